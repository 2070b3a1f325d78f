//! `/v1/support/…`: search by every filter with keyset pagination, a payment's whole story,
//! reconcile now, what needs a human, and who may use them.

use std::collections::HashSet;
use std::time::Duration;

use futures_util::future::join_all;
use serde_json::{json, Value};

use crate::helpers::{assert_problem, TestApp};
use crate::payments::Route;

/// An app whose reconciler sleeps and whose sandbox sends no webhooks, so only a support
/// action finishes an unknown outcome.
async fn app_without_reconciler() -> TestApp {
    let app = TestApp::spawn_config(|config| {
        config.settings.reconciler.interval = Duration::from_secs(3600);
        config.settings.reconciler.alert_after = Duration::ZERO;
    })
    .await;
    app.sandbox.set_webhook_url(None);
    app
}

impl TestApp {
    pub async fn support_get(&self, path: &str) -> reqwest::Response {
        self.get_as(&self.support_key, path).await
    }

    /// Every page of a search, `limit` at a time: the ids in the order served.
    async fn search_all(&self, query: &str, limit: usize) -> Vec<String> {
        let mut ids = Vec::new();
        let mut after: Option<String> = None;
        for _ in 0..1000 {
            let cursor = after
                .as_deref()
                .map(|id| format!("&starting_after={id}"))
                .unwrap_or_default();
            let page: Value = self
                .support_get(&format!(
                    "/v1/support/payments?limit={limit}{query}{cursor}"
                ))
                .await
                .json()
                .await
                .unwrap();
            let data = page["data"].as_array().expect("a list");
            ids.extend(data.iter().map(|p| p["id"].as_str().unwrap().to_string()));
            if page["has_more"] != true {
                return ids;
            }
            after = ids.last().cloned();
        }
        panic!("more than 1000 pages");
    }

    async fn search(&self, query: &str) -> Vec<String> {
        self.search_all(query, 100).await
    }

    /// The payment's support story (`GET /v1/support/payments/{id}`), which must be there.
    pub async fn story(&self, id: &str) -> Value {
        let response = self
            .support_get(&format!("/v1/support/payments/{id}"))
            .await;
        assert_eq!(response.status(), 200);
        response.json().await.unwrap()
    }

    async fn reconcile(&self, id: &str) -> Value {
        let response = self
            .post_keyed(
                &self.support_key,
                &format!("/v1/support/payments/{id}/reconcile"),
                None,
                None,
            )
            .await;
        let status = response.status();
        let body: Value = response.json().await.unwrap();
        assert_eq!(status, 200, "{body}");
        body
    }
}

/// A story's timeline as (status reached, source) pairs.
fn steps(story: &Value) -> Vec<(String, String)> {
    story["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["to"].as_str().unwrap().to_string(),
                t["source"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[tokio::test]
async fn only_support_keys_reach_support_routes_and_support_keys_cannot_write() {
    let app = TestApp::spawn().await;
    let (_, paid) = app.pay(Route::Checkout, "roles", "pm_card_visa").await;
    let id = paid["id"].as_str().unwrap();
    for path in [
        "/v1/support/payments".to_string(),
        format!("/v1/support/payments/{id}"),
        "/v1/support/needs-a-human".to_string(),
    ] {
        let response = app.get_as(&app.merchant_key, &path).await;
        assert_problem(response, 403, "forbidden").await;
    }
    let response = app
        .post_keyed(
            &app.merchant_key,
            &format!("/v1/support/payments/{id}/reconcile"),
            None,
            None,
        )
        .await;
    assert_problem(response, 403, "forbidden").await;

    let order = paid["order_id"].as_str().unwrap();
    let writes = [
        (
            "/v1/orders".to_string(),
            json!({"amount": 100, "currency": "usd"}),
        ),
        (
            "/v1/checkout".to_string(),
            json!({"amount": 100, "currency": "usd", "payment_method": "pm_card_visa"}),
        ),
        (
            format!("/v1/orders/{order}/payments"),
            json!({"payment_method": "pm_card_visa"}),
        ),
        (format!("/v1/orders/{order}/cancel"), json!({})),
    ];
    for (path, body) in writes {
        let response = app
            .post_keyed(
                &app.support_key,
                &path,
                Some("support-write"),
                Some(body.to_string()),
            )
            .await;
        assert_problem(response, 403, "forbidden").await;
    }
    assert_eq!(app.db.count("orders").await, 1);
}

#[tokio::test]
async fn every_filter_finds_exactly_its_payments() {
    let app = TestApp::spawn().await;
    let before = chrono::Utc::now();
    let reference_body = json!({
        "amount": 700, "currency": "eur", "merchant_reference": "cart-42",
        "payment_method": "pm_card_visa"
    });
    let with_reference: Value = app
        .checkout("ref-key", &reference_body)
        .await
        .json()
        .await
        .unwrap();
    let with_reference = &with_reference["payment"];
    let (_, paid) = app.pay(Route::Checkout, "paid-key", "pm_card_visa").await;
    let (_, declined) = app
        .pay(
            Route::OrderPayment,
            "declined-key",
            "pm_card_chargeDeclined",
        )
        .await;
    let (other, other_key) = app.other_merchant().await;
    let other_paid: Value = app
        .post_keyed(
            &other_key,
            "/v1/checkout",
            Some("paid-key"),
            Some(
                json!({"amount": 100, "currency": "usd", "payment_method": "pm_card_visa"})
                    .to_string(),
            ),
        )
        .await
        .json()
        .await
        .unwrap();
    let other_paid = &other_paid["payment"];
    let after = chrono::Utc::now();
    let id = |p: &Value| p["id"].as_str().unwrap().to_string();

    let mine = format!("&merchant_id={}", app.merchant_id);
    assert_eq!(
        app.search(&mine).await,
        [id(&declined), id(&paid), id(with_reference)]
    );
    assert_eq!(
        app.search(&format!("&merchant_id={other}")).await,
        [id(other_paid)]
    );
    assert_eq!(
        app.search(&format!(
            "&order_id={}",
            declined["order_id"].as_str().unwrap()
        ))
        .await,
        [id(&declined)]
    );
    assert_eq!(
        app.search(&format!("{mine}&merchant_reference=cart-42"))
            .await,
        [id(with_reference)]
    );
    assert_eq!(app.search("&status=failed").await, [id(&declined)]);
    assert_eq!(
        app.search(&format!("{mine}&status=succeeded")).await,
        [id(&paid), id(with_reference)]
    );
    // The same key string belongs to two merchants: both are found, or one with its merchant.
    assert_eq!(
        app.search("&idempotency_key=paid-key").await,
        [id(other_paid), id(&paid)]
    );
    assert_eq!(
        app.search(&format!("{mine}&idempotency_key=paid-key"))
            .await,
        [id(&paid)]
    );
    assert_eq!(
        app.search(&format!(
            "&provider_payment_id={}",
            paid["provider_payment_id"].as_str().unwrap()
        ))
        .await,
        [id(&paid)]
    );
    let time = |t: chrono::DateTime<chrono::Utc>| {
        t.to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
            .replace('+', "%2B")
    };
    assert_eq!(
        app.search(&format!(
            "&created_from={}&created_to={}",
            time(before),
            time(after)
        ))
        .await
        .len(),
        4
    );
    assert!(app
        .search(&format!("&created_from={}", time(after)))
        .await
        .is_empty());
    assert!(app
        .search(&format!("&created_to={}", time(before)))
        .await
        .is_empty());
    assert!(app.search("&status=pending").await.is_empty());
}

#[tokio::test]
async fn bad_search_parameters_are_each_named() {
    let app = TestApp::spawn().await;
    let response = app
        .support_get(
            "/v1/support/payments?status=lost&limit=0&created_from=yesterday\
             &merchant_reference=x&starting_after=nope",
        )
        .await;
    let problem = assert_problem(response, 422, "validation_failed").await;
    let fields: HashSet<&str> = problem["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["field"].as_str().unwrap())
        .collect();
    assert_eq!(
        fields,
        HashSet::from([
            "status",
            "limit",
            "created_from",
            "merchant_reference",
            "starting_after"
        ])
    );
    let response = app.support_get("/v1/support/payments?colour=red").await;
    assert_problem(response, 400, "invalid_request").await;
}

/// Pages are cut at an attempt id, newest first: attempts made while a client pages through
/// are newer than every cursor, so no page repeats or skips one that existed when it began.
#[tokio::test]
async fn pages_have_no_duplicates_or_gaps_while_payments_are_made() {
    let app = TestApp::spawn().await;
    let existing: Vec<String> = join_all((0..25).map(|n| {
        let app = &app;
        async move {
            let (_, paid) = app
                .pay(Route::Checkout, &format!("page-{n}"), "pm_card_visa")
                .await;
            paid["id"].as_str().unwrap().to_string()
        }
    }))
    .await;
    let mine = format!("&merchant_id={}", app.merchant_id);
    let paging = app.search_all(&mine, 4);
    let more = join_all((0..10).map(|n| {
        let app = &app;
        async move {
            app.pay(Route::Checkout, &format!("more-{n}"), "pm_card_visa")
                .await
        }
    }));
    let (seen, _) = tokio::join!(paging, more);
    let unique: HashSet<&String> = seen.iter().collect();
    assert_eq!(
        unique.len(),
        seen.len(),
        "a payment was served twice: {seen:?}"
    );
    for id in &existing {
        assert!(unique.contains(id), "{id} was skipped");
    }
    let mut newest_first = seen.clone();
    newest_first.sort_by(|a, b| b.cmp(a));
    assert_eq!(seen, newest_first);
}

/// A lost response leaves the attempt pending; support presses reconcile twice at once; the
/// attempt succeeds once, and its story shows every step.
#[tokio::test]
async fn reconcile_pressed_twice_at_once_tells_one_story() {
    let app = app_without_reconciler().await;
    let (status, pending) = app
        .pay(Route::Checkout, "lost", "pm_sandbox_lost_response")
        .await;
    assert_eq!(status, 201);
    assert_eq!(pending["status"], "pending");
    let id = pending["id"].as_str().unwrap().to_string();

    let attention: Value = app
        .support_get("/v1/support/needs-a-human")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(attention["stuck"][0]["id"], id.as_str(), "{attention}");

    let (a, b) = tokio::join!(app.reconcile(&id), app.reconcile(&id));
    assert_eq!(a["status"], "succeeded", "{a}");
    assert_eq!(b["status"], "succeeded", "{b}");
    assert_eq!(app.charges_for(&id), 1);

    let story = app.story(&id).await;
    assert_eq!(story["payment"]["status"], "succeeded");
    assert_eq!(story["order"]["status"], "paid");
    let moves = steps(&story);
    assert_eq!(
        moves,
        [
            ("created".to_string(), "api".to_string()),
            ("pending".to_string(), "provider_response".to_string()),
            ("succeeded".to_string(), "support".to_string()),
        ],
        "{story}"
    );
    let calls = story["provider_calls"].as_array().unwrap();
    assert_eq!(calls[0]["source"], "api");
    assert_eq!(calls[0]["outcome"], "unknown");
    let support_calls: Vec<&Value> = calls.iter().filter(|c| c["source"] == "support").collect();
    assert!(
        (1..=2).contains(&support_calls.len()),
        "one check or two harmless ones: {calls:?}"
    );
    for call in support_calls {
        assert!(call["detail"]
            .as_str()
            .unwrap()
            .starts_with("asked by support key"));
    }
    assert_eq!(story["idempotency_key_name"], "lost");
    assert_eq!(story["idempotency_key"]["state"], "completed");
    assert_eq!(story["idempotency_key"]["response_status"], 201);
    assert!(story["webhook_events"].is_array());

    let attention: Value = app
        .support_get("/v1/support/needs-a-human")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(attention["stuck"], json!([]), "{attention}");
}

#[tokio::test]
async fn a_final_payment_is_answered_as_it_is_and_unknown_ids_are_404() {
    let app = TestApp::spawn().await;
    let (_, paid) = app.pay(Route::Checkout, "final", "pm_card_visa").await;
    let id = paid["id"].as_str().unwrap();
    let calls = app.story(id).await["provider_calls"]
        .as_array()
        .unwrap()
        .len();
    assert_eq!(app.reconcile(id).await["status"], "succeeded");
    assert_eq!(
        app.story(id).await["provider_calls"]
            .as_array()
            .unwrap()
            .len(),
        calls,
        "a final attempt needs no call"
    );
    let missing = "pay_0190f1c2-7a3b-7c4d-8e5f-0123456789ab";
    let response = app
        .support_get(&format!("/v1/support/payments/{missing}"))
        .await;
    assert_problem(response, 404, "not_found").await;
    let response = app
        .post_keyed(
            &app.support_key,
            &format!("/v1/support/payments/{missing}/reconcile"),
            None,
            None,
        )
        .await;
    assert_problem(response, 404, "not_found").await;
}

/// The story of a lost response that the reconciler finished on its own: every step, from
/// the request that never heard back to the check that found the charge.
#[tokio::test]
async fn the_story_of_a_lost_response_the_reconciler_finished_is_complete() {
    let app = TestApp::spawn().await;
    app.sandbox.set_webhook_url(None);
    let (_, pending) = app
        .pay(Route::Checkout, "lost-story", "pm_sandbox_lost_response")
        .await;
    assert_eq!(pending["status"], "pending");
    let id = pending["id"].as_str().unwrap().to_string();
    let finished = crate::helpers::eventually(Duration::from_secs(10), || async {
        app.story(&id).await["payment"]["status"] == "succeeded"
    })
    .await;
    assert!(finished, "the reconciler finished it");
    let story = app.story(&id).await;
    let moves = steps(&story);
    assert_eq!(
        moves,
        [
            ("created".to_string(), "api".to_string()),
            ("pending".to_string(), "provider_response".to_string()),
            ("succeeded".to_string(), "reconciler".to_string()),
        ],
        "{story}"
    );
    let calls: Vec<(String, String, String)> = story["provider_calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["operation"].as_str().unwrap().to_string(),
                c["source"].as_str().unwrap().to_string(),
                c["outcome"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        calls,
        [
            (
                "create".to_string(),
                "api".to_string(),
                "unknown".to_string()
            ),
            // Inside the key window the reconciler resends under the attempt's own key.
            (
                "create".to_string(),
                "reconciler".to_string(),
                "succeeded".to_string()
            ),
        ],
        "{story}"
    );
    assert_eq!(story["order"]["status"], "paid");
    assert_eq!(story["idempotency_key"]["state"], "completed");
    assert_eq!(story["idempotency_key"]["unresolved"], false);
    assert_eq!(app.charges_for(&id), 1);
}

#[tokio::test]
async fn a_charge_of_a_provider_no_longer_configured_is_found_by_its_id() {
    use diesel::sql_types::Uuid as SqlUuid;
    use diesel_async::RunQueryDsl;

    let app = TestApp::spawn().await;
    // A payment made through `retired_psp`, a provider this replica's configuration no longer
    // names, written as the payment flow writes it (the triggers move its order along).
    let (order, attempt) = (uuid::Uuid::now_v7(), uuid::Uuid::now_v7());
    let mut conn = app.db.connect().await;
    for statement in [
        "INSERT INTO orders (merchant_id, id, amount, currency) VALUES ($1, $2, 1500, 'eur')",
        "INSERT INTO payment_attempts (merchant_id, order_id, id, status, amount, currency, \
             payment_method, provider, provider_idempotency_key, next_check_at) \
         VALUES ($1, $2, $3, 'created', 1500, 'eur', 'pm_card_visa', 'retired_psp', \
             'payorch_retired_1', now())",
        "UPDATE payment_attempts SET status = 'succeeded', provider_payment_id = 'ch_retired_1' \
         WHERE merchant_id = $1 AND order_id = $2 AND id = $3",
    ] {
        diesel::sql_query(statement)
            .bind::<SqlUuid, _>(app.merchant_id.0)
            .bind::<SqlUuid, _>(order)
            .bind::<SqlUuid, _>(attempt)
            .execute(&mut conn)
            .await
            .unwrap();
    }

    assert_eq!(
        app.search("&provider_payment_id=ch_retired_1").await,
        [format!("pay_{}", attempt.simple())]
    );
    assert!(app
        .search("&provider_payment_id=ch_never_made")
        .await
        .is_empty());
}
