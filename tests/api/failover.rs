//! Routing between two providers and failover (docs/guides/routing.md, "Routing and failover"): `a` is the
//! app's sandbox behind a door the test can shut, spoken to as Stripe; `b` a second sandbox
//! spoken to as Adyen. The two ledgers are the judge: one charge per intent at most, across
//! both.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::join_all;
use serde_json::{json, Value};

use payorch::providers::circuit::CircuitSettings;

use crate::helpers::{assert_problem, TestApp};
use crate::payments::checkout_body;

async fn two_providers(circuit: CircuitSettings) -> TestApp {
    TestApp::spawn_config(|config| config.two_providers = Some(circuit)).await
}

/// A circuit that never opens within a test, unless a test wants it to.
fn patient() -> CircuitSettings {
    CircuitSettings {
        threshold: 1000,
        cool_down: Duration::from_secs(60),
    }
}

impl TestApp {
    fn b(&self) -> &payorch_sandbox::SandboxHandle {
        &self.second.as_ref().expect("two providers").sandbox
    }

    fn door(&self) -> &crate::door::Door {
        &self.second.as_ref().expect("two providers").door
    }

    /// Charges for `order_id` in both ledgers: `(on a, on b)`.
    fn charges_on_both(&self, order_id: &str) -> (usize, usize) {
        let on_b = self
            .b()
            .ledger()
            .iter()
            .filter(|e| e.order_id.as_deref() == Some(order_id) && e.is_charged())
            .count();
        (self.charges_for_order(order_id), on_b)
    }

    async fn pay_checkout(&self, key: &str, method: &str) -> Value {
        let response = self.checkout(key, &checkout_body(method)).await;
        assert_eq!(response.status(), 201);
        response.json().await.unwrap()
    }
}

#[tokio::test]
async fn a_provider_refusing_connections_fails_over_to_the_next_under_the_same_key() {
    let app = two_providers(patient()).await;
    app.door().shut();
    let paid = app.pay_checkout("refused", "pm_card_visa").await;
    let payment = &paid["payment"];
    assert_eq!(payment["status"], "succeeded", "{paid}");
    assert_eq!(payment["provider"], "b");
    let order_id = paid["order"]["id"].as_str().unwrap();
    assert_eq!(paid["order"]["status"], "paid");
    assert_eq!(app.charges_on_both(order_id), (0, 1));
    let on_b = app.b().ledger();
    assert_eq!(on_b[0].protocol, "adyen", "charged through b's Adyen face");
    assert_eq!(on_b[0].attempt_id.as_deref(), payment["id"].as_str());

    let order = app.order(order_id).await;
    let attempts = order["payments"].as_array().unwrap();
    assert_eq!(attempts.len(), 2, "{order}");
    let first = attempts.iter().find(|a| a["provider"] == "a").unwrap();
    assert_eq!(first["status"], "failed");
    assert_eq!(first["failure_code"], "provider_unavailable");

    // The key names the final attempt: a retry replays it, and nothing is sent again.
    let again = app
        .checkout("refused", &checkout_body("pm_card_visa"))
        .await;
    assert_eq!(again.status(), 201);
    assert_eq!(again.headers()["idempotent-replayed"], "true");
    let again: Value = again.json().await.unwrap();
    assert_eq!(again["payment"]["id"], payment["id"]);
    assert_eq!(app.charges_on_both(order_id), (0, 1));
}

#[tokio::test]
async fn a_provider_refusing_our_credentials_fails_over_and_charges_once() {
    let app = TestApp::spawn_config(|config| {
        config.two_providers = Some(patient());
        config.provider_a_secret = Some("sk_test_rotated_away".into());
    })
    .await;
    let paid = app.pay_checkout("rotated", "pm_card_visa").await;
    assert_eq!(paid["payment"]["status"], "succeeded", "{paid}");
    assert_eq!(paid["payment"]["provider"], "b");
    let order_id = paid["order"]["id"].as_str().unwrap();
    assert_eq!(app.charges_on_both(order_id), (0, 1));
    let order = app.order(order_id).await;
    let first = order["payments"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["provider"] == "a")
        .cloned()
        .expect("the attempt on a");
    assert_eq!(first["status"], "failed");
    assert_eq!(first["failure_code"], "provider_unavailable");
    let story = app.story(first["id"].as_str().unwrap()).await;
    let call = &story["provider_calls"][0];
    assert_eq!(call["http_status"], 401, "{story}");
    assert_eq!(call["outcome"], "unavailable");
}

#[tokio::test]
async fn an_unknown_outcome_or_a_decline_never_fails_over() {
    let app = two_providers(patient()).await;
    // The reconciler alone settles them, so the answers are the providers' own.
    app.sandbox.set_webhook_url(None);
    // Timing out (slow past the provider timeout), a lost response, failing after charging.
    for method in [
        "pm_sandbox_slow",
        "pm_sandbox_lost_response",
        "pm_sandbox_error_after",
    ] {
        let paid = app.pay_checkout(method, method).await;
        let payment = &paid["payment"];
        assert_eq!(payment["status"], "pending", "{method}: {paid}");
        assert_eq!(payment["provider"], "a");
        let settled = app
            .settled(payment["id"].as_str().unwrap(), Duration::from_secs(20))
            .await;
        assert_eq!(settled["status"], "succeeded", "{method}: {settled}");
        let order_id = paid["order"]["id"].as_str().unwrap();
        assert_eq!(app.charges_on_both(order_id), (1, 0), "{method}");
        assert_eq!(
            app.order(order_id).await["payments"]
                .as_array()
                .unwrap()
                .len(),
            1
        );
    }
    let declined = app.pay_checkout("declined", "pm_card_chargeDeclined").await;
    assert_eq!(declined["payment"]["status"], "failed");
    assert_eq!(declined["payment"]["failure_code"], "generic_decline");
    assert_eq!(declined["payment"]["provider"], "a");
    let order_id = declined["order"]["id"].as_str().unwrap();
    assert_eq!(app.charges_on_both(order_id), (0, 0));
    assert_eq!(
        app.order(order_id).await["payments"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
}

#[tokio::test]
async fn an_open_circuit_sends_nothing_and_fails_over_at_once() {
    let app = two_providers(CircuitSettings {
        threshold: 2,
        cool_down: Duration::from_secs(60),
    })
    .await;
    app.door().shut();
    for i in 0..3 {
        let paid = app.pay_checkout(&format!("c{i}"), "pm_card_visa").await;
        assert_eq!(paid["payment"]["provider"], "b");
        assert_eq!(paid["payment"]["status"], "succeeded");
    }
    app.pay_checkout("c3", "pm_card_visa").await;
    let text = app.get("/metrics").await.text().await.unwrap();
    for line in [
        r#"payorch_provider_failovers_total{from="a",to="b"} 4"#,
        r#"payorch_provider_calls_total{operation="create",outcome="unavailable",provider="a"} 4"#,
    ] {
        assert!(text.contains(line), "missing {line}\n{text}");
    }
    let mut conn = app.db.connect().await;
    let not_sent: i64 = diesel_async::RunQueryDsl::get_result::<Count>(
        diesel::sql_query(
            "SELECT count(*) AS n FROM provider_calls \
             WHERE outcome = 'unavailable' AND detail LIKE 'circuit open%'",
        ),
        &mut conn,
    )
    .await
    .unwrap()
    .n;
    assert_eq!(not_sent, 2, "payments 3 and 4 met an open circuit");
}

#[tokio::test]
async fn a_scrape_sees_a_circuit_open_while_the_reconciler_sleeps() {
    let app = TestApp::spawn_config(|config| {
        config.two_providers = Some(CircuitSettings {
            threshold: 2,
            cool_down: Duration::from_secs(60),
        });
        config.settings.reconciler.interval = Duration::from_secs(3600);
    })
    .await;
    let gauge = |provider: &str, state: u8| {
        format!(r#"payorch_provider_circuit_state{{provider="{provider}"}} {state}"#)
    };
    let text = app.get("/metrics").await.text().await.unwrap();
    assert!(text.contains(&gauge("a", 0)), "{text}");
    app.door().shut();
    for i in 0..2 {
        app.pay_checkout(&format!("c{i}"), "pm_card_visa").await;
    }
    // Two refused sends opened `a`'s circuit; the reconciler has not run since.
    let text = app.get("/metrics").await.text().await.unwrap();
    for line in [gauge("a", 2), gauge("b", 0)] {
        assert!(text.contains(&line), "missing {line}\n{text}");
    }
}

/// The verdict `provider_unavailable` needs proof that the refused send was the attempt's
/// only one. A resend announced under the row lock in between (a resumed request, the
/// reconciler) may have charged, so a refused send seen afterwards must leave the attempt open.
#[tokio::test]
async fn a_refused_send_never_fails_an_attempt_another_sender_announced() {
    use payorch::db::pool::{build_pool, PoolSettings};
    use payorch::idempotency::{
        claim, fingerprint, IdempotencyKey, IdempotencyMetrics, IdempotencySettings, Keyed,
        KeyedRequest, Keys, NewKeyQuota, Operation, RecentKeys,
    };
    use payorch::payments::attempts::failover::fail_unreached;
    use payorch::payments::attempts::keyed::{NewAttempt, PayOrder};
    use payorch::payments::attempts::{before_resend, find_attempt};
    use payorch::providers::{ProviderCall, ProviderOutcome};

    let app = two_providers(patient()).await;
    let metrics = payorch::payments::metrics::PaymentMetrics::new().unwrap();
    let order: Value = app
        .post_keyed(
            &app.merchant_key,
            "/v1/orders",
            Some("an-order"),
            Some(r#"{"amount": 1000, "currency": "eur"}"#.into()),
        )
        .await
        .json()
        .await
        .unwrap();
    let order_id = order["id"].as_str().expect("an order").parse().unwrap();
    // This test is the paying request: it claims a payment's key as the request does (the
    // claim is the only maker of a key in flight), and holds the attempt it made unsent.
    let pool = build_pool(&app.db.url, &PoolSettings::default()).unwrap();
    let keys = Keys {
        settings: IdempotencySettings::default(),
        metrics: Arc::new(IdempotencyMetrics::new().unwrap()),
        quota: Arc::new(NewKeyQuota::new(6000)),
        recent: RecentKeys::default(),
    };
    let request = KeyedRequest {
        merchant_id: app.merchant_id,
        key: IdempotencyKey::parse(Some(b"announced")).unwrap(),
        operation: Operation::CreatePayment,
        fingerprint: fingerprint("POST", "/v1/orders/{id}/payments", None),
        request_id: "req_test".into(),
    };
    let first_check = chrono::Utc::now() + chrono::Duration::minutes(1);
    let work = PayOrder {
        order_id,
        attempt: NewAttempt::new("pm_card_visa", "a", first_check),
    };
    let Keyed::Made {
        made,
        key: Some(key),
    } = claim(&pool, &keys, &request, &work).await.unwrap()
    else {
        panic!("a new key, in flight on its attempt");
    };
    let made = made.attempt_and_order().0.expect("the attempt it made");
    let mut conn = app.db.connect().await;
    let first_read = find_attempt(&mut conn, None, made.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(first_read.status.as_str(), "created");
    // Another sender announces its resend under the row lock.
    let resend_until = chrono::Utc::now() + chrono::Duration::minutes(1);
    assert!(before_resend(&mut conn, &first_read, resend_until)
        .await
        .unwrap()
        .is_some());
    let refused = ProviderCall {
        outcome: ProviderOutcome::Unavailable {
            reason: "connection refused".into(),
        },
        http_status: None,
        latency: Duration::ZERO,
    };
    let verdict = fail_unreached(&mut conn, &metrics, &first_read, &refused, key)
        .await
        .unwrap();
    assert!(
        verdict.is_err(),
        "no verdict once another send was announced: the key is handed back"
    );
    let now = find_attempt(&mut conn, None, made.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(now.status.as_str(), "created");
    let (state,): (String,) = {
        use diesel::prelude::*;
        use payorch::db::schema::idempotency_keys;
        diesel_async::RunQueryDsl::get_result(
            idempotency_keys::table
                .filter(idempotency_keys::key.eq("announced"))
                .select((idempotency_keys::state,)),
            &mut conn,
        )
        .await
        .unwrap()
    };
    assert_eq!(state, "in_flight", "nothing was written of the key");
}

#[derive(diesel::QueryableByName)]
struct Count {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    n: i64,
}

#[tokio::test]
async fn routing_is_set_by_support_per_merchant_and_currency() {
    let app = two_providers(patient()).await;
    let path = format!("/v1/merchants/{}/routing", app.merchant_id);
    let shown: Value = app
        .get_as(&app.merchant_key, &path)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(shown["source"], "default");
    assert_eq!(shown["providers"], json!(["a", "b"]));

    let put = |secret: String, body: Value| {
        let app = &app;
        let path = path.clone();
        async move {
            app.client
                .put(format!("{}{path}", app.base_url))
                .bearer_auth(secret)
                .json(&body)
                .send()
                .await
                .unwrap()
        }
    };
    let body = json!({"providers": ["b", "a"], "currencies": {"USD": ["a"]}});
    assert_problem(
        put(app.merchant_key.clone(), body.clone()).await,
        403,
        "forbidden",
    )
    .await;
    assert_problem(
        put(
            app.support_key.clone(),
            json!({"providers": ["b", "zz", "b"]}),
        )
        .await,
        422,
        "validation_failed",
    )
    .await;
    let set = put(app.support_key.clone(), body).await;
    assert_eq!(set.status(), 200);
    let set: Value = set.json().await.unwrap();
    assert_eq!(set["source"], "merchant");
    assert_eq!(set["currencies"], json!({"usd": ["a"]}));

    let eur = app.pay_checkout("eur", "pm_card_visa").await;
    assert_eq!(eur["payment"]["provider"], "b");
    let mut usd_body = checkout_body("pm_card_visa");
    usd_body["currency"] = json!("usd");
    let usd: Value = app.checkout("usd", &usd_body).await.json().await.unwrap();
    assert_eq!(usd["payment"]["provider"], "a");
    // An existing order in usd is routed by its currency too.
    let order: Value = app
        .post_keyed(
            &app.merchant_key,
            "/v1/orders",
            Some("usd-order"),
            Some(json!({"amount": 500, "currency": "usd"}).to_string()),
        )
        .await
        .json()
        .await
        .unwrap();
    let paid = app
        .pay_order(order["id"].as_str().unwrap(), "usd-pay", "pm_card_visa")
        .await;
    let paid: Value = paid.json().await.unwrap();
    assert_eq!(paid["provider"], "a");
}

/// 200 checkouts from 16 clients that retry like real ones (same key until a final answer)
/// while `a` goes down and up every second: every intent ends with one charge or none,
/// never two, and every answer to one intent names one payment.
#[tokio::test]
async fn two_hundred_checkouts_while_a_flaps_never_charge_twice() {
    let app = Arc::new(
        two_providers(CircuitSettings {
            threshold: 3,
            cool_down: Duration::from_millis(300),
        })
        .await,
    );
    let flapping = Arc::new(AtomicBool::new(true));
    let flapper = {
        let app = app.clone();
        let flapping = flapping.clone();
        tokio::spawn(async move {
            let mut up = true;
            while flapping.load(Ordering::Relaxed) {
                tokio::time::sleep(Duration::from_secs(1)).await;
                up = !up;
                if up {
                    app.door().open()
                } else {
                    app.door().shut()
                }
            }
            app.door().open();
        })
    };
    let clients = (0..16).map(|client| {
        let app = app.clone();
        async move {
            let mut answers: HashMap<String, (String, String)> = HashMap::new();
            let mut retries = 0;
            for i in 0..200 / 16 + usize::from(client < 200 % 16) {
                let key = format!("flap-{client}-{i}");
                // Paced like shoppers, so the run spans several flaps.
                tokio::time::sleep(Duration::from_millis(300)).await;
                let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
                loop {
                    assert!(
                        tokio::time::Instant::now() < deadline,
                        "intent {key} got no final answer in a minute"
                    );
                    let response = app.checkout(&key, &checkout_body("pm_card_visa")).await;
                    if response.status() == 201 {
                        let body: Value = response.json().await.unwrap();
                        let seen = (
                            body["payment"]["id"].as_str().unwrap().to_owned(),
                            body["order"]["id"].as_str().unwrap().to_owned(),
                        );
                        let first = answers.entry(key.clone()).or_insert_with(|| seen.clone());
                        assert_eq!(first.0, seen.0, "one intent, one payment id");
                        if body["payment"]["status"] != "pending" {
                            break;
                        }
                    }
                    retries += 1;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
            (answers, retries)
        }
    });
    let results = join_all(clients).await;
    flapping.store(false, Ordering::Relaxed);
    flapper.await.unwrap();

    let mut orders = Vec::new();
    let mut retries = 0;
    for (answers, r) in results {
        retries += r;
        orders.extend(answers.into_values().map(|(_, order)| order));
    }
    assert_eq!(orders.len(), 200);
    let (mut on_a, mut on_b, mut none) = (0, 0, 0);
    for order in &orders {
        let charges = app.charges_on_both(order);
        match charges {
            (1, 0) => on_a += 1,
            (0, 1) => on_b += 1,
            (0, 0) => none += 1,
            twice => panic!("order {order} charged {twice:?}"),
        }
        let status = app.order(order).await["status"].clone();
        assert_eq!(
            status == "paid",
            charges != (0, 0),
            "order {order} is {status} but its charges are {charges:?}"
        );
    }
    let text = app.get("/metrics").await.text().await.unwrap();
    let failovers: u64 = text
        .lines()
        .filter(|l| l.starts_with("payorch_provider_failovers_total"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum();
    println!(
        "flapping: 200 intents, {retries} retries, {failovers} failovers, \
         charged on a {on_a}, on b {on_b}, not charged {none}, charged twice 0"
    );
    // The run crossed several flaps: payments failed over while `a` was down and went to `a`
    // while it was up, so the checks above judged failover itself, not only `a`.
    assert!(failovers > 0 && on_b > 0, "no payment failed over");
    assert!(on_a > 0, "no payment reached a");
    let mut conn = app.db.connect().await;
    let unavailable: i64 = diesel_async::RunQueryDsl::get_result::<Count>(
        diesel::sql_query(
            "SELECT count(*) AS n FROM payment_attempts \
             WHERE status = 'failed' AND failure_code = 'provider_unavailable'",
        ),
        &mut conn,
    )
    .await
    .unwrap()
    .n;
    assert_eq!(
        unavailable as u64, failovers,
        "each failover left one such attempt"
    );
}
