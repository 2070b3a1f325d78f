//! A key's life past its TTL (docs/guides/idempotency.md, "A key's life"): a key whose payment or refund is still
//! open never expires; once its work is final and its TTL has passed, a same-key retry answers
//! `409 idempotency_key_expired` naming what it made, until the horizon ends. Judged by the
//! sandbox's ledger: a late retry never charges or refunds a second time.

use std::time::Duration;

use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use serde_json::{json, Value};

use payorch::db::schema::idempotency_keys;
use payorch::idempotency::reaper::{reap_once, Reaped, ReaperSettings};
use payorch::idempotency::IdempotencyMetrics;

use crate::helpers::{assert_problem, assert_refused_by, TestApp};
use crate::payments::{checkout_body, Route};

const TTL: Duration = Duration::from_secs(1);

/// Payment keys live `TTL`; the reconciler waits an hour and webhooks go nowhere, so a pending
/// payment or refund stays pending until the test asks the provider through support.
async fn app() -> TestApp {
    let app = TestApp::spawn_with(|settings| {
        settings.idempotency.payment_ttl = TTL;
        settings.reconciler.backoff = vec![Duration::from_secs(3600)];
    })
    .await;
    app.sandbox.set_webhook_url(None);
    app
}

impl TestApp {
    /// One round of the key reaper, with `horizon`.
    async fn reap(&self, horizon: Duration) -> Reaped {
        let pool = payorch::db::build_pool(&self.db.url, &Default::default()).unwrap();
        let settings = ReaperSettings {
            horizon,
            ..Default::default()
        };
        reap_once(&pool, &settings, &IdempotencyMetrics::new().unwrap())
            .await
            .unwrap()
    }

    /// Support asks the provider now; the resource as it is then.
    async fn support_reconcile(&self, path: &str) -> Value {
        let pressed = self.post_keyed(&self.support_key, path, None, None).await;
        assert_eq!(pressed.status(), 200);
        pressed.json().await.unwrap()
    }

    async fn key_state(&self, key: &str) -> (String, Option<i16>) {
        let mut conn = self.db.connect().await;
        idempotency_keys::table
            .filter(idempotency_keys::key.eq(key))
            .select((idempotency_keys::state, idempotency_keys::response_status))
            .first(&mut conn)
            .await
            .unwrap()
    }
}

/// Past the TTL of a key whose work is final: `409 idempotency_key_expired`, naming it.
async fn assert_expired(response: reqwest::Response, id: &str, status: &str) -> Value {
    let problem = assert_problem(response, 409, "idempotency_key_expired").await;
    assert_eq!(problem["resource_id"], id, "{problem}");
    assert_eq!(problem["resource_status"], status, "{problem}");
    problem
}

#[tokio::test]
async fn a_checkout_retried_past_its_key_lifetime_never_charges_twice() {
    let app = app().await;
    let body = checkout_body("pm_sandbox_lost_response");
    let first = app.checkout("late", &body).await;
    assert_eq!(first.status(), 201);
    let first: Value = first.json().await.unwrap();
    assert_eq!(first["payment"]["status"], "pending");
    let id = first["payment"]["id"].as_str().unwrap().to_owned();
    let order_id = first["order"]["id"].as_str().unwrap().to_owned();
    assert_eq!(app.charges(), 1);

    // Past the TTL with the payment still pending: the key still answers for it, and the
    // reaper leaves it alone.
    tokio::time::sleep(TTL + Duration::from_millis(500)).await;
    let late = app.checkout("late", &body).await;
    assert_eq!(late.status(), 201);
    let replayed = late.headers().get("idempotent-replayed").cloned();
    let late: Value = late.json().await.unwrap();
    assert_eq!(app.charges(), 1, "a second charge for one intent: {late}");
    assert_eq!(late["payment"]["id"], id.as_str(), "a new payment: {late}");
    assert_eq!(replayed.unwrap(), "true");
    assert_eq!(app.reap(Duration::from_secs(3600)).await, Reaped::default());
    assert_eq!(app.key_state("late").await, ("completed".into(), Some(201)));

    // Final now, and past the TTL: expired, naming the payment, and still one charge.
    let settled = app
        .support_reconcile(&format!("/v1/support/payments/{id}/reconcile"))
        .await;
    assert_eq!(settled["status"], "succeeded", "{settled}");
    let problem = assert_expired(app.checkout("late", &body).await, &id, "succeeded").await;
    assert_eq!(problem["resource_type"], "payment");
    assert_eq!(problem["order_id"], order_id.as_str());
    assert_eq!(problem["resource_url"], format!("/v1/payments/{id}"));
    // Whatever the body: the key is retired, not reusable.
    let other = app
        .checkout("late", &checkout_body("pm_card_mastercard"))
        .await;
    assert_expired(other, &id, "succeeded").await;

    // The reaper retires it: the stored answer goes, the payment it names stays.
    let reaped = app.reap(Duration::from_secs(3600)).await;
    assert_eq!(reaped.retired, 1);
    assert_eq!(app.key_state("late").await, ("expired".into(), None));
    assert_expired(app.checkout("late", &body).await, &id, "succeeded").await;
    assert_eq!(app.charges(), 1);

    // Past the horizon a key is deleted and free: a new intent, a new order.
    let brief = app.checkout("brief", &checkout_body("pm_card_visa")).await;
    let brief: Value = brief.json().await.unwrap();
    tokio::time::sleep(TTL + Duration::from_millis(500)).await;
    let reaped = app.reap(Duration::ZERO).await;
    assert_eq!((reaped.retired, reaped.deleted), (1, 1));
    assert_eq!(app.key_state("late").await, ("expired".into(), None));
    let fresh = app.checkout("brief", &checkout_body("pm_card_visa")).await;
    assert_eq!(fresh.status(), 201);
    let fresh: Value = fresh.json().await.unwrap();
    assert_ne!(fresh["order"]["id"], brief["order"]["id"]);
    assert_eq!(app.charges(), 3);
}

#[tokio::test]
async fn paying_an_order_retried_past_its_key_lifetime_replays_while_pending_then_answers_expired()
{
    let app = app().await;
    let order_id = app.new_order().await;
    let first = app
        .pay_order(&order_id, "late-pay", "pm_sandbox_lost_response")
        .await;
    assert_eq!(first.status(), 201);
    let first: Value = first.json().await.unwrap();
    assert_eq!(first["status"], "pending");
    let id = first["id"].as_str().unwrap().to_owned();

    tokio::time::sleep(TTL + Duration::from_millis(500)).await;
    let late = app
        .pay_order(&order_id, "late-pay", "pm_sandbox_lost_response")
        .await;
    assert_eq!(late.status(), 201, "not the payment the key made");
    let late: Value = late.json().await.unwrap();
    assert_eq!(late["id"], id.as_str());

    app.support_reconcile(&format!("/v1/support/payments/{id}/reconcile"))
        .await;
    let problem = assert_expired(
        app.pay_order(&order_id, "late-pay", "pm_sandbox_lost_response")
            .await,
        &id,
        "succeeded",
    )
    .await;
    assert_eq!(problem["order_id"], order_id.as_str());
    assert_eq!(app.charges_for_order(&order_id), 1);
    assert_eq!(app.charges(), 1);
}

#[tokio::test]
async fn a_refund_retried_past_its_key_lifetime_never_refunds_twice() {
    let app = app().await;
    let (status, payment) = app.pay(Route::Checkout, "paid", "pm_card_visa").await;
    assert_eq!(
        (status, payment["status"].as_str()),
        (201, Some("succeeded"))
    );
    let payment_id = payment["id"].as_str().unwrap().to_owned();
    let body = json!({"amount": 1000, "reason": "sandbox_lost_response"});
    let first = app.refunded(&payment_id, "late-refund", body.clone()).await;
    assert_eq!(first["status"], "pending");
    let refund_id = first["id"].as_str().unwrap().to_owned();
    assert_eq!(app.refunded_by_provider(&payment), 1000);

    tokio::time::sleep(TTL + Duration::from_millis(500)).await;
    let late = app.refund(&payment_id, "late-refund", body.clone()).await;
    assert_eq!(late.status(), 201);
    let late: Value = late.json().await.unwrap();
    assert_eq!(late["id"], refund_id.as_str(), "a second refund: {late}");
    assert_eq!(app.refunded_by_provider(&payment), 1000, "refunded twice");

    let settled = app
        .support_reconcile(&format!("/v1/support/refunds/{refund_id}/reconcile"))
        .await;
    assert_eq!(settled["status"], "succeeded", "{settled}");
    let problem = assert_expired(
        app.refund(&payment_id, "late-refund", body.clone()).await,
        &refund_id,
        "succeeded",
    )
    .await;
    assert_eq!(problem["resource_type"], "refund");
    assert_eq!(problem["payment_id"], payment_id.as_str());
    assert_eq!(problem["resource_url"], format!("/v1/refunds/{refund_id}"));
    // The refund's key and the payment's.
    assert_eq!(app.reap(Duration::from_secs(3600)).await.retired, 2);
    assert_expired(
        app.refund(&payment_id, "late-refund", body).await,
        &refund_id,
        "succeeded",
    )
    .await;
    assert_eq!(app.refunded_by_provider(&payment), 1000);
}

#[tokio::test]
async fn the_database_keeps_a_key_whose_payment_is_open_and_retires_it_before_deleting_it() {
    let app = app().await;
    let (status, pending) = app
        .pay(Route::Checkout, "open", "pm_sandbox_lost_response")
        .await;
    assert_eq!((status, pending["status"].as_str()), (201, Some("pending")));
    let id = pending["id"].as_str().unwrap().to_owned();
    let mut conn = app.db.connect().await;
    // Even a writer that lies about `unresolved` cannot end the key of an open payment.
    diesel::sql_query("UPDATE idempotency_keys SET unresolved = false WHERE key = 'open'")
        .execute(&mut conn)
        .await
        .unwrap();
    let delete = "DELETE FROM idempotency_keys WHERE key = 'open'";
    let retire = "UPDATE idempotency_keys SET state = 'expired', response_status = NULL, \
                  expires_at = now() + interval '1 hour' WHERE key = 'open'";
    assert_refused_by(&mut conn, delete, "idempotency_keys_open_work_kept").await;
    assert_refused_by(&mut conn, retire, "idempotency_keys_open_work_kept").await;

    app.support_reconcile(&format!("/v1/support/payments/{id}/reconcile"))
        .await;
    // Final: a payment's key is retired first, never deleted while it still answers.
    assert_refused_by(&mut conn, delete, "idempotency_keys_retired_before_deleted").await;
    diesel::sql_query(retire).execute(&mut conn).await.unwrap();
    assert_refused_by(
        &mut conn,
        "UPDATE idempotency_keys SET state = 'completed', response_status = 201 \
         WHERE key = 'open'",
        "idempotency_keys_expired_is_final",
    )
    .await;
    assert_refused_by(&mut conn, delete, "idempotency_keys_retired_before_deleted").await;
    // An order's key is no payment's: it may go at its TTL.
    let order = app
        .post_keyed(
            &app.merchant_key,
            "/v1/orders",
            Some("an-order"),
            Some(json!({"amount": 100, "currency": "eur"}).to_string()),
        )
        .await;
    assert_eq!(order.status(), 201);
    assert_refused_by(
        &mut conn,
        "UPDATE idempotency_keys SET state = 'expired', response_status = NULL \
         WHERE key = 'an-order'",
        "idempotency_keys_retired_keeps_resource",
    )
    .await;
    let deleted = diesel::sql_query("DELETE FROM idempotency_keys WHERE key = 'an-order'")
        .execute(&mut conn)
        .await
        .unwrap();
    assert_eq!(deleted, 1);
}
