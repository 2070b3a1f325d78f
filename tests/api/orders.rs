//! Orders through the Idempotency-Key layer: replays, concurrency, mismatches, refusals.

use std::time::Duration;

use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use payorch::db::schema::{idempotency_keys, orders};
use serde_json::{json, Value};

use crate::helpers::{assert_problem, TestApp};

impl TestApp {
    pub async fn create_order(&self, key: &str, body: &Value) -> reqwest::Response {
        self.post_keyed(
            &self.merchant_key,
            "/v1/orders",
            Some(key),
            Some(body.to_string()),
        )
        .await
    }

    /// Orders and idempotency keys stored.
    pub async fn count_rows(&self) -> (i64, i64) {
        (
            self.db.count("orders").await,
            self.db.count("idempotency_keys").await,
        )
    }
}

fn order_body() -> Value {
    json!({"amount": 1999, "currency": "EUR", "description": "Blue mug", "metadata": {"sku": "mug-1", "color": "blue"}})
}

#[tokio::test]
async fn same_key_same_body_replays_the_same_order() {
    let app = TestApp::spawn().await;
    let first = app.create_order("k-1", &order_body()).await;
    assert_eq!(first.status(), 201);
    assert!(first.headers().get("idempotent-replayed").is_none());
    let first: Value = first.json().await.unwrap();
    assert_eq!(first["status"], "awaiting_payment");
    assert_eq!(first["currency"], "eur");
    assert!(first["id"].as_str().unwrap().starts_with("ord_"));

    let second = app.create_order("k-1", &order_body()).await;
    assert_eq!(second.status(), 201);
    assert_eq!(second.headers()["idempotent-replayed"], "true");
    let second: Value = second.json().await.unwrap();
    assert_eq!(second["id"], first["id"]);

    // Other key order and whitespace: the same JSON value, so still a replay.
    let reordered = r#"{ "metadata" : {"color":"blue",  "sku":"mug-1"},
        "description":"Blue mug", "currency":"EUR",   "amount":1999 }"#;
    let third = app
        .post_keyed(
            &app.merchant_key,
            "/v1/orders",
            Some("\"k-1\""),
            Some(reordered.into()),
        )
        .await;
    assert_eq!(third.status(), 201);
    assert_eq!(third.headers()["idempotent-replayed"], "true");
    let third: Value = third.json().await.unwrap();
    assert_eq!(third["id"], first["id"]);
    assert_eq!(app.count_rows().await, (1, 1));
}

#[tokio::test]
async fn a_replay_shows_the_order_as_it_is_now() {
    let app = TestApp::spawn().await;
    let order: Value = app
        .create_order("k-now", &order_body())
        .await
        .json()
        .await
        .unwrap();
    let id = order["id"].as_str().unwrap();
    let cancel = app
        .post_keyed(
            &app.merchant_key,
            &format!("/v1/orders/{id}/cancel"),
            Some("c-1"),
            None,
        )
        .await;
    assert_eq!(cancel.status(), 200);
    let replay: Value = app
        .create_order("k-now", &order_body())
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(replay["id"], id);
    assert_eq!(replay["status"], "canceled");
}

#[tokio::test]
async fn hundred_concurrent_requests_with_one_key_make_one_order() {
    let app = TestApp::spawn().await;
    let body = order_body();
    let answers =
        futures_util::future::join_all((0..100).map(|_| app.create_order("same-key", &body))).await;
    let mut ids = std::collections::HashSet::new();
    let mut in_use = 0;
    for answer in answers {
        match answer.status().as_u16() {
            201 => {
                let order: Value = answer.json().await.unwrap();
                ids.insert(order["id"].as_str().unwrap().to_string());
            }
            409 => {
                assert!(answer.headers().contains_key("retry-after"));
                assert_problem(answer, 409, "idempotency_key_in_use").await;
                in_use += 1;
            }
            other => panic!("unexpected {other}: {}", answer.text().await.unwrap()),
        }
    }
    assert_eq!(ids.len(), 1, "every 201 names the same order");
    assert!(in_use < 100);
    assert_eq!(app.count_rows().await, (1, 1));
}

#[tokio::test]
async fn same_key_with_another_body_or_endpoint_is_422() {
    let app = TestApp::spawn().await;
    let order: Value = app
        .create_order("k-2", &order_body())
        .await
        .json()
        .await
        .unwrap();
    let other_body = json!({"amount": 2000, "currency": "eur"});
    let response = app.create_order("k-2", &other_body).await;
    assert_problem(response, 422, "idempotency_key_reused").await;

    let id = order["id"].as_str().unwrap();
    let response = app
        .post_keyed(
            &app.merchant_key,
            &format!("/v1/orders/{id}/cancel"),
            Some("k-2"),
            None,
        )
        .await;
    assert_problem(response, 422, "idempotency_key_reused").await;
    let still: Value = app
        .get_as(&app.merchant_key, &format!("/v1/orders/{id}"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        still["status"], "awaiting_payment",
        "the mismatched cancel did nothing"
    );
}

#[tokio::test]
async fn another_merchant_with_the_same_key_gets_its_own_order() {
    let app = TestApp::spawn().await;
    let (_, other_key) = app.other_merchant().await;
    let mine: Value = app
        .create_order("shared", &order_body())
        .await
        .json()
        .await
        .unwrap();
    let theirs = app
        .post_keyed(
            &other_key,
            "/v1/orders",
            Some("shared"),
            Some(order_body().to_string()),
        )
        .await;
    assert_eq!(theirs.status(), 201);
    assert!(theirs.headers().get("idempotent-replayed").is_none());
    let theirs: Value = theirs.json().await.unwrap();
    assert_ne!(theirs["id"], mine["id"]);
    // And neither sees the other's order.
    let peek = app
        .get_as(
            &app.merchant_key,
            &format!("/v1/orders/{}", theirs["id"].as_str().unwrap()),
        )
        .await;
    assert_problem(peek, 404, "not_found").await;
}

#[tokio::test]
async fn missing_or_invalid_key_is_400_and_writes_nothing() {
    let app = TestApp::spawn().await;
    let body = Some(order_body().to_string());
    let missing = app
        .post_keyed(&app.merchant_key, "/v1/orders", None, body.clone())
        .await;
    assert_problem(missing, 400, "idempotency_key_missing").await;
    let long = "k".repeat(256);
    for bad in ["has space", "\"unterminated", long.as_str()] {
        let response = app
            .post_keyed(&app.merchant_key, "/v1/orders", Some(bad), body.clone())
            .await;
        assert_problem(response, 400, "idempotency_key_invalid").await;
    }
    assert_eq!(app.count_rows().await, (0, 0));
}

#[tokio::test]
async fn validation_failure_is_not_recorded_so_a_corrected_retry_succeeds() {
    let app = TestApp::spawn().await;
    let bad = json!({"amount": 0, "currency": "xyz", "metadata": {"k": "v".repeat(501)}});
    let response = app.create_order("fix-me", &bad).await;
    let problem = assert_problem(response, 422, "validation_failed").await;
    let fields: Vec<&str> = problem["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["field"].as_str().unwrap())
        .collect();
    assert_eq!(fields, ["/amount", "/currency", "/metadata/k"]);
    assert_eq!(app.count_rows().await, (0, 0));

    let fixed = app.create_order("fix-me", &order_body()).await;
    assert_eq!(fixed.status(), 201);
    assert!(fixed.headers().get("idempotent-replayed").is_none());
}

#[tokio::test]
async fn malformed_json_unknown_fields_and_wrong_content_type_are_400() {
    let app = TestApp::spawn().await;
    let broken = app
        .post_keyed(
            &app.merchant_key,
            "/v1/orders",
            Some("b"),
            Some("{\"amount\":".into()),
        )
        .await;
    assert_problem(broken, 400, "invalid_request").await;
    let unknown = app
        .create_order(
            "b",
            &json!({"amount": 5, "currency": "eur", "colour": "red"}),
        )
        .await;
    let problem = assert_problem(unknown, 400, "invalid_request").await;
    assert!(problem["detail"].as_str().unwrap().contains("colour"));
    let text = app
        .client
        .post(app.url("/v1/orders"))
        .bearer_auth(&app.merchant_key)
        .header("Idempotency-Key", "b")
        .header("content-type", "text/plain")
        .body(order_body().to_string())
        .send()
        .await
        .unwrap();
    assert_problem(text, 400, "invalid_request").await;
    assert_eq!(app.count_rows().await, (0, 0));
}

#[tokio::test]
async fn card_numbers_anywhere_are_refused_and_not_stored() {
    let app = TestApp::spawn().await;
    let body =
        json!({"amount": 500, "currency": "usd", "metadata": {"note": "card 4242 4242 4242 4242"}});
    let response = app.create_order("card", &body).await;
    let problem = assert_problem(response, 422, "raw_card_data_forbidden").await;
    assert_eq!(problem["field"], "/metadata/note");
    assert!(
        !problem.to_string().contains("4242"),
        "the number is not echoed back"
    );
    assert_eq!(app.count_rows().await, (0, 0));
}

#[tokio::test]
async fn merchant_reference_is_unique_for_ever_even_after_its_key_is_reaped() {
    let app = TestApp::spawn_with(|settings| {
        settings.idempotency.order_ttl = Duration::from_secs(1);
    })
    .await;
    let body = json!({"amount": 100, "currency": "eur", "merchant_reference": "inv-77"});
    let first: Value = app.create_order("ref-1", &body).await.json().await.unwrap();
    let dup = app.create_order("ref-2", &body).await;
    let problem = assert_problem(dup, 409, "merchant_reference_exists").await;
    assert_eq!(problem["order_id"], first["id"]);
    // The refusal was not recorded: only ref-1 exists.
    assert_eq!(app.count_rows().await, (1, 1));

    // Let every key expire and reap: the reference still stops a duplicate.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let metrics = payorch::idempotency::IdempotencyMetrics::new().unwrap();
    let pool = payorch::db::build_pool(&app.db.url, &Default::default()).unwrap();
    let reaped = payorch::idempotency::reaper::reap_once(&pool, &Default::default(), &metrics)
        .await
        .unwrap();
    assert_eq!(reaped.deleted, 1);
    assert_eq!(app.count_rows().await, (1, 0));
    let again = app.create_order("ref-1", &body).await;
    let problem = assert_problem(again, 409, "merchant_reference_exists").await;
    assert_eq!(problem["order_id"], first["id"]);
}

#[tokio::test]
async fn reaper_deletes_in_batches_and_spares_live_and_unresolved_keys() {
    let app = TestApp::spawn().await;
    for i in 0..7 {
        let response = app.create_order(&format!("reap-{i}"), &order_body()).await;
        assert_eq!(response.status(), 201);
    }
    let mut conn = app.db.connect().await;
    // Five expired (one of them unresolved, as a pending payment's would be), two live.
    diesel::update(idempotency_keys::table.filter(idempotency_keys::key.lt("reap-5")))
        .set(idempotency_keys::expires_at.eq(chrono::Utc::now() - chrono::Duration::minutes(1)))
        .execute(&mut conn)
        .await
        .unwrap();
    diesel::update(idempotency_keys::table.filter(idempotency_keys::key.eq("reap-0")))
        .set(idempotency_keys::unresolved.eq(true))
        .execute(&mut conn)
        .await
        .unwrap();
    let metrics = payorch::idempotency::IdempotencyMetrics::new().unwrap();
    let pool = payorch::db::build_pool(&app.db.url, &Default::default()).unwrap();
    let settings = payorch::idempotency::reaper::ReaperSettings {
        interval: Duration::from_secs(60),
        batch: 2,
        ..Default::default()
    };
    let reaped = payorch::idempotency::reaper::reap_once(&pool, &settings, &metrics)
        .await
        .unwrap();
    assert_eq!(reaped.deleted, 4);
    let left: Vec<String> = idempotency_keys::table
        .select(idempotency_keys::key)
        .order(idempotency_keys::key)
        .load(&mut conn)
        .await
        .unwrap();
    assert_eq!(left, ["reap-0", "reap-5", "reap-6"]);
}

#[tokio::test]
async fn cancel_moves_awaiting_payment_to_canceled_once() {
    let app = TestApp::spawn().await;
    let order: Value = app
        .create_order("o", &order_body())
        .await
        .json()
        .await
        .unwrap();
    let path = format!("/v1/orders/{}/cancel", order["id"].as_str().unwrap());
    let canceled = app
        .post_keyed(&app.merchant_key, &path, Some("c"), None)
        .await;
    assert_eq!(canceled.status(), 200);
    let replay = app
        .post_keyed(&app.merchant_key, &path, Some("c"), None)
        .await;
    assert_eq!(replay.status(), 200);
    assert_eq!(replay.headers()["idempotent-replayed"], "true");
    let again = app
        .post_keyed(&app.merchant_key, &path, Some("c-2"), None)
        .await;
    let problem = assert_problem(again, 409, "order_not_cancelable").await;
    assert_eq!(problem["order_status"], "canceled");
    let support = app
        .post_keyed(&app.support_key, &path, Some("c-3"), None)
        .await;
    assert_problem(support, 403, "forbidden").await;
    let missing = app
        .post_keyed(
            &app.merchant_key,
            "/v1/orders/ord_00000000000000000000000000000000/cancel",
            Some("c-4"),
            None,
        )
        .await;
    assert_problem(missing, 404, "not_found").await;
}

#[tokio::test]
async fn the_database_refuses_an_order_moving_backwards() {
    let app = TestApp::spawn().await;
    let order: Value = app
        .create_order("db", &order_body())
        .await
        .json()
        .await
        .unwrap();
    let path = format!("/v1/orders/{}/cancel", order["id"].as_str().unwrap());
    app.post_keyed(&app.merchant_key, &path, Some("c"), None)
        .await;
    let mut conn = app.db.connect().await;
    let result = diesel::update(orders::table)
        .set(orders::status.eq("awaiting_payment"))
        .execute(&mut conn)
        .await;
    match result {
        Err(diesel::result::Error::DatabaseError(_, info)) => assert_eq!(
            info.constraint_name(),
            Some("orders_status_transition"),
            "a canceled order stays canceled"
        ),
        other => panic!("a canceled order was moved: {other:?}"),
    }
}

#[tokio::test]
async fn support_reads_any_order_but_cannot_create() {
    let app = TestApp::spawn().await;
    let order: Value = app
        .create_order("s", &order_body())
        .await
        .json()
        .await
        .unwrap();
    let read = app
        .get_as(
            &app.support_key,
            &format!("/v1/orders/{}", order["id"].as_str().unwrap()),
        )
        .await;
    assert_eq!(read.status(), 200);
    let create = app
        .post_keyed(
            &app.support_key,
            "/v1/orders",
            Some("s2"),
            Some(order_body().to_string()),
        )
        .await;
    assert_problem(create, 403, "forbidden").await;
}

#[tokio::test]
async fn new_keys_past_the_per_minute_cap_are_429() {
    let app =
        TestApp::spawn_with(|settings| settings.idempotency.max_new_keys_per_minute = 3).await;
    for i in 0..3 {
        assert_eq!(
            app.create_order(&format!("r{i}"), &order_body())
                .await
                .status(),
            201
        );
    }
    let limited = app.create_order("r3", &order_body()).await;
    assert!(limited.headers().contains_key("retry-after"));
    assert_problem(limited, 429, "rate_limited").await;
    // Replays open no new key and still answer.
    assert_eq!(app.create_order("r0", &order_body()).await.status(), 201);
    assert_eq!(app.count_rows().await, (3, 3));
}

#[tokio::test]
async fn replicas_share_the_per_minute_cap() {
    // The test settings sync the replicas' counts every 100 ms.
    let app =
        TestApp::spawn_with(|settings| settings.idempotency.max_new_keys_per_minute = 3).await;
    let (replica, handle) = app.replica().await;
    let on_replica = |key: &'static str| {
        app.client
            .post(format!("{replica}/v1/orders"))
            .bearer_auth(&app.merchant_key)
            .header("Idempotency-Key", key)
            .json(&order_body())
            .send()
    };
    for key in ["a0", "a1"] {
        assert_eq!(app.create_order(key, &order_body()).await.status(), 201);
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    // The replica has opened none itself, but knows of the first two.
    assert_eq!(on_replica("b0").await.unwrap().status(), 201);
    assert_problem(on_replica("b1").await.unwrap(), 429, "rate_limited").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_problem(
        app.create_order("a2", &order_body()).await,
        429,
        "rate_limited",
    )
    .await;
    // A replay on either replica still answers: it opens no key.
    assert_eq!(on_replica("a0").await.unwrap().status(), 201);
    assert_eq!(app.count_rows().await, (3, 3));
    handle.stop(false).await;
}

#[tokio::test]
async fn metrics_count_idempotency_outcomes() {
    let app = TestApp::spawn().await;
    app.create_order("m", &order_body()).await;
    app.create_order("m", &order_body()).await;
    app.create_order("m", &json!({"amount": 1, "currency": "eur"}))
        .await;
    let text = app.get("/metrics").await.text().await.unwrap();
    for outcome in ["created", "replayed", "reused_mismatch"] {
        let line = format!(
            "payorch_idempotency_requests_total{{outcome=\"{outcome}\",route=\"/v1/orders\"}} 1"
        );
        assert!(text.contains(&line), "{line} missing in\n{text}");
    }
}

/// The problem of a body whose amount is refused, and the field it names.
async fn refused_amount(response: reqwest::Response) -> Vec<String> {
    let problem = assert_problem(response, 422, "validation_failed").await;
    problem["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["field"].as_str().unwrap().to_owned())
        .collect()
}

/// The OpenAPI document gives `amount` JSON Schema's `integer`, which is any number with no
/// fraction: `23295.0` and `2.3295e4` are the amount 23295 for an order and for a checkout
/// alike. A number with a fraction, or past what the server holds, is a refused amount (`422`
/// naming `/amount`), not an unreadable body.
#[tokio::test]
async fn an_amount_is_any_json_number_without_a_fraction() {
    let app = TestApp::spawn().await;
    for (n, written) in ["23295.0", "2.3295e4", "232950e-1"].into_iter().enumerate() {
        let order = app
            .post_keyed(
                &app.merchant_key,
                "/v1/orders",
                Some(&format!("order-{n}")),
                Some(format!(r#"{{"amount": {written}, "currency": "eur"}}"#)),
            )
            .await;
        assert_eq!(order.status(), 201, "{written}");
        let order: Value = order.json().await.unwrap();
        assert_eq!(order["amount"], 23295, "{written}");

        let checkout = app
            .post_keyed(
                &app.merchant_key,
                "/v1/checkout",
                Some(&format!("checkout-{n}")),
                Some(format!(
                    r#"{{"amount": {written}, "currency": "eur", "payment_method": "pm_card_visa"}}"#
                )),
            )
            .await;
        assert_eq!(checkout.status(), 201, "{written}");
        let checkout: Value = checkout.json().await.unwrap();
        assert_eq!(checkout["order"]["amount"], 23295, "{written}");
        assert_eq!(checkout["payment"]["amount"], 23295, "{written}");
        assert_eq!(checkout["payment"]["status"], "succeeded", "{written}");
    }
    assert_eq!(app.charges(), 3);

    for written in ["23295.5", "0.5", "1e13", "1e300", "18446744073709551616"] {
        let order = app
            .post_keyed(
                &app.merchant_key,
                "/v1/orders",
                Some("refused"),
                Some(format!(r#"{{"amount": {written}, "currency": "eur"}}"#)),
            )
            .await;
        assert_eq!(refused_amount(order).await, ["/amount"], "{written}");
        let checkout = app
            .post_keyed(
                &app.merchant_key,
                "/v1/checkout",
                Some("refused"),
                Some(format!(
                    r#"{{"amount": {written}, "currency": "eur", "payment_method": "pm_card_visa"}}"#
                )),
            )
            .await;
        assert_eq!(refused_amount(checkout).await, ["/amount"], "{written}");
    }
    assert_eq!(app.count_rows().await, (6, 6));
    assert_eq!(app.charges(), 3);
}

impl TestApp {
    /// `POST /v1/orders/{id}` with `body` under `key`, as `secret`.
    async fn update_order(
        &self,
        secret: &str,
        id: &str,
        key: &str,
        body: &Value,
    ) -> reqwest::Response {
        self.post_keyed(
            secret,
            &format!("/v1/orders/{id}"),
            Some(key),
            Some(body.to_string()),
        )
        .await
    }
}

/// Stripe's update semantics: keys given are set, a key given as "" is removed, the others
/// are kept; the same key and body replay the answer, the same key with another body is 422.
#[tokio::test]
async fn updating_metadata_sets_removes_and_keeps_keys_once_per_key() {
    let app = TestApp::spawn().await;
    let order: Value = app
        .create_order("o", &order_body())
        .await
        .json()
        .await
        .unwrap();
    let id = order["id"].as_str().unwrap();
    let change = json!({"metadata": {"color": "", "gift": "yes", "sku": "mug-2"}});
    let updated = app.update_order(&app.merchant_key, id, "u", &change).await;
    assert_eq!(updated.status(), 200);
    let updated: Value = updated.json().await.unwrap();
    assert_eq!(updated["id"], order["id"]);
    assert_eq!(updated["metadata"], json!({"gift": "yes", "sku": "mug-2"}));
    assert_eq!(updated["amount"], 1999);

    // Replayed: the order as it is now, after a later change under another key.
    let later = json!({"metadata": {"wrapped": "true"}});
    let later = app.update_order(&app.merchant_key, id, "u-2", &later).await;
    assert_eq!(later.status(), 200);
    let replay = app.update_order(&app.merchant_key, id, "u", &change).await;
    assert_eq!(replay.status(), 200);
    assert_eq!(replay.headers()["idempotent-replayed"], "true");
    let replay: Value = replay.json().await.unwrap();
    assert_eq!(
        replay["metadata"],
        json!({"gift": "yes", "sku": "mug-2", "wrapped": "true"}),
        "the change was made once, and the replay shows the order as it is now"
    );

    let other_body = json!({"metadata": {"gift": "no"}});
    let reused = app
        .update_order(&app.merchant_key, id, "u", &other_body)
        .await;
    assert_problem(reused, 422, "idempotency_key_reused").await;
    let (_, keys) = app.count_rows().await;
    assert_eq!(keys, 3, "the order's key and the two changes'");
}

/// Metadata is the merchant's own notes: it changes in any status, a canceled order's too.
#[tokio::test]
async fn a_canceled_orders_metadata_can_change() {
    let app = TestApp::spawn().await;
    let order: Value = app
        .create_order("o", &order_body())
        .await
        .json()
        .await
        .unwrap();
    let id = order["id"].as_str().unwrap();
    let cancel = app
        .post_keyed(
            &app.merchant_key,
            &format!("/v1/orders/{id}/cancel"),
            Some("c"),
            None,
        )
        .await;
    assert_eq!(cancel.status(), 200);
    let change = json!({"metadata": {"why": "customer asked"}});
    let updated = app.update_order(&app.merchant_key, id, "u", &change).await;
    assert_eq!(updated.status(), 200);
    let updated: Value = updated.json().await.unwrap();
    assert_eq!(updated["status"], "canceled");
    assert_eq!(updated["metadata"]["why"], "customer asked");
}

/// The merged map keeps the order's rules (at most 50 keys, keys ≤ 40 characters, values ≤
/// 500): `validation_failed`, with nothing recorded under the key.
#[tokio::test]
async fn a_metadata_change_that_breaks_the_rules_is_validation_failed() {
    let app = TestApp::spawn().await;
    let order: Value = app
        .create_order("o", &order_body())
        .await
        .json()
        .await
        .unwrap();
    let id = order["id"].as_str().unwrap();
    let long_key = "k".repeat(41);
    let problem = assert_problem(
        app.update_order(
            &app.merchant_key,
            id,
            "bad-1",
            &json!({"metadata": {long_key.clone(): "v", "note": "x".repeat(501)}}),
        )
        .await,
        422,
        "validation_failed",
    )
    .await;
    let fields: Vec<_> = problem["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["field"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        fields,
        [format!("/metadata/{long_key}"), "/metadata/note".into()]
    );
    assert_problem(
        app.update_order(&app.merchant_key, id, "bad-2", &json!({}))
            .await,
        422,
        "validation_failed",
    )
    .await;
    // Two keys are there already: 49 new ones make 51, and removing one of the old makes 50.
    let mut many: serde_json::Map<String, Value> =
        (0..49).map(|i| (format!("k{i}"), json!("v"))).collect();
    let too_many = app
        .update_order(
            &app.merchant_key,
            id,
            "bad-3",
            &json!({"metadata": many.clone()}),
        )
        .await;
    let problem = assert_problem(too_many, 422, "validation_failed").await;
    assert_eq!(problem["errors"][0]["field"], "/metadata");
    let (_, keys) = app.count_rows().await;
    assert_eq!(keys, 1, "nothing recorded under a refused change's key");
    many.insert("color".into(), json!(""));
    let fits = app
        .update_order(&app.merchant_key, id, "bad-3", &json!({"metadata": many}))
        .await;
    assert_eq!(
        fits.status(),
        200,
        "the key is free for the corrected change"
    );
    let fits: Value = fits.json().await.unwrap();
    assert_eq!(fits["metadata"].as_object().unwrap().len(), 50);
}

/// Another merchant's order does not exist to this one, and a support key may not write.
#[tokio::test]
async fn another_merchants_order_is_404_and_a_support_key_is_403() {
    let app = TestApp::spawn().await;
    let order: Value = app
        .create_order("o", &order_body())
        .await
        .json()
        .await
        .unwrap();
    let id = order["id"].as_str().unwrap();
    let change = json!({"metadata": {"gift": "yes"}});
    let (_, other_key) = app.other_merchant().await;
    assert_problem(
        app.update_order(&other_key, id, "u", &change).await,
        404,
        "not_found",
    )
    .await;
    assert_problem(
        app.update_order(&app.support_key, id, "u", &change).await,
        403,
        "forbidden",
    )
    .await;
    assert_problem(
        app.update_order(
            &app.merchant_key,
            "ord_00000000000000000000000000000000",
            "u",
            &change,
        )
        .await,
        404,
        "not_found",
    )
    .await;
    let shown: Value = app
        .get_as(&app.merchant_key, &format!("/v1/orders/{id}"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(shown["metadata"], order["metadata"], "unchanged");
}
