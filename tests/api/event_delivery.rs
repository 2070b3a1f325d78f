//! Delivering events (docs/guides/events.md, "What a delivery is" to "Answering, and retries";
//! docs/DESIGN.md, "Delivering events"): the app's own delivery worker sends to a real HTTP
//! receiver on loopback (wiremock), which records every request and answers as each test
//! says.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use chrono::{DateTime, Utc};
use diesel::sql_types::{Nullable, Text, Timestamptz, Uuid as SqlUuid};
use diesel_async::RunQueryDsl;
use serde_json::{json, Value};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

use payorch::db::transaction::in_transaction;
use payorch::db::PgConn;
use payorch::delivery::take::take_due;
use payorch::events::safe_url::UrlPolicy;
use payorch::events::signing::{verify, Secret};
use payorch::ids::{EndpointId, EventId};

use crate::helpers::{eventually, sealed_secret, TestApp};
use crate::payments::checkout_body;

const PATIENCE: Duration = Duration::from_secs(30);

/// An endpoint of the test merchant, written straight into its table (registration's own
/// checks are the endpoints API's tests); `events` as `enabled_events` holds them.
async fn subscribe(app: &TestApp, url: &str, events: &[&str], secret: &Secret) -> EndpointId {
    let id = EndpointId::new();
    let mut conn = app.db.connect().await;
    diesel::sql_query(
        "INSERT INTO webhook_endpoints (merchant_id, id, url, enabled_events, secret) \
         VALUES ($1, $2, $3, $4, $5)",
    )
    .bind::<SqlUuid, _>(app.merchant_id.0)
    .bind::<SqlUuid, _>(id.0)
    .bind::<Text, _>(url)
    .bind::<diesel::sql_types::Array<Text>, _>(
        events.iter().map(|e| e.to_string()).collect::<Vec<_>>(),
    )
    .bind::<Text, _>(sealed_secret(id, secret))
    .execute(&mut conn)
    .await
    .expect("an endpoint");
    id
}

/// A paid checkout; its order's id.
async fn paid_checkout(app: &TestApp, key: &str) -> String {
    let response = app.checkout(key, &checkout_body("pm_card_visa")).await;
    assert_eq!(response.status(), 201);
    let body: Value = response.json().await.unwrap();
    body["order"]["id"].as_str().unwrap().to_owned()
}

#[derive(Debug, diesel::QueryableByName)]
struct DeliveryRow {
    #[diesel(sql_type = Text)]
    state: String,
    #[diesel(sql_type = diesel::sql_types::Integer)]
    attempts: i32,
    #[diesel(sql_type = Timestamptz)]
    next_attempt_at: DateTime<Utc>,
}

async fn deliveries_to(conn: &mut PgConn, endpoint: EndpointId) -> Vec<DeliveryRow> {
    diesel::sql_query(
        "SELECT state::text AS state, attempts, next_attempt_at FROM event_deliveries \
         WHERE endpoint_id = $1 ORDER BY created_at",
    )
    .bind::<SqlUuid, _>(endpoint.0)
    .load(conn)
    .await
    .expect("deliveries")
}

#[derive(Debug, diesel::QueryableByName)]
struct AttemptRow {
    #[diesel(sql_type = Nullable<diesel::sql_types::SmallInt>)]
    http_status: Option<i16>,
    #[diesel(sql_type = Nullable<Text>)]
    error: Option<String>,
    #[diesel(sql_type = Timestamptz)]
    attempted_at: DateTime<Utc>,
}

async fn attempts_to(conn: &mut PgConn, endpoint: EndpointId) -> Vec<AttemptRow> {
    diesel::sql_query(
        "SELECT http_status, error, attempted_at FROM delivery_attempts \
         WHERE endpoint_id = $1 ORDER BY id",
    )
    .bind::<SqlUuid, _>(endpoint.0)
    .load(conn)
    .await
    .expect("attempts")
}

#[derive(Debug, diesel::QueryableByName)]
struct EndpointRow {
    #[diesel(sql_type = Text)]
    status: String,
    #[diesel(sql_type = Nullable<Text>)]
    disabled_reason: Option<String>,
    #[diesel(sql_type = Nullable<Timestamptz>)]
    failing_since: Option<DateTime<Utc>>,
}

async fn endpoint_row(conn: &mut PgConn, endpoint: EndpointId) -> EndpointRow {
    diesel::sql_query(
        "SELECT status::text AS status, disabled_reason, failing_since FROM webhook_endpoints \
         WHERE id = $1",
    )
    .bind::<SqlUuid, _>(endpoint.0)
    .get_result(conn)
    .await
    .expect("the endpoint")
}

/// Waits until the deliveries to `endpoint` satisfy `done`; their last state.
async fn deliveries_until(
    app: &TestApp,
    endpoint: EndpointId,
    done: impl Fn(&[DeliveryRow]) -> bool,
) -> Vec<DeliveryRow> {
    let mut conn = app.db.connect().await;
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let rows = deliveries_to(&mut conn, endpoint).await;
        if done(&rows) || tokio::time::Instant::now() > deadline {
            return rows;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn all_in(state: &'static str) -> impl Fn(&[DeliveryRow]) -> bool {
    move |rows| !rows.is_empty() && rows.iter().all(|r| r.state == state)
}

fn header<'a>(request: &'a Request, name: &str) -> &'a str {
    request
        .headers
        .get(name)
        .unwrap_or_else(|| panic!("{name} is sent"))
        .to_str()
        .expect("an ASCII header")
}

/// The signature checked by code that is not payorch's: Python's standard library, reading
/// docs/guides/events.md's steps (decode the secret's base64 part; HMAC-SHA256 of id.timestamp.body;
/// any v1 entry equal).
fn python_verifies(secret: &Secret, request: &Request) -> bool {
    let script = r#"
import base64, hashlib, hmac, json, sys
given = json.load(sys.stdin)
key = base64.b64decode(given["secret"].split("_", 1)[1])
signed = (given["id"] + "." + given["timestamp"] + ".").encode() + base64.b64decode(given["body"])
mine = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
ok = any(v == "v1" and hmac.compare_digest(s, mine)
         for v, s in (e.split(",", 1) for e in given["signature"].split(" ")))
print("yes" if ok else "no")
"#;
    use base64::Engine;
    let input = json!({
        "secret": secret.expose(),
        "id": header(request, "webhook-id"),
        "timestamp": header(request, "webhook-timestamp"),
        "signature": header(request, "webhook-signature"),
        "body": base64::engine::general_purpose::STANDARD.encode(&request.body),
    });
    let mut child = Command::new("python3")
        .args(["-c", script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 runs");
    child
        .stdin
        .take()
        .expect("its stdin")
        .write_all(input.to_string().as_bytes())
        .expect("write to python3");
    let out = child.wait_with_output().expect("python3 ends");
    String::from_utf8_lossy(&out.stdout).trim() == "yes"
}

fn payorch_verifies(secrets: &[Secret], request: &Request) -> bool {
    verify(
        secrets,
        header(request, "webhook-id"),
        header(request, "webhook-timestamp"),
        header(request, "webhook-signature"),
        &request.body,
        Utc::now(),
    )
    .is_ok()
}

async fn posts_to(receiver: &MockServer, at: &str) -> Vec<Request> {
    receiver
        .received_requests()
        .await
        .expect("recording on")
        .into_iter()
        .filter(|r| r.url.path() == at)
        .collect()
}

#[actix_web::test]
async fn a_checkouts_events_are_delivered_signed_as_get_shows_them() {
    let app = TestApp::spawn().await;
    let receiver = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/hook"))
        .respond_with(ResponseTemplate::new(204))
        .mount(&receiver)
        .await;
    let secret = Secret::generate();
    let endpoint = subscribe(&app, &format!("{}/hook", receiver.uri()), &["*"], &secret).await;
    let order = paid_checkout(&app, "deliver-1").await;

    let rows = deliveries_until(&app, endpoint, |rows| {
        rows.len() == 2 && rows.iter().all(|r| r.state == "succeeded")
    })
    .await;
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert!(
        rows.iter()
            .all(|r| r.state == "succeeded" && r.attempts == 1),
        "{rows:?}"
    );

    let events = app.events_of(&order).await;
    let posts = posts_to(&receiver, "/hook").await;
    assert_eq!(posts.len(), 2);
    let mut delivered_types = Vec::new();
    for post in &posts {
        let body: Value = serde_json::from_slice(&post.body).expect("a JSON body");
        let id = body["id"].as_str().expect("the event's id");
        assert_eq!(header(post, "webhook-id"), id);
        assert!(id.starts_with("evt_"), "{id}");
        assert_eq!(header(post, "content-type"), "application/json");
        assert!(
            header(post, "user-agent").starts_with("payorch"),
            "{post:?}"
        );
        header(post, "webhook-timestamp")
            .parse::<i64>()
            .expect("Unix seconds");
        assert!(payorch_verifies(std::slice::from_ref(&secret), post));
        assert!(
            python_verifies(&secret, post),
            "python3 disagrees: {post:?}"
        );
        assert!(!payorch_verifies(&[Secret::generate()], post));
        // The body is the event exactly as GET /v1/events/{id} shows it.
        let shown = app
            .get_as(&app.merchant_key, &format!("/v1/events/{id}"))
            .await;
        assert_eq!(shown.status(), 200);
        let shown: Value = shown.json().await.unwrap();
        assert_eq!(body, shown);
        assert!(
            events.contains(&body),
            "{body} is one of the order's events"
        );
        delivered_types.push(body["type"].as_str().unwrap().to_owned());
    }
    delivered_types.sort();
    assert_eq!(delivered_types, ["order.paid", "payment.succeeded"]);
}

#[actix_web::test]
async fn a_failing_endpoint_gets_the_same_webhook_id_again_until_it_answers_2xx() {
    let app = TestApp::spawn().await;
    let receiver = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(500))
        .up_to_n_times(2)
        .with_priority(1)
        .mount(&receiver)
        .await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200))
        .with_priority(2)
        .mount(&receiver)
        .await;
    let secret = Secret::generate();
    let endpoint = subscribe(
        &app,
        &format!("{}/hook", receiver.uri()),
        &["order.paid"],
        &secret,
    )
    .await;
    paid_checkout(&app, "retry-1").await;

    let rows = deliveries_until(&app, endpoint, all_in("succeeded")).await;
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!((rows[0].state.as_str(), rows[0].attempts), ("succeeded", 3));
    let posts = posts_to(&receiver, "/hook").await;
    assert_eq!(posts.len(), 3);
    let id = header(&posts[0], "webhook-id");
    for post in &posts {
        assert_eq!(header(post, "webhook-id"), id);
        assert!(payorch_verifies(std::slice::from_ref(&secret), post));
    }
    let mut conn = app.db.connect().await;
    let attempts = attempts_to(&mut conn, endpoint).await;
    let statuses: Vec<Option<i16>> = attempts.iter().map(|a| a.http_status).collect();
    assert_eq!(statuses, [Some(500), Some(500), Some(200)]);
    assert!(
        attempts[0].error.as_deref().unwrap().contains("500"),
        "{attempts:?}"
    );
    assert_eq!(attempts[2].error, None);
    // Failing since the first failure, healthy again after the success.
    assert_eq!(endpoint_row(&mut conn, endpoint).await.failing_since, None);
}

#[actix_web::test]
async fn a_delivery_is_given_up_after_the_schedule_and_an_endpoint_failing_three_days_is_disabled()
{
    let app = TestApp::spawn().await;
    let receiver = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(502))
        .mount(&receiver)
        .await;
    let secret = Secret::generate();
    let url = format!("{}/hook", receiver.uri());
    let endpoint = subscribe(&app, &url, &["order.paid"], &secret).await;
    paid_checkout(&app, "give-up-1").await;

    // The test app's schedule: four attempts, then given up.
    let rows = deliveries_until(&app, endpoint, all_in("failed")).await;
    assert_eq!(
        (rows[0].state.as_str(), rows[0].attempts),
        ("failed", 4),
        "{rows:?}"
    );
    assert_eq!(posts_to(&receiver, "/hook").await.len(), 4);
    let mut conn = app.db.connect().await;
    let shown = endpoint_row(&mut conn, endpoint).await;
    assert_eq!(shown.status, "enabled");
    assert!(shown.failing_since.is_some());

    // Another endpoint that has failed everything for three days: its next failure disables it.
    let tired = subscribe(&app, &url, &["order.paid"], &secret).await;
    diesel::sql_query(
        "UPDATE webhook_endpoints SET failing_since = now() - interval '3 days 1 minute' \
         WHERE id = $1",
    )
    .bind::<SqlUuid, _>(tired.0)
    .execute(&mut conn)
    .await
    .unwrap();
    paid_checkout(&app, "give-up-2").await;
    let rows = deliveries_until(&app, tired, all_in("failed")).await;
    assert_eq!(
        (rows[0].state.as_str(), rows[0].attempts),
        ("failed", 1),
        "{rows:?}"
    );
    let shown = endpoint_row(&mut conn, tired).await;
    assert_eq!(shown.status, "disabled");
    assert!(
        shown.disabled_reason.as_deref().unwrap().contains("3 days"),
        "{shown:?}"
    );
}

#[actix_web::test]
async fn a_410_disables_the_endpoint_and_its_pending_deliveries_are_not_sent() {
    let app = TestApp::spawn().await;
    let receiver = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(410))
        .mount(&receiver)
        .await;
    let secret = Secret::generate();
    let endpoint = subscribe(
        &app,
        &format!("{}/hook", receiver.uri()),
        &["order.paid"],
        &secret,
    )
    .await;
    paid_checkout(&app, "gone-1").await;

    let rows = deliveries_until(&app, endpoint, all_in("failed")).await;
    assert_eq!(
        (rows[0].state.as_str(), rows[0].attempts),
        ("failed", 1),
        "{rows:?}"
    );
    let mut conn = app.db.connect().await;
    let shown = endpoint_row(&mut conn, endpoint).await;
    assert_eq!(shown.status, "disabled");
    assert!(
        shown.disabled_reason.as_deref().unwrap().contains("410"),
        "{shown:?}"
    );

    // A delivery still pending for it (made before it was disabled) is canceled, not sent.
    let order = paid_checkout(&app, "gone-2").await;
    let event = app.events_of(&order).await.pop().expect("order.paid");
    let event: EventId = event["id"].as_str().unwrap().parse().unwrap();
    diesel::sql_query(
        "INSERT INTO event_deliveries (event_id, endpoint_id, merchant_id) VALUES ($1, $2, $3)",
    )
    .bind::<SqlUuid, _>(event.0)
    .bind::<SqlUuid, _>(endpoint.0)
    .bind::<SqlUuid, _>(app.merchant_id.0)
    .execute(&mut conn)
    .await
    .unwrap();
    let rows = deliveries_until(&app, endpoint, |rows| {
        rows.iter().any(|r| r.state == "canceled")
    })
    .await;
    let states: Vec<&str> = rows.iter().map(|r| r.state.as_str()).collect();
    assert_eq!(states, ["failed", "canceled"]);
    assert_eq!(posts_to(&receiver, "/hook").await.len(), 1);
}

#[actix_web::test]
async fn retry_after_of_a_503_sets_the_next_attempt_no_earlier_than_asked() {
    let app = TestApp::spawn().await;
    let receiver = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(503).insert_header("Retry-After", "3600"))
        .mount(&receiver)
        .await;
    let secret = Secret::generate();
    let endpoint = subscribe(
        &app,
        &format!("{}/hook", receiver.uri()),
        &["order.paid"],
        &secret,
    )
    .await;
    paid_checkout(&app, "later-1").await;

    let rows = deliveries_until(&app, endpoint, |rows| rows.iter().any(|r| r.attempts == 1)).await;
    assert_eq!(
        (rows[0].state.as_str(), rows[0].attempts),
        ("pending", 1),
        "{rows:?}"
    );
    let mut conn = app.db.connect().await;
    let attempts = attempts_to(&mut conn, endpoint).await;
    assert_eq!(attempts.len(), 1);
    assert_eq!(attempts[0].http_status, Some(503));
    // The test schedule would retry after 0.2 s; the endpoint asked for an hour.
    assert!(
        rows[0].next_attempt_at >= attempts[0].attempted_at + chrono::Duration::seconds(3600),
        "{rows:?} {attempts:?}"
    );
}

#[actix_web::test]
async fn a_redirect_is_a_failed_attempt_and_is_not_followed() {
    let app = TestApp::spawn().await;
    let receiver = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/hook"))
        .respond_with(ResponseTemplate::new(307).insert_header("Location", "/elsewhere"))
        .mount(&receiver)
        .await;
    Mock::given(method("POST"))
        .and(path("/elsewhere"))
        .respond_with(ResponseTemplate::new(200))
        .mount(&receiver)
        .await;
    let secret = Secret::generate();
    let endpoint = subscribe(
        &app,
        &format!("{}/hook", receiver.uri()),
        &["order.paid"],
        &secret,
    )
    .await;
    paid_checkout(&app, "redirect-1").await;

    let rows = deliveries_until(&app, endpoint, all_in("failed")).await;
    assert_eq!(
        (rows[0].state.as_str(), rows[0].attempts),
        ("failed", 4),
        "{rows:?}"
    );
    assert_eq!(posts_to(&receiver, "/hook").await.len(), 4);
    assert!(posts_to(&receiver, "/elsewhere").await.is_empty());
    let mut conn = app.db.connect().await;
    let attempts = attempts_to(&mut conn, endpoint).await;
    assert_eq!(attempts[0].http_status, Some(307));
    assert!(
        attempts[0]
            .error
            .as_deref()
            .unwrap()
            .contains("redirects are not followed"),
        "{attempts:?}"
    );
}

#[actix_web::test]
async fn private_addresses_are_refused_at_send_time_by_name_and_by_address() {
    // No flag: nothing on loopback, let alone the metadata address.
    let app = TestApp::spawn_with(|settings| settings.delivery.urls = UrlPolicy::default()).await;
    let receiver = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200))
        .mount(&receiver)
        .await;
    let secret = Secret::generate();
    let port = receiver.address().port();
    // A name registered while it was public (registration judges only addresses), that now
    // resolves to loopback: what DNS rebinding does.
    let by_name = subscribe(
        &app,
        &format!("https://localhost:{port}/hook"),
        &["order.paid"],
        &secret,
    )
    .await;
    // An address that no registration takes, written into the table by hand.
    let metadata = subscribe(
        &app,
        "https://169.254.169.254/latest/meta-data",
        &["order.paid"],
        &secret,
    )
    .await;
    paid_checkout(&app, "private-1").await;

    let mut conn = app.db.connect().await;
    for endpoint in [by_name, metadata] {
        assert!(
            eventually(PATIENCE, || async {
                attempts_to(&mut app.db.connect().await, endpoint)
                    .await
                    .len()
                    >= 2
            })
            .await
        );
        let attempts = attempts_to(&mut conn, endpoint).await;
        assert!(
            attempts.iter().all(|a| a.http_status.is_none()),
            "{attempts:?}"
        );
        let error = attempts[0].error.clone().unwrap();
        if endpoint == by_name {
            assert!(error.contains("localhost resolves to"), "{error}");
            assert!(error.contains("loopback"), "{error}");
        } else {
            assert!(error.contains("169.254.169.254"), "{error}");
            assert!(error.contains("cloud metadata"), "{error}");
        }
    }
    assert!(receiver.received_requests().await.unwrap().is_empty());
}

#[actix_web::test]
async fn a_delivery_taken_by_a_worker_that_died_is_sent_once_its_lease_has_passed() {
    let app = TestApp::spawn().await;
    let receiver = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200))
        .mount(&receiver)
        .await;
    let secret = Secret::generate();
    // Paid before the endpoint exists: no delivery is made for it by the trigger.
    let order = paid_checkout(&app, "lease-1").await;
    let endpoint = subscribe(
        &app,
        &format!("{}/hook", receiver.uri()),
        &["order.paid"],
        &secret,
    )
    .await;
    let event = app.events_of(&order).await.pop().expect("order.paid");
    let event: EventId = event["id"].as_str().unwrap().parse().unwrap();

    // A worker that makes the delivery and takes it, in one transaction (so the app's own
    // worker never sees it untaken), then dies: it never sends, never records.
    let mut conn = app.db.connect().await;
    let lease = Duration::from_secs(2);
    let taken = in_transaction(&mut conn, async |conn| {
        diesel::sql_query(
            "INSERT INTO event_deliveries (event_id, endpoint_id, merchant_id) \
             VALUES ($1, $2, $3)",
        )
        .bind::<SqlUuid, _>(event.0)
        .bind::<SqlUuid, _>(endpoint.0)
        .bind::<SqlUuid, _>(app.merchant_id.0)
        .execute(conn)
        .await?;
        take_due(conn, lease, 10).await
    })
    .await
    .expect("taken");
    assert_eq!(taken.len(), 1);
    assert_eq!(taken[0].event_id(), event);
    // While the lease holds, no other worker can take it.
    assert!(take_due(&mut conn, lease, 10).await.unwrap().is_empty());

    let rows = deliveries_until(&app, endpoint, all_in("succeeded")).await;
    assert_eq!(
        (rows[0].state.as_str(), rows[0].attempts),
        ("succeeded", 1),
        "{rows:?}"
    );
    let posts = posts_to(&receiver, "/hook").await;
    assert_eq!(posts.len(), 1);
    assert_eq!(header(&posts[0], "webhook-id"), event.to_string());
    // Only the send that happened is recorded, after the lease the dead worker held.
    let attempts = attempts_to(&mut conn, endpoint).await;
    assert_eq!(attempts.len(), 1);
    assert!(
        attempts[0].attempted_at >= taken[0].lease_until,
        "{attempts:?}"
    );
}

#[actix_web::test]
async fn after_a_rotation_both_secrets_sign_until_the_previous_one_ends() {
    let app = TestApp::spawn().await;
    let receiver = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200))
        .mount(&receiver)
        .await;
    let (old, new) = (Secret::generate(), Secret::generate());
    let endpoint = subscribe(
        &app,
        &format!("{}/hook", receiver.uri()),
        &["order.paid"],
        &new,
    )
    .await;
    let mut conn = app.db.connect().await;
    diesel::sql_query(
        "UPDATE webhook_endpoints SET previous_secret = $2, \
             previous_secret_until = now() + interval '24 hours' WHERE id = $1",
    )
    .bind::<SqlUuid, _>(endpoint.0)
    .bind::<Text, _>(sealed_secret(endpoint, &old))
    .execute(&mut conn)
    .await
    .unwrap();
    paid_checkout(&app, "rotate-1").await;
    deliveries_until(&app, endpoint, all_in("succeeded")).await;
    let posts = posts_to(&receiver, "/hook").await;
    assert_eq!(posts.len(), 1);
    let signatures: Vec<&str> = header(&posts[0], "webhook-signature").split(' ').collect();
    assert_eq!(signatures.len(), 2, "{signatures:?}");
    for secret in [&old, &new] {
        assert!(payorch_verifies(std::slice::from_ref(secret), &posts[0]));
        assert!(python_verifies(secret, &posts[0]));
    }

    // Once the previous secret has ended, only the new one signs.
    diesel::sql_query(
        "UPDATE webhook_endpoints SET previous_secret_until = now() - interval '1 second' \
         WHERE id = $1",
    )
    .bind::<SqlUuid, _>(endpoint.0)
    .execute(&mut conn)
    .await
    .unwrap();
    paid_checkout(&app, "rotate-2").await;
    deliveries_until(&app, endpoint, |rows| {
        rows.len() == 2 && rows.iter().all(|r| r.state == "succeeded")
    })
    .await;
    let posts = posts_to(&receiver, "/hook").await;
    assert_eq!(posts.len(), 2);
    let last = posts
        .iter()
        .find(|p| header(p, "webhook-signature") != header(&posts[0], "webhook-signature"))
        .expect("the second delivery");
    assert!(!header(last, "webhook-signature").contains(' '));
    assert!(payorch_verifies(std::slice::from_ref(&new), last));
    assert!(!payorch_verifies(std::slice::from_ref(&old), last));
}
