//! The sandbox against the providers' published contracts (fixtures/contracts/README.md): it
//! imitates Stripe and Adyen, so what it answers, and the webhooks and notifications it
//! sends, must be what the providers' OpenAPI documents say theirs are. Each test drives
//! operations of one face with contract-valid requests (each checked before it is sent, so a
//! finding is always the sandbox's), its faults and refusals included, and validates every
//! answer against the operation's response schema for its status; then the Stripe events
//! received (against `event`, and their `data.object` against `payment_intent` or `refund`)
//! and the Adyen notifications (against the Webhooks-v1 webhook of their `eventCode`).
//!
//! Every finding of a test is gathered before it fails, so one run tells all that is wrong.
//! Waits are for an expected webhook to arrive (`common::eventually`), never a timed
//! assertion.

mod common;

use std::time::Duration;

use common::{adyen_post, client, eventually, fast, location, press, start, Answer, Receiver};
use payorch_contract::{report, Contract};
use payorch_sandbox::{SandboxConfig, SandboxHandle, DECLINES};
use serde_json::{json, Value};

const FORM: &str = "application/x-www-form-urlencoded";
const ACCOUNT: &str = "PayorchECOM";
const RETURN_URL: &str = "https://shop.example/back?order=42";

/// One sandbox with a receiver for each face's webhooks, and what was found wrong.
struct World {
    sandbox: SandboxHandle,
    stripe_hook: Receiver,
    adyen_hook: Receiver,
    client: reqwest::Client,
    findings: Vec<String>,
}

impl World {
    async fn start() -> World {
        let stripe_hook = Receiver::start().await;
        let adyen_hook = Receiver::start().await;
        let sandbox = start(SandboxConfig {
            webhook_url: Some(stripe_hook.url.clone()),
            adyen_notification_url: Some(adyen_hook.url.clone()),
            ..fast()
        })
        .await;
        World {
            sandbox,
            stripe_hook,
            adyen_hook,
            client: client(Duration::from_secs(5)),
            findings: Vec::new(),
        }
    }

    /// The answer checked against `contract`'s response for its status; what breaks it is a
    /// finding.
    fn check_answer(
        &mut self,
        contract: &Contract,
        method: &str,
        path: &str,
        what: &str,
        answer: &Answer,
    ) {
        if let Err(violations) =
            contract.validate_response(method, path, answer.status, &answer.bytes)
        {
            self.findings.push(format!(
                "{method} {path} ({what}) answered {}, which breaks the contract:\n{}\n  answer: {}",
                answer.status,
                report(&violations),
                String::from_utf8_lossy(&answer.bytes)
            ));
        }
    }

    /// A form POST to the Stripe face; the form is checked against the contract first.
    async fn stripe_post(
        &mut self,
        path: &str,
        key: Option<&str>,
        form: &[(&str, &str)],
        what: &str,
    ) -> Answer {
        let body = serde_urlencoded::to_string(form).expect("a form");
        if let Err(v) = Contract::stripe().validate_request("POST", path, FORM, body.as_bytes()) {
            panic!(
                "the test's own request POST {path} {body} breaks the contract:\n{}",
                report(&v)
            );
        }
        let answer = common::stripe_post(&self.client, &self.sandbox, path, key, form)
            .await
            .unwrap_or_else(|| panic!("POST {path} ({what}) is answered"));
        self.check_answer(Contract::stripe(), "POST", path, what, &answer);
        answer
    }

    /// A GET of the Stripe face (`path` with its query); the query is checked first.
    async fn stripe_get(&mut self, path: &str, what: &str) -> Answer {
        if let Err(v) = Contract::stripe().validate_request("GET", path, "", b"") {
            panic!(
                "the test's own request GET {path} breaks the contract:\n{}",
                report(&v)
            );
        }
        let answer = common::get(&self.client, &self.sandbox, path).await;
        self.check_answer(Contract::stripe(), "GET", path, what, &answer);
        answer
    }

    /// A JSON POST to the Adyen face; the body is checked against the contract first.
    async fn adyen(&mut self, path: &str, key: Option<&str>, body: &Value, what: &str) -> Answer {
        let bytes = serde_json::to_vec(body).expect("JSON");
        if let Err(v) =
            Contract::adyen_checkout().validate_request("POST", path, "application/json", &bytes)
        {
            panic!(
                "the test's own request POST {path} {body} breaks the contract:\n{}",
                report(&v)
            );
        }
        self.adyen_unchecked(path, key, body, what).await
    }

    /// A JSON POST to the Adyen face that may break the contract (a refusal's test): only
    /// the answer is checked.
    async fn adyen_unchecked(
        &mut self,
        path: &str,
        key: Option<&str>,
        body: &Value,
        what: &str,
    ) -> Answer {
        let answer = adyen_post(&self.client, &self.sandbox, path, key, body)
            .await
            .unwrap_or_else(|| panic!("POST {path} ({what}) is answered"));
        self.check_answer(Contract::adyen_checkout(), "POST", path, what, &answer);
        answer
    }

    /// Waits for a Stripe event `kind` about object `id`.
    async fn stripe_event(&self, id: &str, kind: &str) {
        let hook = &self.stripe_hook;
        eventually(&format!("{kind} of {id}"), || {
            hook.stripe_events(id)
                .iter()
                .any(|k| k == kind)
                .then_some(())
        })
        .await;
    }

    /// Waits for an Adyen notification `event_code` about payment `psp` (as the payment or
    /// as the original of a modification or refund).
    async fn adyen_item(&self, psp: &str, event_code: &str) -> Value {
        let hook = &self.adyen_hook;
        eventually(&format!("{event_code} of {psp}"), || {
            hook.adyen_items(psp)
                .into_iter()
                .find(|item| item["eventCode"] == event_code)
        })
        .await
    }

    /// Every Stripe event received so far checked against `event`, and its object against
    /// its own schema.
    fn check_stripe_events(&mut self) {
        let stripe = Contract::stripe();
        for event in self.stripe_hook.received() {
            let what = format!("event {} {}", event["type"], event["id"]);
            if let Err(v) = stripe.validate_schema("event", &event) {
                self.findings
                    .push(format!("{what} breaks `event`:\n{}", report(&v)));
            }
            let object = &event["data"]["object"];
            let schema = match object["object"].as_str() {
                Some("payment_intent") => "payment_intent",
                Some("refund") => "refund",
                other => {
                    self.findings
                        .push(format!("{what}: data.object is a {other:?}"));
                    continue;
                }
            };
            if let Err(v) = stripe.validate_schema(schema, object) {
                self.findings.push(format!(
                    "{what}: data.object breaks `{schema}`:\n{}\n  object: {object}",
                    report(&v)
                ));
            }
        }
    }

    /// Every Adyen notification received so far, item by item, checked against the
    /// Webhooks-v1 webhook of its `eventCode`.
    fn check_adyen_notifications(&mut self) {
        let webhooks = Contract::adyen_webhooks();
        for delivery in self.adyen_hook.received() {
            let items = delivery["notificationItems"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            if items.is_empty() {
                self.findings
                    .push(format!("a notification of no items: {delivery}"));
            }
            for wrapper in items {
                let code = wrapper["NotificationRequestItem"]["eventCode"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                let one = json!({"live": delivery["live"], "notificationItems": [wrapper]});
                let bytes = serde_json::to_vec(&one).expect("JSON");
                if let Err(v) = webhooks.validate_webhook(&code, &bytes) {
                    self.findings.push(format!(
                        "notification {code:?} breaks the webhook's contract:\n{}\n  item: {}",
                        report(&v),
                        wrapper["NotificationRequestItem"]
                    ));
                }
            }
        }
    }

    async fn finish(self) -> Vec<String> {
        self.sandbox.stop().await;
        self.stripe_hook.stop().await;
        self.adyen_hook.stop().await;
        self.findings
    }
}

#[track_caller]
fn assert_clean(findings: Vec<String>) {
    assert!(
        findings.is_empty(),
        "{} findings:\n{}",
        findings.len(),
        findings.join("\n")
    );
}

// The Stripe face.

fn intent_form<'a>(payment_method: &'a str, attempt: &'a str) -> Vec<(&'a str, &'a str)> {
    vec![
        ("amount", "4200"),
        ("currency", "eur"),
        ("payment_method", payment_method),
        ("confirm", "true"),
        ("payment_method_types[0]", "card"),
        ("metadata[attempt_id]", attempt),
        ("metadata[order_id]", "ord_1"),
        ("metadata[merchant_id]", "mer_1"),
    ]
}

fn id_of(answer: &Answer) -> String {
    answer.body["id"]
        .as_str()
        .unwrap_or_else(|| panic!("an id in {}", answer.body))
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stripe_payment_intents_answer_as_the_contract_says() {
    let mut w = World::start().await;
    let create = "/v1/payment_intents";

    let paid = w
        .stripe_post(
            create,
            Some("k-visa"),
            &intent_form("pm_card_visa", "att_visa"),
            "a good card",
        )
        .await;
    assert_eq!(paid.status, 200, "{}", paid.body);
    let paid_id = id_of(&paid);
    // A resend under the key: the same answer again.
    w.stripe_post(
        create,
        Some("k-visa"),
        &intent_form("pm_card_visa", "att_visa"),
        "a replay",
    )
    .await;
    // Another request under the key: Stripe's idempotency error.
    let other = w
        .stripe_post(
            create,
            Some("k-visa"),
            &intent_form("pm_card_mastercard", "att_visa"),
            "a key reused",
        )
        .await;
    assert_eq!(other.status, 400, "{}", other.body);

    let mut manual = intent_form("pm_card_visa", "att_hold");
    manual.push(("capture_method", "manual"));
    let held = w
        .stripe_post(create, Some("k-hold"), &manual, "a hold")
        .await;
    assert_eq!(held.body["status"], "requires_capture");

    for (card, what) in [
        ("pm_card_chargeDeclined", "a decline"),
        (
            "pm_card_chargeDeclinedInsufficientFunds",
            "insufficient funds",
        ),
        ("pm_sandbox_error_before", "a 500 before the charge"),
        ("pm_sandbox_error_after", "a 500 after the charge"),
        ("pm_sandbox_processing", "processing"),
    ] {
        let answer = w
            .stripe_post(create, Some(card), &intent_form(card, card), what)
            .await;
        assert!(answer.status >= 200, "{what}");
    }
    // Every decline's 402 and intent, as the pinned API version's `error` schema has them.
    for token in DECLINES.iter().filter_map(|d| d.token) {
        let key = format!("k-{token}");
        let answer = w
            .stripe_post(create, Some(&key), &intent_form(token, token), "a decline")
            .await;
        assert_eq!(answer.status, 402, "{token}: {}", answer.body);
    }
    // 3-D Secure: without a return_url Stripe refuses it; with one, it waits for the payer.
    let refused = w
        .stripe_post(
            create,
            Some("k-3ds-none"),
            &intent_form("pm_card_threeDSecure2Required", "att_3ds_none"),
            "3-D Secure without return_url",
        )
        .await;
    assert_eq!(refused.status, 400, "{}", refused.body);
    let mut three_ds = intent_form("pm_card_threeDSecure2Required", "att_3ds");
    three_ds.push(("return_url", RETURN_URL));
    let waiting = w
        .stripe_post(create, Some("k-3ds"), &three_ds, "3-D Secure")
        .await;
    assert_eq!(
        waiting.body["status"], "requires_action",
        "{}",
        waiting.body
    );
    let three_ds_id = id_of(&waiting);
    let page = waiting.body["next_action"]["redirect_to_url"]["url"]
        .as_str()
        .expect("a redirect")
        .to_owned();
    let done = press(&w.client, &format!("{page}/complete")).await;
    assert_eq!(done.status(), 303);

    // Made without confirm, then confirmed.
    let unconfirmed: Vec<(&str, &str)> = intent_form("pm_card_visa", "att_later")
        .into_iter()
        .filter(|(k, _)| *k != "confirm")
        .collect();
    let later = w
        .stripe_post(create, Some("k-later"), &unconfirmed, "unconfirmed")
        .await;
    let later_id = id_of(&later);
    w.stripe_post(
        &format!("/v1/payment_intents/{later_id}/confirm"),
        Some("k-confirm"),
        &[],
        "a confirm",
    )
    .await;

    w.stripe_get(&format!("/v1/payment_intents/{paid_id}"), "a retrieve")
        .await;
    w.stripe_get("/v1/payment_intents/pi_never_made", "a retrieve of nothing")
        .await;
    let created_after = (unix_now() - 600).to_string();
    w.stripe_get(
        &format!("/v1/payment_intents?limit=100&created[gte]={created_after}"),
        "a list",
    )
    .await;
    w.stripe_get("/v1/payment_intents?limit=2", "a page of the list")
        .await;
    w.stripe_get(
        "/v1/payment_intents/search?query=metadata%5B%27attempt_id%27%5D%3A%27att_visa%27",
        "a search",
    )
    .await;

    w.stripe_event(&paid_id, "payment_intent.succeeded").await;
    w.stripe_event(&id_of(&held), "payment_intent.amount_capturable_updated")
        .await;
    w.stripe_event(&three_ds_id, "payment_intent.succeeded")
        .await;
    w.check_stripe_events();
    assert_clean(w.finish().await);
}

fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_secs() as i64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stripe_captures_and_cancels_answer_as_the_contract_says() {
    let mut w = World::start().await;
    let create = "/v1/payment_intents";
    let mut manual = intent_form("pm_card_visa", "att_capture");
    manual.push(("capture_method", "manual"));
    let held = id_of(&w.stripe_post(create, Some("k-1"), &manual, "a hold").await);
    let capture = format!("/v1/payment_intents/{held}/capture");
    let captured = w
        .stripe_post(
            &capture,
            Some("cap-1"),
            &[("amount_to_capture", "4000")],
            "a capture",
        )
        .await;
    assert_eq!(captured.body["status"], "succeeded", "{}", captured.body);
    let again = w
        .stripe_post(
            &capture,
            Some("cap-2"),
            &[("amount_to_capture", "4000")],
            "a capture of a captured intent",
        )
        .await;
    assert_eq!(again.status, 400, "{}", again.body);

    for field in manual
        .iter_mut()
        .filter(|(name, _)| *name == "metadata[attempt_id]")
    {
        field.1 = "att_void";
    }
    let to_void = id_of(&w.stripe_post(create, Some("k-2"), &manual, "a hold").await);
    let voided = w
        .stripe_post(
            &format!("/v1/payment_intents/{to_void}/cancel"),
            Some("void-1"),
            &[],
            "a cancel",
        )
        .await;
    assert_eq!(voided.body["status"], "canceled", "{}", voided.body);
    let mut faulty = intent_form("pm_sandbox_capture_error_before", "att_fault");
    faulty.push(("capture_method", "manual"));
    let fault_id = id_of(&w.stripe_post(create, Some("k-3"), &faulty, "a hold").await);
    w.stripe_post(
        &format!("/v1/payment_intents/{fault_id}/capture"),
        Some("cap-f"),
        &[],
        "a capture's 500",
    )
    .await;
    let paid = id_of(
        &w.stripe_post(
            create,
            Some("k-4"),
            &intent_form("pm_card_visa", "att_paid"),
            "a payment",
        )
        .await,
    );
    let late_void = w
        .stripe_post(
            &format!("/v1/payment_intents/{paid}/cancel"),
            Some("void-2"),
            &[],
            "a cancel of a payment",
        )
        .await;
    assert_eq!(late_void.status, 400, "{}", late_void.body);

    w.stripe_event(&held, "payment_intent.succeeded").await;
    w.stripe_event(&to_void, "payment_intent.canceled").await;
    w.check_stripe_events();
    assert_clean(w.finish().await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stripe_refunds_answer_as_the_contract_says() {
    let mut w = World::start().await;
    let paid = id_of(
        &w.stripe_post(
            "/v1/payment_intents",
            Some("k-paid"),
            &intent_form("pm_card_visa", "att_paid"),
            "a payment",
        )
        .await,
    );
    let refund = |amount: &'static str, reason: Option<&'static str>| {
        let mut form = vec![
            ("payment_intent", paid.as_str()),
            ("amount", amount),
            ("metadata[refund_id]", "ref_1"),
            ("metadata[payment_id]", "att_paid"),
        ];
        if let Some(reason) = reason {
            form.push(("metadata[reason]", reason));
        }
        form
    };
    let made = w
        .stripe_post(
            "/v1/refunds",
            Some("r-1"),
            &refund("1000", None),
            "a refund",
        )
        .await;
    assert_eq!(made.status, 200, "{}", made.body);
    let refund_id = id_of(&made);
    let pending = w
        .stripe_post(
            "/v1/refunds",
            Some("r-2"),
            &refund("500", Some("sandbox_pending")),
            "a pending refund",
        )
        .await;
    let failing = w
        .stripe_post(
            "/v1/refunds",
            Some("r-3"),
            &refund("500", Some("sandbox_failure")),
            "a failing refund",
        )
        .await;
    w.stripe_post(
        "/v1/refunds",
        Some("r-4"),
        &refund("500", Some("sandbox_error_before")),
        "a refund's 500",
    )
    .await;
    let too_much = w
        .stripe_post(
            "/v1/refunds",
            Some("r-5"),
            &refund("99999", None),
            "more than was paid",
        )
        .await;
    assert_eq!(too_much.status, 400, "{}", too_much.body);
    w.stripe_get(&format!("/v1/refunds/{refund_id}"), "a refund's retrieve")
        .await;
    w.stripe_get("/v1/refunds/re_never_made", "a retrieve of nothing")
        .await;
    w.stripe_get(
        &format!("/v1/refunds?payment_intent={paid}&limit=100"),
        "a list of refunds",
    )
    .await;

    w.stripe_event(&refund_id, "refund.created").await;
    w.stripe_event(&id_of(&pending), "refund.updated").await;
    w.stripe_event(&id_of(&failing), "refund.failed").await;
    w.check_stripe_events();
    assert_clean(w.finish().await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stripe_refuses_an_unknown_parameter() {
    // Stripe's request schemas allow no other parameter (`additionalProperties: false`), and
    // Stripe answers `400 parameter_unknown` to one.
    let mut w = World::start().await;
    let mut form = intent_form("pm_card_visa", "att_unknown");
    form.push(("colour", "blue"));
    let body = serde_urlencoded::to_string(&form).unwrap();
    assert!(
        Contract::stripe()
            .validate_request("POST", "/v1/payment_intents", FORM, body.as_bytes())
            .is_err(),
        "the contract refuses it"
    );
    let answer = common::stripe_post(
        &w.client,
        &w.sandbox,
        "/v1/payment_intents",
        Some("k-unknown"),
        &form,
    )
    .await
    .expect("answered");
    w.check_answer(
        Contract::stripe(),
        "POST",
        "/v1/payment_intents",
        "an unknown parameter",
        &answer,
    );
    if answer.status != 400 {
        w.findings.push(format!(
            "POST /v1/payment_intents with an unknown parameter answered {}, Stripe answers 400 parameter_unknown: {}",
            answer.status, answer.body
        ));
    }
    assert_clean(w.finish().await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stripe_and_adyen_refuse_a_wrong_key() {
    let mut w = World::start().await;
    let base = w.sandbox.base_url();
    let stripe = w
        .client
        .get(format!("{base}/v1/payment_intents/pi_1"))
        .bearer_auth("sk_test_wrong")
        .send()
        .await
        .expect("answered");
    let status = stripe.status().as_u16();
    let bytes = stripe.bytes().await.expect("a body").to_vec();
    let answer = Answer {
        status,
        body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        bytes,
        replayed: false,
    };
    assert_eq!(answer.status, 401);
    w.check_answer(
        Contract::stripe(),
        "GET",
        "/v1/payment_intents/pi_1",
        "a wrong key",
        &answer,
    );
    let adyen = w
        .client
        .post(format!("{base}/v71/payments"))
        .header("X-API-Key", "wrong")
        .json(&payment("pm_card_visa", "att_key"))
        .send()
        .await
        .expect("answered");
    let status = adyen.status().as_u16();
    let bytes = adyen.bytes().await.expect("a body").to_vec();
    let answer = Answer {
        status,
        body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        bytes,
        replayed: false,
    };
    assert_eq!(answer.status, 401);
    w.check_answer(
        Contract::adyen_checkout(),
        "POST",
        "/v71/payments",
        "a wrong key",
        &answer,
    );
    assert_clean(w.finish().await);
}

// The Adyen face.

/// A payment as payorch's adapter makes one (docs/DESIGN.md, "The provider protocol").
fn payment(stored_id: &str, reference: &str) -> Value {
    json!({
        "amount": {"value": 4200, "currency": "EUR"},
        "reference": reference,
        "merchantAccount": ACCOUNT,
        "paymentMethod": {"type": "scheme", "storedPaymentMethodId": stored_id},
        "shopperInteraction": "ContAuth",
        "recurringProcessingModel": "UnscheduledCardOnFile",
        "metadata": {"order_id": "ord_1", "merchant_id": "mer_1"},
        "returnUrl": RETURN_URL,
    })
}

fn held(stored_id: &str, reference: &str) -> Value {
    let mut body = payment(stored_id, reference);
    body["additionalData"] = json!({"manualCapture": "true"});
    body
}

fn psp_of(answer: &Answer) -> String {
    answer.body["pspReference"]
        .as_str()
        .unwrap_or_else(|| panic!("a pspReference in {}", answer.body))
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adyen_payments_and_details_answer_as_the_contract_says() {
    let mut w = World::start().await;
    let paid = w
        .adyen(
            "/v71/payments",
            Some("k-visa"),
            &payment("pm_card_visa", "att_visa"),
            "a good card",
        )
        .await;
    assert_eq!(paid.body["resultCode"], "Authorised", "{}", paid.body);
    let paid_psp = psp_of(&paid);
    w.adyen(
        "/v71/payments",
        Some("k-visa"),
        &payment("pm_card_visa", "att_visa"),
        "a replay",
    )
    .await;
    let reused = w
        .adyen(
            "/v71/payments",
            Some("k-visa"),
            &payment("pm_card_mastercard", "att_visa"),
            "a key reused",
        )
        .await;
    assert_eq!(reused.status, 422, "{}", reused.body);
    let hold = w
        .adyen(
            "/v71/payments",
            Some("k-hold"),
            &held("pm_card_visa", "att_hold"),
            "a hold",
        )
        .await;
    let hold_psp = psp_of(&hold);
    let declined = w
        .adyen(
            "/v71/payments",
            Some("k-decl"),
            &payment("pm_card_chargeDeclined", "att_decl"),
            "a decline",
        )
        .await;
    assert_eq!(declined.body["resultCode"], "Refused", "{}", declined.body);
    let declined_psp = psp_of(&declined);
    for (token, what) in [
        (
            "pm_card_chargeDeclinedInsufficientFunds",
            "insufficient funds",
        ),
        ("pm_sandbox_error_before", "a 500 before the payment"),
        ("pm_sandbox_error_after", "a 500 after the payment"),
        ("pm_sandbox_processing", "processing"),
        ("pm_no_such_token", "an unknown stored payment method"),
    ] {
        w.adyen("/v71/payments", Some(token), &payment(token, token), what)
            .await;
    }
    // Every decline's refusal, with its `additionalData`, and its notification.
    for token in DECLINES.iter().filter_map(|d| d.token) {
        let key = format!("k-{token}");
        let refused = w
            .adyen(
                "/v71/payments",
                Some(&key),
                &payment(token, &key),
                "a refusal",
            )
            .await;
        assert_eq!(refused.body["resultCode"], "Refused", "{}", refused.body);
    }

    // 3-D Secure: the shopper is sent to the challenge, comes back with a redirectResult,
    // and /payments/details tells the outcome.
    let mut challenged = payment("pm_card_threeDSecure2Required", "att_3ds");
    challenged["shopperInteraction"] = json!("Ecommerce");
    challenged["recurringProcessingModel"] = json!("CardOnFile");
    challenged["channel"] = json!("Web");
    let redirect = w
        .adyen("/v71/payments", Some("k-3ds"), &challenged, "3-D Secure")
        .await;
    assert_eq!(
        redirect.body["resultCode"], "RedirectShopper",
        "{}",
        redirect.body
    );
    let page = redirect.body["action"]["url"]
        .as_str()
        .expect("a redirect")
        .to_owned();
    let three_ds_psp = page.rsplit('/').next().expect("the payment").to_owned();
    let done = press(&w.client, &format!("{page}/complete")).await;
    assert_eq!(done.status(), 303);
    let back = reqwest::Url::parse(&location(&done)).expect("a URL");
    let result = back
        .query_pairs()
        .find(|(k, _)| k == "redirectResult")
        .map(|(_, v)| v.into_owned())
        .expect("a redirectResult");
    let details = json!({"details": {"redirectResult": result}});
    let authorised = w
        .adyen(
            "/v71/payments/details",
            None,
            &details,
            "the shopper's return",
        )
        .await;
    assert_eq!(
        authorised.body["resultCode"], "Authorised",
        "{}",
        authorised.body
    );
    let garbage = json!({"details": {"redirectResult": "bm90IGEgcmVzdWx0"}});
    w.adyen(
        "/v71/payments/details",
        None,
        &garbage,
        "a redirectResult that is none",
    )
    .await;

    w.adyen_item(&paid_psp, "AUTHORISATION").await;
    w.adyen_item(&hold_psp, "AUTHORISATION").await;
    w.adyen_item(&declined_psp, "AUTHORISATION").await;
    w.adyen_item(&three_ds_psp, "AUTHORISATION").await;
    w.check_adyen_notifications();
    assert_clean(w.finish().await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adyen_captures_cancels_and_refunds_answer_as_the_contract_says() {
    let mut w = World::start().await;
    let modification = |reference: &str, amount: Option<i64>| {
        let mut body = json!({"merchantAccount": ACCOUNT, "reference": reference});
        if let Some(value) = amount {
            body["amount"] = json!({"value": value, "currency": "EUR"});
        }
        body
    };

    let capture_psp = psp_of(
        &w.adyen(
            "/v71/payments",
            Some("k-1"),
            &held("pm_card_visa", "att_capture"),
            "a hold",
        )
        .await,
    );
    let captures = format!("/v71/payments/{capture_psp}/captures");
    let captured = w
        .adyen(
            &captures,
            Some("cap-1"),
            &modification("att_capture", Some(4000)),
            "a capture",
        )
        .await;
    assert_eq!(captured.status, 201, "{}", captured.body);
    w.adyen(
        &captures,
        Some("cap-2"),
        &modification("att_capture", Some(4000)),
        "a second capture",
    )
    .await;
    w.adyen(
        &captures,
        Some("cap-3"),
        &modification("att_capture", Some(99999)),
        "more than is held",
    )
    .await;
    w.adyen(
        "/v71/payments/NOSUCHPAYMENT000/captures",
        Some("cap-4"),
        &modification("att_none", Some(100)),
        "a capture of no payment",
    )
    .await;

    let void_psp = psp_of(
        &w.adyen(
            "/v71/payments",
            Some("k-2"),
            &held("pm_card_visa", "att_void"),
            "a hold",
        )
        .await,
    );
    let canceled = w
        .adyen(
            &format!("/v71/payments/{void_psp}/cancels"),
            Some("void-1"),
            &modification("att_void", None),
            "a cancel",
        )
        .await;
    assert_eq!(canceled.status, 201, "{}", canceled.body);

    // A cancel by the payment's reference, of a payment that exists.
    let by_ref_psp = psp_of(
        &w.adyen(
            "/v71/payments",
            Some("k-3"),
            &held("pm_card_visa", "att_by_ref"),
            "a hold",
        )
        .await,
    );
    let by_reference = json!({"merchantAccount": ACCOUNT, "paymentReference": "att_by_ref", "reference": "att_by_ref"});
    let technical = w
        .adyen(
            "/v71/cancels",
            Some("void-2"),
            &by_reference,
            "a cancel by reference",
        )
        .await;
    assert_eq!(technical.status, 201, "{}", technical.body);

    let fault_psp = psp_of(
        &w.adyen(
            "/v71/payments",
            Some("k-4"),
            &held("pm_sandbox_capture_error_before", "att_fault"),
            "a hold",
        )
        .await,
    );
    w.adyen(
        &format!("/v71/payments/{fault_psp}/captures"),
        Some("cap-5"),
        &modification("att_fault", Some(4200)),
        "a capture's 500",
    )
    .await;

    // Refunds, and their faults (chosen by the payment's token after a `+`).
    let mut refunded = Vec::new();
    for (token, reference) in [
        ("pm_card_visa", "att_refund"),
        ("pm_card_visa+sandbox_pending", "att_refund_pending"),
        ("pm_card_visa+sandbox_failure", "att_refund_failure"),
        ("pm_card_visa+sandbox_error_before", "att_refund_500"),
    ] {
        let psp = psp_of(
            &w.adyen(
                "/v71/payments",
                Some(reference),
                &payment(token, reference),
                "a payment",
            )
            .await,
        );
        let refund = json!({"amount": {"value": 1000, "currency": "EUR"}, "reference": format!("ref_{reference}"), "merchantAccount": ACCOUNT});
        let answer = w
            .adyen(
                &format!("/v71/payments/{psp}/refunds"),
                Some(&format!("r-{reference}")),
                &refund,
                token,
            )
            .await;
        refunded.push((psp, answer.status));
    }

    w.adyen_item(&capture_psp, "CAPTURE").await;
    w.adyen_item(&void_psp, "CANCELLATION").await;
    w.adyen_item(&by_ref_psp, "TECHNICAL_CANCEL").await;
    for (psp, status) in &refunded {
        if *status == 201 {
            w.adyen_item(psp, "REFUND").await;
        }
    }
    w.check_adyen_notifications();
    assert_clean(w.finish().await);
}

// What Adyen refuses, which the sandbox must refuse too.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adyen_answers_422_to_an_unknown_field() {
    // Every Checkout v71 request schema is `additionalProperties: false`: Adyen refuses a
    // field it does not know with a 422 validation error, it does not ignore it.
    let mut w = World::start().await;
    let psp = psp_of(
        &w.adyen(
            "/v71/payments",
            Some("k-hold"),
            &held("pm_card_visa", "att_hold"),
            "a hold",
        )
        .await,
    );
    let paid = psp_of(
        &w.adyen(
            "/v71/payments",
            Some("k-paid"),
            &payment("pm_card_visa", "att_paid"),
            "a payment",
        )
        .await,
    );
    let mut nested = payment("pm_card_visa", "att_nested");
    nested["amount"]["colour"] = json!("blue");
    let cases = [
        ("/v71/payments".to_owned(), {
            let mut body = payment("pm_card_visa", "att_unknown");
            body["colour"] = json!("blue");
            body
        }),
        ("/v71/payments".to_owned(), nested),
        (
            "/v71/payments/details".to_owned(),
            json!({"details": {"redirectResult": "x"}, "colour": "blue"}),
        ),
        (
            format!("/v71/payments/{psp}/captures"),
            json!({"merchantAccount": ACCOUNT, "amount": {"value": 100, "currency": "EUR"}, "colour": "blue"}),
        ),
        (
            format!("/v71/payments/{psp}/cancels"),
            json!({"merchantAccount": ACCOUNT, "colour": "blue"}),
        ),
        (
            "/v71/cancels".to_owned(),
            json!({"merchantAccount": ACCOUNT, "paymentReference": "att_hold", "colour": "blue"}),
        ),
        (
            format!("/v71/payments/{paid}/refunds"),
            json!({"merchantAccount": ACCOUNT, "amount": {"value": 100, "currency": "EUR"}, "reference": "ref_1", "colour": "blue"}),
        ),
    ];
    for (index, (path, body)) in cases.iter().enumerate() {
        let bytes = serde_json::to_vec(body).unwrap();
        assert!(
            Contract::adyen_checkout()
                .validate_request("POST", path, "application/json", &bytes)
                .is_err(),
            "the contract refuses {body}"
        );
        let answer = w
            .adyen_unchecked(
                path,
                Some(&format!("unknown-{index}")),
                body,
                "an unknown field",
            )
            .await;
        if answer.status != 422 {
            w.findings.push(format!(
                "POST {path} with an unknown field answered {}, Adyen answers 422: {}\n  request: {body}",
                answer.status, answer.body
            ));
        }
    }
    assert_clean(w.finish().await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adyen_answers_422_to_a_four_letter_currency() {
    // `Amount.currency` is `minLength: 3, maxLength: 3`.
    let mut w = World::start().await;
    let mut body = payment("pm_card_visa", "att_euro");
    body["amount"]["currency"] = json!("EURO");
    let answer = w
        .adyen_unchecked(
            "/v71/payments",
            Some("k-euro"),
            &body,
            "a four-letter currency",
        )
        .await;
    if answer.status != 422 {
        w.findings.push(format!(
            "POST /v71/payments with currency \"EURO\" answered {}, Adyen answers 422: {}",
            answer.status, answer.body
        ));
    }
    assert_clean(w.finish().await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adyen_technical_cancel_of_an_unknown_reference_is_a_contract_notification() {
    // Adyen takes a cancel by reference before it looks (201), then tells the outcome in a
    // `TECHNICAL_CANCEL` notification, whose item requires `amount` like every other.
    let mut w = World::start().await;
    let body = json!({"merchantAccount": ACCOUNT, "paymentReference": "att_never_made", "reference": "att_never_made"});
    let taken = w
        .adyen(
            "/v71/cancels",
            Some("void-none"),
            &body,
            "a cancel of no payment",
        )
        .await;
    assert_eq!(taken.status, 201, "{}", taken.body);
    let hook = &w.adyen_hook;
    eventually("TECHNICAL_CANCEL of att_never_made", || {
        hook.received()
            .iter()
            .flat_map(|d| {
                d["notificationItems"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
            })
            .any(|item| item["NotificationRequestItem"]["merchantReference"] == "att_never_made")
            .then_some(())
    })
    .await;
    w.check_adyen_notifications();
    assert_clean(w.finish().await);
}
