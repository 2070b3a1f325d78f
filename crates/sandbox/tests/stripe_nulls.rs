//! `--null-rate`: the fields Stripe's OpenAPI document marks `nullable` come `null` in the
//! Stripe face's answers and events at that rate, never a field it does not mark so, and the
//! ledger is the truth whatever the answers showed.

mod common;

use std::time::Duration;

use common::{client, fast, get, start, stripe_post, Receiver, SandboxConfig};
use serde_json::Value;

const INTENT_NULLABLE: [&str; 6] = [
    "description",
    "latest_charge",
    "last_payment_error",
    "canceled_at",
    "cancellation_reason",
    "payment_method",
];
const REFUND_NULLABLE: [&str; 4] = ["status", "metadata", "payment_intent", "reason"];

fn all_null(object: &Value, fields: &[&str]) {
    for field in fields {
        assert_eq!(object[*field], Value::Null, "{field} in {object}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_rate_one_every_nullable_field_is_null_in_answers_and_events_and_the_ledger_is_true() {
    let hook = Receiver::start().await;
    let sandbox = start(SandboxConfig {
        null_rate: 1.0,
        webhook_url: Some(hook.url.clone()),
        ..fast()
    })
    .await;
    let client = client(Duration::from_secs(5));
    let form = [
        ("amount", "1200"),
        ("currency", "eur"),
        ("payment_method", "pm_card_visa"),
        ("confirm", "true"),
        ("payment_method_types[0]", "card"),
        ("description", "a lamp"),
        ("metadata[attempt_id]", "att_null"),
    ];
    let paid = stripe_post(
        &client,
        &sandbox,
        "/v1/payment_intents",
        Some("k-null"),
        &form,
    )
    .await
    .expect("answered");
    assert_eq!(paid.status, 200);
    all_null(&paid.body, &INTENT_NULLABLE);
    // Not nullable in the document: always there.
    assert_eq!(paid.body["status"], "succeeded");
    assert_eq!(paid.body["metadata"]["attempt_id"], "att_null");
    assert_eq!(paid.body["amount"], 1200);
    let id = paid.body["id"].as_str().expect("an id").to_owned();
    let replay = stripe_post(
        &client,
        &sandbox,
        "/v1/payment_intents",
        Some("k-null"),
        &form,
    )
    .await
    .expect("answered");
    assert_eq!(replay.bytes, paid.bytes, "a replay is the answer recorded");
    let retrieved = get(&client, &sandbox, &format!("/v1/payment_intents/{id}")).await;
    all_null(&retrieved.body, &INTENT_NULLABLE);
    let listed = get(&client, &sandbox, "/v1/payment_intents").await;
    all_null(&listed.body["data"][0], &INTENT_NULLABLE);

    let declined = stripe_post(
        &client,
        &sandbox,
        "/v1/payment_intents",
        None,
        &[
            ("amount", "1200"),
            ("currency", "eur"),
            ("payment_method", "pm_card_chargeDeclined"),
            ("confirm", "true"),
            ("payment_method_types[0]", "card"),
        ],
    )
    .await
    .expect("answered");
    assert_eq!(declined.status, 402);
    assert_eq!(declined.body["error"]["decline_code"], "generic_decline");
    all_null(&declined.body["error"]["payment_intent"], &INTENT_NULLABLE);

    let refund = stripe_post(
        &client,
        &sandbox,
        "/v1/refunds",
        None,
        &[
            ("payment_intent", id.as_str()),
            ("amount", "200"),
            ("reason", "requested_by_customer"),
            ("metadata[refund_id]", "ref_1"),
        ],
    )
    .await
    .expect("answered");
    assert_eq!(refund.status, 200);
    all_null(&refund.body, &REFUND_NULLABLE);
    assert_eq!(refund.body["amount"], 200);
    let refund_id = refund.body["id"].as_str().expect("an id").to_owned();
    let retrieved = get(&client, &sandbox, &format!("/v1/refunds/{refund_id}")).await;
    all_null(&retrieved.body, &REFUND_NULLABLE);

    let events = common::eventually("the events", || {
        let received = hook.received();
        (received.len() >= 3).then_some(received)
    })
    .await;
    for event in &events {
        let object = &event["data"]["object"];
        match object["object"].as_str() {
            Some("payment_intent") => all_null(object, &INTENT_NULLABLE),
            Some("refund") => all_null(object, &REFUND_NULLABLE),
            other => panic!("an event about {other:?}"),
        }
        assert!(event["type"].is_string() && event["id"].is_string());
    }

    // The truth is untouched.
    let entry = sandbox
        .ledger()
        .into_iter()
        .find(|e| e.provider_id == id)
        .expect("in the ledger");
    assert_eq!(
        (entry.status.as_str(), entry.payment_method.as_deref()),
        ("succeeded", Some("pm_card_visa"))
    );
    let refunds = sandbox.refunds();
    assert_eq!(refunds[0].status, "succeeded");
    assert_eq!(refunds[0].refund_id.as_deref(), Some("ref_1"));
    sandbox.stop().await;
    hook.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_at_rate_one_hides_when_and_why_and_at_rate_zero_shows_them() {
    for (rate, hidden) in [(1.0, true), (0.0, false)] {
        let sandbox = start(SandboxConfig {
            null_rate: rate,
            ..fast()
        })
        .await;
        let client = client(Duration::from_secs(5));
        let made = stripe_post(
            &client,
            &sandbox,
            "/v1/payment_intents",
            None,
            &[("amount", "300"), ("currency", "eur"), ("description", "d")],
        )
        .await
        .expect("answered");
        let id = made.body["id"].as_str().expect("an id").to_owned();
        let canceled = stripe_post(
            &client,
            &sandbox,
            &format!("/v1/payment_intents/{id}/cancel"),
            None,
            &[("cancellation_reason", "abandoned")],
        )
        .await
        .expect("answered");
        assert_eq!(canceled.body["status"], "canceled");
        for field in ["canceled_at", "cancellation_reason", "description"] {
            assert_eq!(
                canceled.body[field].is_null(),
                hidden,
                "{field} at {rate}: {}",
                canceled.body
            );
        }
        sandbox.stop().await;
    }
}
