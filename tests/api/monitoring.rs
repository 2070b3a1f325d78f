//! What an operator watches (docs/operations/monitoring.md, "Alerts" and "Monitoring"): the metrics the alert rules
//! and the dashboard under `ops/` read, and logs that stay plain text off a terminal.

use std::process::Stdio;
use std::time::Duration;

use futures_util::future::join_all;
use serde_json::json;

use crate::helpers::{eventually, payorch_bin, TestApp};
use crate::payments::Route;

/// The value of the sample `name` (labels included, as the exposition writes them) in a
/// scrape of `/metrics`, if it is there.
pub async fn sample(app: &TestApp, name: &str) -> Option<f64> {
    let text = app.get("/metrics").await.text().await.unwrap();
    text.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}

/// `RefundsStuck` reads this gauge: a refund open past `--unresolved-alert-secs` is counted,
/// the one support's "What needs a human" lists, and no longer once it settles.
#[tokio::test]
async fn a_refund_open_past_the_alert_age_is_counted_overdue() {
    let app = TestApp::spawn_config(|config| {
        config.settings.reconciler.alert_after = Duration::ZERO;
    })
    .await;
    let (status, payment) = app.pay(Route::Checkout, "overdue", "pm_card_visa").await;
    assert_eq!(status, 201, "{payment}");
    let gauge = "payorch_refunds_unresolved_overdue";
    assert_eq!(
        sample(&app, gauge).await,
        Some(0.0),
        "registered, none open"
    );
    // A 500 before the provider saw it, on every resend: the refund stays pending.
    let refund = app
        .refunded(
            payment["id"].as_str().unwrap(),
            "refund-overdue",
            json!({"amount": 1000, "reason": "sandbox_error_before"}),
        )
        .await;
    assert_eq!(refund["status"], "pending");
    let counted = eventually(Duration::from_secs(10), || async {
        sample(&app, gauge).await == Some(1.0)
    })
    .await;
    assert!(counted, "{:?}", sample(&app, gauge).await);
}

/// `DbPoolWaits` reads this histogram: every request that asks the pool for a connection is
/// counted with how long it waited, also between two scrapes, where the `db_pool_waiting`
/// gauge shows only the queue at the instant of the scrape.
#[tokio::test]
async fn every_wait_for_a_connection_is_counted() {
    // One connection for sixteen requests at once: fifteen queue behind it.
    let app = TestApp::spawn_with(|settings| settings.pool.max_size = 1).await;
    let count = "payorch_db_pool_acquire_wait_seconds_count";
    let before = sample(&app, count).await.expect("the histogram is served");
    let answers = join_all(
        (0..16).map(|_| async { app.get_as(&app.merchant_key, "/v1/events").await.status() }),
    )
    .await;
    assert!(answers.iter().all(|s| *s == 200), "{answers:?}");
    let after = sample(&app, count).await.unwrap();
    assert!(after - before >= 16.0, "{before} → {after}");
    let quick = sample(
        &app,
        r#"payorch_db_pool_acquire_wait_seconds_bucket{le="0.0001"}"#,
    )
    .await
    .unwrap();
    assert!(
        quick < after,
        "someone queued: {quick} of {after} waited under 0.1 ms"
    );
    assert_eq!(
        sample(&app, "payorch_db_pool_acquire_timeouts_total").await,
        Some(0.0)
    );
}

/// Logs written to a pipe (a file, journald, a log shipper) are plain text: no ANSI colour
/// codes for `grep` to trip over. The sandbox's start is logged through the same subscriber
/// as `serve`'s (`telemetry::init`, in main).
#[tokio::test]
async fn logs_to_a_pipe_carry_no_colour_codes() {
    let mut child = tokio::process::Command::new(payorch_bin())
        .args(["sandbox", "--bind", "127.0.0.1:0"])
        .env_remove("NO_COLOR")
        .env("RUST_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start payorch sandbox");
    {
        use tokio::io::AsyncBufReadExt;
        let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
        tokio::time::timeout(Duration::from_secs(30), lines.next_line())
            .await
            .expect("the sandbox says where it listens")
            .unwrap();
    }
    child.start_kill().unwrap();
    let output = child.wait_with_output().await.unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("sandbox provider listening"),
        "its start is logged: {stderr}"
    );
    assert!(!stderr.contains('\u{1b}'), "no ESC byte: {stderr:?}");
}

/// `WebhookEndpointDisabled` and `WebhookDeliveriesGivenUp` read counters with `increase()`,
/// which sees no increase in a series that first appears at 1: every series of the delivery
/// counters is served from the start, at 0.
#[tokio::test]
async fn the_delivery_counters_are_served_at_zero_before_anything_happens() {
    let app = TestApp::spawn().await;
    for series in [
        r#"payorch_event_delivery_attempts_total{outcome="failed"}"#,
        r#"payorch_event_deliveries_finished_total{state="failed"}"#,
        r#"payorch_webhook_endpoints_disabled_total{reason="gone"}"#,
        r#"payorch_webhook_endpoints_disabled_total{reason="failing"}"#,
    ] {
        assert_eq!(sample(&app, series).await, Some(0.0), "{series}");
    }
}
