//! The Adyen face as strict as Checkout API v71: no lookups (v71 has none: Adyen's `404`),
//! unknown fields refused at any depth (`422`, `702`), a currency that is not ISO 4217's
//! refused (`422`, `138`), a refund's `reference` optional, the technical cancel answered
//! `201 received` and settled by a `TECHNICAL_CANCEL` notification, every notification item
//! carrying what Webhooks-v1 requires and signed over what Adyen's HMAC covers, and
//! `/payments/details` naming the payment's `merchantReference`.

mod common;

use std::time::Duration;

use base64::Engine;
use common::{adyen_post, client, fast, get, ledger, location, press, start, Receiver};
use payorch_sandbox::{SandboxConfig, SandboxHandle};
use payorch_wire::adyen::NotificationRequestItem;
use payorch_wire::adyen_hmac::HmacKey;
use serde_json::{json, Value};

const ACCOUNT: &str = "PayorchECOM";

fn payment(reference: &str, token: &str, manual: bool) -> Value {
    let mut body = json!({
        "amount": {"value": 1000, "currency": "EUR"},
        "reference": reference,
        "merchantAccount": ACCOUNT,
        "paymentMethod": {"type": "scheme", "storedPaymentMethodId": token},
        "shopperInteraction": "ContAuth",
        "recurringProcessingModel": "UnscheduledCardOnFile",
        "metadata": {"order_id": "ord_1", "merchant_id": "mer_1"},
        "returnUrl": "https://shop.example/back",
    });
    if manual {
        body["additionalData"] = json!({"manualCapture": "true"});
    }
    body
}

async fn with_notifications() -> (SandboxHandle, Receiver) {
    let hook = Receiver::start().await;
    let sandbox = start(SandboxConfig {
        adyen_notification_url: Some(hook.url.clone()),
        ..fast()
    })
    .await;
    (sandbox, hook)
}

/// A payment made: its answer.
async fn paid(client: &reqwest::Client, sandbox: &SandboxHandle, body: &Value) -> Value {
    let made = adyen_post(client, sandbox, "/v71/payments", None, body)
        .await
        .expect("answered");
    assert_eq!(made.status, 200, "{}", made.body);
    made.body
}

/// Every notification item received so far.
fn items(hook: &Receiver) -> Vec<Value> {
    hook.received()
        .iter()
        .flat_map(|delivery| {
            delivery["notificationItems"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .map(|item| item["NotificationRequestItem"].clone())
        .collect()
}

/// The first item received for which `pick` holds, once it has come.
async fn item(hook: &Receiver, what: &str, pick: impl Fn(&Value) -> bool) -> Value {
    common::eventually(what, || items(hook).into_iter().find(|item| pick(item))).await
}

/// The item has every field Webhooks-v1's `NotificationRequestItem` requires, and its HMAC
/// signature (over `pspReference`, `originalReference`, `merchantAccountCode`,
/// `merchantReference`, `amount.value`, `amount.currency`, `eventCode`, `success`) holds.
fn well_formed(item: &Value, sandbox: &SandboxHandle) {
    for field in [
        "pspReference",
        "merchantReference",
        "merchantAccountCode",
        "eventDate",
        "eventCode",
        "amount",
        "success",
    ] {
        assert!(
            item.get(field).is_some_and(|v| !v.is_null()),
            "{field} missing: {item}"
        );
    }
    assert!(item["amount"]["value"].is_i64(), "{item}");
    assert_eq!(
        item["amount"]["currency"].as_str().map(str::len),
        Some(3),
        "{item}"
    );
    let key = HmacKey::from_hex(sandbox.adyen_hmac_key().expose()).expect("a hex key");
    let parsed: NotificationRequestItem = serde_json::from_value(item.clone()).expect("an item");
    let signature = base64::engine::general_purpose::STANDARD
        .decode(
            item["additionalData"]["hmacSignature"]
                .as_str()
                .expect("signed"),
        )
        .expect("base64");
    assert!(key.verifies(&parsed, &signature), "{item}");
}

fn service_error(answer: &common::Answer, status: u16, code: &str) {
    assert_eq!(answer.status, status, "{}", answer.body);
    let fields = answer.body.as_object().expect("a ServiceError");
    let mut names: Vec<&str> = fields.keys().map(String::as_str).collect();
    names.sort_unstable();
    assert_eq!(names, ["errorCode", "errorType", "message", "status"]);
    assert_eq!(answer.body["status"], status);
    assert_eq!(answer.body["errorCode"], code, "{}", answer.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v71_has_no_lookup_and_neither_has_the_sandbox() {
    let sandbox = start(fast()).await;
    let client = client(Duration::from_secs(5));
    let made = paid(
        &client,
        &sandbox,
        &payment("att_look", "pm_card_visa", false),
    )
    .await;
    let psp = made["pspReference"].as_str().expect("named").to_owned();
    let refund = json!({"merchantAccount": ACCOUNT, "amount": {"value": 100, "currency": "EUR"}, "reference": "ref_look"});
    let refunded = adyen_post(
        &client,
        &sandbox,
        &format!("/v71/payments/{psp}/refunds"),
        None,
        &refund,
    )
    .await
    .expect("answered");
    assert_eq!(refunded.status, 201);
    let refund_psp = refunded.body["pspReference"].as_str().expect("named");
    for path in [
        format!("/v71/payments/{psp}"),
        "/v71/payments?reference=att_look".to_owned(),
        format!("/v71/refunds/{refund_psp}"),
        format!("/v71/payments/{psp}/refunds?reference=ref_look"),
        format!("/v71/payments/{psp}/refunds"),
        "/v71/nothing/here".to_owned(),
    ] {
        service_error(&get(&client, &sandbox, &path).await, 404, "000");
    }
    let unknown = adyen_post(&client, &sandbox, "/v71/payments/search", None, &json!({}))
        .await
        .expect("answered");
    service_error(&unknown, 404, "000");
    let anonymous = client
        .get(format!("{}/v71/payments/{psp}", sandbox.base_url()))
        .send()
        .await
        .expect("answered");
    assert_eq!(anonymous.status(), 401, "the key is checked first");
    // The sandbox's own door still tells the truth.
    let book = ledger(&client, &sandbox).await;
    assert_eq!(book["data"][0]["provider_id"], psp.as_str());
    assert_eq!(book["refunds"][0]["provider_id"], refund_psp);
    // The Stripe face's unknown routes keep Stripe's words.
    let stripe = get(&client, &sandbox, "/v1/nothing").await;
    assert_eq!(stripe.status, 404);
    assert_eq!(stripe.body["error"]["type"], "invalid_request_error");
    sandbox.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_field_v71_does_not_define_is_refused_at_any_depth_and_nothing_is_done() {
    let (sandbox, hook) = with_notifications().await;
    let client = client(Duration::from_secs(5));
    let held = paid(
        &client,
        &sandbox,
        &payment("att_held", "pm_card_visa", true),
    )
    .await;
    let psp = held["pspReference"].as_str().expect("named").to_owned();
    let with = |mut body: Value, pointer: &str| {
        body.pointer_mut(pointer)
            .and_then(Value::as_object_mut)
            .expect("an object there")
            .insert("colour".into(), json!("blue"));
        body
    };
    let capture = json!({"merchantAccount": ACCOUNT, "amount": {"value": 100, "currency": "EUR"}, "reference": "c"});
    let cancel = json!({"merchantAccount": ACCOUNT, "reference": "v"});
    let refund = json!({"merchantAccount": ACCOUNT, "amount": {"value": 100, "currency": "EUR"}});
    let by_reference = json!({"merchantAccount": ACCOUNT, "paymentReference": "att_held"});
    let cases = [
        (
            "/v71/payments".to_owned(),
            with(payment("att_x", "pm_card_visa", false), ""),
        ),
        (
            "/v71/payments".to_owned(),
            with(payment("att_x", "pm_card_visa", false), "/amount"),
        ),
        (
            "/v71/payments".to_owned(),
            with(payment("att_x", "pm_card_visa", false), "/paymentMethod"),
        ),
        (
            "/v71/payments/details".to_owned(),
            with(json!({"details": {"redirectResult": "x"}}), "/details"),
        ),
        (
            format!("/v71/payments/{psp}/captures"),
            with(capture.clone(), ""),
        ),
        (
            format!("/v71/payments/{psp}/captures"),
            with(capture, "/amount"),
        ),
        (format!("/v71/payments/{psp}/cancels"), with(cancel, "")),
        ("/v71/cancels".to_owned(), with(by_reference, "")),
        (
            format!("/v71/payments/{psp}/refunds"),
            with(refund.clone(), ""),
        ),
        (
            format!("/v71/payments/{psp}/refunds"),
            with(refund, "/amount"),
        ),
    ];
    for (path, body) in &cases {
        let refused = adyen_post(&client, &sandbox, path, Some("k-unknown"), body)
            .await
            .expect("answered");
        service_error(&refused, 422, "702");
        assert_eq!(refused.body["errorType"], "validation");
        let message = refused.body["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("unknown fields: [colour]"),
            "{path}: {message}"
        );
    }
    let book = ledger(&client, &sandbox).await;
    assert_eq!(book["data"].as_array().map(Vec::len), Some(1), "{book}");
    assert_eq!(book["holds"][0]["status"], "held");
    assert!(book["captures"].as_array().is_some_and(Vec::is_empty));
    assert!(book["voids"].as_array().is_some_and(Vec::is_empty));
    assert!(book["refunds"].as_array().is_some_and(Vec::is_empty));
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        items(&hook)
            .iter()
            .all(|item| item["eventCode"] == "AUTHORISATION"),
        "nothing but the payment's authorisation was told"
    );
    // The key was not spent on a refused request.
    let taken = adyen_post(
        &client,
        &sandbox,
        &format!("/v71/payments/{psp}/captures"),
        Some("k-unknown"),
        &json!({"merchantAccount": ACCOUNT, "amount": {"value": 100, "currency": "EUR"}}),
    )
    .await
    .expect("answered");
    assert_eq!(taken.status, 201, "{}", taken.body);
    sandbox.stop().await;
    hook.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_currency_that_is_not_iso_4217_is_refused() {
    let sandbox = start(fast()).await;
    let client = client(Duration::from_secs(5));
    for currency in ["EURO", "XYZ", "EU"] {
        let mut body = payment("att_money", "pm_card_visa", false);
        body["amount"]["currency"] = json!(currency);
        let refused = adyen_post(&client, &sandbox, "/v71/payments", None, &body)
            .await
            .expect("answered");
        service_error(&refused, 422, "138");
    }
    assert!(sandbox.ledger().is_empty(), "nothing was charged");
    let held = paid(
        &client,
        &sandbox,
        &payment("att_money", "pm_card_visa", true),
    )
    .await;
    let psp = held["pspReference"].as_str().expect("named").to_owned();
    for action in ["captures", "refunds"] {
        let body =
            json!({"merchantAccount": ACCOUNT, "amount": {"value": 100, "currency": "EURO"}});
        let refused = adyen_post(
            &client,
            &sandbox,
            &format!("/v71/payments/{psp}/{action}"),
            None,
            &body,
        )
        .await
        .expect("answered");
        service_error(&refused, 422, "138");
    }
    // The Stripe face refuses an unknown currency as Stripe does.
    let stripe = common::stripe_post(
        &client,
        &sandbox,
        "/v1/payment_intents",
        None,
        &[("amount", "100"), ("currency", "xyz")],
    )
    .await
    .expect("answered");
    assert_eq!(stripe.status, 400);
    assert_eq!(stripe.body["error"]["param"], "currency");
    sandbox.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refund_without_a_reference_is_taken_and_told_under_the_payments_reference() {
    let (sandbox, hook) = with_notifications().await;
    let client = client(Duration::from_secs(5));
    let made = paid(
        &client,
        &sandbox,
        &payment("att_refund", "pm_card_visa", false),
    )
    .await;
    let psp = made["pspReference"].as_str().expect("named").to_owned();
    let refund = json!({"merchantAccount": ACCOUNT, "amount": {"value": 300, "currency": "EUR"}});
    let path = format!("/v71/payments/{psp}/refunds");
    let taken = adyen_post(&client, &sandbox, &path, Some("r-1"), &refund)
        .await
        .expect("answered");
    assert_eq!(taken.status, 201, "{}", taken.body);
    assert_eq!(taken.body["status"], "received");
    assert_eq!(taken.body["paymentPspReference"], psp.as_str());
    assert!(taken.body.get("reference").is_none(), "{}", taken.body);
    let refund_psp = taken.body["pspReference"]
        .as_str()
        .expect("named")
        .to_owned();
    let replay = adyen_post(&client, &sandbox, &path, Some("r-1"), &refund)
        .await
        .expect("answered");
    assert_eq!(replay.bytes, taken.bytes);
    let told = item(&hook, "REFUND", |i| i["eventCode"] == "REFUND").await;
    well_formed(&told, &sandbox);
    assert_eq!(told["pspReference"], refund_psp.as_str());
    assert_eq!(told["originalReference"], psp.as_str());
    assert_eq!(told["merchantReference"], "att_refund");
    assert_eq!(told["success"], "true");
    let refunds = sandbox.refunds();
    assert_eq!(refunds.len(), 1);
    assert_eq!(
        (refunds[0].amount, refunds[0].refund_id.as_deref()),
        (300, None)
    );
    sandbox.stop().await;
    hook.stop().await;
}

/// `POST /v71/cancels` of the payment made with `reference`, checked to be Adyen's
/// `StandalonePaymentCancelResponse`: the cancel's own `pspReference`.
async fn technical_cancel(
    client: &reqwest::Client,
    sandbox: &SandboxHandle,
    reference: &str,
) -> String {
    let body = json!({
        "merchantAccount": ACCOUNT,
        "paymentReference": reference,
        "reference": format!("tc_{reference}"),
    });
    let taken = adyen_post(client, sandbox, "/v71/cancels", None, &body)
        .await
        .expect("answered");
    assert_eq!(taken.status, 201, "{}", taken.body);
    let mut names: Vec<&str> = taken
        .body
        .as_object()
        .expect("an object")
        .keys()
        .map(String::as_str)
        .collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "merchantAccount",
            "paymentReference",
            "pspReference",
            "reference",
            "status"
        ],
        "{}",
        taken.body
    );
    assert_eq!(taken.body["status"], "received");
    assert_eq!(taken.body["paymentReference"], reference);
    assert_eq!(taken.body["merchantAccount"], ACCOUNT);
    assert_eq!(taken.body["reference"], format!("tc_{reference}"));
    taken.body["pspReference"]
        .as_str()
        .expect("its own")
        .to_owned()
}

/// The `TECHNICAL_CANCEL` item about cancel `cancel_psp`, once it has come, well formed.
async fn told(hook: &Receiver, sandbox: &SandboxHandle, cancel_psp: String) -> Value {
    let told = item(hook, "TECHNICAL_CANCEL", |i| {
        i["eventCode"] == "TECHNICAL_CANCEL" && i["pspReference"] == cancel_psp.as_str()
    })
    .await;
    well_formed(&told, sandbox);
    told
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_technical_cancel_voids_what_was_not_captured_and_says_why_not_otherwise() {
    let (sandbox, hook) = with_notifications().await;
    let client = client(Duration::from_secs(5));
    // Authorised and held: canceled, the hold voided.
    let held = paid(
        &client,
        &sandbox,
        &payment("att_held", "pm_card_visa", true),
    )
    .await;
    let outcome = told(
        &hook,
        &sandbox,
        technical_cancel(&client, &sandbox, "att_held").await,
    )
    .await;
    assert_eq!(outcome["success"], "true");
    assert_eq!(outcome["originalReference"], held["pspReference"]);
    assert_eq!(outcome["merchantReference"], "att_held");
    assert_eq!(outcome["amount"], json!({"value": 1000, "currency": "EUR"}));

    // Waiting for the shopper's 3-D Secure challenge: canceled, and the challenge is over.
    let mut challenged = payment("att_3ds", "pm_card_threeDSecure2Required", false);
    challenged["shopperInteraction"] = json!("Ecommerce");
    challenged["recurringProcessingModel"] = json!("CardOnFile");
    let waiting = paid(&client, &sandbox, &challenged).await;
    let page = waiting["action"]["url"]
        .as_str()
        .expect("a page")
        .to_owned();
    let outcome = told(
        &hook,
        &sandbox,
        technical_cancel(&client, &sandbox, "att_3ds").await,
    )
    .await;
    assert_eq!(outcome["success"], "true");
    let challenged_psp = page.rsplit('/').next().expect("an id");
    assert_eq!(outcome["originalReference"], challenged_psp);
    let late = press(&client, &format!("{page}/complete")).await;
    assert_eq!(late.status(), 200, "the challenge moves nothing any more");

    // Captured: cannot be canceled, and the reason says so.
    let captured = paid(
        &client,
        &sandbox,
        &payment("att_captured", "pm_card_visa", false),
    )
    .await;
    let outcome = told(
        &hook,
        &sandbox,
        technical_cancel(&client, &sandbox, "att_captured").await,
    )
    .await;
    assert_eq!(outcome["success"], "false");
    assert_eq!(outcome["originalReference"], captured["pspReference"]);
    let reason = outcome["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("captured"), "{reason}");

    // Refused: nothing was authorised, nothing to cancel.
    let refused = paid(
        &client,
        &sandbox,
        &payment("att_refused", "pm_card_chargeDeclined", false),
    )
    .await;
    assert_eq!(refused["resultCode"], "Refused");
    let outcome = told(
        &hook,
        &sandbox,
        technical_cancel(&client, &sandbox, "att_refused").await,
    )
    .await;
    assert_eq!(outcome["success"], "false");
    assert!(!outcome["reason"].as_str().unwrap_or_default().is_empty());

    // No payment under the reference: taken, told false, with the amount the item requires.
    let outcome = told(
        &hook,
        &sandbox,
        technical_cancel(&client, &sandbox, "att_never").await,
    )
    .await;
    assert_eq!(outcome["success"], "false");
    assert_eq!(outcome["merchantReference"], "att_never");
    assert!(outcome.get("originalReference").is_none(), "{outcome}");
    assert_eq!(outcome["amount"]["value"], 0);

    let book = ledger(&client, &sandbox).await;
    let voids = book["voids"].as_array().expect("a list");
    assert_eq!(voids.len(), 1, "only the hold went back: {voids:?}");
    assert_eq!(voids[0]["provider_id"], held["pspReference"]);
    assert_eq!(voids[0]["kind"], "technical_cancel");
    assert!(!sandbox
        .ledger()
        .iter()
        .any(|e| e.attempt_id.as_deref() == Some("att_3ds") && e.is_charged()));
    assert!(sandbox
        .ledger()
        .iter()
        .any(|e| e.attempt_id.as_deref() == Some("att_captured") && e.is_charged()));
    for item in items(&hook) {
        well_formed(&item, &sandbox);
    }
    sandbox.stop().await;
    hook.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_details_answer_names_the_payment_by_its_merchant_reference_whatever_the_outcome() {
    let sandbox = start(fast()).await;
    let client = client(Duration::from_secs(5));
    for (reference, button, result) in [
        ("att_passed", "complete", "Authorised"),
        ("att_failed", "fail", "Refused"),
    ] {
        let mut body = payment(reference, "pm_card_threeDSecure2Required", false);
        body["shopperInteraction"] = json!("Ecommerce");
        body["recurringProcessingModel"] = json!("CardOnFile");
        let waiting = paid(&client, &sandbox, &body).await;
        let page = waiting["action"]["url"]
            .as_str()
            .expect("a page")
            .to_owned();
        let back = location(&press(&client, &format!("{page}/{button}")).await);
        let redirect_result = reqwest::Url::parse(&back)
            .expect("a URL")
            .query_pairs()
            .find(|(name, _)| name == "redirectResult")
            .map(|(_, value)| value.into_owned())
            .expect("a redirectResult");
        let details = adyen_post(
            &client,
            &sandbox,
            "/v71/payments/details",
            None,
            &json!({"details": {"redirectResult": redirect_result}}),
        )
        .await
        .expect("answered");
        assert_eq!(details.status, 200);
        assert_eq!(details.body["resultCode"], result);
        assert_eq!(details.body["merchantReference"], reference);
    }
    sandbox.stop().await;
}
