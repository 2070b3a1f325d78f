//! Authorize now, capture later, over real HTTP, real PostgreSQL and the sandbox, whose ledger
//! of holds, captures and voids is the judge (docs/guides/captures.md, "Authorize now, capture later"): a
//! manual payment holds money; a capture takes at most what was held, once, even when the
//! provider's answer is lost or fails before or after the capture; a void releases it.

use std::time::Duration;

use serde_json::{json, Value};

use crate::helpers::{assert_problem, eventually, TestApp};

impl TestApp {
    /// A manual-capture checkout of 4200 eur by `method`; the payment.
    async fn held(&self, key: &str, method: &str) -> Value {
        let body = json!({"amount": 4200, "currency": "eur", "payment_method": method,
                          "capture_method": "manual"});
        let response = self.checkout(key, &body).await;
        assert_eq!(response.status(), 201);
        let body: Value = response.json().await.unwrap();
        body["payment"].clone()
    }

    async fn hold_operation(
        &self,
        payment: &Value,
        what: &str,
        key: &str,
        body: Value,
    ) -> reqwest::Response {
        let id = payment["id"].as_str().unwrap();
        self.post_keyed(
            &self.merchant_key,
            &format!("/v1/payments/{id}/{what}"),
            Some(key),
            Some(body.to_string()),
        )
        .await
    }

    /// The sandbox's succeeded captures of `payment`'s charge.
    fn captures_of(&self, payment: &Value) -> Vec<i64> {
        let attempt = payment["id"].as_str().unwrap();
        self.sandbox
            .captures()
            .into_iter()
            .filter(|c| c.is_captured() && c.attempt_id.as_deref() == Some(attempt))
            .map(|c| c.amount)
            .collect()
    }

    fn voids_of(&self, payment: &Value) -> usize {
        let attempt = payment["id"].as_str().unwrap();
        self.sandbox
            .voids()
            .into_iter()
            .filter(|v| v.attempt_id.as_deref() == Some(attempt))
            .count()
    }
}

/// How long a test waits for the reconciler: rounds every 50 ms, but a machine busy with the
/// rest of `cargo test` can hold a round up by seconds.
const RECONCILED_WITHIN: Duration = Duration::from_secs(45);

/// A test app whose reconciler asks again within a fraction of a second, and to which the
/// sandbox sends no webhooks: what the first call left open only the reconciler finishes.
async fn quick_app() -> TestApp {
    let app = TestApp::spawn_config(|config| {
        config.settings.reconciler.interval = Duration::from_millis(50);
        config.settings.reconciler.backoff = vec![Duration::from_millis(300)];
    })
    .await;
    app.sandbox.set_webhook_url(None);
    app
}

#[tokio::test]
async fn a_manual_payment_holds_and_a_partial_capture_takes_part_of_it_once() {
    let app = TestApp::spawn().await;
    let payment = app.held("hold-1", "pm_card_visa").await;
    assert_eq!(payment["status"], "authorized");
    assert_eq!(payment["capture_method"], "manual");
    assert!(payment["authorized_until"].is_string(), "{payment}");
    let order = app.order(payment["order_id"].as_str().unwrap()).await;
    assert_eq!(order["status"], "authorized");
    assert!(app.captures_of(&payment).is_empty());

    // More than was authorized: refused, nothing written, nothing sent.
    let too_much = app
        .hold_operation(&payment, "capture", "cap-0", json!({"amount": 4201}))
        .await;
    let problem = assert_problem(too_much, 409, "capture_exceeds_authorization").await;
    assert_eq!(problem["amount_capturable"], 4200);

    let captured = app
        .hold_operation(&payment, "capture", "cap-1", json!({"amount": 3000}))
        .await;
    assert_eq!(captured.status(), 200);
    let captured: Value = captured.json().await.unwrap();
    assert_eq!(captured["operation"]["object"], "capture");
    assert_eq!(captured["operation"]["status"], "succeeded");
    assert_eq!(captured["payment"]["status"], "succeeded");
    assert_eq!(captured["payment"]["amount_captured"], 3000);
    assert_eq!(app.captures_of(&payment), [3000]);

    // The same key again: the same answer, replayed, and nothing sent.
    let again = app
        .hold_operation(&payment, "capture", "cap-1", json!({"amount": 3000}))
        .await;
    assert_eq!(again.status(), 200);
    assert_eq!(again.headers()["idempotent-replayed"], "true");
    // Another key: the hold is gone.
    let second = app
        .hold_operation(&payment, "capture", "cap-2", json!({}))
        .await;
    assert_problem(second, 409, "payment_not_capturable").await;
    assert_eq!(app.captures_of(&payment), [3000]);
    let order = app.order(payment["order_id"].as_str().unwrap()).await;
    assert_eq!(order["status"], "paid");

    // Refunds give back what was captured, not what was authorized.
    let id = payment["id"].as_str().unwrap();
    let refund = app
        .post_keyed(
            &app.merchant_key,
            &format!("/v1/payments/{id}/refunds"),
            Some("refund-1"),
            Some(json!({"amount": 3001}).to_string()),
        )
        .await;
    let problem = assert_problem(refund, 409, "refund_exceeds_payment").await;
    assert_eq!(problem["amount_refundable"], 3000);
}

#[tokio::test]
async fn a_void_releases_the_hold_and_the_order_is_payable_again() {
    let app = TestApp::spawn().await;
    let payment = app.held("void-1", "pm_card_visa").await;
    let voided = app
        .hold_operation(&payment, "cancel", "void-op-1", json!({}))
        .await;
    assert_eq!(voided.status(), 200);
    let voided: Value = voided.json().await.unwrap();
    assert_eq!(voided["operation"]["object"], "void");
    assert_eq!(voided["operation"]["status"], "succeeded");
    assert_eq!(voided["payment"]["status"], "canceled");
    assert_eq!(voided["payment"]["cancellation_reason"], "voided");
    assert_eq!(app.voids_of(&payment), 1);
    assert!(app.captures_of(&payment).is_empty());
    let order = app.order(payment["order_id"].as_str().unwrap()).await;
    assert_eq!(order["status"], "awaiting_payment");

    let capture = app
        .hold_operation(&payment, "capture", "late-capture", json!({}))
        .await;
    assert_problem(capture, 409, "payment_not_capturable").await;
    assert!(app.captures_of(&payment).is_empty());
}

#[tokio::test]
async fn an_automatic_payment_cannot_be_captured_or_voided() {
    let app = TestApp::spawn().await;
    let response = app
        .checkout(
            "auto-1",
            &json!({"amount": 4200, "currency": "eur", "payment_method": "pm_card_visa"}),
        )
        .await;
    let payment = response.json::<Value>().await.unwrap()["payment"].clone();
    assert_eq!(payment["status"], "succeeded");
    assert_eq!(payment["capture_method"], "automatic");
    let capture = app
        .hold_operation(&payment, "capture", "auto-cap", json!({}))
        .await;
    assert_problem(capture, 409, "payment_not_capturable").await;
    let cancel = app
        .hold_operation(&payment, "cancel", "auto-void", json!({}))
        .await;
    assert_problem(cancel, 409, "payment_not_cancelable").await;
    let bad = app
        .hold_operation(&payment, "capture", "auto-bad", json!({"amount": 0}))
        .await;
    assert_problem(bad, 422, "validation_failed").await;
    let unknown = app
        .checkout(
            "auto-2",
            &json!({"amount": 4200, "currency": "eur", "payment_method": "pm_card_visa",
                    "capture_method": "later"}),
        )
        .await;
    let problem = assert_problem(unknown, 422, "validation_failed").await;
    assert_eq!(problem["errors"][0]["field"], "/capture_method");
}

/// A capture whose answer is lost, or that fails before or after it was made, stays open and
/// is asked about again under the same key: exactly one capture of the hold, whatever came
/// back the first time.
#[tokio::test]
async fn captures_under_faults_take_the_hold_exactly_once() {
    let app = quick_app().await;
    for (n, method) in [
        "pm_sandbox_capture_lost_response",
        "pm_sandbox_capture_error_before",
        "pm_sandbox_capture_error_after",
    ]
    .into_iter()
    .enumerate()
    {
        let payment = app.held(&format!("fault-{n}"), method).await;
        assert_eq!(payment["status"], "authorized", "{method}");
        let first = app
            .hold_operation(&payment, "capture", &format!("fault-cap-{n}"), json!({}))
            .await;
        assert_eq!(first.status(), 200, "{method}");
        let first: Value = first.json().await.unwrap();
        assert_eq!(first["operation"]["status"], "pending", "{method}: {first}");
        assert_eq!(first["payment"]["status"], "authorized", "{method}");
        let id = payment["id"].as_str().unwrap().to_owned();
        let captured = eventually(RECONCILED_WITHIN, || async {
            app.payment(&id).await["status"] == "succeeded"
        })
        .await;
        assert!(captured, "{method}: the reconciler finished the capture");
        assert_eq!(app.captures_of(&payment), [4200], "{method}: one capture");
        // A retry of the request now answers the finished capture.
        let replay = app
            .hold_operation(&payment, "capture", &format!("fault-cap-{n}"), json!({}))
            .await;
        let replay: Value = replay.json().await.unwrap();
        assert_eq!(replay["operation"]["status"], "succeeded", "{method}");
    }
}

#[tokio::test]
async fn voids_under_faults_release_the_hold_once_and_never_capture() {
    let app = quick_app().await;
    for (n, method) in [
        "pm_sandbox_capture_lost_response",
        "pm_sandbox_capture_error_before",
        "pm_sandbox_capture_error_after",
    ]
    .into_iter()
    .enumerate()
    {
        let payment = app.held(&format!("vfault-{n}"), method).await;
        let first = app
            .hold_operation(&payment, "cancel", &format!("vfault-op-{n}"), json!({}))
            .await;
        assert_eq!(first.status(), 200, "{method}");
        // While the void is open, no capture can start.
        let capture = app
            .hold_operation(&payment, "capture", &format!("vfault-cap-{n}"), json!({}))
            .await;
        let status = capture.status().as_u16();
        assert_eq!(status, 409, "{method}");
        let id = payment["id"].as_str().unwrap().to_owned();
        let released = eventually(RECONCILED_WITHIN, || async {
            app.payment(&id).await["status"] == "canceled"
        })
        .await;
        assert!(released, "{method}: the reconciler finished the void");
        assert_eq!(app.voids_of(&payment), 1, "{method}");
        assert!(app.captures_of(&payment).is_empty(), "{method}");
    }
}

#[tokio::test]
async fn a_hold_and_its_end_are_told_to_the_merchant_as_events() {
    let app = TestApp::spawn().await;
    // An endpoint may subscribe to the new types.
    let endpoint = app
        .post_keyed(
            &app.merchant_key,
            "/v1/webhook_endpoints",
            Some("hold-endpoint"),
            Some(
                json!({"url": "https://shop.example/hooks",
                       "enabled_events": ["payment.requires_action", "payment.authorized",
                                          "payment.canceled"]})
                .to_string(),
            ),
        )
        .await;
    assert_eq!(endpoint.status(), 201);
    let payment = app.held("events-1", "pm_card_visa").await;
    app.hold_operation(&payment, "capture", "events-cap", json!({}))
        .await;
    let id = payment["id"].as_str().unwrap()[4..].to_owned();
    let mut conn = app.db.connect().await;
    #[derive(diesel::QueryableByName)]
    struct Row {
        #[diesel(sql_type = diesel::sql_types::Text)]
        r#type: String,
    }
    let types: Vec<String> = diesel_async::RunQueryDsl::load::<Row>(
        diesel::sql_query(format!(
            "SELECT type FROM merchant_events WHERE resource_id = '{id}' ORDER BY seq"
        )),
        &mut conn,
    )
    .await
    .unwrap()
    .into_iter()
    .map(|r| r.r#type)
    .collect();
    assert_eq!(types, ["payment.authorized", "payment.succeeded"]);
    let events = app
        .get_as(&app.merchant_key, "/v1/events?type=payment.authorized")
        .await;
    assert_eq!(events.status(), 200);
    let events: Value = events.json().await.unwrap();
    assert_eq!(events["data"][0]["data"]["object"]["status"], "authorized");
}

/// A challenge the payer never answers is canceled at the provider after the challenge
/// timeout; only then is the payment `canceled` and its order payable again, and nothing was
/// charged.
#[tokio::test]
async fn a_challenge_left_unanswered_is_canceled_at_the_provider_and_the_order_freed() {
    let app = TestApp::spawn_config(|config| {
        config.settings.reconciler.interval = Duration::from_millis(50);
        config.settings.reconciler.backoff = vec![Duration::from_millis(300)];
        config.settings.reconciler.challenge_timeout = Duration::from_secs(1);
    })
    .await;
    let body = json!({"amount": 4200, "currency": "eur",
                      "payment_method": "pm_card_threeDSecure2Required",
                      "return_url": "https://shop.example/back"});
    let response = app.checkout("challenge-1", &body).await;
    assert_eq!(response.status(), 201);
    let payment = response.json::<Value>().await.unwrap()["payment"].clone();
    assert_eq!(payment["status"], "pending", "{payment}");
    assert_eq!(
        payment["next_action"]["type"], "redirect_to_url",
        "{payment}"
    );
    assert!(payment["next_action"]["url"]
        .as_str()
        .unwrap()
        .contains("/__sandbox/3ds/"));
    let id = payment["id"].as_str().unwrap().to_owned();
    let canceled = eventually(RECONCILED_WITHIN, || async {
        app.payment(&id).await["status"] == "canceled"
    })
    .await;
    assert!(canceled, "the abandoned challenge was canceled");
    let now = app.payment(&id).await;
    assert_eq!(now["cancellation_reason"], "challenge_abandoned");
    assert!(
        now["next_action"].is_null(),
        "no challenge to follow any more: {now}"
    );
    let order = app.order(payment["order_id"].as_str().unwrap()).await;
    assert_eq!(order["status"], "awaiting_payment");
    assert!(
        app.sandbox
            .ledger()
            .iter()
            .filter(|c| c.attempt_id.as_deref() == Some(id.as_str()))
            .all(|c| c.status == "canceled"),
        "nothing was charged: the intent is canceled at the provider"
    );
}

/// A hold near the end of its lifetime is voided by the reconciler, after it asked the
/// provider, and nothing is captured.
#[tokio::test]
async fn a_hold_about_to_expire_is_voided_by_the_reconciler() {
    let app = TestApp::spawn_config(|config| {
        config.settings.reconciler.interval = Duration::from_millis(50);
        config.settings.reconciler.backoff = vec![Duration::from_millis(300)];
    })
    .await;
    // No webhook: one arriving after the forged end below would set the next check from the
    // end it read before, a week away.
    app.sandbox.set_webhook_url(None);
    let payment = app.held("expiring-1", "pm_card_visa").await;
    let id = payment["id"].as_str().unwrap().to_owned();
    // As if the provider had said the hold ends in half an hour: within the reconciler's
    // margin of an hour.
    let mut conn = app.db.connect().await;
    diesel_async::RunQueryDsl::execute(
        diesel::sql_query(format!(
            "UPDATE payment_attempts SET authorized_until = now() + interval '30 minutes', \
             next_check_at = now() WHERE id = '{}'",
            &id[4..]
        )),
        &mut conn,
    )
    .await
    .unwrap();
    let voided = eventually(RECONCILED_WITHIN, || async {
        app.payment(&id).await["status"] == "canceled"
    })
    .await;
    assert!(voided, "the expiring hold was voided");
    assert_eq!(
        app.payment(&id).await["cancellation_reason"],
        "authorization_expired"
    );
    assert_eq!(app.voids_of(&payment), 1);
    assert!(app.captures_of(&payment).is_empty());
}

/// The same hold through Adyen's protocol, where a capture or void is only `received` at once
/// and its outcome comes later as a CAPTURE or CANCELLATION notification: the operation stays
/// open until the notification settles the payment, and the hold is taken or released once.
#[tokio::test]
async fn through_adyen_a_capture_and_a_void_are_settled_by_their_notifications() {
    let app = quick_app_with_webhooks().await;
    app.route_to(&["adyen"]).await;
    let captured = app.held("adyen-hold-1", "pm_card_visa").await;
    assert_eq!(captured["status"], "authorized", "{captured}");
    assert_eq!(captured["provider"], "adyen");
    let answer = app
        .hold_operation(&captured, "capture", "adyen-cap", json!({"amount": 1000}))
        .await;
    assert_eq!(answer.status(), 200);
    let id = captured["id"].as_str().unwrap().to_owned();
    let done = eventually(RECONCILED_WITHIN, || async {
        app.payment(&id).await["status"] == "succeeded"
    })
    .await;
    assert!(done, "the CAPTURE notification settled the payment");
    assert_eq!(app.payment(&id).await["amount_captured"], 1000);
    assert_eq!(app.captures_of(&captured), [1000]);

    let voided = app.held("adyen-hold-2", "pm_card_visa").await;
    let answer = app
        .hold_operation(&voided, "cancel", "adyen-void", json!({}))
        .await;
    assert_eq!(answer.status(), 200);
    let id = voided["id"].as_str().unwrap().to_owned();
    let done = eventually(RECONCILED_WITHIN, || async {
        app.payment(&id).await["status"] == "canceled"
    })
    .await;
    assert!(done, "the CANCELLATION notification settled the payment");
    assert_eq!(app.payment(&id).await["cancellation_reason"], "voided");
    assert_eq!(app.voids_of(&voided), 1);
    assert!(app.captures_of(&voided).is_empty());
    // Each operation followed its payment: nothing is left open to resend.
    let replay = app
        .hold_operation(&voided, "cancel", "adyen-void", json!({}))
        .await;
    let replay: Value = replay.json().await.unwrap();
    let settled = eventually(RECONCILED_WITHIN, || async {
        let again = app
            .hold_operation(&voided, "cancel", "adyen-void", json!({}))
            .await;
        again.json::<Value>().await.unwrap()["operation"]["status"] == "succeeded"
    })
    .await;
    assert!(
        settled,
        "the void's operation followed its payment: {replay}"
    );
}

/// [`quick_app`], with the sandbox's webhooks and notifications on.
async fn quick_app_with_webhooks() -> TestApp {
    TestApp::spawn_config(|config| {
        config.settings.reconciler.interval = Duration::from_millis(50);
        config.settings.reconciler.backoff = vec![Duration::from_millis(300)];
    })
    .await
}

/// Adyen tells of a capture it could not make only afterwards (CAPTURE, success false): the
/// capture is refused by that word, the hold stays as it was, and nothing was taken.
#[tokio::test]
async fn an_adyen_capture_refused_by_its_notification_leaves_the_hold() {
    let app = quick_app().await;
    app.route_to(&["adyen"]).await;
    app.sandbox.set_notification_url(None);
    let held = app.held("adyen-refused", "pm_card_visa").await;
    assert_eq!(held["status"], "authorized", "{held}");
    let first = app
        .hold_operation(&held, "capture", "adyen-refused-cap", json!({}))
        .await;
    let first: Value = first.json().await.unwrap();
    assert_eq!(first["operation"]["status"], "pending", "{first}");
    let id = held["id"].as_str().unwrap();
    let refused = json!({
        "additionalData": {},
        "amount": {"value": 4200, "currency": "EUR"},
        "eventCode": "CAPTURE",
        "eventDate": "2026-11-24T10:00:00+01:00",
        "merchantAccountCode": payorch::wiring::SANDBOX_MERCHANT_ACCOUNT,
        "merchantReference": id,
        "originalReference": held["provider_payment_id"],
        "pspReference": "CAPTUREREFUSED0001",
        "reason": "Insufficient balance on payment",
        "success": "false",
    });
    let key = app.sandbox.adyen_hmac_key();
    let answer = app.notify(std::slice::from_ref(&refused), &key).await;
    assert_eq!(answer.status(), 200);
    let replay = app
        .hold_operation(&held, "capture", "adyen-refused-cap", json!({}))
        .await;
    let replay: Value = replay.json().await.unwrap();
    assert_eq!(replay["operation"]["status"], "failed", "{replay}");
    assert_eq!(
        replay["operation"]["failure_code"], "capture_failed",
        "{replay}"
    );
    assert_eq!(app.payment(id).await["status"], "authorized");
}
