//! Refunds (docs/guides/refunds.md, "Refunds"): never more back than was taken, whatever races, faults or
//! hand-written SQL do. The sandbox's refund ledger is the judge of what went back.

use std::time::Duration;

use futures_util::future::join_all;
use serde_json::{json, Value};

use crate::helpers::{assert_problem, assert_refused_by, eventually, TestApp};
use crate::payments::Route;

/// The reconciler asleep for the whole test: something else must finish the refunds.
pub fn asleep(settings: &mut payorch::app::AppSettings) {
    settings.reconciler.interval = Duration::from_secs(3600);
    settings.reconciler.backoff = vec![Duration::from_secs(3600)];
}

/// A succeeded payment of 4200 (eur).
async fn paid(app: &TestApp, key: &str) -> Value {
    let (status, payment) = app.pay(Route::Checkout, key, "pm_card_visa").await;
    assert_eq!(
        (status, payment["status"].as_str()),
        (201, Some("succeeded"))
    );
    payment
}

impl TestApp {
    pub async fn refund(&self, payment: &str, key: &str, body: Value) -> reqwest::Response {
        self.post_keyed(
            &self.merchant_key,
            &format!("/v1/payments/{payment}/refunds"),
            Some(key),
            Some(body.to_string()),
        )
        .await
    }

    /// A refund that must be made: its `201` body.
    pub async fn refunded(&self, payment: &str, key: &str, body: Value) -> Value {
        let response = self.refund(payment, key, body).await;
        assert_eq!(response.status(), 201);
        let location = response.headers()["location"].to_str().unwrap().to_owned();
        let refund: Value = response.json().await.unwrap();
        assert_eq!(
            location,
            format!("/v1/refunds/{}", refund["id"].as_str().unwrap())
        );
        refund
    }

    pub async fn get_refund(&self, id: &str) -> Value {
        self.get_as(&self.merchant_key, &format!("/v1/refunds/{id}"))
            .await
            .json()
            .await
            .unwrap()
    }

    async fn order_status(&self, order: &str) -> String {
        let order: Value = self
            .get_as(&self.merchant_key, &format!("/v1/orders/{order}"))
            .await
            .json()
            .await
            .unwrap();
        order["status"].as_str().unwrap().to_owned()
    }

    /// What the sandbox gave back for `payment`'s charge, succeeded or on its way.
    pub fn refunded_by_provider(&self, payment: &Value) -> i64 {
        let charge = payment["provider_payment_id"].as_str().unwrap();
        self.sandbox
            .refunds()
            .iter()
            .filter(|r| r.payment_intent == charge && r.is_refunded())
            .map(|r| r.amount)
            .sum()
    }
}

#[tokio::test]
async fn a_full_refund_gives_everything_back_once_and_replays() {
    let app = TestApp::spawn().await;
    let payment = paid(&app, "full").await;
    let id = payment["id"].as_str().unwrap();
    let refund = app
        .refunded(id, "refund-full", json!({"reason": "changed mind"}))
        .await;
    assert_eq!(refund["object"], "refund");
    assert!(
        refund["id"].as_str().unwrap().starts_with("re_"),
        "{refund}"
    );
    assert_eq!(refund["status"], "succeeded");
    assert_eq!(refund["amount"], 4200);
    assert_eq!(refund["currency"], "eur");
    assert_eq!(refund["payment_id"], id);
    assert_eq!(refund["reason"], "changed mind");
    assert!(refund["provider_refund_id"]
        .as_str()
        .unwrap()
        .starts_with("re_"));

    // The same key answers the same refund, as it is now; nothing more goes back.
    let again = app
        .refund(id, "refund-full", json!({"reason": "changed mind"}))
        .await;
    assert_eq!(again.status(), 201);
    assert_eq!(again.headers()["idempotent-replayed"], "true");
    let again: Value = again.json().await.unwrap();
    assert_eq!(again["id"], refund["id"]);
    let reused = app.refund(id, "refund-full", json!({"amount": 1})).await;
    assert_problem(reused, 422, "idempotency_key_reused").await;

    assert_eq!(
        app.get_refund(refund["id"].as_str().unwrap()).await["status"],
        "succeeded"
    );
    let shown = app.payment(id).await;
    assert_eq!(shown["amount_refunded"], 4200);
    assert_eq!(shown["refunds"][0]["id"], refund["id"]);
    assert_eq!(
        app.order_status(payment["order_id"].as_str().unwrap())
            .await,
        "refunded"
    );
    assert_eq!(app.refunded_by_provider(&payment), 4200);

    // Support sees the refund in the payment's story, with its provider call.
    let story = app.story(id).await;
    assert_eq!(story["refunds"][0]["id"], refund["id"], "{story}");
    let moves: Vec<(&str, &str)> = story["refund_timeline"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| (l["to"].as_str().unwrap(), l["source"].as_str().unwrap()))
        .collect();
    // The sandbox's refund event races the answer (webhook delay 0): either may move it.
    assert!(
        moves == [("created", "api"), ("succeeded", "provider_response")]
            || moves == [("created", "api"), ("succeeded", "webhook")],
        "{story}"
    );
    let calls = story["provider_calls"].as_array().unwrap();
    assert!(
        calls
            .iter()
            .any(|c| c["operation"] == "create_refund" && c["outcome"] == "succeeded"),
        "{calls:?}"
    );
}

#[tokio::test]
async fn partial_refunds_add_up_to_the_payment_and_no_further() {
    let app = TestApp::spawn().await;
    let payment = paid(&app, "partial").await;
    let id = payment["id"].as_str().unwrap();
    let order = payment["order_id"].as_str().unwrap();
    let first = app.refunded(id, "p1", json!({"amount": 1200})).await;
    assert_eq!(first["status"], "succeeded");
    assert_eq!(app.order_status(order).await, "partially_refunded");
    // No amount: what is left.
    let second = app.refunded(id, "p2", json!({})).await;
    assert_eq!(second["amount"], 3000);
    assert_eq!(app.order_status(order).await, "refunded");

    let third = app.refund(id, "p3", json!({"amount": 1})).await;
    let problem = assert_problem(third, 409, "refund_exceeds_payment").await;
    assert_eq!(problem["amount_refundable"], 0);
    let fourth = app.refund(id, "p4", json!({})).await;
    assert_problem(fourth, 409, "refund_exceeds_payment").await;
    assert_eq!(app.payment(id).await["amount_refunded"], 4200);
    assert_eq!(app.refunded_by_provider(&payment), 4200);
}

#[tokio::test]
async fn only_a_succeeded_payment_of_ones_own_can_be_refunded_and_amounts_are_checked() {
    let app = TestApp::spawn().await;
    let (_, declined) = app
        .pay(Route::Checkout, "declined", "pm_card_chargeDeclined")
        .await;
    let response = app
        .refund(declined["id"].as_str().unwrap(), "r-declined", json!({}))
        .await;
    let problem = assert_problem(response, 409, "payment_not_refundable").await;
    assert_eq!(problem["payment_status"], "failed");

    // A payment whose outcome is not known yet: nothing to give back yet.
    app.sandbox.set_webhook_url(None);
    let (_, pending) = app
        .pay(Route::Checkout, "unknown", "pm_sandbox_error_before")
        .await;
    assert_eq!(pending["status"], "pending");
    let response = app
        .refund(pending["id"].as_str().unwrap(), "r-pending", json!({}))
        .await;
    assert_problem(response, 409, "payment_not_refundable").await;

    let payment = paid(&app, "amounts").await;
    let id = payment["id"].as_str().unwrap();
    for (key, body) in [
        ("zero", json!({"amount": 0})),
        ("negative", json!({"amount": -5})),
        ("text", json!({"amount": "5"})),
    ] {
        let response = app.refund(id, key, body.clone()).await;
        let status = response.status().as_u16();
        assert!(status == 422 || status == 400, "{body}: {status}");
    }
    let response = app.refund(id, "too-much", json!({"amount": 4201})).await;
    let problem = assert_problem(response, 409, "refund_exceeds_payment").await;
    assert_eq!(problem["amount_refundable"], 4200);

    let response = app
        .refund("pay_00000000000070008000000000000000", "nobody", json!({}))
        .await;
    assert_problem(response, 404, "not_found").await;
    let (_, other_key) = app.other_merchant().await;
    let response = app
        .post_keyed(
            &other_key,
            &format!("/v1/payments/{id}/refunds"),
            Some("not-mine"),
            Some("{}".into()),
        )
        .await;
    assert_problem(response, 404, "not_found").await;
    assert_eq!(app.refunded_by_provider(&payment), 0);
}

#[tokio::test]
async fn fifty_concurrent_partial_refunds_never_give_back_more_than_was_taken() {
    let app = TestApp::spawn().await;
    let payment = paid(&app, "race").await;
    let id = payment["id"].as_str().unwrap().to_owned();
    // Three replicas on one database, as in production.
    let (second, _second_handle) = app.replica().await;
    let (third, _third_handle) = app.replica().await;
    let replicas = [app.base_url.clone(), second, third];
    // 30 % of 4200, fifty times, each under its own key: three fit.
    let answers = join_all((0..50).map(|i| {
        let app = &app;
        let url = format!("{}/v1/payments/{id}/refunds", replicas[i % 3]);
        async move {
            let response = app
                .client
                .post(url)
                .bearer_auth(&app.merchant_key)
                .header("Idempotency-Key", format!("race-{i}"))
                .json(&json!({"amount": 1260}))
                .send()
                .await
                .unwrap();
            let status = response.status().as_u16();
            (status, response.json::<Value>().await.unwrap())
        }
    }))
    .await;
    let made: Vec<&Value> = answers
        .iter()
        .filter(|(status, _)| *status == 201)
        .map(|(_, body)| body)
        .collect();
    assert_eq!(made.len(), 3, "{answers:?}");
    for (status, body) in &answers {
        if *status != 201 {
            assert_eq!(
                (*status, body["code"].as_str()),
                (409, Some("refund_exceeds_payment"))
            );
        }
    }
    assert!(made.iter().all(|r| r["status"] == "succeeded"));
    assert_eq!(app.refunded_by_provider(&payment), 3 * 1260);
    assert!(app.refunded_by_provider(&payment) <= 4200);
    assert_eq!(app.payment(&id).await["amount_refunded"], 3 * 1260);
}

#[tokio::test]
async fn a_refund_whose_answer_is_lost_or_wrong_is_settled_by_the_reconciler_once() {
    let app = TestApp::spawn().await;
    for fault in ["lost_response", "error_after", "slow"] {
        let payment = paid(&app, &format!("fault-{fault}")).await;
        let id = payment["id"].as_str().unwrap();
        let refund = app
            .refunded(
                id,
                &format!("refund-{fault}"),
                json!({"amount": 1000, "reason": format!("sandbox_{fault}")}),
            )
            .await;
        let refund_id = refund["id"].as_str().unwrap().to_owned();
        let settled = eventually(Duration::from_secs(10), || async {
            app.get_refund(&refund_id).await["status"] == "succeeded"
        })
        .await;
        assert!(settled, "{fault}: {}", app.get_refund(&refund_id).await);
        assert_eq!(app.refunded_by_provider(&payment), 1000, "{fault}: once");
        assert_eq!(app.payment(id).await["amount_refunded"], 1000, "{fault}");
    }
}

#[tokio::test]
async fn a_refund_the_provider_never_made_fails_past_the_key_window_and_frees_its_amount() {
    // A key window of 1 s stands for Stripe's 24 hours.
    let app = TestApp::spawn_config(|config| {
        config.settings.reconciler.key_window = Duration::from_secs(1);
        config.settings.reconciler.alert_after = Duration::ZERO;
    })
    .await;
    let payment = paid(&app, "never-made").await;
    let id = payment["id"].as_str().unwrap();
    // A 500 before the provider saw it, on every resend: nothing goes back.
    let refund = app
        .refunded(
            id,
            "refund-error-before",
            json!({"amount": 1000, "reason": "sandbox_error_before"}),
        )
        .await;
    assert_eq!(refund["status"], "pending");
    // While it is open, it holds its amount.
    let response = app.refund(id, "while-open", json!({"amount": 3201})).await;
    let problem = assert_problem(response, 409, "refund_exceeds_payment").await;
    assert_eq!(
        problem["amount_refundable"], 3200,
        "the pending refund holds its amount"
    );
    // Support sees it among what needs a human while it is open.
    let attention: Value = app
        .get_as(&app.support_key, "/v1/support/needs-a-human")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        attention["stuck_refunds"][0]["id"], refund["id"],
        "{attention}"
    );

    let refund_id = refund["id"].as_str().unwrap().to_owned();
    let failed = eventually(Duration::from_secs(10), || async {
        app.get_refund(&refund_id).await["status"] == "failed"
    })
    .await;
    let now = app.get_refund(&refund_id).await;
    assert!(failed, "{now}");
    assert_eq!(now["failure_code"], "provider_no_record");
    assert_eq!(app.refunded_by_provider(&payment), 0);
    // Its amount is free again.
    let all = app.refunded(id, "after-no-record", json!({})).await;
    assert_eq!(
        (all["amount"].as_i64(), all["status"].as_str()),
        (Some(4200), Some("succeeded"))
    );
    assert_eq!(app.refunded_by_provider(&payment), 4200);
}

#[tokio::test]
async fn hand_written_sql_cannot_over_refund_or_move_a_refund_back() {
    let app = TestApp::spawn().await;
    let payment = paid(&app, "sql").await;
    let id = payment["id"].as_str().unwrap();
    let refund = app
        .refunded(id, "sql-refund", json!({"amount": 4000}))
        .await;
    let uuid = |prefixed: &str| prefixed.split_once('_').unwrap().1.to_owned();
    let payment_uuid = uuid(id);
    let refund_uuid = uuid(refund["id"].as_str().unwrap());
    let mut conn = app.db.connect().await;
    let cases = [
        (
            format!(
                "INSERT INTO refunds (merchant_id, id, payment_id, order_id, status, amount, \
                 currency, provider, provider_idempotency_key, next_check_at) \
                 SELECT merchant_id, gen_random_uuid(), id, order_id, 'created', 201, currency, \
                 provider, 'hand-made', now() FROM payment_attempts WHERE id = '{payment_uuid}'"
            ),
            "refunds_within_payment",
        ),
        (
            format!("UPDATE refunds SET status = 'pending' WHERE id = '{refund_uuid}'"),
            "refunds_final",
        ),
        (
            format!("UPDATE refunds SET amount = 1 WHERE id = '{refund_uuid}'"),
            "refunds_final",
        ),
        (
            format!("UPDATE payment_attempts SET refund_held = 0 WHERE id = '{payment_uuid}'"),
            "payment_attempts_refund_held_by_refunds",
        ),
        (
            format!(
                "INSERT INTO refunds (merchant_id, id, payment_id, order_id, status, amount, \
                 currency, provider, provider_idempotency_key, finished_at) \
                 SELECT merchant_id, gen_random_uuid(), id, order_id, 'succeeded', 1, currency, \
                 provider, 'hand-made-2', now() FROM payment_attempts WHERE id = '{payment_uuid}'"
            ),
            "refunds_start_created",
        ),
    ];
    for (sql, constraint) in cases {
        assert_refused_by(&mut conn, &sql, constraint).await;
    }
    assert_eq!(
        app.get_refund(refund["id"].as_str().unwrap()).await["status"],
        "succeeded"
    );
    assert_eq!(app.payment(id).await["amount_refunded"], 4000);
}

#[tokio::test]
async fn refund_webhooks_settle_a_pending_refund_and_a_failed_one_frees_its_amount() {
    // The reconciler sleeps: only the provider's webhooks can finish these refunds.
    let app = TestApp::spawn_config(|config| asleep(&mut config.settings)).await;
    let payment = paid(&app, "webhook-refunds").await;
    let id = payment["id"].as_str().unwrap();

    let pending = app
        .refunded(
            id,
            "wh-pending",
            json!({"amount": 1000, "reason": "sandbox_pending"}),
        )
        .await;
    assert_eq!(pending["status"], "pending");
    let pending_id = pending["id"].as_str().unwrap().to_owned();
    let settled = eventually(Duration::from_secs(10), || async {
        app.get_refund(&pending_id).await["status"] == "succeeded"
    })
    .await;
    assert!(settled, "{}", app.get_refund(&pending_id).await);

    let failing = app
        .refunded(
            id,
            "wh-failure",
            json!({"amount": 3200, "reason": "sandbox_failure"}),
        )
        .await;
    let failing_id = failing["id"].as_str().unwrap().to_owned();
    let failed = eventually(Duration::from_secs(10), || async {
        app.get_refund(&failing_id).await["status"] == "failed"
    })
    .await;
    let failure = app.get_refund(&failing_id).await;
    assert!(failed, "{failure}");
    assert_eq!(failure["failure_code"], "expired_or_canceled_card");

    // Nothing went back for the failed one, and its amount is free again.
    assert_eq!(app.refunded_by_provider(&payment), 1000);
    let rest = app
        .refunded(id, "wh-rest", json!({"reason": "sandbox_pending"}))
        .await;
    assert_eq!(rest["amount"], 3200);
    let order = payment["order_id"].as_str().unwrap();
    assert_eq!(app.order_status(order).await, "partially_refunded");
}

/// A signed refund event about `refund` saying `status`.
fn refund_event(kind: &str, event_id: &str, refund: &Value, status: &str) -> String {
    json!({
        "id": event_id,
        "object": "event",
        "type": kind,
        "created": chrono::Utc::now().timestamp(),
        "livemode": false,
        "data": {"object": {
            "id": refund["provider_refund_id"],
            "object": "refund",
            "amount": refund["amount"],
            "currency": refund["currency"],
            "status": status,
            "failure_reason": if status == "failed" { json!("lost_or_stolen_card") } else { Value::Null },
            "metadata": {"refund_id": refund["id"]},
            "created": chrono::Utc::now().timestamp(),
        }},
    })
    .to_string()
}

#[tokio::test]
async fn a_duplicated_and_reordered_refund_webhook_is_applied_once_and_one_way() {
    let app = TestApp::spawn_config(|config| {
        asleep(&mut config.settings);
        // The sandbox leaves the refund pending for a long while; the test delivers.
        config.sandbox.processing_ms = 60_000;
    })
    .await;
    app.sandbox.set_webhook_url(None);
    let payment = paid(&app, "reordered").await;
    let id = payment["id"].as_str().unwrap();
    let refund = app
        .refunded(
            id,
            "reordered-refund",
            json!({"amount": 700, "reason": "sandbox_pending"}),
        )
        .await;
    assert_eq!(refund["status"], "pending");
    let refund_id = refund["id"].as_str().unwrap();

    let succeeded = refund_event("refund.updated", "evt_refund_done", &refund, "succeeded");
    let first = app.deliver_signed(&succeeded).await;
    assert_eq!(first["outcome"], "applied", "{first}");
    let again = app.deliver_signed(&succeeded).await;
    assert_eq!(again["duplicate"], true, "{again}");
    // The older news arrives last: it cannot move the refund back.
    let older = refund_event("refund.created", "evt_refund_created", &refund, "pending");
    assert_eq!(app.deliver_signed(&older).await["outcome"], "stale");
    // A failure after success contradicts it: recorded for a human, nothing changes.
    let contradiction = refund_event("refund.failed", "evt_refund_failed", &refund, "failed");
    assert_eq!(
        app.deliver_signed(&contradiction).await["outcome"],
        "conflict"
    );
    // Another amount is not this refund's news.
    let mut other = refund.clone();
    other["amount"] = 1.into();
    let wrong = refund_event("refund.updated", "evt_refund_other", &other, "succeeded");
    assert_eq!(app.deliver_signed(&wrong).await["outcome"], "conflict");

    let now = app.get_refund(refund_id).await;
    assert_eq!(now["status"], "succeeded", "{now}");
    assert_eq!(app.payment(id).await["amount_refunded"], 700);
    let story = app.story(id).await;
    let events: Vec<(String, String)> = story["webhook_events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["event_type"].as_str().unwrap().starts_with("refund."))
        .map(|e| {
            (
                e["provider_event_id"].as_str().unwrap().to_owned(),
                e["outcome"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        events,
        [
            ("evt_refund_done".to_string(), "applied".to_string()),
            ("evt_refund_created".to_string(), "stale".to_string()),
            ("evt_refund_failed".to_string(), "conflict".to_string()),
            ("evt_refund_other".to_string(), "conflict".to_string()),
        ],
        "{story}"
    );
}

#[tokio::test]
async fn support_asks_the_provider_about_an_open_refund_now() {
    // The reconciler sleeps and webhooks go nowhere: only support's button can finish it.
    let app = TestApp::spawn_config(|config| asleep(&mut config.settings)).await;
    app.sandbox.set_webhook_url(None);
    let payment = paid(&app, "support-refund-payment").await;
    let id = payment["id"].as_str().unwrap();
    let refund = app
        .refunded(
            id,
            "support-refund",
            json!({"amount": 500, "reason": "sandbox_pending"}),
        )
        .await;
    assert_eq!(refund["status"], "pending");
    let path = format!(
        "/v1/support/refunds/{}/reconcile",
        refund["id"].as_str().unwrap()
    );
    let merchant = app.post_keyed(&app.merchant_key, &path, None, None).await;
    assert_problem(merchant, 403, "forbidden").await;

    // The sandbox settles a pending refund after 300 ms; then one press finds it.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let pressed = app.post_keyed(&app.support_key, &path, None, None).await;
    assert_eq!(pressed.status(), 200);
    let pressed: Value = pressed.json().await.unwrap();
    assert_eq!(pressed["status"], "succeeded", "{pressed}");
    let story = app.story(id).await;
    let last = story["refund_timeline"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(
        (last["to"].as_str(), last["source"].as_str()),
        (Some("succeeded"), Some("support"))
    );
    assert_eq!(app.refunded_by_provider(&payment), 500);
    let unknown = app
        .post_keyed(
            &app.support_key,
            "/v1/support/refunds/re_00000000000070008000000000000000/reconcile",
            None,
            None,
        )
        .await;
    assert_problem(unknown, 404, "not_found").await;
}

/// A refund's `amount` is JSON Schema's `integer`, as the OpenAPI document says: `23295.0` is
/// 23295. One with a fraction is refused naming `/amount`, and nothing goes back.
#[tokio::test]
async fn a_refund_amount_is_any_json_number_without_a_fraction() {
    let app = TestApp::spawn().await;
    let checkout = app
        .checkout(
            "paid-23295",
            &json!({"amount": 23295, "currency": "eur", "payment_method": "pm_card_visa"}),
        )
        .await;
    assert_eq!(checkout.status(), 201);
    let payment = checkout.json::<Value>().await.unwrap()["payment"].clone();
    let id = payment["id"].as_str().unwrap();

    let response = app
        .post_keyed(
            &app.merchant_key,
            &format!("/v1/payments/{id}/refunds"),
            Some("fraction"),
            Some(r#"{"amount": 23295.5}"#.into()),
        )
        .await;
    let problem = assert_problem(response, 422, "validation_failed").await;
    assert_eq!(problem["errors"][0]["field"], "/amount", "{problem}");
    assert_eq!(app.refunded_by_provider(&payment), 0);

    let response = app
        .post_keyed(
            &app.merchant_key,
            &format!("/v1/payments/{id}/refunds"),
            Some("point-zero"),
            Some(r#"{"amount": 23295.0}"#.into()),
        )
        .await;
    assert_eq!(response.status(), 201);
    let refund: Value = response.json().await.unwrap();
    assert_eq!(refund["amount"], 23295);
    assert_eq!(refund["status"], "succeeded");
    assert_eq!(app.refunded_by_provider(&payment), 23295);
}
