//! `GET /v1/events`, `GET /v1/events/{id}`, the event reaper and what support sees of events
//! (docs/guides/events.md, "Events and webhook endpoints";
//! docs/guides/support.md, "Support"). Endpoints, deliveries and their
//! sends are written by SQL with states a delivery worker leaves alone (final, or due far
//! ahead), so what each test reads is what it wrote.

use diesel_async::RunQueryDsl;
use serde_json::{json, Value};
use uuid::Uuid;

use payorch::db::PgConn;
use payorch::events::signing::Secret;
use payorch::ids::{EndpointId, EventId, MerchantId};

use crate::helpers::{assert_problem, sealed_secret, TestApp};
use crate::payments::checkout_body;

async fn run_sql(conn: &mut PgConn, sql: &str) -> usize {
    diesel::sql_query(sql)
        .execute(conn)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
}

fn uuid_of(event: &str) -> Uuid {
    event.parse::<EventId>().expect("an event id").0
}

/// Every event id of the database, newest first by `seq`, as the API shows ids.
async fn all_event_ids(app: &TestApp, merchant: Option<MerchantId>) -> Vec<String> {
    #[derive(diesel::QueryableByName)]
    struct Row {
        #[diesel(sql_type = diesel::sql_types::Uuid)]
        id: Uuid,
    }
    let filter = merchant.map_or(String::new(), |m| format!("WHERE merchant_id = '{}'", m.0));
    let mut conn = app.db.connect().await;
    diesel::sql_query(format!(
        "SELECT id FROM merchant_events {filter} ORDER BY seq DESC"
    ))
    .load::<Row>(&mut conn)
    .await
    .unwrap()
    .into_iter()
    .map(|r| EventId(r.id).to_string())
    .collect()
}

/// A checkout by `secret`'s merchant that succeeds: `payment.succeeded` and `order.paid`.
async fn paid_checkout(app: &TestApp, secret: &str, key: &str) -> Value {
    let response = app
        .post_keyed(
            secret,
            "/v1/checkout",
            Some(key),
            Some(checkout_body("pm_card_visa").to_string()),
        )
        .await;
    assert_eq!(response.status(), 201);
    response.json().await.unwrap()
}

/// A webhook endpoint of `merchant`, made by SQL (the endpoints API is tested on its own).
async fn endpoint(conn: &mut PgConn, merchant: MerchantId, events: &str, status: &str) -> Uuid {
    let id = Uuid::now_v7();
    let reason = if status == "disabled" {
        "'the endpoint answered 410 Gone'"
    } else {
        "NULL"
    };
    run_sql(
        conn,
        &format!(
            "INSERT INTO webhook_endpoints (merchant_id, id, url, enabled_events, secret, status, \
                 disabled_reason, failing_since) \
             VALUES ('{m}', '{id}', 'https://endpoint.invalid/{id}', ARRAY[{events}], \
                 '{sealed}', '{status}', {reason}, \
                 CASE WHEN '{status}' = 'disabled' THEN now() - interval '3 days' END)",
            m = merchant.0,
            sealed = sealed_secret(EndpointId(id), &Secret::generate()),
        ),
    )
    .await;
    id
}

/// A delivery of `event` to `endpoint` in `state`, due in a day (no worker takes it now).
async fn delivery(conn: &mut PgConn, event: &str, endpoint: Uuid, state: &str) {
    run_sql(
        conn,
        &format!(
            "INSERT INTO event_deliveries (event_id, endpoint_id, merchant_id, state, attempts, \
                 next_attempt_at) \
             SELECT id, '{endpoint}', merchant_id, '{state}', 2, now() + interval '1 day' \
             FROM merchant_events WHERE id = '{}'",
            uuid_of(event)
        ),
    )
    .await;
}

fn ids(page: &Value) -> Vec<String> {
    page["data"]
        .as_array()
        .expect("a list")
        .iter()
        .map(|e| e["id"].as_str().unwrap().to_owned())
        .collect()
}

async fn page(app: &TestApp, secret: &str, query: &str) -> Value {
    let response = app.get_as(secret, &format!("/v1/events{query}")).await;
    assert_eq!(response.status(), 200, "{query}");
    response.json().await.unwrap()
}

#[tokio::test]
async fn events_are_listed_newest_first_a_page_at_a_time_and_each_as_get_shows_it() {
    let app = TestApp::spawn().await;
    for n in 0..6 {
        paid_checkout(&app, &app.merchant_key, &format!("list-{n}")).await;
    }
    let all = all_event_ids(&app, None).await;
    assert_eq!(all.len(), 12);

    // Ten by default, newest first.
    let first = page(&app, &app.merchant_key, "").await;
    assert_eq!(first["object"], "list");
    assert_eq!(ids(&first), all[..10]);
    assert_eq!(first["has_more"], true);

    // Pages of 5 after a cursor; an event written meanwhile is newer than every cursor, so
    // the pages neither repeat nor skip one.
    let one = page(&app, &app.merchant_key, "?limit=5").await;
    paid_checkout(&app, &app.merchant_key, "list-meanwhile").await;
    let after = ids(&one).last().unwrap().clone();
    let two = page(
        &app,
        &app.merchant_key,
        &format!("?limit=5&starting_after={after}"),
    )
    .await;
    let after = ids(&two).last().unwrap().clone();
    let three = page(
        &app,
        &app.merchant_key,
        &format!("?limit=5&starting_after={after}"),
    )
    .await;
    assert_eq!(two["has_more"], true);
    assert_eq!(three["has_more"], false);
    let paged: Vec<String> = [ids(&one), ids(&two), ids(&three)].concat();
    assert_eq!(paged, all);

    // Each event of the list is the event as GET /v1/events/{id} shows it.
    for event in first["data"].as_array().unwrap() {
        let id = event["id"].as_str().unwrap();
        let shown: Value = app
            .get_as(&app.merchant_key, &format!("/v1/events/{id}"))
            .await
            .json()
            .await
            .unwrap();
        assert_eq!(&shown, event);
    }
    assert_eq!(first["data"][0]["type"], "order.paid");
    assert_eq!(first["data"][1]["type"], "payment.succeeded");
}

#[tokio::test]
async fn each_filter_narrows_the_list() {
    let app = TestApp::spawn().await;
    let paid = paid_checkout(&app, &app.merchant_key, "filter-paid").await;
    let declined = app
        .checkout("filter-declined", &checkout_body("pm_card_chargeDeclined"))
        .await;
    assert_eq!(declined.status(), 201);
    let all = all_event_ids(&app, None).await;
    // Newest first: payment.failed, order.paid, payment.succeeded.
    let (failed, order_paid, succeeded) = (&all[0], &all[1], &all[2]);
    let key = &app.merchant_key;

    let only = page(&app, key, "?type=payment.succeeded").await;
    assert_eq!(ids(&only), [succeeded.as_str()]);
    let two = page(&app, key, "?type=payment.failed,payment.succeeded").await;
    assert_eq!(ids(&two), [failed.as_str(), succeeded.as_str()]);

    // The created window: one event moved back to New Year, in RFC 3339 and Unix seconds.
    let mut conn = app.db.connect().await;
    run_sql(
        &mut conn,
        &format!(
            "UPDATE merchant_events SET created_at = '2026-01-01T00:00:00Z' WHERE id = '{}'",
            uuid_of(succeeded)
        ),
    )
    .await;
    let old = page(&app, key, "?created_lte=2026-01-01T00:00:00Z").await;
    assert_eq!(ids(&old), [succeeded.as_str()]);
    let new = page(&app, key, "?created_gte=1767225601").await; // 2026-01-01T00:00:01Z
    assert_eq!(ids(&new), [failed.as_str(), order_paid.as_str()]);
    let window = page(
        &app,
        key,
        "?created_gte=2025-12-31T23:00:00%2B00:00&created_lte=1767225600",
    )
    .await;
    assert_eq!(ids(&window), [succeeded.as_str()]);

    // delivery_success: `false` has a delivery not succeeded, `true` has deliveries that all
    // did, and an event with no delivery is in neither.
    let (a, b) = (
        endpoint(&mut conn, app.merchant_id, "'*'", "enabled").await,
        endpoint(&mut conn, app.merchant_id, "'*'", "enabled").await,
    );
    delivery(&mut conn, succeeded, a, "succeeded").await;
    delivery(&mut conn, succeeded, b, "succeeded").await;
    delivery(&mut conn, order_paid, a, "succeeded").await;
    delivery(&mut conn, order_paid, b, "failed").await;
    let delivered = page(&app, key, "?delivery_success=true").await;
    assert_eq!(ids(&delivered), [succeeded.as_str()]);
    let missed = page(&app, key, "?delivery_success=false").await;
    assert_eq!(ids(&missed), [order_paid.as_str()]);
    run_sql(
        &mut conn,
        &format!(
            "UPDATE event_deliveries SET state = 'pending' WHERE event_id = '{}'",
            uuid_of(succeeded)
        ),
    )
    .await;
    let missed = page(&app, key, "?delivery_success=false").await;
    assert_eq!(ids(&missed), [order_paid.as_str(), succeeded.as_str()]);
    assert_eq!(
        ids(&page(&app, key, "?delivery_success=true").await),
        Vec::<String>::new()
    );

    // Filters together, and with the pages.
    let both = page(&app, key, "?delivery_success=false&type=order.paid&limit=1").await;
    assert_eq!(ids(&both), [order_paid.as_str()]);
    assert_eq!(both["has_more"], false);
    assert_eq!(paid["order"]["id"], both["data"][0]["data"]["object"]["id"]);
}

#[tokio::test]
async fn a_merchant_sees_its_own_events_and_support_sees_every_merchants() {
    let app = TestApp::spawn().await;
    let (other, other_key) = app.other_merchant().await;
    paid_checkout(&app, &app.merchant_key, "mine").await;
    paid_checkout(&app, &other_key, "theirs").await;
    let mine = all_event_ids(&app, Some(app.merchant_id)).await;
    let theirs = all_event_ids(&app, Some(other)).await;
    let everyone = all_event_ids(&app, None).await;

    assert_eq!(ids(&page(&app, &app.merchant_key, "").await), mine);
    assert_eq!(ids(&page(&app, &other_key, "").await), theirs);
    assert_eq!(ids(&page(&app, &app.support_key, "").await), everyone);
    let filtered = page(&app, &app.support_key, &format!("?merchant_id={other}")).await;
    assert_eq!(ids(&filtered), theirs);
    let own = page(
        &app,
        &app.merchant_key,
        &format!("?merchant_id={}", app.merchant_id),
    )
    .await;
    assert_eq!(ids(&own), mine);

    // Another merchant's event does not exist for a merchant key: 404, and no cursor.
    let response = app
        .get_as(&app.merchant_key, &format!("/v1/events/{}", theirs[0]))
        .await;
    assert_problem(response, 404, "not_found").await;
    let response = app
        .get_as(&app.support_key, &format!("/v1/events/{}", theirs[0]))
        .await;
    assert_eq!(response.status(), 200);
    let response = app
        .get_as(
            &app.merchant_key,
            &format!("/v1/events?starting_after={}", theirs[0]),
        )
        .await;
    let problem = assert_problem(response, 422, "validation_failed").await;
    assert_eq!(problem["errors"][0]["field"], "starting_after", "{problem}");
    let response = app
        .get_as(
            &app.merchant_key,
            &format!("/v1/events?merchant_id={other}"),
        )
        .await;
    let problem = assert_problem(response, 422, "validation_failed").await;
    assert_eq!(problem["errors"][0]["field"], "merchant_id", "{problem}");

    for path in [
        "/v1/events/evt_nope",
        &format!("/v1/events/{}", EventId::new()),
    ] {
        assert_problem(app.get_as(&app.support_key, path).await, 404, "not_found").await;
    }
    assert_problem(app.get("/v1/events").await, 401, "unauthenticated").await;
}

#[tokio::test]
async fn bad_parameters_are_each_named() {
    let app = TestApp::spawn().await;
    let key = &app.merchant_key;
    let response = app
        .get_as(
            key,
            "/v1/events?type=payment.paid&created_gte=yesterday&created_lte=2026-13-01\
             &delivery_success=maybe&limit=0&starting_after=pay_1&merchant_id=42",
        )
        .await;
    let problem = assert_problem(response, 422, "validation_failed").await;
    let mut fields: Vec<&str> = problem["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["field"].as_str().unwrap())
        .collect();
    fields.sort();
    assert_eq!(
        fields,
        [
            "created_gte",
            "created_lte",
            "delivery_success",
            "limit",
            "merchant_id",
            "starting_after",
            "type"
        ],
        "{problem}"
    );
    for (query, field) in [
        ("limit=101", "limit"),
        ("limit=ten", "limit"),
        ("type=payment.succeeded,", "type"),
        (
            "created_gte=2026-02-01T00:00:00Z&created_lte=2026-01-01T00:00:00Z",
            "created_lte",
        ),
    ] {
        let response = app.get_as(key, &format!("/v1/events?{query}")).await;
        let problem = assert_problem(response, 422, "validation_failed").await;
        assert_eq!(problem["errors"][0]["field"], field, "{query}: {problem}");
    }
    // An unknown parameter, or one given twice: 400, naming it.
    for (query, named) in [
        ("types=payment.succeeded", "types"),
        ("type=payment.failed&type=order.paid", "type"),
    ] {
        let response = app.get_as(key, &format!("/v1/events?{query}")).await;
        let problem = assert_problem(response, 400, "invalid_request").await;
        let detail = problem["detail"].as_str().unwrap();
        assert!(detail.contains(named), "{query}: {detail}");
    }
}

#[tokio::test]
async fn support_redelivers_an_event_to_every_live_endpoint_subscribed() {
    let app = TestApp::spawn().await;
    paid_checkout(&app, &app.merchant_key, "redeliver").await;
    let events = all_event_ids(&app, None).await;
    let event = &events[1]; // payment.succeeded
    let mut conn = app.db.connect().await;
    let m = app.merchant_id;
    let failed = endpoint(&mut conn, m, "'payment.succeeded'", "enabled").await;
    let canceled = endpoint(&mut conn, m, "'*'", "enabled").await;
    let delivered = endpoint(&mut conn, m, "'*'", "enabled").await;
    let disabled = endpoint(&mut conn, m, "'*'", "disabled").await;
    let missing = endpoint(
        &mut conn,
        m,
        "'payment.failed', 'payment.succeeded'",
        "enabled",
    )
    .await;
    let unsubscribed = endpoint(&mut conn, m, "'order.paid'", "enabled").await;
    delivery(&mut conn, event, failed, "failed").await;
    delivery(&mut conn, event, canceled, "canceled").await;
    delivery(&mut conn, event, delivered, "succeeded").await;
    delivery(&mut conn, event, disabled, "canceled").await;

    let path = format!("/v1/support/events/{event}/redeliver");
    let by_merchant = app.post_keyed(&app.merchant_key, &path, None, None).await;
    assert_problem(by_merchant, 403, "forbidden").await;
    let response = app.post_keyed(&app.support_key, &path, None, None).await;
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["event_id"], event.as_str());
    let state_of = |endpoint: Uuid| {
        let id = payorch::ids::EndpointId(endpoint).to_string();
        body["deliveries"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["endpoint_id"] == id.as_str())
            .map(|d| {
                (
                    d["state"].as_str().unwrap().to_owned(),
                    d["attempts"].clone(),
                )
            })
    };
    for live in [failed, canceled, delivered] {
        assert_eq!(state_of(live), Some(("pending".into(), json!(2))), "{body}");
    }
    assert_eq!(
        state_of(missing),
        Some(("pending".into(), json!(0))),
        "{body}"
    );
    assert_eq!(
        state_of(disabled),
        Some(("canceled".into(), json!(2))),
        "{body}"
    );
    assert_eq!(state_of(unsubscribed), None, "{body}");
    assert_eq!(body["deliveries"].as_array().unwrap().len(), 5);

    let unknown = format!("/v1/support/events/{}/redeliver", EventId::new());
    let response = app.post_keyed(&app.support_key, &unknown, None, None).await;
    assert_problem(response, 404, "not_found").await;
    let response = app.get_as(&app.support_key, &path).await;
    assert_problem(response, 405, "method_not_allowed").await;
}

#[tokio::test]
async fn the_story_shows_the_orders_events_with_deliveries_and_attempts() {
    let app = TestApp::spawn().await;
    let response = app
        .post_keyed(
            &app.merchant_key,
            "/v1/checkout",
            Some("story-events"),
            Some(checkout_body("pm_card_visa").to_string()),
        )
        .await;
    let request_id = response.headers()["x-request-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let body: Value = response.json().await.unwrap();
    let payment = body["payment"]["id"].as_str().unwrap();
    let events = all_event_ids(&app, None).await;
    let (order_paid, succeeded) = (&events[0], &events[1]);
    let mut conn = app.db.connect().await;
    let hook = endpoint(&mut conn, app.merchant_id, "'*'", "enabled").await;
    delivery(&mut conn, succeeded, hook, "pending").await;
    for (status, error) in [
        ("NULL", "'timed out after 15 s'"),
        ("503", "'the endpoint answered 503'"),
    ] {
        run_sql(
            &mut conn,
            &format!(
                "INSERT INTO delivery_attempts (event_id, endpoint_id, http_status, latency_ms, \
                     error) VALUES ('{}', '{hook}', {status}, 15000, {error})",
                uuid_of(succeeded)
            ),
        )
        .await;
    }

    let story: Value = app
        .get_as(&app.support_key, &format!("/v1/support/payments/{payment}"))
        .await
        .json()
        .await
        .unwrap();
    let shown = story["events"].as_array().expect("the order's events");
    assert_eq!(shown.len(), 2, "{story}");
    let (first, second) = (&shown[0], &shown[1]);
    assert_eq!(first["id"], succeeded.as_str());
    assert_eq!(first["type"], "payment.succeeded");
    // The checkout's request, when its answer made the move; none when the sandbox's webhook,
    // sent as it answers, got there first (a busy machine): the timeline says which.
    let moved_by = story["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .find(|line| line["to"] == "succeeded")
        .map(|line| line["source"].clone());
    let request = match moved_by.as_ref().and_then(Value::as_str) {
        Some("api" | "provider_response") => {
            json!({"id": request_id, "idempotency_key": "story-events"})
        }
        Some("webhook") => Value::Null,
        other => panic!("the payment moved to succeeded by {other:?}: {story}"),
    };
    assert_eq!(first["request"], request, "{story}");
    assert_eq!(second["id"], order_paid.as_str());
    assert_eq!(second["deliveries"], json!([]));
    let endpoint_id = payorch::ids::EndpointId(hook).to_string();
    let delivery = &first["deliveries"][0];
    assert_eq!(delivery["endpoint_id"], endpoint_id.as_str());
    assert_eq!(delivery["url"], format!("https://endpoint.invalid/{hook}"));
    assert_eq!(delivery["state"], "pending");
    assert_eq!(delivery["attempts"], 2);
    assert!(delivery["next_attempt_at"].is_string(), "{delivery}");
    let attempts = first["delivery_attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 2);
    assert_eq!(attempts[0]["http_status"], Value::Null);
    assert_eq!(attempts[0]["error"], "timed out after 15 s");
    assert_eq!(attempts[1]["http_status"], 503);
    assert_eq!(attempts[1]["latency_ms"], 15000);
    assert_eq!(attempts[1]["endpoint_id"], endpoint_id.as_str());
    assert!(attempts[1]["at"].is_string());
}

#[tokio::test]
async fn needs_a_human_lists_the_disabled_webhook_endpoints() {
    let app = TestApp::spawn().await;
    let mut conn = app.db.connect().await;
    let (other, _) = app.other_merchant().await;
    let disabled = endpoint(&mut conn, other, "'*'", "disabled").await;
    let deleted = endpoint(&mut conn, app.merchant_id, "'*'", "disabled").await;
    run_sql(
        &mut conn,
        &format!("UPDATE webhook_endpoints SET deleted_at = now() WHERE id = '{deleted}'"),
    )
    .await;
    endpoint(&mut conn, app.merchant_id, "'*'", "enabled").await;

    let needs: Value = app
        .get_as(&app.support_key, "/v1/support/needs-a-human")
        .await
        .json()
        .await
        .unwrap();
    let listed = needs["disabled_webhook_endpoints"].as_array().unwrap();
    assert_eq!(listed.len(), 1, "{needs}");
    let shown = &listed[0];
    assert_eq!(shown["id"], payorch::ids::EndpointId(disabled).to_string());
    assert_eq!(shown["merchant_id"], other.to_string());
    assert_eq!(shown["url"], format!("https://endpoint.invalid/{disabled}"));
    assert_eq!(shown["disabled_reason"], "the endpoint answered 410 Gone");
    assert!(shown["failing_since"].is_string(), "{shown}");
}
