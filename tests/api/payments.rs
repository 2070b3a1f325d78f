//! Payment attempts over real HTTP, real PostgreSQL and the sandbox provider, whose ledger
//! is the judge of what was charged.

use std::time::Duration;

use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use futures_util::future::join_all;
use serde_json::{json, Value};

use payorch::db::schema::idempotency_keys;

use crate::helpers::{assert_problem, assert_refused_by, TestApp};

/// How a test pays: create-and-pay in one call, or an order first and then its payment.
#[derive(Debug, Clone, Copy)]
pub enum Route {
    Checkout,
    OrderPayment,
}

impl TestApp {
    pub async fn checkout(&self, key: &str, body: &Value) -> reqwest::Response {
        self.post_keyed(
            &self.merchant_key,
            "/v1/checkout",
            Some(key),
            Some(body.to_string()),
        )
        .await
    }

    pub async fn pay_order(&self, order_id: &str, key: &str, method: &str) -> reqwest::Response {
        self.post_keyed(
            &self.merchant_key,
            &format!("/v1/orders/{order_id}/payments"),
            Some(key),
            Some(json!({ "payment_method": method }).to_string()),
        )
        .await
    }

    /// A new order awaiting payment; its id.
    pub async fn new_order(&self) -> String {
        let key = uuid::Uuid::now_v7().to_string();
        let order = self
            .post_keyed(
                &self.merchant_key,
                "/v1/orders",
                Some(&key),
                Some(json!({"amount": 2500, "currency": "usd"}).to_string()),
            )
            .await;
        assert_eq!(order.status(), 201);
        let order: Value = order.json().await.unwrap();
        order["id"].as_str().unwrap().to_string()
    }

    /// Pays `method` by `route` under `key`; the response and the attempt it shows.
    pub async fn pay(&self, route: Route, key: &str, method: &str) -> (u16, Value) {
        let response = match route {
            Route::Checkout => self.checkout(key, &checkout_body(method)).await,
            Route::OrderPayment => {
                let order_id = self.new_order().await;
                self.pay_order(&order_id, key, method).await
            }
        };
        let status = response.status().as_u16();
        let location = response
            .headers()
            .get("location")
            .map(|v| v.to_str().unwrap().to_string());
        let body: Value = response.json().await.unwrap();
        let attempt = match route {
            Route::Checkout => body["payment"].clone(),
            Route::OrderPayment => body,
        };
        if status == 201 {
            assert_eq!(
                location.as_deref(),
                Some(format!("/v1/payments/{}", attempt["id"].as_str().unwrap()).as_str())
            );
        }
        (status, attempt)
    }

    pub async fn payment(&self, id: &str) -> Value {
        let response = self
            .get_as(&self.merchant_key, &format!("/v1/payments/{id}"))
            .await;
        assert_eq!(response.status(), 200);
        response.json().await.unwrap()
    }

    pub async fn order(&self, id: &str) -> Value {
        let response = self
            .get_as(&self.merchant_key, &format!("/v1/orders/{id}"))
            .await;
        assert_eq!(response.status(), 200);
        response.json().await.unwrap()
    }

    /// Waits until the attempt is final; its last state.
    pub async fn settled(&self, id: &str, limit: Duration) -> Value {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let last = self.payment(id).await;
            if last["status"] == "succeeded"
                || last["status"] == "failed"
                || tokio::time::Instant::now() >= deadline
            {
                return last;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub async fn count(&self, table: &str) -> i64 {
        self.db.count(table).await
    }
}

pub fn checkout_body(method: &str) -> Value {
    json!({"amount": 4200, "currency": "eur", "description": "Teapot", "payment_method": method})
}

/// `(payment_method, status in the 201, final status, failure code, charges)`.
const OUTCOMES: [(&str, &str, &str, Option<&str>, usize); 9] = [
    ("pm_card_visa", "succeeded", "succeeded", None, 1),
    ("pm_card_mastercard", "succeeded", "succeeded", None, 1),
    (
        "pm_card_chargeDeclined",
        "failed",
        "failed",
        Some("generic_decline"),
        0,
    ),
    (
        "pm_card_chargeDeclinedInsufficientFunds",
        "failed",
        "failed",
        Some("insufficient_funds"),
        0,
    ),
    ("pm_sandbox_processing", "pending", "succeeded", None, 1),
    ("pm_sandbox_slow", "succeeded", "succeeded", None, 1),
    ("pm_sandbox_lost_response", "pending", "succeeded", None, 1),
    // Nothing charged, and the provider forgets the key: past the window, no record.
    (
        "pm_sandbox_error_before",
        "pending",
        "failed",
        Some("provider_no_record"),
        0,
    ),
    ("pm_sandbox_error_after", "pending", "succeeded", None, 1),
];

#[tokio::test]
async fn every_sandbox_payment_method_ends_in_the_right_status_by_both_routes() {
    let app = TestApp::spawn_config(|config| {
        config.sandbox.slow_ms = 300;
    })
    .await;
    // The reconciler alone finds the truth here; webhooks have their own tests.
    app.sandbox.set_webhook_url(None);
    let cases = OUTCOMES
        .iter()
        .flat_map(|case| [Route::Checkout, Route::OrderPayment].map(|route| (route, *case)));
    let results = join_all(cases.map(|(route, (method, first, last, code, charges))| {
        let app = &app;
        async move {
            let key = format!("{method}-{route:?}");
            let (status, attempt) = app.pay(route, &key, method).await;
            assert_eq!(status, 201, "{method} via {route:?}: {attempt}");
            assert_eq!(
                attempt["status"], first,
                "{method} via {route:?}: {attempt}"
            );
            let id = attempt["id"].as_str().unwrap().to_string();
            let settled = app.settled(&id, Duration::from_secs(20)).await;
            assert_eq!(settled["status"], last, "{method} via {route:?}: {settled}");
            assert_eq!(
                settled["failure_code"].as_str(),
                code,
                "{method}: {settled}"
            );
            let order = app.order(settled["order_id"].as_str().unwrap()).await;
            let order_status = if last == "succeeded" {
                "paid"
            } else {
                "awaiting_payment"
            };
            assert_eq!(order["status"], order_status, "{method} via {route:?}");
            assert_eq!(app.charges_for(&id), charges, "{method} via {route:?}");
            // A late retry of the original key replays the final state.
            let (replayed_status, replayed) = match route {
                Route::Checkout => {
                    let r = app.checkout(&key, &checkout_body(method)).await;
                    assert_eq!(r.headers()["idempotent-replayed"], "true");
                    let status = r.status().as_u16();
                    (status, r.json::<Value>().await.unwrap()["payment"].clone())
                }
                Route::OrderPayment => {
                    let order_id = settled["order_id"].as_str().unwrap();
                    let r = app.pay_order(order_id, &key, method).await;
                    assert_eq!(r.headers()["idempotent-replayed"], "true");
                    (r.status().as_u16(), r.json::<Value>().await.unwrap())
                }
            };
            assert_eq!(replayed_status, 201);
            assert_eq!(replayed["id"], settled["id"]);
            assert_eq!(replayed["status"], last);
            id
        }
    }))
    .await;
    assert_eq!(results.len(), 18);
    let expected: usize = OUTCOMES.iter().map(|case| case.4).sum::<usize>() * 2;
    assert_eq!(
        app.charges(),
        expected,
        "no charge beyond one per paid attempt"
    );
}

#[tokio::test]
async fn fifty_concurrent_checkouts_with_one_key_make_one_order_one_attempt_one_charge() {
    let app = TestApp::spawn_with(|settings| {
        settings.workers = 2;
        settings.idempotency.wait = Duration::from_secs(5);
    })
    .await;
    let body = checkout_body("pm_card_visa");
    let answers = join_all((0..50).map(|_| async {
        let response = app.checkout("double-click", &body).await;
        let status = response.status().as_u16();
        (status, response.json::<Value>().await.unwrap())
    }))
    .await;
    let mut ids = Vec::new();
    for (status, body) in &answers {
        match status {
            201 => ids.push(body["payment"]["id"].as_str().unwrap().to_string()),
            409 => assert_eq!(body["code"], "idempotency_key_in_use", "{body}"),
            other => panic!("unexpected {other}: {body}"),
        }
    }
    assert!(!ids.is_empty());
    assert!(ids.iter().all(|id| *id == ids[0]), "one attempt for all");
    assert_eq!(app.count("orders").await, 1);
    assert_eq!(app.count("payment_attempts").await, 1);
    assert_eq!(app.charges(), 1);
    assert_eq!(app.charges_for(&ids[0]), 1);
}

#[tokio::test]
async fn fifty_concurrent_payments_for_one_order_with_different_keys_charge_once() {
    let app = TestApp::spawn_with(|settings| settings.workers = 2).await;
    let order_id = app.new_order().await;
    let answers = join_all((0..50).map(|n| {
        let app = &app;
        let order_id = &order_id;
        async move {
            let response = app
                .pay_order(order_id, &format!("tab-{n}"), "pm_card_visa")
                .await;
            let status = response.status().as_u16();
            (status, response.json::<Value>().await.unwrap())
        }
    }))
    .await;
    let winners: Vec<&Value> = answers
        .iter()
        .filter(|(status, _)| *status == 201)
        .map(|(_, body)| body)
        .collect();
    assert_eq!(winners.len(), 1, "exactly one attempt is made");
    let winner = winners[0]["id"].as_str().unwrap();
    for (status, body) in answers.iter().filter(|(status, _)| *status != 201) {
        assert_eq!(*status, 409, "{body}");
        assert!(
            body["code"] == "payment_in_progress" || body["code"] == "order_already_paid",
            "{body}"
        );
        assert_eq!(body["payment_id"], winner, "the refusal names the attempt");
    }
    assert_eq!(app.charges(), 1);
    assert_eq!(app.count("payment_attempts").await, 1);
    // Refusals are not recorded: only the winner's key exists (besides the order's).
    assert_eq!(app.count("idempotency_keys").await, 2);
    assert_eq!(app.order(&order_id).await["status"], "paid");
}

#[tokio::test]
async fn a_lost_response_is_pending_then_reconciled_then_replayed_as_succeeded() {
    let app = TestApp::spawn().await;
    // No webhook may tell the truth first: the reconciler has to find it.
    app.sandbox.set_webhook_url(None);
    let (status, attempt) = app
        .pay(Route::Checkout, "lost", "pm_sandbox_lost_response")
        .await;
    assert_eq!(status, 201);
    assert_eq!(attempt["status"], "pending");
    assert!(attempt["next_check_at"].is_string());
    let id = attempt["id"].as_str().unwrap();
    // The provider charged before the response was lost.
    assert_eq!(app.charges_for(id), 1);

    let settled = app.settled(id, Duration::from_secs(15)).await;
    assert_eq!(settled["status"], "succeeded");
    assert!(settled["provider_payment_id"]
        .as_str()
        .unwrap()
        .starts_with("pi_"));
    assert!(settled["next_check_at"].is_null());
    assert_eq!(
        app.charges_for(id),
        1,
        "the reconciler's resend was a replay"
    );

    let replay = app
        .checkout("lost", &checkout_body("pm_sandbox_lost_response"))
        .await;
    assert_eq!(replay.status(), 201);
    assert_eq!(replay.headers()["idempotent-replayed"], "true");
    let replay: Value = replay.json().await.unwrap();
    assert_eq!(replay["payment"]["id"], id);
    assert_eq!(replay["payment"]["status"], "succeeded");
    assert_eq!(replay["order"]["status"], "paid");
    // The key was settled by the reconciler: resolved, so it may expire.
    let mut conn = app.db.connect().await;
    let unresolved: bool = idempotency_keys::table
        .filter(idempotency_keys::key.eq("lost"))
        .select(idempotency_keys::unresolved)
        .first(&mut conn)
        .await
        .unwrap();
    assert!(!unresolved);
}

#[tokio::test]
async fn error_after_is_found_succeeded_and_error_before_fails_long_before_the_key_window_ends() {
    // The provider's key window stays a day: error_before, replayed as a 500 on every resend,
    // settles because the search finds nothing after the last possible send.
    let app = TestApp::spawn().await;
    app.sandbox.set_webhook_url(None);
    let (_, after) = app
        .pay(Route::OrderPayment, "after", "pm_sandbox_error_after")
        .await;
    let (_, before) = app
        .pay(Route::OrderPayment, "before", "pm_sandbox_error_before")
        .await;
    assert_eq!(after["status"], "pending");
    assert_eq!(before["status"], "pending");
    let after_id = after["id"].as_str().unwrap();
    let before_id = before["id"].as_str().unwrap();

    let after = app.settled(after_id, Duration::from_secs(15)).await;
    assert_eq!(after["status"], "succeeded");
    assert_eq!(app.charges_for(after_id), 1);

    let before = app.settled(before_id, Duration::from_secs(15)).await;
    assert_eq!(before["status"], "failed");
    assert_eq!(before["failure_code"], "provider_no_record");
    assert_eq!(app.charges_for(before_id), 0);

    // Every create of one attempt carried the same provider key.
    let ledger = app.sandbox.ledger();
    let keys: Vec<_> = ledger
        .iter()
        .filter(|e| e.attempt_id.as_deref() == Some(after_id))
        .map(|e| e.idempotency_key.clone())
        .collect();
    assert_eq!(
        keys,
        [after["provider_idempotency_key"].as_str().map(String::from)]
    );
}

#[tokio::test]
async fn a_replay_shows_the_attempt_as_it_is_now_never_a_stale_pending() {
    let app = TestApp::spawn().await;
    let order_id = app.new_order().await;
    let first = app
        .pay_order(&order_id, "slowly", "pm_sandbox_processing")
        .await;
    assert_eq!(first.status(), 201);
    let first: Value = first.json().await.unwrap();
    assert_eq!(first["status"], "pending");
    let id = first["id"].as_str().unwrap();
    app.settled(id, Duration::from_secs(15)).await;
    let replay = app
        .pay_order(&order_id, "slowly", "pm_sandbox_processing")
        .await;
    assert_eq!(replay.status(), 201);
    assert_eq!(replay.headers()["idempotent-replayed"], "true");
    let replay: Value = replay.json().await.unwrap();
    assert_eq!(replay["id"], id);
    assert_eq!(replay["status"], "succeeded");
}

#[tokio::test]
async fn refusals_name_the_attempt_in_the_way_and_are_not_recorded() {
    let app = TestApp::spawn().await;
    let order_id = app.new_order().await;
    let pending = app
        .pay_order(&order_id, "tab-1", "pm_sandbox_processing")
        .await;
    let pending: Value = pending.json().await.unwrap();
    let pending_id = pending["id"].as_str().unwrap();

    let second = app.pay_order(&order_id, "tab-2", "pm_card_visa").await;
    let problem = assert_problem(second, 409, "payment_in_progress").await;
    assert_eq!(problem["payment_id"], pending_id);

    app.settled(pending_id, Duration::from_secs(15)).await;
    let third = app.pay_order(&order_id, "tab-2", "pm_card_visa").await;
    let problem = assert_problem(third, 409, "order_already_paid").await;
    assert_eq!(problem["payment_id"], pending_id);
    assert_eq!(app.charges(), 1);

    // A canceled order cannot be paid; the refused key is judged afresh next time.
    let canceled = app.new_order().await;
    let cancel = app
        .post_keyed(
            &app.merchant_key,
            &format!("/v1/orders/{canceled}/cancel"),
            Some("cancel-1"),
            None,
        )
        .await;
    assert_eq!(cancel.status(), 200);
    let refused = app.pay_order(&canceled, "tab-3", "pm_card_visa").await;
    let problem = assert_problem(refused, 409, "order_not_payable").await;
    assert_eq!(problem["order_status"], "canceled");
    let mut conn = app.db.connect().await;
    let recorded: i64 = idempotency_keys::table
        .filter(idempotency_keys::key.eq_any(["tab-2", "tab-3"]))
        .count()
        .get_result(&mut conn)
        .await
        .unwrap();
    assert_eq!(recorded, 0, "refusals leave no key behind");

    // Unknown and other merchants' orders are not found.
    let unknown = app
        .pay_order(
            &format!("ord_{}", uuid::Uuid::now_v7().simple()),
            "tab-4",
            "pm_card_visa",
        )
        .await;
    assert_problem(unknown, 404, "not_found").await;
    let (_, other_key) = app.other_merchant().await;
    let foreign = app
        .post_keyed(
            &other_key,
            &format!("/v1/orders/{order_id}/payments"),
            Some("tab-5"),
            Some(json!({"payment_method": "pm_card_visa"}).to_string()),
        )
        .await;
    assert_problem(foreign, 404, "not_found").await;
    let foreign_read = app
        .get_as(&other_key, &format!("/v1/payments/{pending_id}"))
        .await;
    assert_problem(foreign_read, 404, "not_found").await;
    let support_read = app
        .get_as(&app.support_key, &format!("/v1/payments/{pending_id}"))
        .await;
    assert_eq!(support_read.status(), 200);
}

#[tokio::test]
async fn a_declined_order_can_be_paid_again_and_lists_its_attempts_newest_first() {
    let app = TestApp::spawn().await;
    let order_id = app.new_order().await;
    let declined = app
        .pay_order(&order_id, "try-1", "pm_card_chargeDeclined")
        .await;
    let declined: Value = declined.json().await.unwrap();
    assert_eq!(declined["status"], "failed");
    assert_eq!(declined["failure_code"], "generic_decline");
    assert_eq!(declined["failure_class"], "soft");
    assert_eq!(
        declined["provider_failure_code"],
        "card_declined/generic_decline"
    );
    assert!(declined["failure_message"].is_string());
    assert_eq!(app.order(&order_id).await["status"], "awaiting_payment");
    // Counted in the vocabulary's words, by provider.
    let metrics = app.get("/metrics").await.text().await.unwrap();
    let counted = format!(
        r#"payorch_payment_declines_total{{class="soft",code="generic_decline",provider="{}"}} 1"#,
        declined["provider"].as_str().unwrap()
    );
    assert!(metrics.contains(&counted), "missing {counted}\n{metrics}");

    let paid = app.pay_order(&order_id, "try-2", "pm_card_visa").await;
    let paid: Value = paid.json().await.unwrap();
    assert_eq!(paid["status"], "succeeded");
    let order = app.order(&order_id).await;
    assert_eq!(order["status"], "paid");
    let listed: Vec<&str> = order["payments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        listed,
        [
            paid["id"].as_str().unwrap(),
            declined["id"].as_str().unwrap()
        ]
    );
}

#[tokio::test]
async fn the_database_refuses_moves_the_state_machine_does_not_allow() {
    let app = TestApp::spawn().await;
    let (_, paid) = app.pay(Route::Checkout, "paid", "pm_card_visa").await;
    let (_, declined) = app
        .pay(Route::Checkout, "declined", "pm_card_chargeDeclined")
        .await;
    let mut conn = app.db.connect().await;
    let id = |attempt: &Value| attempt["id"].as_str().unwrap()[4..].to_string();
    let cases = [
        (
            format!(
                "UPDATE payment_attempts SET status = 'failed', failure_code = 'x' WHERE id = '{}'",
                id(&paid)
            ),
            "payment_attempts_final",
        ),
        (
            format!(
                "UPDATE payment_attempts SET status = 'pending', next_check_at = now() WHERE id = '{}'",
                id(&paid)
            ),
            "payment_attempts_final",
        ),
        (
            format!(
                "UPDATE payment_attempts SET status = 'succeeded', failure_code = NULL WHERE id = '{}'",
                id(&declined)
            ),
            "payment_attempts_final",
        ),
        (
            format!(
                "UPDATE payment_attempts SET amount = 1 WHERE id = '{}'",
                id(&paid)
            ),
            "payment_attempts_final",
        ),
        // A second attempt for a paid order.
        (
            format!(
                "INSERT INTO payment_attempts (merchant_id, id, order_id, status, payment_method, \
                 provider, provider_idempotency_key, next_check_at) \
                 SELECT merchant_id, gen_random_uuid(), order_id, 'created', 'pm_card_visa', \
                 provider, 'hand-made', now() FROM payment_attempts WHERE id = '{}'",
                id(&paid)
            ),
            "payment_attempts_order_payable",
        ),
        // An order that skips processing.
        (
            format!(
                "UPDATE orders SET status = 'paid' WHERE id = (SELECT order_id FROM payment_attempts WHERE id = '{}')",
                id(&declined)
            ),
            "orders_status_transition",
        ),
    ];
    for (sql, constraint) in cases {
        assert_refused_by(&mut conn, &sql, constraint).await;
    }
    assert_eq!(
        app.payment(paid["id"].as_str().unwrap()).await["status"],
        "succeeded"
    );
    assert_eq!(
        app.payment(declined["id"].as_str().unwrap()).await["status"],
        "failed"
    );
}

#[tokio::test]
async fn no_verdict_of_no_record_while_a_send_may_be_under_way() {
    // A long lease: the request's send window is surely open while the test writes.
    let app = TestApp::spawn_config(|config| {
        config.settings.idempotency.lease = Duration::from_secs(120);
    })
    .await;
    app.sandbox.set_webhook_url(None);
    let (_, open) = app
        .pay(Route::OrderPayment, "open", "pm_sandbox_processing")
        .await;
    let id = open["id"].as_str().unwrap();
    let uuid = &id[4..];
    let mut conn = app.db.connect().await;
    // Whatever writes the row: no verdict of no record inside the window, and the window
    // cannot be moved back to allow one.
    assert_refused_by(
        &mut conn,
        &format!(
            "UPDATE payment_attempts SET status = 'failed', failure_code = 'provider_no_record', \
             failure_message = 'by hand' WHERE id = '{uuid}'"
        ),
        "payment_attempts_no_record_after_sending",
    )
    .await;
    assert_refused_by(
        &mut conn,
        &format!(
            "UPDATE payment_attempts SET sending_until = now() - interval '1 hour' WHERE id = '{uuid}'"
        ),
        "payment_attempts_sending_forward",
    )
    .await;
    assert_eq!(app.payment(id).await["status"], "pending");
}

/// The one-column rules are domains: whatever writes a row, a bad value is refused by the
/// rule's own name.
#[tokio::test]
async fn the_database_refuses_values_outside_their_domain_by_name() {
    let app = TestApp::spawn().await;
    let (_, paid) = app.pay(Route::Checkout, "domains", "pm_card_visa").await;
    let id = &paid["id"].as_str().unwrap()[4..];
    let order = &paid["order_id"].as_str().unwrap()[4..];
    let mut conn = app.db.connect().await;
    let new_order = |column: &str, value: &str| {
        format!(
            "INSERT INTO orders (merchant_id, id, amount, currency, {column}) \
             SELECT merchant_id, gen_random_uuid(), 100, 'usd', {value} FROM orders WHERE id = '{order}'"
        )
    };
    let cases = [
        (new_order("merchant_reference", "''"), "short_text_length"),
        (new_order("description", "repeat('x', 1001)"), "description_text_length"),
        (new_order("metadata", "'[]'"), "json_object_is_object"),
        (new_order("status", "'lost'"), "order_status_known"),
        (
            format!("UPDATE orders SET currency = 'USD' WHERE id = '{order}'"),
            "currency_code_lower_iso",
        ),
        (
            format!("UPDATE orders SET amount = 0 WHERE id = '{order}'"),
            "amount_minor_range",
        ),
        (
            format!("UPDATE payment_attempts SET status = 'refunded' WHERE id = '{id}'"),
            "attempt_status_known",
        ),
        (
            format!(
                "INSERT INTO attempt_transitions (merchant_id, attempt_id, from_status, to_status, source) \
                 SELECT merchant_id, id, 'succeeded', 'failed', 'api' FROM payment_attempts WHERE id = '{id}'"
            ),
            "open_attempt_status_known",
        ),
        (
            format!(
                "INSERT INTO provider_calls (merchant_id, attempt_id, operation, source, outcome, latency_ms) \
                 SELECT merchant_id, id, 'create', 'webhook', 'succeeded', 1 FROM payment_attempts WHERE id = '{id}'"
            ),
            "provider_call_source_known",
        ),
        (
            "UPDATE idempotency_keys SET state = 'done'".to_string(),
            "key_state_known",
        ),
    ];
    for (sql, constraint) in cases {
        match diesel::sql_query(&sql).execute(&mut conn).await {
            Err(diesel::result::Error::DatabaseError(
                diesel::result::DatabaseErrorKind::CheckViolation,
                info,
            )) => assert_eq!(info.constraint_name(), Some(constraint), "{sql}"),
            other => panic!("{sql}: expected {constraint} to refuse it, got {other:?}"),
        }
    }
    assert_eq!(
        app.payment(paid["id"].as_str().unwrap()).await["status"],
        "succeeded"
    );
}

#[tokio::test]
async fn bad_payment_requests_get_field_errors_and_write_nothing() {
    let app = TestApp::spawn().await;
    let order_id = app.new_order().await;
    let missing = app
        .post_keyed(
            &app.merchant_key,
            &format!("/v1/orders/{order_id}/payments"),
            Some("bad-1"),
            Some("{}".into()),
        )
        .await;
    let problem = assert_problem(missing, 422, "validation_failed").await;
    assert_eq!(problem["errors"][0]["field"], "/payment_method");

    let card = app
        .post_keyed(
            &app.merchant_key,
            &format!("/v1/orders/{order_id}/payments"),
            Some("bad-2"),
            Some(json!({"payment_method": "4242424242424242"}).to_string()),
        )
        .await;
    assert_problem(card, 422, "raw_card_data_forbidden").await;

    let checkout = app
        .checkout("bad-3", &json!({"currency": "eur", "payment_method": ""}))
        .await;
    let problem = assert_problem(checkout, 422, "validation_failed").await;
    let fields: Vec<&str> = problem["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["field"].as_str().unwrap())
        .collect();
    assert_eq!(fields, ["/amount", "/payment_method"]);

    let no_key = app
        .post_keyed(
            &app.merchant_key,
            "/v1/checkout",
            None,
            Some(checkout_body("pm_card_visa").to_string()),
        )
        .await;
    assert_problem(no_key, 400, "idempotency_key_missing").await;
    assert_eq!(app.count("payment_attempts").await, 0);
    assert_eq!(app.count("orders").await, 1);
    assert_eq!(app.charges(), 0);
}

#[tokio::test]
async fn payment_metrics_count_transitions_and_provider_calls() {
    // The sandbox's webhooks held back, so the provider's answer is what moves the attempts.
    let app = TestApp::spawn_config(|config| config.sandbox.webhook_delay_ms = 60_000).await;
    app.pay(Route::Checkout, "m-1", "pm_card_visa").await;
    app.pay(Route::Checkout, "m-2", "pm_card_chargeDeclined")
        .await;
    let text = app.get("/metrics").await.text().await.unwrap();
    for line in [
        r#"payorch_payment_attempt_transitions_total{from="created",source="provider_response",to="succeeded"} 1"#,
        r#"payorch_payment_attempt_transitions_total{from="created",source="provider_response",to="failed"} 1"#,
        r#"payorch_provider_calls_total{operation="create",outcome="succeeded",provider="stripe"} 1"#,
        r#"payorch_provider_calls_total{operation="create",outcome="failed",provider="stripe"} 1"#,
        r#"payorch_provider_circuit_state{provider="stripe"} 0"#,
        "payorch_provider_call_seconds_bucket",
        "payorch_payment_attempts_oldest_unresolved_seconds",
    ] {
        assert!(text.contains(line), "missing {line}\n{text}");
    }
}

#[tokio::test]
async fn a_status_the_code_does_not_know_is_an_error_not_a_guess() {
    use diesel::sql_types::Text;
    use payorch::payments::status::OrderStatus;
    use payorch::payments::AttemptStatus;

    #[derive(diesel::QueryableByName, Debug)]
    struct Attempt {
        #[diesel(sql_type = Text)]
        #[allow(dead_code, reason = "read to see whether it converts")]
        status: AttemptStatus,
    }
    #[derive(diesel::QueryableByName, Debug)]
    struct Order {
        #[diesel(sql_type = Text)]
        #[allow(dead_code, reason = "read to see whether it converts")]
        status: OrderStatus,
    }
    let db = crate::helpers::TestDatabase::migrated().await;
    let mut conn = db.connect().await;
    let read = |sql: &'static str| diesel::sql_query(sql);
    let known = read("SELECT 'pending' AS status")
        .get_result::<Attempt>(&mut conn)
        .await;
    assert_eq!(known.unwrap().status, AttemptStatus::Pending);
    let unknown = read("SELECT 'refunded' AS status")
        .get_result::<Attempt>(&mut conn)
        .await;
    assert!(
        matches!(unknown, Err(diesel::result::Error::DeserializationError(ref e))
            if e.to_string().contains("unknown payment attempt status \"refunded\"")),
        "{unknown:?}"
    );
    let unknown = read("SELECT 'shipped' AS status")
        .get_result::<Order>(&mut conn)
        .await;
    assert!(
        matches!(unknown, Err(diesel::result::Error::DeserializationError(ref e))
            if e.to_string().contains("unknown order status \"shipped\"")),
        "{unknown:?}"
    );
}
