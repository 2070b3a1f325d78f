//! A server that dies between the payment flow's two transactions: the attempt is made and
//! the provider is charging, but the outcome is never written. After a restart the same
//! attempt is finished — by a retry of the key or by the reconciler — and the sandbox ledger
//! shows one charge. Once with the server task aborted in-process, once with the `serve`
//! process killed (SIGKILL) while an external `payorch sandbox` process keeps charging.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use serde_json::Value;

use payorch::db::schema::payment_attempts;

use crate::helpers::{
    assert_problem, eventually, payorch_bin, sandbox_process, temp_dir, TestApp, TestDatabase,
};
use crate::payments::checkout_body;
use crate::serve::wait_ready;

/// A slow charge, a lease of 60 s, and the server crashed while the charge is in flight.
async fn crash_mid_payment(reconciler_interval: Duration) -> (TestApp, String) {
    let mut app = TestApp::spawn_config(|config| {
        config.sandbox.slow_ms = 1000;
        config.provider_timeout = Duration::from_secs(2);
        config.settings.reconciler.interval = reconciler_interval;
        // A reconciler that is to sleep through the test must also find nothing due when
        // the restarted server runs its first round, at start: the attempt's first check
        // is pushed as far out (it was 300 ms, and on a loaded machine that round finished
        // the attempt before the retry came).
        if reconciler_interval >= Duration::from_secs(60) {
            config.settings.reconciler.backoff = vec![reconciler_interval];
        }
        // A duplicate waits briefly, so a retry inside the lease is told to come back. The
        // lease outlasts the crash and restart however loaded the machine is (a 6 s lease
        // once ran out before the first retry); a test that needs it over ends it in the
        // database rather than waiting for the clock.
        config.settings.idempotency.wait = Duration::from_millis(200);
        config.settings.idempotency.lease = Duration::from_secs(60);
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
        app.db.count("payment_attempts").await == 1
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

    // Once the lease has run out, the retry takes over. The lease's end is moved to now
    // instead of waiting 60 s; the claim compares it with the database's clock.
    let mut conn = app.db.connect().await;
    let ended = diesel::sql_query(
        "UPDATE idempotency_keys SET locked_until = now() \
         WHERE key = 'crash' AND state = 'in_flight'",
    )
    .execute(&mut conn)
    .await
    .unwrap();
    assert_eq!(ended, 1, "the dead request's key is still in flight");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let resumed = loop {
        let response = retry(&app).await;
        if response.status() != 409 {
            break response;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the retry never took over the dead request's key"
        );
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

/// `payorch serve` on `database_url`, charging through the sandbox at `provider_url`.
fn serve_process(data_dir: &Path, database_url: &str, provider_url: &str) -> tokio::process::Child {
    tokio::process::Command::new(payorch_bin())
        .args(["serve", "--bind", "127.0.0.1:0", "--workers", "1"])
        .arg("--data-dir")
        .arg(data_dir)
        .args([
            "--provider-url",
            provider_url,
            "--provider-secret",
            "sk_test_kill",
            // The credentials file this test reads is the demo's.
            "--demo",
        ])
        .args([
            "--idempotency-lease-secs",
            "4",
            "--provider-timeout-ms",
            "3000",
        ])
        .args([
            "--reconciler-interval-ms",
            "200",
            "--reconcile-backoff-secs",
            "1",
        ])
        .env("DATABASE_URL", database_url)
        // A real provider: serve refuses to start without a master key.
        .env("PAYORCH_MASTER_KEY", crate::helpers::TEST_MASTER_KEY)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start payorch serve")
}

async fn charges_in(client: &reqwest::Client, sandbox_url: &str, attempt_id: &str) -> usize {
    let ledger: Value = client
        .get(format!("{sandbox_url}/__sandbox/ledger"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    ledger["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["attempt_id"] == attempt_id && e["status"] == "succeeded")
        .count()
}

#[tokio::test]
async fn a_serve_process_killed_mid_payment_is_finished_after_restart_with_one_charge() {
    let db = TestDatabase::migrated().await;
    let data_dir = temp_dir("kill");
    // Its own process: it must outlive the killed server.
    let (_sandbox, sandbox_url) =
        sandbox_process(&["--secret", "sk_test_kill", "--slow-ms", "1500"]).await;
    let mut server = serve_process(&data_dir, &db.url, &sandbox_url);
    let creds = wait_ready(&data_dir, "").await;
    let client = reqwest::Client::new();
    let checkout = || {
        client
            .post(format!("{}/v1/checkout", creds.base_url))
            .bearer_auth(&creds.api_key)
            .header("Idempotency-Key", "kill-9")
            .json(&checkout_body("pm_sandbox_slow"))
            .send()
    };
    let in_flight = tokio::spawn(checkout());

    let made = eventually(Duration::from_secs(10), || async {
        db.count("payment_attempts").await == 1
    })
    .await;
    assert!(made, "transaction 1 never committed");
    server.kill().await.expect("SIGKILL the server");
    assert!(
        in_flight.await.unwrap().is_err(),
        "the client got no answer"
    );

    let mut conn = db.connect().await;
    let (id, status): (uuid::Uuid, String) = payment_attempts::table
        .select((payment_attempts::id, payment_attempts::status))
        .first(&mut conn)
        .await
        .unwrap();
    assert_eq!(status, "created", "killed before transaction 2");
    let attempt_id = format!("pay_{}", id.simple());

    let _restarted = serve_process(&data_dir, &db.url, &sandbox_url);
    let creds = wait_ready(&data_dir, &creds.base_url).await;
    let finished = eventually(Duration::from_secs(30), || async {
        let response = client
            .post(format!("{}/v1/checkout", creds.base_url))
            .bearer_auth(&creds.api_key)
            .header("Idempotency-Key", "kill-9")
            .json(&checkout_body("pm_sandbox_slow"))
            .send()
            .await
            .unwrap();
        if response.status() != 201 {
            return false;
        }
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["payment"]["id"], attempt_id, "the same attempt");
        body["payment"]["status"] == "succeeded"
    })
    .await;
    assert!(finished, "the attempt was never finished");
    assert_eq!(charges_in(&client, &sandbox_url, &attempt_id).await, 1);
    assert_eq!(db.count("payment_attempts").await, 1);
    let _ = std::fs::remove_dir_all(&data_dir);
}
