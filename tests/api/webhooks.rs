//! `POST /v1/webhooks/stripe`: verified on the raw body, recorded once per provider event id,
//! applied only along allowed transitions.

use std::time::Duration;

use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use futures_util::future::join_all;
use serde_json::Value;

use payorch::db::schema::{attempt_transitions, idempotency_keys, provider_webhooks};
use payorch::providers::signature;

use crate::helpers::{assert_problem, TestApp, TEST_WEBHOOK_SECRET};
use crate::payments::Route;

/// An app whose attempts only webhooks can finish: the sandbox sends none by itself and
/// keeps `processing` for an hour, and the reconciler sleeps.
pub async fn quiet_app() -> TestApp {
    let app = TestApp::spawn_config(|config| {
        config.sandbox.processing_ms = 3_600_000;
        config.settings.reconciler.interval = Duration::from_secs(3600);
    })
    .await;
    app.sandbox.set_webhook_url(None);
    app
}

/// A fixture event body made about `attempt`, with its own event id.
pub fn event(kind: &str, event_id: &str, attempt: &Value) -> String {
    let path = format!(
        "{}/fixtures/webhooks/payment_intent.{kind}.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let mut event: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    event["id"] = event_id.into();
    let object = &mut event["data"]["object"];
    object["id"] = attempt["provider_payment_id"].clone();
    object["amount"] = attempt["amount"].clone();
    object["currency"] = attempt["currency"].clone();
    object["metadata"]["attempt_id"] = attempt["id"].clone();
    object["metadata"]["order_id"] = attempt["order_id"].clone();
    object["metadata"]["merchant_id"] = attempt["merchant_id"].clone();
    event.to_string()
}

fn signed(secrets: &[&str], body: &str) -> String {
    signature::header_value(secrets, chrono::Utc::now().timestamp(), body.as_bytes())
}

impl TestApp {
    async fn deliver(&self, body: &str, header: Option<&str>) -> reqwest::Response {
        let mut request = self
            .client
            .post(self.url("/v1/webhooks/stripe"))
            .header("content-type", "application/json")
            .body(body.to_string());
        if let Some(header) = header {
            request = request.header("Stripe-Signature", header);
        }
        request.send().await.expect("request sent")
    }

    pub async fn deliver_signed(&self, body: &str) -> Value {
        let response = self
            .deliver(body, Some(&signed(&[TEST_WEBHOOK_SECRET], body)))
            .await;
        assert_eq!(response.status(), 200);
        response.json().await.unwrap()
    }

    /// A pending attempt with a provider charge id, as `pm_sandbox_processing` leaves it.
    pub async fn pending_attempt(&self, key: &str) -> Value {
        let (status, attempt) = self
            .pay(Route::Checkout, key, "pm_sandbox_processing")
            .await;
        assert_eq!(status, 201);
        assert_eq!(attempt["status"], "pending");
        assert!(attempt["provider_payment_id"].is_string());
        attempt
    }

    pub async fn event_outcomes(&self) -> Vec<(String, String)> {
        let mut conn = self.db.connect().await;
        provider_webhooks::table
            .order(provider_webhooks::received_at)
            .select((
                provider_webhooks::provider_event_id,
                provider_webhooks::outcome,
            ))
            .load(&mut conn)
            .await
            .unwrap()
    }
}

#[tokio::test]
async fn a_processing_checkout_is_finished_by_the_sandboxs_signed_webhook() {
    // The reconciler sleeps: only the webhook can finish the attempt.
    let app = TestApp::spawn_config(|config| {
        config.settings.reconciler.interval = Duration::from_secs(3600);
    })
    .await;
    let (_, attempt) = app
        .pay(Route::Checkout, "webhook-1", "pm_sandbox_processing")
        .await;
    assert_eq!(attempt["status"], "pending");
    let id = attempt["id"].as_str().unwrap();
    let settled = app.settled(id, Duration::from_secs(15)).await;
    assert_eq!(settled["status"], "succeeded");
    assert_eq!(app.charges_for(id), 1);

    let mut conn = app.db.connect().await;
    let sources: Vec<String> = attempt_transitions::table
        .filter(attempt_transitions::to_status.eq("succeeded"))
        .select(attempt_transitions::source)
        .load(&mut conn)
        .await
        .unwrap();
    assert_eq!(sources, ["webhook"]);
    // The webhook settled the key: a retry replays the final state.
    let unresolved: bool = idempotency_keys::table
        .filter(idempotency_keys::key.eq("webhook-1"))
        .select(idempotency_keys::unresolved)
        .first(&mut conn)
        .await
        .unwrap();
    assert!(!unresolved);
    let replay = app
        .checkout(
            "webhook-1",
            &crate::payments::checkout_body("pm_sandbox_processing"),
        )
        .await;
    assert_eq!(replay.headers()["idempotent-replayed"], "true");
    let replay: Value = replay.json().await.unwrap();
    assert_eq!(replay["payment"]["status"], "succeeded");
}

#[tokio::test]
async fn one_event_delivered_five_times_at_once_has_one_effect() {
    let app = quiet_app().await;
    let attempt = app.pending_attempt("five").await;
    let body = event("succeeded", "evt_five_times", &attempt);
    let header = signed(&[TEST_WEBHOOK_SECRET], &body);
    let answers = join_all((0..5).map(|_| async {
        let response = app.deliver(&body, Some(&header)).await;
        assert_eq!(response.status(), 200);
        response.json::<Value>().await.unwrap()
    }))
    .await;
    let first: Vec<&Value> = answers.iter().filter(|a| a["duplicate"] == false).collect();
    assert_eq!(first.len(), 1, "{answers:?}");
    assert_eq!(first[0]["outcome"], "applied");
    assert_eq!(app.event_outcomes().await.len(), 1);

    let id = attempt["id"].as_str().unwrap();
    assert_eq!(app.payment(id).await["status"], "succeeded");
    let mut conn = app.db.connect().await;
    let moves: i64 = attempt_transitions::table
        .filter(attempt_transitions::source.eq("webhook"))
        .count()
        .get_result(&mut conn)
        .await
        .unwrap();
    assert_eq!(moves, 1);
    let metrics = app.get("/metrics").await.text().await.unwrap();
    assert!(metrics.contains(r#"payorch_webhook_events_total{outcome="duplicate"} 4"#));
    assert!(metrics.contains(r#"payorch_webhook_events_total{outcome="applied"} 1"#));
}

#[tokio::test]
async fn events_in_every_order_never_move_an_attempt_backwards() {
    let app = quiet_app().await;
    let orders = [
        ["processing", "succeeded", "payment_failed"],
        ["processing", "payment_failed", "succeeded"],
        ["succeeded", "processing", "payment_failed"],
        ["succeeded", "payment_failed", "processing"],
        ["payment_failed", "processing", "succeeded"],
        ["payment_failed", "succeeded", "processing"],
    ];
    for (n, order) in orders.iter().enumerate() {
        let attempt = app.pending_attempt(&format!("order-{n}")).await;
        let mut final_status = None;
        for kind in order {
            let event_id = format!("evt_{n}_{kind}");
            let receipt = app.deliver_signed(&event(kind, &event_id, &attempt)).await;
            let expected = match (*kind, final_status) {
                ("processing", None) => "applied",
                ("processing", Some(_)) => "stale",
                (_, None) => {
                    final_status = Some(if *kind == "succeeded" {
                        "succeeded"
                    } else {
                        "failed"
                    });
                    "applied"
                }
                (_, Some(_)) => "conflict",
            };
            assert_eq!(receipt["outcome"], expected, "{order:?}: {kind}");
        }
        let id = attempt["id"].as_str().unwrap();
        let now = app.payment(id).await;
        assert_eq!(now["status"], final_status.unwrap(), "{order:?}");
        if now["status"] == "failed" {
            assert_eq!(now["failure_code"], "insufficient_funds");
            assert_eq!(now["failure_class"], "hard");
            assert_eq!(
                now["provider_failure_code"],
                "card_declined/insufficient_funds"
            );
        }
        let order_status = app.order(now["order_id"].as_str().unwrap()).await["status"].clone();
        assert_eq!(
            order_status,
            if now["status"] == "succeeded" {
                "paid"
            } else {
                "awaiting_payment"
            }
        );
    }
    let metrics = app.get("/metrics").await.text().await.unwrap();
    assert!(metrics.contains(r#"payorch_webhook_events_total{outcome="conflict"} 6"#));
}

#[tokio::test]
async fn a_canceled_intent_cancels_its_attempt() {
    let app = quiet_app().await;
    let attempt = app.pending_attempt("cancel").await;
    let receipt = app
        .deliver_signed(&event("canceled", "evt_canceled", &attempt))
        .await;
    assert_eq!(receipt["outcome"], "applied");
    let now = app.payment(attempt["id"].as_str().unwrap()).await;
    assert_eq!(now["status"], "canceled");
    assert_eq!(now["cancellation_reason"], "canceled_at_provider");
    assert_eq!(now["failure_code"], serde_json::Value::Null);
}

#[tokio::test]
async fn bad_signatures_are_refused_with_nothing_stored() {
    let app = quiet_app().await;
    let attempt = app.pending_attempt("bad").await;
    let body = event("succeeded", "evt_bad", &attempt);
    let now = chrono::Utc::now().timestamp();
    let stale = signature::header_value(&[TEST_WEBHOOK_SECRET], now - 400, body.as_bytes());
    let wrong = signed(&["whsec_not_ours"], &body);
    let good = signed(&[TEST_WEBHOOK_SECRET], &body);
    let changed = body.replace("succeeded", "succeeded ");
    // Issue #40: one unauthenticated request with thousands of candidates once cost a MAC over
    // the body each; now it is refused before any, even with the right one among them.
    let flood = format!("{}{good}", "v1=00,".repeat(1000));
    for (what, body, header) in [
        ("missing header", body.as_str(), None),
        ("malformed header", body.as_str(), Some("v1=abc,t=")),
        ("old timestamp", body.as_str(), Some(stale.as_str())),
        ("wrong secret", body.as_str(), Some(wrong.as_str())),
        (
            "body changed after signing",
            changed.as_str(),
            Some(good.as_str()),
        ),
        ("a thousand candidates", body.as_str(), Some(flood.as_str())),
    ] {
        let response = app.deliver(body, header).await;
        let problem = assert_problem(response, 400, "webhook_signature_invalid").await;
        assert!(
            !problem.to_string().contains(TEST_WEBHOOK_SECRET),
            "{what}: the secret leaked"
        );
    }
    // Signed, but not an event.
    let not_event = "{\"hello\":1}";
    let response = app
        .deliver(not_event, Some(&signed(&[TEST_WEBHOOK_SECRET], not_event)))
        .await;
    assert_problem(response, 400, "invalid_request").await;

    assert!(app.event_outcomes().await.is_empty());
    assert_eq!(
        app.payment(attempt["id"].as_str().unwrap()).await["status"],
        "pending"
    );
    let metrics = app.get("/metrics").await.text().await.unwrap();
    assert!(metrics.contains(r#"payorch_webhook_events_total{outcome="rejected"} 7"#));
}

#[tokio::test]
async fn both_secrets_of_a_rotation_verify() {
    let app = TestApp::spawn_config(|config| {
        config.sandbox.processing_ms = 3_600_000;
        config.settings.reconciler.interval = Duration::from_secs(3600);
        config.webhook_secrets = vec!["whsec_new".into(), "whsec_old".into()];
    })
    .await;
    app.sandbox.set_webhook_url(None);
    let first = app.pending_attempt("rotate-1").await;
    let second = app.pending_attempt("rotate-2").await;
    let old = event("processing", "evt_old", &first);
    let new = event("succeeded", "evt_new", &second);
    // As the provider sends during a roll: one v1 per secret it signs with.
    let both = event("succeeded", "evt_both", &first);
    for (body, header) in [
        (&old, signed(&["whsec_old"], &old)),
        (&new, signed(&["whsec_new"], &new)),
        (&both, signed(&["whsec_retired", "whsec_new"], &both)),
    ] {
        let response = app.deliver(body, Some(&header)).await;
        assert_eq!(response.status(), 200, "{body}");
    }
    assert_eq!(app.event_outcomes().await.len(), 3);
}

#[tokio::test]
async fn unknown_attempts_and_unhandled_types_are_recorded_and_acknowledged() {
    let app = quiet_app().await;
    let attempt = app.pending_attempt("known").await;
    let mut stranger = attempt.clone();
    stranger["id"] = format!("pay_{}", uuid::Uuid::now_v7().simple()).into();
    stranger["provider_payment_id"] = "pi_not_ours".into();
    let receipt = app
        .deliver_signed(&event("succeeded", "evt_stranger", &stranger))
        .await;
    assert_eq!(receipt["outcome"], "unknown_attempt");

    let mut created: Value =
        serde_json::from_str(&event("processing", "evt_created", &attempt)).unwrap();
    created["type"] = "payment_intent.created".into();
    let receipt = app.deliver_signed(&created.to_string()).await;
    assert_eq!(receipt["outcome"], "ignored");

    assert_eq!(
        app.event_outcomes().await,
        [
            ("evt_stranger".to_string(), "unknown_attempt".to_string()),
            ("evt_created".to_string(), "ignored".to_string()),
        ]
    );
    assert_eq!(
        app.payment(attempt["id"].as_str().unwrap()).await["status"],
        "pending"
    );
}

#[tokio::test]
async fn an_event_that_disagrees_with_the_attempt_is_a_conflict_and_changes_nothing() {
    let app = quiet_app().await;
    let attempt = app.pending_attempt("disagree").await;
    let id = attempt["id"].as_str().unwrap();
    let known_charge = attempt["provider_payment_id"].clone();
    let altered = |event_id: &str, change: &dyn Fn(&mut Value)| {
        let mut body: Value =
            serde_json::from_str(&event("succeeded", event_id, &attempt)).unwrap();
        change(&mut body["data"]["object"]);
        body.to_string()
    };
    type Change<'a> = &'a dyn Fn(&mut Value);
    let cases: [(&str, Change); 3] = [
        ("evt_amount", &|o| o["amount"] = 1.into()),
        ("evt_currency", &|o| o["currency"] = "usd".into()),
        ("evt_charge", &|o| o["id"] = "pi_made_up".into()),
    ];
    for (event_id, change) in cases {
        let receipt = app.deliver_signed(&altered(event_id, change)).await;
        assert_eq!(receipt["outcome"], "conflict", "{event_id}");
        let now = app.payment(id).await;
        assert_eq!(now["status"], "pending", "{event_id} changed nothing");
        assert_eq!(now["provider_payment_id"], known_charge, "{event_id}");
    }
    // The event that agrees still applies.
    let receipt = app
        .deliver_signed(&event("succeeded", "evt_agrees", &attempt))
        .await;
    assert_eq!(receipt["outcome"], "applied");
    assert_eq!(app.payment(id).await["status"], "succeeded");
    let metrics = app.get("/metrics").await.text().await.unwrap();
    assert!(metrics.contains(r#"payorch_webhook_events_total{outcome="conflict"} 3"#));
    // Support sees each conflict, naming the payment by the id the API uses everywhere.
    let attention: Value = app
        .get_as(&app.support_key, "/v1/support/needs-a-human")
        .await
        .json()
        .await
        .unwrap();
    let conflicts = attention["webhook_conflicts"].as_array().unwrap();
    assert_eq!(conflicts.len(), 3, "{attention}");
    for conflict in conflicts {
        assert_eq!(conflict["payment_id"], id, "{conflict}");
    }
}

#[tokio::test]
async fn an_event_naming_another_attempts_charge_is_a_conflict() {
    let app = quiet_app().await;
    let first = app.pending_attempt("charge-a").await;
    // An attempt whose charge id payorch does not know yet (the provider's answer was lost).
    let (status, second) = app
        .pay(Route::Checkout, "charge-b", "pm_sandbox_lost_response")
        .await;
    assert_eq!(status, 201);
    assert!(second["provider_payment_id"].is_null());
    let mut claims = second.clone();
    claims["provider_payment_id"] = first["provider_payment_id"].clone();
    let receipt = app
        .deliver_signed(&event("succeeded", "evt_other_charge", &claims))
        .await;
    assert_eq!(receipt["outcome"], "conflict");
    let now = app.payment(second["id"].as_str().unwrap()).await;
    assert_eq!(now["status"], "pending");
    assert!(now["provider_payment_id"].is_null());
}

/// A replica remembers the attempts it saw finish and judges their webhooks without reading
/// the attempt (a final attempt never changes); the outcomes are the read path's.
#[tokio::test]
async fn events_about_an_attempt_this_replica_saw_finish_are_judged_as_read() {
    let app = quiet_app().await;
    let (status, paid) = app.pay(Route::Checkout, "remembered", "pm_card_visa").await;
    assert_eq!(status, 201);
    assert_eq!(paid["status"], "succeeded");
    let succeeded = event("succeeded", "evt_late_success", &paid);
    assert_eq!(app.deliver_signed(&succeeded).await["outcome"], "stale");
    assert_eq!(app.deliver_signed(&succeeded).await["duplicate"], true);
    let failed = event("payment_failed", "evt_late_failure", &paid);
    assert_eq!(app.deliver_signed(&failed).await["outcome"], "conflict");
    let mut other_amount: Value =
        serde_json::from_str(&event("succeeded", "evt_other_amount", &paid)).unwrap();
    other_amount["data"]["object"]["amount"] = 1.into();
    assert_eq!(
        app.deliver_signed(&other_amount.to_string()).await["outcome"],
        "conflict"
    );
    // Another charge id is not the remembered attempt's: read, and judged a conflict.
    let mut other_charge: Value =
        serde_json::from_str(&event("succeeded", "evt_other_charge", &paid)).unwrap();
    other_charge["data"]["object"]["id"] = "pi_made_up".into();
    assert_eq!(
        app.deliver_signed(&other_charge.to_string()).await["outcome"],
        "conflict"
    );
    assert_eq!(
        app.event_outcomes().await,
        [
            ("evt_late_success".to_string(), "stale".to_string()),
            ("evt_late_failure".to_string(), "conflict".to_string()),
            ("evt_other_amount".to_string(), "conflict".to_string()),
            ("evt_other_charge".to_string(), "conflict".to_string()),
        ]
    );
    assert_eq!(
        app.payment(paid["id"].as_str().unwrap()).await["status"],
        "succeeded"
    );
}

/// Events that change nothing share a batch; each delivery is still answered for itself, and
/// two copies of one event in the same batch are recorded once.
#[tokio::test]
async fn many_late_events_at_once_are_each_recorded_once() {
    let app = quiet_app().await;
    let (_, paid) = app.pay(Route::Checkout, "batched", "pm_card_visa").await;
    assert_eq!(paid["status"], "succeeded");
    let bodies: Vec<String> = (0..20)
        .map(|n| event("succeeded", &format!("evt_batch_{n}"), &paid))
        .collect();
    let receipts = join_all(
        bodies
            .iter()
            .chain(bodies.iter())
            .map(|body| app.deliver_signed(body)),
    )
    .await;
    let recorded = receipts.iter().filter(|r| r["duplicate"] == false).count();
    let duplicates = receipts.iter().filter(|r| r["duplicate"] == true).count();
    assert_eq!((recorded, duplicates), (20, 20), "{receipts:?}");
    assert!(receipts
        .iter()
        .filter(|r| r["duplicate"] == false)
        .all(|r| r["outcome"] == "stale"));
    let outcomes = app.event_outcomes().await;
    assert_eq!(outcomes.len(), 20);
    assert!(outcomes.iter().all(|(_, outcome)| outcome == "stale"));
    // Each event's second copy is counted on its row.
    let mut conn = app.db.connect().await;
    let deliveries: Vec<i32> = provider_webhooks::table
        .select(provider_webhooks::deliveries)
        .load(&mut conn)
        .await
        .unwrap();
    assert_eq!(deliveries, [2; 20]);
    let story: Value = app
        .get_as(
            &app.support_key,
            &format!("/v1/support/payments/{}", paid["id"].as_str().unwrap()),
        )
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(story["webhook_events"][0]["deliveries"], 2, "{story}");
}
