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
             &merchant_reference=&merchant_name=&starting_after=nope",
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
            "merchant_name",
            "starting_after"
        ])
    );
    // The status's message names every status there is.
    let status = problem["errors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["field"] == "status")
        .unwrap();
    assert_eq!(
        status["message"],
        "must be one of created, pending, authorized, succeeded, failed, canceled"
    );
    let response = app.support_get("/v1/support/payments?colour=red").await;
    assert_problem(response, 400, "invalid_request").await;
}

/// A merchant's order reference finds its payments with or without the merchant named (one
/// order of each merchant may hold it), and part of a merchant's name, in any case, finds
/// that merchant's payments: what support is told on the phone.
#[tokio::test]
async fn a_merchant_reference_and_a_merchant_s_name_find_their_payments() {
    let app = TestApp::spawn().await;
    let body = |reference: &str, method: &str| {
        json!({"amount": 700, "currency": "eur", "merchant_reference": reference,
               "payment_method": method})
    };
    let pay = |key: &'static str, secret: String, body: Value| {
        let app = &app;
        async move {
            let response = app
                .post_keyed(&secret, "/v1/checkout", Some(key), Some(body.to_string()))
                .await;
            assert_eq!(response.status(), 201);
            let answer: Value = response.json().await.unwrap();
            answer["payment"]["id"].as_str().unwrap().to_owned()
        }
    };
    let mine = app.merchant_key.clone();
    let cart = pay("ref-1", mine.clone(), body("cart-42", "pm_card_visa")).await;
    let other_cart = pay("ref-2", mine.clone(), body("cart-43", "pm_card_visa")).await;
    let (other, other_key) = app.other_merchant().await;
    let theirs = pay("ref-1", other_key, body("cart-42", "pm_card_visa")).await;

    assert_eq!(
        app.search("&merchant_reference=cart-42").await,
        [theirs.clone(), cart.clone()]
    );
    assert_eq!(
        app.search(&format!("&merchant_reference=cart-42&merchant_id={other}"))
            .await,
        std::slice::from_ref(&theirs)
    );
    assert_eq!(
        app.search("&merchant_reference=cart-42&merchant_name=test")
            .await,
        std::slice::from_ref(&cart)
    );
    assert!(app.search("&merchant_reference=cart-4").await.is_empty());
    // "Test merchant" and "Other merchant": a part of one name, then of both.
    assert_eq!(
        app.search("&merchant_name=TEST%20Merch").await,
        [other_cart.clone(), cart.clone()]
    );
    assert_eq!(
        app.search("&merchant_name=merchant").await,
        [theirs.clone(), other_cart, cart]
    );
    assert_eq!(
        app.search(&format!(
            "&merchant_name=other&merchant_id={}",
            app.merchant_id
        ))
        .await,
        Vec::<String>::new()
    );
    // LIKE's wildcards are taken as they are.
    assert!(app.search("&merchant_name=%25").await.is_empty());
    assert!(app.search("&merchant_name=_").await.is_empty());
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

impl TestApp {
    /// Pays `method` through `provider` (by routing this merchant to it alone); the attempt.
    pub async fn pay_through(&self, provider: &str, key: &str, method: &str) -> Value {
        self.route_to(&[provider]).await;
        let (status, attempt) = self.pay(Route::Checkout, key, method).await;
        assert_eq!(status, 201, "{attempt}");
        assert_eq!(attempt["provider"], provider, "{attempt}");
        attempt
    }

    /// `GET /v1/support/payments/stats` with `query`, which must answer 200.
    async fn stats(&self, query: &str) -> Value {
        let response = self
            .support_get(&format!("/v1/support/payments/stats{query}"))
            .await;
        let status = response.status();
        let body: Value = response.json().await.unwrap();
        assert_eq!(status, 200, "{body}");
        body
    }
}

/// `(provider, status) → count` of a stats answer's `counts` or `totals` list.
fn counts(list: &Value) -> Vec<(String, String, i64)> {
    list.as_array()
        .expect("a list of counts")
        .iter()
        .map(|c| {
            (
                c["provider"].as_str().unwrap().to_string(),
                c["status"].as_str().unwrap().to_string(),
                c["count"].as_i64().unwrap(),
            )
        })
        .collect()
}

fn count(provider: &str, status: &str, n: i64) -> (String, String, i64) {
    (provider.to_string(), status.to_string(), n)
}

/// What the console opens on: every merchant's latest payments, newest first, a page at a
/// time, narrowed by status and by provider.
#[tokio::test]
async fn the_latest_payments_are_listed_newest_first_by_page_and_by_status_and_provider() {
    let app = TestApp::spawn().await;
    let mut made = Vec::new();
    for (provider, key, method) in [
        ("stripe", "latest-1", "pm_card_visa"),
        ("adyen", "latest-2", "pm_card_visa"),
        ("stripe", "latest-3", "pm_card_chargeDeclined"),
        ("adyen", "latest-4", "pm_card_chargeDeclined"),
        ("stripe", "latest-5", "pm_card_visa"),
    ] {
        made.push(app.pay_through(provider, key, method).await);
    }
    let (_, other_key) = app.other_merchant().await;
    let other: Value = app
        .post_keyed(
            &other_key,
            "/v1/checkout",
            Some("latest-other"),
            Some(
                json!({"amount": 100, "currency": "usd", "payment_method": "pm_card_visa"})
                    .to_string(),
            ),
        )
        .await
        .json()
        .await
        .unwrap();
    made.push(other["payment"].clone());
    let id = |p: &Value| p["id"].as_str().unwrap().to_string();
    let newest_first: Vec<String> = made.iter().rev().map(id).collect();

    assert_eq!(app.search("").await, newest_first);
    assert_eq!(app.search_all("", 2).await, newest_first, "pages of two");
    let first_page: Value = app
        .support_get("/v1/support/payments?limit=4")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(first_page["has_more"], true);
    let second_page: Value = app
        .support_get(&format!(
            "/v1/support/payments?limit=4&starting_after={}",
            first_page["data"][3]["id"].as_str().unwrap()
        ))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(second_page["has_more"], false);
    assert_eq!(
        second_page["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(id)
            .collect::<Vec<_>>(),
        newest_first[4..]
    );

    assert_eq!(
        app.search("&provider=adyen").await,
        [id(&made[3]), id(&made[1])]
    );
    assert_eq!(
        app.search("&status=failed").await,
        [id(&made[3]), id(&made[2])]
    );
    assert_eq!(
        app.search("&status=succeeded&provider=stripe").await,
        [id(&made[5]), id(&made[4]), id(&made[0])]
    );
    assert_eq!(
        app.search_all("&status=succeeded&provider=stripe", 1).await,
        [id(&made[5]), id(&made[4]), id(&made[0])]
    );
    assert!(app.search("&provider=retired_psp").await.is_empty());
}

/// The console's chart: each provider's attempts of the window by status now, in buckets, as
/// payments made through the API left them.
#[tokio::test]
async fn stats_count_the_window_s_payments_by_provider_and_status() {
    use diesel::sql_types::{Timestamptz, Uuid as SqlUuid};
    use diesel_async::RunQueryDsl;

    let app = app_without_reconciler().await;
    for (n, method) in ["pm_card_visa", "pm_card_visa", "pm_card_chargeDeclined"]
        .into_iter()
        .enumerate()
    {
        app.pay_through("stripe", &format!("stats-s{n}"), method)
            .await;
    }
    let lost = app
        .pay_through("stripe", "stats-lost", "pm_sandbox_lost_response")
        .await;
    assert_eq!(lost["status"], "pending");
    for (n, method) in [
        "pm_card_visa",
        "pm_card_chargeDeclined",
        "pm_card_chargeDeclined",
    ]
    .into_iter()
    .enumerate()
    {
        app.pay_through("adyen", &format!("stats-a{n}"), method)
            .await;
    }
    // Outside the hour: made two hours ago (as the payment flow writes an attempt, with an id
    // of its time), through a provider no longer configured.
    let two_hours_ago = chrono::Utc::now() - chrono::Duration::hours(2);
    let old_id = uuid::Uuid::new_v7(uuid::Timestamp::from_unix(
        uuid::NoContext,
        two_hours_ago.timestamp() as u64,
        0,
    ));
    let mut conn = app.db.connect().await;
    let old_order = uuid::Uuid::now_v7();
    diesel::sql_query(
        "INSERT INTO orders (merchant_id, id, amount, currency) VALUES ($1, $2, 1500, 'eur')",
    )
    .bind::<SqlUuid, _>(app.merchant_id.0)
    .bind::<SqlUuid, _>(old_order)
    .execute(&mut conn)
    .await
    .unwrap();
    diesel::sql_query(
        "INSERT INTO payment_attempts (merchant_id, order_id, id, status, amount, currency, \
             payment_method, provider, provider_idempotency_key, next_check_at, created_at) \
         VALUES ($1, $2, $3, 'created', 1500, 'eur', 'pm_card_visa', 'retired_psp', \
             'payorch_retired_old', now(), $4)",
    )
    .bind::<SqlUuid, _>(app.merchant_id.0)
    .bind::<SqlUuid, _>(old_order)
    .bind::<SqlUuid, _>(old_id)
    .bind::<Timestamptz, _>(two_hours_ago)
    .execute(&mut conn)
    .await
    .unwrap();

    let stats = app.stats("").await;
    assert_eq!(stats["object"], "payment_stats");
    assert_eq!(stats["window_seconds"], 3600);
    assert_eq!(stats["bucket_seconds"], 60);
    assert_eq!(stats["providers"], json!(["stripe", "adyen"]), "{stats}");
    let totals = counts(&stats["totals"]);
    assert_eq!(
        totals,
        [
            count("stripe", "pending", 1),
            count("stripe", "succeeded", 2),
            count("stripe", "failed", 1),
            count("adyen", "succeeded", 1),
            count("adyen", "failed", 2),
        ],
        "{stats}"
    );
    let buckets = stats["buckets"].as_array().unwrap();
    assert_eq!(buckets.len(), 60);
    let starts: Vec<chrono::DateTime<chrono::Utc>> = buckets
        .iter()
        .map(|b| b["start"].as_str().unwrap().parse().unwrap())
        .collect();
    assert_eq!(
        stats["from"]
            .as_str()
            .unwrap()
            .parse::<chrono::DateTime<chrono::Utc>>()
            .unwrap(),
        starts[0]
    );
    assert!(starts
        .windows(2)
        .all(|w| w[1] - w[0] == chrono::Duration::minutes(1)));
    assert_eq!(starts[0].timestamp() % 60, 0, "aligned to the minute");
    // Every payment above was made in the last minute or two: in the last buckets, the same
    // as the totals once added up.
    let mut added: Vec<(String, String, i64)> = Vec::new();
    for (n, bucket) in buckets.iter().enumerate() {
        for (provider, status, n_made) in counts(&bucket["counts"]) {
            assert!(n >= 57, "bucket {n} of 60 holds a recent payment: {stats}");
            match added
                .iter_mut()
                .find(|(p, s, _)| *p == provider && *s == status)
            {
                Some(total) => total.2 += n_made,
                None => added.push((provider, status, n_made)),
            }
        }
    }
    added.sort();
    let mut sorted = totals.clone();
    sorted.sort();
    assert_eq!(added, sorted);

    // A three-hour window takes in the old attempt and names its provider after the
    // configured ones; the default width for three hours is five minutes.
    let stats = app.stats("?window=3h").await;
    assert_eq!(stats["bucket_seconds"], 300);
    assert_eq!(stats["buckets"].as_array().unwrap().len(), 36);
    assert_eq!(
        stats["providers"],
        json!(["stripe", "adyen", "retired_psp"])
    );
    assert!(counts(&stats["totals"]).contains(&count("retired_psp", "created", 1)));

    // Support's reconcile moves the pending one: counted as it is now.
    app.reconcile(lost["id"].as_str().unwrap()).await;
    let stats = app.stats("?window=15m&bucket=5m").await;
    assert_eq!(stats["buckets"].as_array().unwrap().len(), 3);
    assert_eq!(
        counts(&stats["totals"])[..2],
        [
            count("stripe", "succeeded", 3),
            count("stripe", "failed", 1)
        ]
    );
}

#[tokio::test]
async fn stats_are_for_support_keys_and_bad_parameters_are_each_named() {
    let app = TestApp::spawn().await;
    app.stats("?window=1h").await;
    let response = app
        .get_as(&app.merchant_key, "/v1/support/payments/stats")
        .await;
    assert_problem(response, 403, "forbidden").await;
    let response = app
        .get_as(&app.merchant_key, "/v1/support/payments/stats?window=lots")
        .await;
    assert_problem(response, 403, "forbidden").await;

    for (query, wanted) in [
        ("window=2d&bucket=7s", vec!["window", "bucket"]),
        ("window=25h", vec!["window"]),
        ("window=0m", vec!["window"]),
        ("window=1h&bucket=7m", vec!["bucket"]),
        ("window=15m&bucket=1h", vec!["bucket"]),
        ("window=-1h&bucket=m", vec!["window", "bucket"]),
        // A unit that is not one byte long: named, not a dropped connection.
        ("window=1%C2%80&bucket=%C2%80", vec!["window", "bucket"]),
    ] {
        let response = app
            .support_get(&format!("/v1/support/payments/stats?{query}"))
            .await;
        let problem = assert_problem(response, 422, "validation_failed").await;
        let fields: Vec<&str> = problem["errors"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["field"].as_str().unwrap())
            .collect();
        assert_eq!(fields, wanted, "{query}: {problem}");
    }
    let response = app
        .support_get("/v1/support/payments/stats?window=1h&provider=stripe")
        .await;
    assert_problem(response, 400, "invalid_request").await;

    let response = app
        .support_get("/v1/support/payments?provider=Not%20A%20Provider&status=lost")
        .await;
    let problem = assert_problem(response, 422, "validation_failed").await;
    let fields: HashSet<&str> = problem["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["field"].as_str().unwrap())
        .collect();
    assert_eq!(fields, HashSet::from(["provider", "status"]));
}
