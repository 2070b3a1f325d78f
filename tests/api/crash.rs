//! A server that dies between the payment flow's two transactions: the attempt is made and
//! the provider is charging, but the outcome is never written. After a restart the same
//! attempt is finished — by a retry of the key or by the reconciler — and the sandbox ledger
//! shows one charge.

use std::time::Duration;

use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use serde_json::Value;

use payorch::db::schema::payment_attempts;

use crate::helpers::{assert_problem, eventually, TestApp};
use crate::payments::checkout_body;

/// A slow charge, a lease of 3 s, and the server crashed while the charge is in flight.
async fn crash_mid_payment(reconciler_interval: Duration) -> (TestApp, String) {
    let mut app = TestApp::spawn_config(|config| {
        config.sandbox.slow_ms = 1000;
        config.provider_timeout = Duration::from_secs(2);
        config.settings.reconciler.interval = reconciler_interval;
        // A duplicate waits briefly, so a retry inside the lease is told to come back.
        config.settings.idempotency.wait = Duration::from_millis(200);
    })
    .await;
    let request = app
        .client
        .post(app.url("/v1/checkout"))
        .bearer_auth(&app.merchant_key)
        .header("Idempotency-Key", "crash")
        .json(&checkout_body("pm_sandbox_slow"))
        .send();
    let in_flight = tokio::spawn(request);

    // Transaction 1 has committed: the attempt exists, the provider call is under way.
    let mut conn = app.db.connect().await;
    let made = eventually(Duration::from_secs(5), || async {
        let mut conn = app.db.connect().await;
        payment_attempts::table
            .count()
            .get_result::<i64>(&mut conn)
            .await
            .unwrap()
            == 1
    })
    .await;
    assert!(made, "transaction 1 never committed");
    tokio::time::sleep(Duration::from_millis(200)).await;
    app.crash().await;
    let lost = in_flight.await.unwrap();
    assert!(lost.is_err(), "the client never got an answer: {lost:?}");

    let (id, status): (uuid::Uuid, String) = payment_attempts::table
        .select((payment_attempts::id, payment_attempts::status))
        .first(&mut conn)
        .await
        .unwrap();
    assert_eq!(status, "created", "transaction 2 never ran");
    let attempt_id = format!("pay_{}", id.simple());
    // The provider's charge outlives the crash.
    assert!(
        eventually(Duration::from_secs(5), || async {
            app.charges_for(&attempt_id) == 1
        })
        .await
    );
    app.restart().await;
    (app, attempt_id)
}

async fn retry(app: &TestApp) -> reqwest::Response {
    app.checkout("crash", &checkout_body("pm_sandbox_slow"))
        .await
}

#[tokio::test]
async fn a_retry_after_a_crash_resumes_the_same_attempt_and_charges_once() {
    // The reconciler sleeps through this test: the retry has to finish the attempt.
    let (app, attempt_id) = crash_mid_payment(Duration::from_secs(3600)).await;

    // While the dead request's lease holds, a retry is told to come back.
    let early = retry(&app).await;
    assert_problem(early, 409, "idempotency_key_in_use").await;

    let resumed = loop {
        let response = retry(&app).await;
        if response.status() != 409 {
            break response;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(resumed.status(), 201);
    let body: Value = resumed.json().await.unwrap();
    assert_eq!(
        body["payment"]["id"], attempt_id,
        "the same attempt, not a new one"
    );
    assert_eq!(body["payment"]["status"], "succeeded");
    assert_eq!(body["order"]["status"], "paid");
    assert_eq!(app.count("payment_attempts").await, 1);
    assert_eq!(app.charges_for(&attempt_id), 1);
    assert_eq!(app.charges(), 1);

    let replay = retry(&app).await;
    assert_eq!(replay.headers()["idempotent-replayed"], "true");
}

#[tokio::test]
async fn after_a_crash_the_reconciler_finishes_the_attempt_nobody_retried() {
    let (app, attempt_id) = crash_mid_payment(Duration::from_millis(100)).await;

    let settled = app.settled(&attempt_id, Duration::from_secs(20)).await;
    assert_eq!(settled["status"], "succeeded");
    assert_eq!(app.charges_for(&attempt_id), 1);

    // The reconciler completed the key: a late retry replays the final state at once.
    let late = retry(&app).await;
    assert_eq!(late.status(), 201);
    assert_eq!(late.headers()["idempotent-replayed"], "true");
    let body: Value = late.json().await.unwrap();
    assert_eq!(body["payment"]["id"], attempt_id);
    assert_eq!(body["payment"]["status"], "succeeded");
    assert_eq!(app.count("payment_attempts").await, 1);
    assert_eq!(app.charges(), 1);
}
