//! payorch's real Stripe and Adyen adapters against the providers' published contracts
//! (fixtures/contracts/README.md): every request each method of `PaymentProvider` sends to a
//! recording server must be an operation of the provider's OpenAPI document, with a body
//! (and query) that validates against that operation's request schema, the
//! `Idempotency-Key` payorch promises (docs/DESIGN.md, "The provider protocol"), and for
//! Stripe the `Stripe-Version` payorch pins. The server answers canned, contract-valid
//! answers (checked by `canned_answers_are_contract_valid`), so the adapters run their
//! ordinary paths; what they make of the answers is tests/provider_adapter.rs's and
//! tests/adyen_adapter.rs's business, not this file's.
//!
//! A method may send nothing (Adyen's Checkout API has no lookups: a lookup that asks
//! nothing breaks no contract); the methods that must reach the provider to do their work
//! (creates, refunds, captures, cancels, the payer's return) are asserted to send.

use std::time::Duration;

use chrono::Utc;
use payorch::providers::adyen::{AdyenConfig, AdyenProvider};
use payorch::providers::dispute_actions::{
    DisputeEvidence, EvidenceDocument, EvidenceField, EVIDENCE_NOT_SUPPORTED,
};
use payorch::providers::stripe::{StripeConfig, StripeProvider};
use payorch::providers::{
    AcceptDisputeRequest, CancelRequest, CaptureMethod, CaptureRequest, ChargeRequest,
    DisputeEvidenceRequest, PaymentProvider, ProviderOutcome, RefundRequest, SendWindow,
    ThreeDSecure,
};
use payorch_contract::{decode_form, report, Contract};
use serde_json::{json, Value};
use wiremock::matchers::any;
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

/// The API version payorch pins with `Stripe-Version`, the vendored document's.
const STRIPE_VERSION: &str = "2023-08-16";
const MERCHANT: &str = "PayorchTestMerchant";
const HMAC_KEY: &str = "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056";
const RETURN_URL: &str = "https://pay.example.com/v1/payments/pay_0001/return";

// The canned answers: contract-valid objects of each provider.

fn intent(id: &str, status: &str) -> Value {
    let mut intent = json!({
        "id": id, "object": "payment_intent", "amount": 4200, "amount_capturable": 0,
        "amount_received": 4200, "currency": "eur", "capture_method": "automatic",
        "confirmation_method": "automatic", "created": Utc::now().timestamp(), "livemode": false,
        "payment_method_types": ["card"], "status": status, "last_payment_error": null,
        "next_action": null, "metadata": {"attempt_id": "pay_0001", "order_id": "ord_0001",
        "merchant_id": "mer_0001"}, "client_secret": format!("{id}_secret_x"),
    });
    match status {
        "requires_capture" => {
            intent["capture_method"] = json!("manual");
            intent["amount_capturable"] = json!(4200);
            intent["amount_received"] = json!(0);
        }
        "requires_action" => {
            intent["amount_received"] = json!(0);
            intent["next_action"] = json!({
                "type": "redirect_to_url",
                "redirect_to_url": {"url": "https://hooks.stripe.com/3d_secure_2/authenticate/x", "return_url": RETURN_URL},
            });
        }
        "canceled" => {
            intent["amount_received"] = json!(0);
            intent["canceled_at"] = json!(Utc::now().timestamp());
            intent["cancellation_reason"] = json!("requested_by_customer");
        }
        _ => {}
    }
    intent
}

fn refund(id: &str) -> Value {
    json!({
        "id": id, "object": "refund", "amount": 1500, "currency": "eur", "created": Utc::now().timestamp(),
        "payment_intent": "pi_0001", "status": "succeeded", "charge": "ch_0001", "reason": null,
        "metadata": {"refund_id": "ref_0001", "payment_id": "pay_0001", "merchant_id": "mer_0001"},
    })
}

fn dispute(id: &str, status: &str) -> Value {
    json!({
        "id": id, "object": "dispute", "amount": 4200, "currency": "eur", "charge": "ch_0001",
        "payment_intent": "pi_0001", "created": Utc::now().timestamp(), "livemode": false,
        "balance_transactions": [], "evidence": {}, "is_charge_refundable": false,
        "evidence_details": {"due_by": Utc::now().timestamp() + 86_400, "has_evidence": false,
        "past_due": false, "submission_count": 0}, "metadata": {}, "reason": "fraudulent",
        "status": status,
    })
}

fn balance_transaction(id: &str) -> Value {
    let now = Utc::now().timestamp();
    json!({
        "id": id, "object": "balance_transaction", "amount": 4200, "available_on": now,
        "created": now, "currency": "eur", "fee": 0, "fee_details": [], "net": 4200,
        "reporting_category": "charge", "source": "ch_0001", "status": "available",
        "type": "charge",
    })
}

fn list(url: &str, data: Vec<Value>) -> Value {
    json!({"object": "list", "data": data, "has_more": false, "url": url})
}

/// Stripe's answer to `method` on the operation `template`, given the decoded form.
fn stripe_answer(method: &str, template: &str, form: &Value) -> (u16, Value) {
    let id = "pi_0001";
    let answer = match (method, template) {
        ("POST", "/v1/payment_intents") => {
            if form["payment_method"] == "pm_card_threeDSecure2Required" {
                intent(id, "requires_action")
            } else if form["capture_method"] == "manual" {
                intent(id, "requires_capture")
            } else {
                intent(id, "succeeded")
            }
        }
        ("POST", "/v1/payment_intents/{intent}/confirm") => intent(id, "succeeded"),
        ("GET", "/v1/payment_intents/{intent}") => intent(id, "succeeded"),
        ("GET", "/v1/payment_intents") => {
            list("/v1/payment_intents", vec![intent(id, "succeeded")])
        }
        ("GET", "/v1/payment_intents/search") => json!({
            "object": "search_result", "data": [intent(id, "succeeded")], "has_more": false,
            "next_page": null, "url": "/v1/payment_intents/search",
        }),
        ("POST", "/v1/payment_intents/{intent}/capture") => intent(id, "succeeded"),
        ("POST", "/v1/payment_intents/{intent}/cancel") => intent(id, "canceled"),
        ("POST", "/v1/refunds") | ("GET", "/v1/refunds/{refund}") => refund("re_0001"),
        ("GET", "/v1/refunds") => list("/v1/refunds", vec![refund("re_0001")]),
        ("GET", "/v1/disputes/{dispute}") => dispute("du_0001", "needs_response"),
        ("POST", "/v1/disputes/{dispute}") => dispute("du_0001", "under_review"),
        ("POST", "/v1/disputes/{dispute}/close") => dispute("du_0001", "lost"),
        ("GET", "/v1/disputes") => list("/v1/disputes", vec![dispute("du_0001", "won")]),
        ("GET", "/v1/balance_transactions") => list(
            "/v1/balance_transactions",
            vec![balance_transaction("txn_0001")],
        ),
        _ => return (404, stripe_error("Unrecognized request URL")),
    };
    (200, answer)
}

fn stripe_error(message: &str) -> Value {
    json!({"error": {"type": "invalid_request_error", "message": message}})
}

fn amount() -> Value {
    json!({"value": 4200, "currency": "EUR"})
}

/// Adyen's answer to `method` on the operation `template`.
fn adyen_answer(method: &str, template: &str) -> (u16, Value) {
    let psp = "PSP0000000000001";
    let received = |extra: Value| {
        let mut answer = json!({"status": "received", "pspReference": "PSP0000000000002", "merchantAccount": MERCHANT});
        answer
            .as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        (201, answer)
    };
    match (method, template) {
        ("POST", "/payments") | ("POST", "/payments/details") => (
            200,
            json!({"pspReference": psp, "resultCode": "Authorised", "merchantReference": "pay_0001", "amount": amount()}),
        ),
        ("POST", "/payments/{paymentPspReference}/captures") => received(
            json!({"paymentPspReference": psp, "amount": amount(), "reference": "pay_0001"}),
        ),
        ("POST", "/payments/{paymentPspReference}/refunds") => received(
            json!({"paymentPspReference": psp, "amount": amount(), "reference": "ref_0001"}),
        ),
        ("POST", "/payments/{paymentPspReference}/cancels")
        | ("POST", "/payments/{paymentPspReference}/reversals") => {
            received(json!({"paymentPspReference": psp, "reference": "pay_0001"}))
        }
        ("POST", "/cancels") => {
            received(json!({"paymentReference": "pay_0001", "reference": "pay_0001"}))
        }
        // The Disputes API (v30).
        ("POST", "/acceptDispute" | "/defendDispute" | "/supplyDefenseDocument") => {
            (200, json!({"disputeServiceResult": {"success": true}}))
        }
        ("POST", "/retrieveApplicableDefenseReasons") => (
            200,
            json!({"disputeServiceResult": {"success": true}, "defenseReasons": [
                {"defenseReasonCode": "SupplyDefenseMaterial", "satisfied": false}]}),
        ),
        _ => (
            404,
            json!({"status": 404, "errorCode": "000", "message": "Not found", "errorType": "validation"}),
        ),
    }
}

fn respond(status: u16, body: Value) -> ResponseTemplate {
    ResponseTemplate::new(status).set_body_json(body)
}

/// A recording server answering every request as the provider of `contract` would.
async fn server_for(contract: &'static Contract) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(any())
        .respond_with(move |request: &Request| {
            let method = request.method.as_str();
            let Some(op) = contract.operation(method, request.url.path()) else {
                return if contract.name() == "stripe" {
                    respond(404, stripe_error("Unrecognized request URL"))
                } else {
                    respond(404, adyen_answer("GET", "").1)
                };
            };
            let (status, body) = if contract.name() == "stripe" {
                let form = decode_form(&request.body).unwrap_or(Value::Null);
                stripe_answer(method, op.template, &form)
            } else {
                adyen_answer(method, op.template)
            };
            respond(status, body)
        })
        .mount(&server)
        .await;
    server
}

// The adapters, as tests/provider_adapter.rs and tests/adyen_adapter.rs make them.

fn stripe(base_url: &str) -> StripeProvider {
    StripeProvider::new(StripeConfig {
        base_url: base_url.to_owned(),
        secret: "sk_test_contract".into(),
        webhook_secrets: vec!["whsec_contract".into()],
        connect_timeout: Duration::from_millis(500),
        timeout: Duration::from_secs(2),
        webhook_tolerance: Duration::from_secs(300),
    })
    .expect("valid config")
}

fn adyen(base_url: &str) -> AdyenProvider {
    AdyenProvider::new(AdyenConfig {
        base_url: base_url.to_owned(),
        api_key: "AQE_test_contract".into(),
        merchant_account: MERCHANT.into(),
        hmac_keys: vec![HMAC_KEY.into()],
        connect_timeout: Duration::from_millis(500),
        timeout: Duration::from_secs(2),
    })
    .expect("valid config")
}

fn charge(payment_method: &str, capture_method: CaptureMethod, payer: bool) -> ChargeRequest {
    ChargeRequest {
        amount: 4200,
        currency: "eur".into(),
        payment_method: payment_method.into(),
        idempotency_key: "pk_attempt_0001".into(),
        attempt_id: "pay_0001".into(),
        order_id: "ord_0001".into(),
        merchant_id: "mer_0001".into(),
        capture_method,
        return_url: payer.then(|| RETURN_URL.to_owned()),
        return_route: RETURN_URL.to_owned(),
        three_d_secure: ThreeDSecure::Automatic,
    }
}

fn refund_request(provider_payment_id: &str, reason: Option<&str>) -> RefundRequest {
    RefundRequest {
        provider_payment_id: provider_payment_id.into(),
        amount: 1500,
        currency: "eur".into(),
        idempotency_key: "rk_refund_0001".into(),
        refund_id: "ref_0001".into(),
        payment_id: "pay_0001".into(),
        merchant_id: "mer_0001".into(),
        reason: reason.map(str::to_owned),
    }
}

fn capture_request(provider_payment_id: &str) -> CaptureRequest {
    CaptureRequest {
        provider_payment_id: provider_payment_id.into(),
        amount: 4200,
        currency: "eur".into(),
        idempotency_key: "ck_capture_0001".into(),
        attempt_id: "pay_0001".into(),
        merchant_id: "mer_0001".into(),
    }
}

fn cancel_request(provider_payment_id: Option<&str>) -> CancelRequest {
    CancelRequest {
        provider_payment_id: provider_payment_id.map(str::to_owned),
        idempotency_key: "vk_cancel_0001".into(),
        attempt_id: "pay_0001".into(),
        merchant_id: "mer_0001".into(),
    }
}

fn window() -> SendWindow {
    let now = Utc::now();
    SendWindow {
        from: now - chrono::Duration::minutes(1),
        until: now,
    }
}

// The checks of every request sent.

fn header(request: &Request, name: &str) -> Option<String> {
    request
        .headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

/// What payorch promises about one call's requests.
struct Promise<'a> {
    /// The `Idempotency-Key` every request that changes something must carry: each POST but
    /// Adyen's `/payments/details` (the payer's return reads, and payorch sends it without).
    key: Option<&'a str>,
}

/// Everything wrong with the requests `server` received, and how many it received.
async fn check_requests(
    server: &MockServer,
    contract: &Contract,
    promise: Promise<'_>,
) -> (usize, Vec<String>) {
    let requests = server.received_requests().await.expect("recording on");
    let mut problems = Vec::new();
    for request in &requests {
        let method = request.method.as_str();
        let path = request.url.path();
        let target = match request.url.query() {
            Some(query) => format!("{path}?{query}"),
            None => path.to_owned(),
        };
        let what = format!("{method} {target}");
        if contract.operation(method, path).is_none() {
            problems.push(format!(
                "{what}: no such operation in {}'s published contract",
                contract.name()
            ));
            continue;
        }
        let content_type = header(request, "content-type").unwrap_or_default();
        if let Err(violations) =
            contract.validate_request(method, &target, &content_type, &request.body)
        {
            problems.push(format!(
                "{what}: the request breaks the contract:\n{}\n  body: {}",
                report(&violations),
                String::from_utf8_lossy(&request.body)
            ));
        }
        let modifies = method == "POST" && !path.ends_with("/payments/details");
        if let (true, Some(expected)) = (modifies, promise.key) {
            let sent = header(request, "idempotency-key");
            if sent.as_deref() != Some(expected) {
                problems.push(format!(
                    "{what}: Idempotency-Key {sent:?}, payorch promises {expected:?}"
                ));
            }
        }
        if contract.name() == "stripe" {
            let version = header(request, "stripe-version");
            if version.as_deref() != Some(STRIPE_VERSION) {
                problems.push(format!(
                    "{what}: Stripe-Version {version:?}, payorch pins {STRIPE_VERSION:?} (the contract's version)"
                ));
            }
        }
    }
    (requests.len(), problems)
}

/// A fresh server for `contract`, `call` run against it, and its requests checked.
async fn sent_by<F, Fut>(
    contract: &'static Contract,
    promise: Promise<'_>,
    call: F,
) -> (usize, Vec<String>)
where
    F: FnOnce(String) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let server = server_for(contract).await;
    call(server.uri()).await;
    check_requests(&server, contract, promise).await
}

/// [`sent_by`], and whether a request's body named `field` (as a form's key, percent-encoded
/// brackets and all, or a JSON member).
async fn sent_naming<F, Fut>(
    contract: &'static Contract,
    promise: Promise<'_>,
    field: &str,
    call: F,
) -> ((usize, Vec<String>), bool)
where
    F: FnOnce(String) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let server = server_for(contract).await;
    call(server.uri()).await;
    let requests = server.received_requests().await.expect("recording on");
    let named = requests
        .iter()
        .any(|r| String::from_utf8_lossy(&r.body).contains(field));
    (check_requests(&server, contract, promise).await, named)
}

/// What is wrong with one call's requests, each line naming the call: `must_send` when the
/// call cannot do its work without asking the provider.
fn findings(what: &str, (sent, problems): (usize, Vec<String>), must_send: bool) -> Vec<String> {
    let mut found: Vec<String> = problems
        .into_iter()
        .map(|p| format!("[{what}] {p}"))
        .collect();
    if must_send && sent == 0 {
        found.push(format!("[{what}] no request was sent"));
    }
    found
}

/// Every finding of a test at once, so one run tells all that is wrong.
#[track_caller]
fn assert_clean(found: Vec<String>) {
    assert!(
        found.is_empty(),
        "{} problems:\n{}",
        found.len(),
        found.join("\n")
    );
}

// The canned answers themselves.

#[test]
fn canned_answers_are_contract_valid() {
    let stripe = Contract::stripe();
    for op in stripe.operations() {
        let path = op
            .template
            .replace("{intent}", "pi_0001")
            .replace("{refund}", "re_0001")
            .replace("{dispute}", "du_0001");
        let forms = [
            json!({}),
            json!({"capture_method": "manual"}),
            json!({"payment_method": "pm_card_threeDSecure2Required"}),
        ];
        for form in forms {
            let (status, body) = stripe_answer(&op.method, op.template, &form);
            assert_eq!(status, 200, "{} {}", op.method, op.template);
            let bytes = serde_json::to_vec(&body).unwrap();
            if let Err(v) = stripe.validate_response(&op.method, &path, status, &bytes) {
                panic!("{} {path} {form}: {body}\n{}", op.method, report(&v));
            }
        }
    }
    let error = serde_json::to_vec(&stripe_error("x")).unwrap();
    stripe
        .validate_response("GET", "/v1/payment_intents/pi_1", 404, &error)
        .expect("Stripe's error answer is its `error` schema");

    let checkout = Contract::adyen_checkout();
    for op in checkout.operations() {
        let path = format!(
            "/v71{}",
            op.template
                .replace("{paymentPspReference}", "PSP0000000000001")
        );
        let (status, body) = adyen_answer(&op.method, op.template);
        let bytes = serde_json::to_vec(&body).unwrap();
        if let Err(v) = checkout.validate_response(&op.method, &path, status, &bytes) {
            panic!("{} {path}: {body}\n{}", op.method, report(&v));
        }
    }
    let disputes = Contract::adyen_disputes();
    for op in disputes.operations() {
        let path = format!("{}{}", disputes.base_path(), op.template);
        let (status, body) = adyen_answer(&op.method, op.template);
        assert_eq!(status, 200, "{} {path}", op.method);
        let bytes = serde_json::to_vec(&body).unwrap();
        if let Err(v) = disputes.validate_response(&op.method, &path, status, &bytes) {
            panic!("{} {path}: {body}\n{}", op.method, report(&v));
        }
    }
}

// Stripe: every method that makes a request.

fn keyed(key: &str) -> Promise<'_> {
    Promise { key: Some(key) }
}

const UNKEYED: Promise<'static> = Promise { key: None };

#[tokio::test]
async fn stripe_create_charge_automatic_and_manual_with_and_without_a_payer() {
    let mut found = Vec::new();
    for capture in [CaptureMethod::Automatic, CaptureMethod::Manual] {
        for payer in [false, true] {
            let req = charge("pm_card_visa", capture, payer);
            let sent = sent_by(
                Contract::stripe(),
                keyed("pk_attempt_0001"),
                |url| async move {
                    stripe(&url).create_charge(&req).await;
                },
            )
            .await;
            found.extend(findings(
                &format!("create {capture:?}, payer {payer}"),
                sent,
                true,
            ));
        }
    }
    // A challenge: Stripe needs the return_url to answer with a redirect.
    let req = charge(
        "pm_card_threeDSecure2Required",
        CaptureMethod::Automatic,
        true,
    );
    let sent = sent_by(
        Contract::stripe(),
        keyed("pk_attempt_0001"),
        |url| async move {
            stripe(&url).create_charge(&req).await;
        },
    )
    .await;
    found.extend(findings("create, 3-D Secure", sent, true));
    // 3-D Secure requested (the step-up retry): sent with a payer, never without one.
    for payer in [false, true] {
        let req = ChargeRequest {
            three_d_secure: ThreeDSecure::Required,
            ..charge("pm_card_visa", CaptureMethod::Automatic, payer)
        };
        let (sent, named) = sent_naming(
            Contract::stripe(),
            keyed("pk_attempt_0001"),
            "request_three_d_secure",
            |url| async move {
                stripe(&url).create_charge(&req).await;
            },
        )
        .await;
        let what = format!("create, 3-D Secure requested, payer {payer}");
        if named != payer {
            found.push(format!("[{what}] request_three_d_secure sent: {named}"));
        }
        found.extend(findings(&what, sent, true));
    }
    assert_clean(found);
}

/// The value of the field that asks for 3-D Secure is one the pinned documents list. The
/// validator cannot tell for Stripe's: Stripe marks the enum `x-stripeBypassValidation` (it
/// may add values), so any text would pass it.
#[test]
fn the_three_d_secure_request_is_a_value_of_the_pinned_documents() {
    let stripe = Contract::stripe().document();
    let create = &stripe["paths"]["/v1/payment_intents"]["post"]["requestBody"]["content"]
        ["application/x-www-form-urlencoded"]["schema"]["properties"];
    let card = &create["payment_method_options"]["properties"]["card"]["anyOf"][0];
    let (name, value) = payorch::providers::stripe::REQUEST_THREE_D_SECURE;
    assert_eq!(name, "payment_method_options[card][request_three_d_secure]");
    let allowed = &card["properties"]["request_three_d_secure"]["enum"];
    assert!(
        allowed
            .as_array()
            .is_some_and(|a| a.contains(&json!(value))),
        "{value} is not among {allowed}"
    );

    let adyen = Contract::adyen_checkout().document();
    let schemas = &adyen["components"]["schemas"];
    assert_eq!(
        schemas["PaymentRequest"]["properties"]["authenticationData"]["$ref"],
        "#/components/schemas/AuthenticationData"
    );
    let allowed = &schemas["AuthenticationData"]["properties"]["attemptAuthentication"]["enum"];
    let value = payorch::providers::adyen::ATTEMPT_AUTHENTICATION;
    assert!(
        allowed
            .as_array()
            .is_some_and(|a| a.contains(&json!(value))),
        "{value} is not among {allowed}"
    );
}

#[tokio::test]
async fn stripe_retrieve() {
    let sent = sent_by(Contract::stripe(), UNKEYED, |url| async move {
        stripe(&url).retrieve("pi_0001").await;
    })
    .await;
    assert_clean(findings("retrieve", sent, true));
}

#[tokio::test]
async fn stripe_find_by_attempt() {
    let sent = sent_by(Contract::stripe(), UNKEYED, |url| async move {
        stripe(&url).find_by_attempt("pay_0001", window()).await;
    })
    .await;
    assert_clean(findings("find_by_attempt", sent, true));
}

/// The settlement reconciliation's read (docs/operations/reconciliation.md): every page of
/// `GET /v1/balance_transactions` over each hour of a `created` window, its sources expanded,
/// as the contract defines the list; the contract's answer read into entries.
#[tokio::test]
async fn stripe_settlement_entries() {
    let query = payorch::providers::settlement::SettlementQuery {
        position: None,
        since: Utc::now() - chrono::Duration::days(1),
        until: Utc::now(),
        first_batch: 1,
    };
    let sent = sent_by(Contract::stripe(), UNKEYED, |url| async move {
        let read = stripe(&url).settlement_entries(&query).await;
        let page = read.result.expect("the contract's answer reads");
        // A day read an hour at a time; the mock answers its one transaction to each.
        assert!(page.entries.len() >= 24, "{}", page.entries.len());
        assert!(page
            .entries
            .iter()
            .all(|e| e.provider_entry_id == "txn_0001"));
    })
    .await;
    assert_clean(findings("settlement_entries", sent, true));
}

#[tokio::test]
async fn stripe_create_refund_with_and_without_reason() {
    let mut found = Vec::new();
    for reason in [None, Some("requested_by_customer")] {
        let req = refund_request("pi_0001", reason);
        let sent = sent_by(
            Contract::stripe(),
            keyed("rk_refund_0001"),
            |url| async move {
                stripe(&url).create_refund(&req).await;
            },
        )
        .await;
        found.extend(findings(
            &format!("create_refund, reason {reason:?}"),
            sent,
            true,
        ));
    }
    assert_clean(found);
}

#[tokio::test]
async fn stripe_retrieve_refund() {
    let sent = sent_by(Contract::stripe(), UNKEYED, |url| async move {
        stripe(&url).retrieve_refund("re_0001").await;
    })
    .await;
    assert_clean(findings("retrieve_refund", sent, true));
}

#[tokio::test]
async fn stripe_find_refund() {
    let sent = sent_by(Contract::stripe(), UNKEYED, |url| async move {
        stripe(&url).find_refund("pi_0001", "ref_0001").await;
    })
    .await;
    assert_clean(findings("find_refund", sent, true));
}

#[tokio::test]
async fn stripe_capture() {
    let sent = sent_by(
        Contract::stripe(),
        keyed("ck_capture_0001"),
        |url| async move {
            stripe(&url).capture(&capture_request("pi_0001")).await;
        },
    )
    .await;
    assert_clean(findings("capture", sent, true));
}

#[tokio::test]
async fn stripe_cancel_with_and_without_a_provider_id() {
    let mut found = Vec::new();
    let sent = sent_by(
        Contract::stripe(),
        keyed("vk_cancel_0001"),
        |url| async move {
            stripe(&url).cancel(&cancel_request(Some("pi_0001"))).await;
        },
    )
    .await;
    found.extend(findings("cancel by id", sent, true));
    // Stripe cancels by id only: whatever the adapter asks to learn the id must be in the
    // contract too, or it may send nothing.
    let sent = sent_by(
        Contract::stripe(),
        keyed("vk_cancel_0001"),
        |url| async move {
            stripe(&url).cancel(&cancel_request(None)).await;
        },
    )
    .await;
    found.extend(findings("cancel without an id", sent, false));
    assert_clean(found);
}

#[tokio::test]
async fn stripe_complete_action() {
    let params = [
        ("payment_intent".to_owned(), "pi_0001".to_owned()),
        ("redirect_status".to_owned(), "succeeded".to_owned()),
    ];
    let sent = sent_by(Contract::stripe(), UNKEYED, |url| async move {
        stripe(&url)
            .complete_action("pi_0001", "pay_0001", &params)
            .await;
    })
    .await;
    assert_clean(findings("complete_action", sent, true));
}

// Adyen: every method that makes a request, and the lookups, which must ask nothing the
// Checkout API does not have.

#[tokio::test]
async fn adyen_create_charge_automatic_and_manual_with_and_without_a_payer() {
    let mut found = Vec::new();
    for capture in [CaptureMethod::Automatic, CaptureMethod::Manual] {
        for payer in [false, true] {
            let req = charge("8415995487234100", capture, payer);
            let sent = sent_by(
                Contract::adyen_checkout(),
                keyed("pk_attempt_0001"),
                |url| async move {
                    adyen(&url).create_charge(&req).await;
                },
            )
            .await;
            found.extend(findings(
                &format!("create {capture:?}, payer {payer}"),
                sent,
                true,
            ));
        }
    }
    // 3-D Secure requested (the step-up retry): attempted with a payer, never without one.
    for payer in [false, true] {
        let req = ChargeRequest {
            three_d_secure: ThreeDSecure::Required,
            ..charge("8415995487234100", CaptureMethod::Automatic, payer)
        };
        let (sent, named) = sent_naming(
            Contract::adyen_checkout(),
            keyed("pk_attempt_0001"),
            "attemptAuthentication",
            |url| async move {
                adyen(&url).create_charge(&req).await;
            },
        )
        .await;
        let what = format!("create, 3-D Secure requested, payer {payer}");
        if named != payer {
            found.push(format!("[{what}] attemptAuthentication sent: {named}"));
        }
        found.extend(findings(&what, sent, true));
    }
    assert_clean(found);
}

#[tokio::test]
async fn adyen_retrieve() {
    let sent = sent_by(Contract::adyen_checkout(), UNKEYED, |url| async move {
        adyen(&url).retrieve("PSP0000000000001").await;
    })
    .await;
    assert_clean(findings("retrieve", sent, false));
}

#[tokio::test]
async fn adyen_find_by_attempt() {
    let sent = sent_by(Contract::adyen_checkout(), UNKEYED, |url| async move {
        adyen(&url).find_by_attempt("pay_0001", window()).await;
    })
    .await;
    assert_clean(findings("find_by_attempt", sent, false));
}

#[tokio::test]
async fn adyen_create_refund_with_and_without_reason() {
    let mut found = Vec::new();
    for reason in [None, Some("requested_by_customer")] {
        let req = refund_request("PSP0000000000001", reason);
        let sent = sent_by(
            Contract::adyen_checkout(),
            keyed("rk_refund_0001"),
            |url| async move {
                adyen(&url).create_refund(&req).await;
            },
        )
        .await;
        found.extend(findings(
            &format!("create_refund, reason {reason:?}"),
            sent,
            true,
        ));
    }
    assert_clean(found);
}

#[tokio::test]
async fn adyen_retrieve_refund() {
    let sent = sent_by(Contract::adyen_checkout(), UNKEYED, |url| async move {
        adyen(&url).retrieve_refund("PSP0000000000002").await;
    })
    .await;
    assert_clean(findings("retrieve_refund", sent, false));
}

#[tokio::test]
async fn adyen_find_refund() {
    let sent = sent_by(Contract::adyen_checkout(), UNKEYED, |url| async move {
        adyen(&url)
            .find_refund("PSP0000000000001", "ref_0001")
            .await;
    })
    .await;
    assert_clean(findings("find_refund", sent, false));
}

#[tokio::test]
async fn adyen_capture() {
    let sent = sent_by(
        Contract::adyen_checkout(),
        keyed("ck_capture_0001"),
        |url| async move {
            adyen(&url)
                .capture(&capture_request("PSP0000000000001"))
                .await;
        },
    )
    .await;
    assert_clean(findings("capture", sent, true));
}

#[tokio::test]
async fn adyen_cancel_with_and_without_a_provider_id() {
    let mut found = Vec::new();
    for psp in [Some("PSP0000000000001"), None] {
        let sent = sent_by(
            Contract::adyen_checkout(),
            keyed("vk_cancel_0001"),
            |url| async move {
                adyen(&url).cancel(&cancel_request(psp)).await;
            },
        )
        .await;
        // Without a pspReference Adyen cancels by the payment's reference (`/cancels`).
        found.extend(findings(
            &format!("cancel, pspReference {psp:?}"),
            sent,
            true,
        ));
    }
    assert_clean(found);
}

#[tokio::test]
async fn adyen_complete_action() {
    let params = [("redirectResult".to_owned(), "X6XtfGC3%21Y...".to_owned())];
    let sent = sent_by(Contract::adyen_checkout(), UNKEYED, |url| async move {
        adyen(&url).complete_action("", "pay_0001", &params).await;
    })
    .await;
    assert_clean(findings("complete_action", sent, true));
}

// Disputes: evidence and accepting, through both protocols (docs/guides/disputes.md,
// "Answering a dispute").

fn evidence_request(
    provider_dispute_id: &str,
    evidence: DisputeEvidence,
) -> DisputeEvidenceRequest {
    DisputeEvidenceRequest {
        provider_dispute_id: provider_dispute_id.into(),
        idempotency_key: "dk_action_0001".into(),
        dispute_id: "dp_0001".into(),
        merchant_id: "mer_0001".into(),
        evidence,
    }
}

fn accept_request(provider_dispute_id: &str) -> AcceptDisputeRequest {
    AcceptDisputeRequest {
        provider_dispute_id: provider_dispute_id.into(),
        idempotency_key: "dk_action_0002".into(),
        dispute_id: "dp_0001".into(),
        merchant_id: "mer_0001".into(),
    }
}

/// Every text field at its longest, so a field Stripe lacks or a length it refuses shows.
fn every_text_field() -> DisputeEvidence {
    DisputeEvidence {
        text: EvidenceField::ALL
            .into_iter()
            .map(|f| (f, "x".repeat(f.max_chars())))
            .collect(),
        ..DisputeEvidence::default()
    }
}

fn a_document() -> DisputeEvidence {
    DisputeEvidence {
        documents: vec![EvidenceDocument {
            document_type: "DefenseMaterial".into(),
            content_type: "application/pdf".into(),
            content_base64: "JVBERi0xLjQK".into(),
        }],
        defense_reason_code: Some("SupplyDefenseMaterial".into()),
        ..DisputeEvidence::default()
    }
}

#[tokio::test]
async fn stripe_submit_dispute_evidence_and_accept() {
    let mut found = Vec::new();
    let outcomes = std::sync::Mutex::new(Vec::new());
    let recorded = &outcomes;
    let ((sent, problems), submitted) = sent_naming(
        Contract::stripe(),
        keyed("dk_action_0001"),
        "submit=true",
        |url| async move {
            let call = stripe(&url)
                .submit_dispute_evidence(&evidence_request("du_0001", every_text_field()))
                .await;
            recorded.lock().unwrap().push(call.outcome);
        },
    )
    .await;
    found.extend(findings("submit_dispute_evidence", (sent, problems), true));
    assert!(submitted, "evidence is submitted at once (submit=true)");
    let sent = sent_by(
        Contract::stripe(),
        keyed("dk_action_0002"),
        |url| async move {
            let call = stripe(&url)
                .accept_dispute(&accept_request("du_0001"))
                .await;
            recorded.lock().unwrap().push(call.outcome);
        },
    )
    .await;
    found.extend(findings("accept_dispute", sent, true));
    assert_clean(found);
    let outcomes = outcomes.into_inner().unwrap();
    assert_eq!(outcomes.len(), 2);
    for outcome in outcomes {
        assert_eq!(
            outcome,
            ProviderOutcome::Succeeded {
                provider_id: "du_0001".into()
            }
        );
    }
}

/// Documents through Stripe need its Files API, which payorch does not use: refused, nothing
/// sent.
#[tokio::test]
async fn stripe_refuses_documents_without_sending() {
    let outcome = std::sync::Mutex::new(None);
    let recorded = &outcome;
    let (sent, problems) = sent_by(Contract::stripe(), UNKEYED, |url| async move {
        let call = stripe(&url)
            .submit_dispute_evidence(&evidence_request("du_0001", a_document()))
            .await;
        *recorded.lock().unwrap() = Some(call.outcome);
    })
    .await;
    assert_eq!((sent, problems), (0, Vec::<String>::new()));
    assert!(matches!(
        outcome.into_inner().unwrap(),
        Some(ProviderOutcome::Failed { ref code, .. }) if code == EVIDENCE_NOT_SUPPORTED
    ));
}

#[tokio::test]
async fn adyen_supply_documents_defend_and_accept() {
    let server = server_for(Contract::adyen_disputes()).await;
    let adapter = adyen(&server.uri());
    let evidence = adapter
        .submit_dispute_evidence(&evidence_request("DZ4DPSHB4WD2WN82", a_document()))
        .await;
    let accepted = adapter
        .accept_dispute(&accept_request("DZ4DPSHB4WD2WN82"))
        .await;
    let requests = server.received_requests().await.expect("recording on");
    let sent: Vec<(String, Option<String>)> = requests
        .iter()
        .map(|r| (r.url.path().to_owned(), header(r, "idempotency-key")))
        .collect();
    let base = Contract::adyen_disputes().base_path();
    // Documents first, then the defence, then the accept: each request its own key.
    assert_eq!(
        sent,
        vec![
            (
                format!("{base}/supplyDefenseDocument"),
                Some("dk_action_0001:documents".into())
            ),
            (
                format!("{base}/defendDispute"),
                Some("dk_action_0001:defend".into())
            ),
            (
                format!("{base}/acceptDispute"),
                Some("dk_action_0002".into())
            ),
        ]
    );
    for r in &requests {
        assert_eq!(header(r, "x-api-key").as_deref(), Some("AQE_test_contract"));
        let body: Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(body["merchantAccountCode"], MERCHANT);
        assert_eq!(body["disputePspReference"], "DZ4DPSHB4WD2WN82");
    }
    let (_, problems) = check_requests(&server, Contract::adyen_disputes(), UNKEYED).await;
    assert_clean(problems);
    for call in [evidence, accepted] {
        assert_eq!(
            call.outcome,
            ProviderOutcome::Succeeded {
                provider_id: "DZ4DPSHB4WD2WN82".into()
            }
        );
    }
}

/// Adyen's Disputes API takes no text: refused, nothing sent.
#[tokio::test]
async fn adyen_refuses_text_without_sending() {
    let outcome = std::sync::Mutex::new(None);
    let recorded = &outcome;
    let (sent, problems) = sent_by(Contract::adyen_disputes(), UNKEYED, |url| async move {
        let call = adyen(&url)
            .submit_dispute_evidence(&evidence_request("DZ1", every_text_field()))
            .await;
        *recorded.lock().unwrap() = Some(call.outcome);
    })
    .await;
    assert_eq!((sent, problems), (0, Vec::<String>::new()));
    assert!(matches!(
        outcome.into_inner().unwrap(),
        Some(ProviderOutcome::Failed { ref code, .. }) if code == EVIDENCE_NOT_SUPPORTED
    ));
}

/// Stripe's evidence object allows any member (no `additionalProperties: false`), so the
/// request check alone would pass a field Stripe lacks: every text field payorch sends must
/// be a property of the pinned document's `evidence`, at the length Stripe takes.
#[test]
fn every_evidence_field_is_stripes_at_its_length() {
    let evidence = Contract::stripe()
        .document()
        .pointer(
            "/paths/~1v1~1disputes~1{dispute}/post/requestBody/content/\
             application~1x-www-form-urlencoded/schema/properties/evidence/properties",
        )
        .expect("the evidence parameters of POST /v1/disputes/{dispute}");
    for field in EvidenceField::ALL {
        let property = &evidence[field.as_str()];
        assert_eq!(
            property["maxLength"].as_u64(),
            Some(field.max_chars() as u64),
            "evidence[{}]: {property}",
            field.as_str()
        );
    }
}
