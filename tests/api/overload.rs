//! More than payorch can serve: a request the database pool could not serve in time is
//! refused on arrival with `503` and nothing written, and a client that gives up frees its
//! place in the connection budget at once (docs/guides/api.md, "Overload").

use std::net::SocketAddr;
use std::time::Duration;

use diesel_async::{AsyncConnection, SimpleAsyncConnection};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::helpers::{assert_problem, eventually, TestApp};
use crate::payments::checkout_body;

fn address(app: &TestApp) -> SocketAddr {
    app.base_url
        .trim_start_matches("http://")
        .parse()
        .expect("host:port")
}

/// The value of the gauge `name` in `/metrics`.
async fn gauge(app: &TestApp, name: &str) -> f64 {
    let text = app.get("/metrics").await.text().await.unwrap();
    text.lines()
        .find_map(|line| line.strip_prefix(name)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("{name} in /metrics"))
}

#[tokio::test]
async fn past_what_the_pool_can_serve_in_time_a_request_is_refused_at_once_and_nothing_is_written()
{
    // One connection, and a long acquire timeout so that the request queued behind the stuck
    // one is still waiting when the third arrives.
    let app = TestApp::spawn_with(|settings| {
        settings.pool.max_size = 1;
        settings.pool.acquire_timeout = Duration::from_secs(4);
    })
    .await;
    // The test holds the keys table: the first checkout takes the pool's one connection and
    // waits on the lock with it.
    let mut locker = payorch::db::PgConn::establish(&app.db.url).await.unwrap();
    locker
        .batch_execute("BEGIN; LOCK TABLE idempotency_keys IN ACCESS EXCLUSIVE MODE")
        .await
        .unwrap();
    let stuck = {
        let app_client = app.client.clone();
        let url = app.url("/v1/checkout");
        let key = app.merchant_key.clone();
        tokio::spawn(async move {
            app_client
                .post(url)
                .bearer_auth(key)
                .header("Idempotency-Key", "stuck")
                .json(&checkout_body("pm_card_visa"))
                .send()
                .await
                .unwrap()
        })
    };
    let waiting_on_lock = "pg_stat_activity WHERE application_name = 'payorch' \
                           AND wait_event_type = 'Lock'";
    assert!(
        eventually(Duration::from_secs(10), || async {
            app.db.count(waiting_on_lock).await == 1
        })
        .await,
        "the first checkout waits on the lock with the pool's connection"
    );
    // The second is admitted (no queue yet) and queues for the connection.
    let unknown = format!("/v1/orders/ord_{}", uuid::Uuid::now_v7().simple());
    let queued = tokio::spawn(
        app.client
            .get(app.url(&unknown))
            .bearer_auth(&app.merchant_key)
            .send(),
    );
    assert!(
        eventually(Duration::from_secs(10), || async {
            gauge(&app, "payorch_db_pool_waiting").await >= 1.0
        })
        .await,
        "the second request queues for the connection"
    );
    // Nothing has been handed out for this long, with a request queued: a newcomer would
    // wait at least as long, past half the acquire timeout (its checkout asks twice).
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let refused = app
        .client
        .post(app.url("/v1/checkout"))
        .bearer_auth(&app.merchant_key)
        .header("Idempotency-Key", "refused")
        .json(&checkout_body("pm_card_visa"))
        .send()
        .await
        .unwrap();
    let retry_after: u64 = refused
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok()?.parse().ok())
        .expect("a Retry-After in seconds");
    assert!(
        retry_after >= 3,
        "retry after the queue is served: {retry_after}"
    );
    let problem = assert_problem(refused, 503, "unavailable").await;
    assert!(
        problem["detail"]
            .as_str()
            .unwrap()
            .contains("more requests in hand"),
        "refused by admission, not by the pool's timeout: {problem}"
    );

    // The lock goes: the stuck checkout finishes, and the service takes requests again.
    locker.batch_execute("COMMIT").await.unwrap();
    assert_eq!(stuck.await.unwrap().status(), 201);
    let _ = queued.await.unwrap();
    let response = app.checkout("after", &checkout_body("pm_card_visa")).await;
    assert_eq!(response.status(), 201);
    let keys = "idempotency_keys WHERE key = 'refused'";
    assert_eq!(
        app.db.count(keys).await,
        0,
        "the refused request wrote nothing"
    );
    let retried = app
        .checkout("refused", &checkout_body("pm_card_visa"))
        .await;
    assert_eq!(retried.status(), 201, "and its retry is served as new");
}

/// Sends `request` on a new connection from this machine and reads the answer; `None` when
/// the server closes the connection without one (refused over its budget).
async fn answer_on_new_connection(to: SocketAddr, request: &str) -> Option<String> {
    let mut stream = TcpStream::connect(to).await.ok()?;
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut answer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut answer));
    read.await.ok()?.ok()?;
    (!answer.is_empty()).then(|| String::from_utf8_lossy(&answer).into_owned())
}

#[tokio::test]
async fn a_connection_its_client_closed_leaves_the_budget_while_its_checkout_goes_on() {
    let app = TestApp::spawn_config(|config| {
        // One connection per address, this machine's included.
        config.settings.clients.max_connections_per_ip = 1;
        config.settings.clients.exempt = vec![];
        // A provider call that outlasts the client's patience by far.
        config.sandbox.slow_ms = 6_000;
        config.provider_timeout = Duration::from_secs(10);
        config.settings.idempotency.lease = Duration::from_secs(15);
    })
    .await;
    let to = address(&app);
    let body = checkout_body("pm_sandbox_slow").to_string();
    let checkout = format!(
        "POST /v1/checkout HTTP/1.1\r\nHost: payorch\r\nAuthorization: Bearer {}\r\n\
         Idempotency-Key: gave-up\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{body}",
        app.merchant_key,
        body.len()
    );
    let mut first = TcpStream::connect(to).await.unwrap();
    first.write_all(checkout.as_bytes()).await.unwrap();
    let open = "payment_attempts WHERE status IN ('created', 'pending')";
    assert!(
        eventually(Duration::from_secs(10), || async {
            app.db.count(open).await == 1
        })
        .await,
        "the checkout is at the provider"
    );
    // The client gives up on the answer and comes back on a new connection.
    drop(first);
    let live = "GET /health/live HTTP/1.1\r\nHost: payorch\r\nConnection: close\r\n\r\n";
    let mut admitted = None;
    for _ in 0..50 {
        if let Some(answer) = answer_on_new_connection(to, live).await {
            admitted = Some(answer);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let answer = admitted.expect("a new connection from the same address is admitted");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert_eq!(
        app.db.count(open).await,
        1,
        "admitted while the first connection's checkout was still at the provider: its place \
         was given back when its client closed it, not when its answer was done"
    );
    // The checkout its client left is not dropped half-way: it finishes, and its retry
    // replays it.
    let succeeded = "payment_attempts WHERE status = 'succeeded'";
    assert!(
        eventually(Duration::from_secs(20), || async {
            app.db.count(succeeded).await == 1
        })
        .await,
        "the checkout finishes though its client left"
    );
    // From another address: the sandbox's webhook connection, kept alive, now holds this
    // machine's one place.
    let elsewhere = reqwest::Client::builder()
        .local_address(std::net::IpAddr::from([127, 0, 0, 2]))
        .build()
        .unwrap();
    let replay = elsewhere
        .post(app.url("/v1/checkout"))
        .bearer_auth(&app.merchant_key)
        .header("Idempotency-Key", "gave-up")
        .json(&checkout_body("pm_sandbox_slow"))
        .send()
        .await
        .unwrap();
    assert_eq!(replay.status(), 201);
    let replay: serde_json::Value = replay.json().await.unwrap();
    assert_eq!(replay["payment"]["status"], json!("succeeded"), "{replay}");
    assert_eq!(app.charges(), 1);
}
