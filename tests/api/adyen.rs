//! payorch paying through the sandbox's Adyen face (docs/guides/routing.md, "Routing and failover"): the
//! same fault tokens end the same way as through Stripe, notifications settle payments, and
//! a notification is applied once however often and in whatever order it comes, and never
//! with a bad signature. Refunds of Adyen payments (docs/guides/refunds.md, "Refunds") settle by their
//! notification or the reconciler's status check, once, and never past what was taken.

use std::time::Duration;

use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use serde_json::{json, Value};

use payorch::db::schema::payment_attempts;
use payorch::providers::adyen::sign_item;

use crate::helpers::{assert_problem, eventually, TestApp};
use crate::payments::Route;
use crate::refunds::asleep;

impl TestApp {
    /// Routes this merchant's payments to `providers`, in order.
    pub async fn route_to(&self, providers: &[&str]) {
        let response = self
            .client
            .put(format!(
                "{}/v1/merchants/{}/routing",
                self.base_url, self.merchant_id
            ))
            .bearer_auth(&self.support_key)
            .json(&json!({ "providers": providers }))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
    }

    /// A notification delivery of `items` (NotificationRequestItem objects), each signed with
    /// `hex_key`.
    pub async fn notify(&self, items: &[Value], hex_key: &str) -> reqwest::Response {
        let items: Vec<Value> = items
            .iter()
            .map(|item| {
                let mut item = item.clone();
                let signature = sign_item(&item, hex_key).expect("a signable item");
                item["additionalData"]["hmacSignature"] = json!(signature);
                json!({ "NotificationRequestItem": item })
            })
            .collect();
        self.client
            .post(format!("{}/v1/webhooks/adyen", self.base_url))
            .json(&json!({"live": "false", "notificationItems": items}))
            .send()
            .await
            .unwrap()
    }
}

/// `(payment_method, status in the 201 (`None`: pending, or already settled by a notification
/// that raced the answer), final status, failure code, charges)`.
type Outcome = (
    &'static str,
    Option<&'static str>,
    &'static str,
    Option<&'static str>,
    usize,
);

const OUTCOMES: [Outcome; 6] = [
    ("pm_card_visa", Some("succeeded"), "succeeded", None, 1),
    (
        "pm_card_chargeDeclined",
        Some("failed"),
        "failed",
        Some("generic_decline"),
        0,
    ),
    (
        "pm_sandbox_processing",
        Some("pending"),
        "succeeded",
        None,
        1,
    ),
    ("pm_sandbox_slow", Some("pending"), "succeeded", None, 1),
    ("pm_sandbox_lost_response", None, "succeeded", None, 1),
    ("pm_sandbox_error_after", None, "succeeded", None, 1),
];

#[tokio::test]
async fn every_fault_token_ends_in_the_right_status_through_adyen() {
    // Adyen has no lookup: answers, the resend under the attempt's key and the signed
    // notifications tell (docs/DESIGN.md, "What proves what").
    let app = TestApp::spawn().await;
    app.route_to(&["adyen"]).await;
    for (method, first, last, code, charges) in OUTCOMES {
        let (status, attempt) = app.pay(Route::Checkout, method, method).await;
        assert_eq!(status, 201, "{method}: {attempt}");
        assert_eq!(attempt["provider"], "adyen", "{method}");
        match first {
            Some(first) => assert_eq!(attempt["status"], first, "{method}: {attempt}"),
            None => assert!(
                matches!(attempt["status"].as_str(), Some("pending" | "succeeded")),
                "{method}: {attempt}"
            ),
        }
        let id = attempt["id"].as_str().unwrap();
        let settled = app.settled(id, Duration::from_secs(20)).await;
        assert_eq!(settled["status"], last, "{method}: {settled}");
        assert_eq!(
            settled["failure_code"].as_str(),
            code,
            "{method}: {settled}"
        );
        assert_eq!(app.charges_for(id), charges, "{method}");
        let story = app.story(id).await;
        assert!(
            story["provider_calls"]
                .as_array()
                .unwrap()
                .iter()
                .all(|c| c["operation"] == "create"),
            "{method}: no lookup asked: {story}"
        );
    }
    let ledger = app.sandbox.ledger();
    assert!(!ledger.is_empty());
    assert!(ledger.iter().all(|e| e.protocol == "adyen"));
}

/// An Adyen payment whose outcome no answer and no notification told: canceled once the
/// deadline passed, and the cancel's own notification ends it.
#[tokio::test]
async fn an_adyen_outcome_never_told_is_canceled_by_reference_once_and_ends() {
    let app = TestApp::spawn_config(|config| {
        config.settings.reconciler.technical_cancel_after = Duration::from_secs(2);
        // Received, and never decided: no AUTHORISATION comes.
        config.sandbox.processing_ms = 3_600_000;
    })
    .await;
    app.route_to(&["adyen"]).await;
    let (_, attempt) = app
        .pay(Route::Checkout, "never-told", "pm_sandbox_processing")
        .await;
    assert_eq!(attempt["status"], "pending", "{attempt}");
    let id = attempt["id"].as_str().unwrap();
    let settled = app.settled(id, Duration::from_secs(20)).await;
    assert_eq!(settled["status"], "canceled", "{settled}");
    assert_eq!(
        settled["cancellation_reason"], "outcome_unknown",
        "{settled}"
    );
    assert_eq!(app.charges_for(id), 0, "released, nothing taken");
    let story = app.story(id).await;
    let voids = story["hold_operations"].as_array().unwrap();
    assert_eq!(voids.len(), 1, "one technical cancel: {story}");
    assert_eq!(voids[0]["reason"], "outcome_unknown", "{story}");
    // The payment was `Received` under a pspReference, so it is canceled by it (a
    // CANCELLATION); without one, by payorch's reference (a TECHNICAL_CANCEL, next test).
    let events = story["webhook_events"].as_array().unwrap();
    assert!(
        events
            .iter()
            .any(|e| e["event_type"] == "CANCELLATION" && e["outcome"] == "applied"),
        "{story}"
    );
    // The order may be paid again.
    assert_eq!(story["order"]["status"], "awaiting_payment", "{story}");
}

/// A cancel refused because the payment was captured (its AUTHORISATION lost) says the money
/// moved, never that the payment failed: the attempt is not failed (its order would be paid
/// twice), it stays open for a human.
#[tokio::test]
async fn a_cancel_refused_because_the_payment_was_captured_never_fails_it() {
    let app = TestApp::spawn_config(|config| {
        config.settings.reconciler.technical_cancel_after = Duration::from_secs(2);
    })
    .await;
    app.route_to(&["adyen"]).await;
    // The AUTHORISATION of the received payment is lost (nobody to send it to) ...
    app.sandbox.set_notification_url(None);
    let (_, attempt) = app
        .pay(Route::Checkout, "captured-untold", "pm_sandbox_processing")
        .await;
    let id = attempt["id"].as_str().unwrap();
    tokio::time::sleep(Duration::from_millis(800)).await;
    // ... and the cancel's refusal is heard.
    app.sandbox
        .set_notification_url(Some(format!("{}/v1/webhooks/adyen", app.base_url)));
    let refused = eventually(Duration::from_secs(20), || async {
        let story = app.story(id).await;
        story["hold_operations"]
            .as_array()
            .is_some_and(|ops| ops.iter().any(|o| o["status"] == "failed"))
    })
    .await;
    let story = app.story(id).await;
    assert!(refused, "{story}");
    assert_eq!(story["payment"]["status"], "pending", "{story}");
    assert_eq!(story["order"]["status"], "processing", "{story}");
    assert_eq!(app.charges_for(id), 1);
}

/// A payment Adyen refused before processing (a 500 that a resend meets again): nothing tells
/// its outcome; the cancel by reference finds no payment under it, and that ends the attempt
/// `provider_no_record` (nothing was charged), once no send of it can still be on its way.
#[tokio::test]
async fn an_adyen_cancel_by_reference_that_finds_no_payment_ends_it_no_record() {
    let app = TestApp::spawn_config(|config| {
        config.settings.reconciler.technical_cancel_after = Duration::from_secs(1);
        config.settings.reconciler.settle_delay = Duration::from_secs(1);
    })
    .await;
    app.route_to(&["adyen"]).await;
    let (_, attempt) = app
        .pay(Route::Checkout, "refused-cancel", "pm_sandbox_error_before")
        .await;
    assert_eq!(attempt["status"], "pending", "{attempt}");
    let id = attempt["id"].as_str().unwrap();
    let settled = app.settled(id, Duration::from_secs(30)).await;
    assert_eq!(settled["status"], "failed", "{settled}");
    assert_eq!(settled["failure_code"], "provider_no_record", "{settled}");
    let story = app.story(id).await;
    let voids = story["hold_operations"].as_array().unwrap();
    assert_eq!(voids.len(), 1, "one cancel: {story}");
    let told: Vec<&Value> = story["webhook_events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["event_type"] == "TECHNICAL_CANCEL")
        .collect();
    // Told once, taken at the first delivery: the cancel went only after every send settled.
    assert_eq!(told.len(), 1, "{story}");
    assert_eq!(told[0]["outcome"], "applied", "{story}");
    assert_eq!(told[0]["deliveries"], 1, "{story}");
    assert_eq!(story["order"]["status"], "awaiting_payment", "{story}");
    assert_eq!(app.charges_for(id), 0);
}

#[tokio::test]
async fn a_notification_settles_a_pending_adyen_payment() {
    let app = TestApp::spawn_config(|config| {
        // The reconciler asleep: only the notification can finish it.
        config.settings.reconciler.interval = Duration::from_secs(3600);
        config.settings.reconciler.backoff = vec![Duration::from_secs(3600)];
    })
    .await;
    app.route_to(&["adyen"]).await;
    let (_, attempt) = app
        .pay(Route::Checkout, "received", "pm_sandbox_processing")
        .await;
    assert_eq!(attempt["status"], "pending");
    let id = attempt["id"].as_str().unwrap();
    let settled = app.settled(id, Duration::from_secs(15)).await;
    assert_eq!(settled["status"], "succeeded", "{settled}");
    let story = app.story(id).await;
    let events = story["webhook_events"].as_array().unwrap();
    assert_eq!(events.len(), 1, "{story}");
    assert_eq!(events[0]["event_type"], "AUTHORISATION");
    assert_eq!(events[0]["outcome"], "applied");
}

#[tokio::test]
async fn a_notification_duplicated_and_reordered_is_applied_once_and_a_bad_signature_is_refused() {
    let app = TestApp::spawn_config(|config| {
        config.settings.reconciler.interval = Duration::from_secs(3600);
        config.settings.reconciler.backoff = vec![Duration::from_secs(3600)];
    })
    .await;
    app.route_to(&["adyen"]).await;
    // Made, then left `Received`: the sandbox's own notification is not delivered.
    app.sandbox.set_notification_url(None);
    let (_, attempt) = app
        .pay(Route::Checkout, "quiet", "pm_sandbox_processing")
        .await;
    let id = attempt["id"].as_str().unwrap();
    let psp = attempt["provider_payment_id"].as_str().unwrap();
    let key = app.sandbox.adyen_hmac_key();
    let item = |event: &str, success: &str| {
        json!({
            "additionalData": {},
            "amount": {"value": 4200, "currency": "EUR"},
            "eventCode": event,
            "eventDate": "2026-11-23T10:00:00+01:00",
            "merchantAccountCode": payorch::wiring::SANDBOX_MERCHANT_ACCOUNT,
            "merchantReference": id,
            "pspReference": psp,
            "success": success,
        })
    };
    let authorised = item("AUTHORISATION", "true");

    // A bad signature: refused, nothing stored, nothing moved.
    let events_before = app.count("provider_webhooks").await;
    let mut forged = authorised.clone();
    forged["additionalData"]["hmacSignature"] =
        json!("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=");
    let refused = app
        .client
        .post(format!("{}/v1/webhooks/adyen", app.base_url))
        .json(&json!({"live": "false", "notificationItems": [{"NotificationRequestItem": forged}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 400);
    let wrong_key = app
        .notify(std::slice::from_ref(&authorised), &"11".repeat(32))
        .await;
    assert_eq!(wrong_key.status(), 400);
    assert_eq!(app.count("provider_webhooks").await, events_before);
    assert_eq!(app.payment(id).await["status"], "pending");

    // Reordered: a capture (not acted on) first, then the authorisation five times over, two
    // of them in one delivery; then a contradicting authorisation.
    let capture = item("CAPTURE", "true");
    for delivery in [
        vec![capture.clone()],
        vec![authorised.clone()],
        vec![authorised.clone(), authorised.clone()],
        vec![authorised.clone()],
        vec![authorised.clone()],
        vec![item("AUTHORISATION", "false")],
    ] {
        let answer = app.notify(&delivery, key.expose()).await;
        assert_eq!(answer.status(), 200);
        assert_eq!(answer.text().await.unwrap(), "[accepted]");
    }
    assert_eq!(app.payment(id).await["status"], "succeeded");
    let story = app.story(id).await;
    let outcomes: Vec<&str> = story["webhook_events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["outcome"].as_str().unwrap())
        .collect();
    let applied = outcomes.iter().filter(|o| **o == "applied").count();
    assert_eq!(applied, 1, "{outcomes:?}");
    let authorisation = story["webhook_events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["outcome"] == "applied")
        .unwrap();
    assert_eq!(authorisation["deliveries"], 5, "{authorisation}");
    assert!(outcomes.contains(&"conflict"), "{outcomes:?}");
    assert_eq!(app.charges_for(id), 1);
}

// --- refunds -----------------------------------------------------------------------

/// A payment of 4200 (eur) that succeeded through the Adyen face.
async fn paid_through_adyen(app: &TestApp, key: &str, method: &str) -> Value {
    let (status, payment) = app.pay(Route::Checkout, key, method).await;
    assert_eq!(status, 201, "{payment}");
    assert_eq!(payment["provider"], "adyen", "{payment}");
    assert_eq!(payment["status"], "succeeded", "{payment}");
    payment
}

impl TestApp {
    /// Whether the refund `id` reaches `status` within `limit`.
    async fn refund_ends(&self, id: &str, status: &str, limit: Duration) -> bool {
        eventually(limit, || async {
            self.get_refund(id).await["status"] == status
        })
        .await
    }

    /// The sandbox's refunds of `payment`'s charge: the ground truth of what it was asked.
    fn provider_refunds(&self, payment: &Value) -> Vec<payorch_sandbox::RefundEntry> {
        let charge = payment["provider_payment_id"].as_str().unwrap();
        self.sandbox
            .refunds()
            .into_iter()
            .filter(|r| r.payment_intent == charge)
            .collect()
    }
}

/// `(to, source)` of the last move of `payment`'s refund timeline.
async fn last_refund_move(app: &TestApp, payment: &str) -> (String, String) {
    let story = app.story(payment).await;
    let last = story["refund_timeline"].as_array().unwrap().last().unwrap();
    (
        last["to"].as_str().unwrap().to_owned(),
        last["source"].as_str().unwrap().to_owned(),
    )
}

#[tokio::test]
async fn an_adyen_refund_is_settled_by_its_notification_once_and_never_past_what_is_left() {
    // The reconciler asleep: only the REFUND notification can settle the refunds.
    let app = TestApp::spawn_config(|config| asleep(&mut config.settings)).await;
    app.route_to(&["adyen"]).await;
    let payment = paid_through_adyen(&app, "refund-by-notification", "pm_card_visa").await;
    let id = payment["id"].as_str().unwrap();

    let refund = app
        .refunded(id, "adyen-refund", json!({"amount": 1500}))
        .await;
    // Adyen answers `received`; its notification races the answer (webhook delay 0).
    assert!(
        matches!(refund["status"].as_str(), Some("pending" | "succeeded")),
        "{refund}"
    );
    let refund_id = refund["id"].as_str().unwrap();
    assert!(
        app.refund_ends(refund_id, "succeeded", Duration::from_secs(15))
            .await,
        "{}",
        app.get_refund(refund_id).await
    );
    assert_eq!(
        last_refund_move(&app, id).await,
        ("succeeded".to_owned(), "webhook".to_owned())
    );
    let story = app.story(id).await;
    let notices: Vec<&Value> = story["webhook_events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["event_type"] == "REFUND")
        .collect();
    assert_eq!(notices.len(), 1, "{story}");
    assert_eq!(notices[0]["outcome"], "applied", "{story}");

    // The ledger shows it once, as an Adyen refund, under payorch's refund id.
    let made = app.provider_refunds(&payment);
    assert_eq!(made.len(), 1, "{made:?}");
    assert_eq!(
        (
            made[0].protocol.as_str(),
            made[0].refund_id.as_deref(),
            made[0].amount,
            made[0].status.as_str()
        ),
        ("adyen", Some(refund_id), 1500, "succeeded")
    );
    assert_eq!(
        made[0].provider_id,
        app.get_refund(refund_id).await["provider_refund_id"]
    );
    let ledger: Value = reqwest::get(format!("{}/__sandbox/ledger", app.sandbox.base_url()))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(ledger["refunds"][0]["protocol"], "adyen", "{ledger}");

    // More than is left is refused; what is left is not, and then nothing is.
    let response = app
        .refund(id, "adyen-too-much", json!({"amount": 2701}))
        .await;
    let problem = assert_problem(response, 409, "refund_exceeds_payment").await;
    assert_eq!(problem["amount_refundable"], 2700);
    let rest = app.refunded(id, "adyen-rest", json!({})).await;
    assert_eq!(rest["amount"], 2700);
    let rest_id = rest["id"].as_str().unwrap();
    assert!(
        app.refund_ends(rest_id, "succeeded", Duration::from_secs(15))
            .await
    );
    let response = app.refund(id, "adyen-nothing-left", json!({})).await;
    assert_problem(response, 409, "refund_exceeds_payment").await;
    assert_eq!(app.provider_refunds(&payment).len(), 2);
    assert_eq!(app.refunded_by_provider(&payment), 4200);
    assert_eq!(app.payment(id).await["amount_refunded"], 4200);
}

#[tokio::test]
async fn without_its_notification_an_adyen_refund_stays_open_for_a_human_never_guessed() {
    // A key window of 1 s stands for Adyen's days of keys: past it, Stripe's protocol would
    // list the charge's refunds, but Adyen has no list.
    let app = TestApp::spawn_config(|config| {
        config.settings.reconciler.key_window = Duration::from_secs(1);
        config.settings.reconciler.alert_after = Duration::from_secs(1);
    })
    .await;
    app.route_to(&["adyen"]).await;
    app.sandbox.set_notification_url(None);
    let payment = paid_through_adyen(&app, "refund-untold", "pm_card_visa").await;
    let id = payment["id"].as_str().unwrap();
    let refund = app
        .refunded(id, "untold-refund", json!({"amount": 1000}))
        .await;
    assert_eq!(refund["status"], "pending", "{refund}");
    let refund_id = refund["id"].as_str().unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let now = app.get_refund(refund_id).await;
    assert_eq!(now["status"], "pending", "{now}");
    let story = app.story(id).await;
    assert!(
        story["provider_calls"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| !matches!(
                c["operation"].as_str(),
                Some("retrieve_refund" | "list" | "search")
            )),
        "no lookup asked: {story}"
    );
    let needs: Value = app
        .get_as(&app.support_key, "/v1/support/needs-a-human")
        .await
        .json()
        .await
        .unwrap();
    assert!(
        needs["stuck_refunds"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["id"] == refund_id),
        "{needs}"
    );
    // It went back once at the provider; payorch holds its amount until told.
    assert_eq!(app.provider_refunds(&payment).len(), 1);
    let response = app
        .refund(id, "untold-too-much", json!({"amount": 3201}))
        .await;
    assert_problem(response, 409, "refund_exceeds_payment").await;
}

/// `(refund fault, carried by the payment; the refund's final status and failure code; what
/// went back)`.
const REFUND_FAULTS: [(&str, &str, Option<&str>, i64); 4] = [
    ("sandbox_lost_response", "succeeded", None, 1000),
    ("sandbox_error_after", "succeeded", None, 1000),
    ("sandbox_pending", "succeeded", None, 1000),
    ("sandbox_failure", "failed", Some("refund_failed"), 0),
];

#[tokio::test]
async fn every_refund_fault_through_adyen_ends_with_exactly_one_refund() {
    // A resend under the refund's key and the REFUND / REFUND_FAILED notifications tell.
    let app = TestApp::spawn().await;
    app.route_to(&["adyen"]).await;
    for (fault, last, code, back) in REFUND_FAULTS {
        let payment = paid_through_adyen(&app, fault, &format!("pm_card_visa+{fault}")).await;
        let id = payment["id"].as_str().unwrap();
        let refund = app
            .refunded(id, &format!("refund-{fault}"), json!({"amount": 1000}))
            .await;
        let refund_id = refund["id"].as_str().unwrap();
        let ended = app
            .refund_ends(refund_id, last, Duration::from_secs(20))
            .await;
        let now = app.get_refund(refund_id).await;
        assert!(ended, "{fault}: {now}");
        assert_eq!(now["failure_code"].as_str(), code, "{fault}: {now}");
        assert_eq!(app.provider_refunds(&payment).len(), 1, "{fault}: once");
        assert_eq!(app.refunded_by_provider(&payment), back, "{fault}");
        assert_eq!(app.payment(id).await["amount_refunded"], back, "{fault}");
    }
}

/// An Adyen attempt whose request died before any answer (the server crashed mid-send), and
/// whose first check passed while nothing was to be resent: Adyen has no lookup and no
/// notification comes, so only a resend under the attempt's key can tell. It is resent at a
/// later check and ends with the one charge the first send made, long before the cancel by
/// reference (once, under CI's load, it waited for that deadline and the run ended first).
#[tokio::test]
async fn an_adyen_attempt_never_answered_is_resent_at_a_later_check_and_charged_once() {
    let mut app = TestApp::spawn_config(|config| {
        config.sandbox.slow_ms = 1000;
        config.provider_timeout = Duration::from_secs(2);
        config.settings.reconciler.interval = Duration::from_millis(200);
        config.settings.reconciler.backoff = vec![Duration::from_secs(2)];
        config.settings.reconciler.technical_cancel_after = Duration::from_secs(3600);
        config.settings.idempotency.lease = Duration::from_secs(60);
        // The restarted server listens on another port: its public URL, in the body Adyen
        // fingerprints (`returnUrl`), stays the same as a deployment's does.
        config.settings.public_url = Some("https://payorch.example".into());
    })
    .await;
    app.route_to(&["adyen"]).await;
    // No notification tells: the answer to a resend is all there is.
    app.sandbox.set_notification_url(None);
    let request = app
        .client
        .post(app.url("/v1/checkout"))
        .bearer_auth(&app.merchant_key)
        .header("Idempotency-Key", "never-answered")
        .json(&crate::payments::checkout_body("pm_sandbox_slow"))
        .send();
    let in_flight = tokio::spawn(request);
    let made = eventually(Duration::from_secs(5), || async {
        app.db.count("payment_attempts").await == 1
    })
    .await;
    assert!(made, "the attempt was never made");
    tokio::time::sleep(Duration::from_millis(200)).await;
    app.crash().await;
    assert!(
        in_flight.await.unwrap().is_err(),
        "no answer reached the client"
    );
    let mut conn = app.db.connect().await;
    let (uuid, status): (uuid::Uuid, String) = payment_attempts::table
        .select((payment_attempts::id, payment_attempts::status))
        .first(&mut conn)
        .await
        .unwrap();
    assert_eq!(status, "created", "no answer was recorded");
    let id = format!("pay_{}", uuid.simple());
    assert!(
        eventually(Duration::from_secs(5), || async {
            app.charges_for(&id) == 1
        })
        .await,
        "the first send's charge outlives the crash"
    );
    // Its first checks came and went (while all was quiet, the service down past the settle
    // delay, or its resend lost with the server): only later checks are left.
    diesel::sql_query("UPDATE payment_attempts SET checks = 3, next_check_at = now()")
        .execute(&mut conn)
        .await
        .unwrap();
    app.restart().await;
    let settled = app.settled(&id, Duration::from_secs(20)).await;
    assert_eq!(settled["status"], "succeeded", "{}", app.story(&id).await);
    assert_eq!(app.charges_for(&id), 1, "the resend charged nothing more");
}
