//! The Stripe face's fault tokens and its idempotency keys: a key's first result is saved
//! "whatever it was, including 500 errors" (Stripe's docs, "Idempotent requests"), so after
//! `pm_sandbox_error_after` (charged, then a `500`) a resend with the key gets the `500` again,
//! never the charge; the ledger has the charge. A failure before the API saw the request
//! (`--error-rate`) saves nothing.

mod common;

use std::time::Duration;

use common::{client, fast, get, start, stripe_post, SandboxConfig};
use payorch_sandbox::SandboxHandle;

fn create(
    payment_method: &'static str,
    attempt: &'static str,
) -> Vec<(&'static str, &'static str)> {
    vec![
        ("amount", "700"),
        ("currency", "eur"),
        ("payment_method", payment_method),
        ("confirm", "true"),
        ("payment_method_types[0]", "card"),
        ("metadata[attempt_id]", attempt),
    ]
}

fn charged(sandbox: &SandboxHandle, attempt: &str) -> usize {
    sandbox
        .ledger()
        .iter()
        .filter(|e| e.attempt_id.as_deref() == Some(attempt) && e.is_charged())
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_after_charges_and_its_key_replays_the_500_not_the_charge() {
    // One answer kept byte for byte: the key's 500 must outlive its bytes too.
    let sandbox = start(SandboxConfig {
        keep_answers: 1,
        ..fast()
    })
    .await;
    let client = client(Duration::from_secs(5));
    let form = create("pm_sandbox_error_after", "att_after");
    let first = stripe_post(
        &client,
        &sandbox,
        "/v1/payment_intents",
        Some("k-after"),
        &form,
    )
    .await
    .expect("answered");
    assert_eq!(first.status, 500);
    assert_eq!(first.body["error"]["type"], "api_error");
    assert_eq!(charged(&sandbox, "att_after"), 1, "the charge was made");
    let entry = sandbox
        .ledger()
        .into_iter()
        .find(|e| e.attempt_id.as_deref() == Some("att_after"))
        .expect("in the ledger");
    assert_eq!(entry.idempotency_key.as_deref(), Some("k-after"));

    let resent = stripe_post(
        &client,
        &sandbox,
        "/v1/payment_intents",
        Some("k-after"),
        &form,
    )
    .await
    .expect("answered");
    assert_eq!((resent.status, resent.replayed), (500, true));
    assert_eq!(resent.bytes, first.bytes, "the same body");

    // Another key's answer pushes this one's bytes out; the key still answers its 500.
    let other = stripe_post(
        &client,
        &sandbox,
        "/v1/payment_intents",
        Some("k-other"),
        &create("pm_card_visa", "att_other"),
    )
    .await
    .expect("answered");
    assert_eq!(other.status, 200);
    let late = stripe_post(
        &client,
        &sandbox,
        "/v1/payment_intents",
        Some("k-after"),
        &form,
    )
    .await
    .expect("answered");
    assert_eq!((late.status, late.replayed), (500, true));
    assert_eq!(late.bytes, first.bytes);
    assert_eq!(charged(&sandbox, "att_after"), 1, "charged once");
    sandbox.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_confirm_meets_the_charge_faults_and_its_key_replays_them() {
    let sandbox = start(fast()).await;
    let client = client(Duration::from_secs(5));
    for (token, attempt, made) in [
        ("pm_sandbox_error_after", "att_confirm_after", 1),
        ("pm_sandbox_error_before", "att_confirm_before", 0),
    ] {
        let unconfirmed = [
            ("amount", "700"),
            ("currency", "eur"),
            ("payment_method", token),
            ("metadata[attempt_id]", attempt),
        ];
        let intent = stripe_post(&client, &sandbox, "/v1/payment_intents", None, &unconfirmed)
            .await
            .expect("answered");
        assert_eq!(intent.body["status"], "requires_confirmation", "{token}");
        let id = intent.body["id"].as_str().expect("an id");
        let confirm = format!("/v1/payment_intents/{id}/confirm");
        let first = stripe_post(&client, &sandbox, &confirm, Some(attempt), &[])
            .await
            .expect("answered");
        assert_eq!(first.status, 500, "{token}");
        let resent = stripe_post(&client, &sandbox, &confirm, Some(attempt), &[])
            .await
            .expect("answered");
        assert_eq!((resent.status, resent.replayed), (500, true), "{token}");
        assert_eq!(resent.bytes, first.bytes, "{token}");
        assert_eq!(charged(&sandbox, attempt), made, "{token}");
    }
    sandbox.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_before_charges_nothing_and_its_key_replays_the_500() {
    let sandbox = start(fast()).await;
    let client = client(Duration::from_secs(5));
    let form = create("pm_sandbox_error_before", "att_before");
    let first = stripe_post(
        &client,
        &sandbox,
        "/v1/payment_intents",
        Some("k-before"),
        &form,
    )
    .await
    .expect("answered");
    assert_eq!(first.status, 500);
    let resent = stripe_post(
        &client,
        &sandbox,
        "/v1/payment_intents",
        Some("k-before"),
        &form,
    )
    .await
    .expect("answered");
    assert_eq!((resent.status, resent.replayed), (500, true));
    assert_eq!(resent.bytes, first.bytes);
    let mismatch = stripe_post(
        &client,
        &sandbox,
        "/v1/payment_intents",
        Some("k-before"),
        &create("pm_card_visa", "att_before"),
    )
    .await
    .expect("answered");
    assert_eq!(
        (mismatch.status, mismatch.body["error"]["type"].as_str()),
        (400, Some("idempotency_error")),
        "the key is spent on the first request's parameters"
    );
    assert_eq!(charged(&sandbox, "att_before"), 0);
    assert!(sandbox.ledger().is_empty(), "nothing was charged");
    sandbox.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refund_fault_500_is_the_keys_first_result_whether_or_not_the_refund_was_made() {
    let sandbox = start(fast()).await;
    let client = client(Duration::from_secs(5));
    let paid = stripe_post(
        &client,
        &sandbox,
        "/v1/payment_intents",
        None,
        &create("pm_card_visa", "att_refunded"),
    )
    .await
    .expect("answered");
    let id = paid.body["id"].as_str().expect("an id").to_owned();
    for (fault, made) in [("error_after", 1), ("error_before", 0)] {
        let form = [
            ("payment_intent", id.as_str()),
            ("amount", "100"),
            ("metadata[sandbox_fault]", fault),
        ];
        let before = sandbox.refunds().len();
        let first = stripe_post(&client, &sandbox, "/v1/refunds", Some(fault), &form)
            .await
            .expect("answered");
        assert_eq!(first.status, 500, "{fault}");
        assert_eq!(sandbox.refunds().len(), before + made, "{fault}");
        let resent = stripe_post(&client, &sandbox, "/v1/refunds", Some(fault), &form)
            .await
            .expect("answered");
        assert_eq!((resent.status, resent.replayed), (500, true), "{fault}");
        assert_eq!(resent.bytes, first.bytes, "{fault}");
        assert_eq!(sandbox.refunds().len(), before + made, "{fault}: once");
    }
    let listed = get(
        &client,
        &sandbox,
        &format!("/v1/refunds?payment_intent={id}"),
    )
    .await;
    assert_eq!(
        listed.body["data"].as_array().map(Vec::len),
        Some(1),
        "the list tells what the 500 hid"
    );
    sandbox.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failure_before_the_api_saw_the_request_saves_nothing() {
    let sandbox = start(SandboxConfig {
        error_rate: 1.0,
        ..fast()
    })
    .await;
    let client = client(Duration::from_secs(5));
    let form = create("pm_card_visa", "att_edge");
    for _ in 0..2 {
        let refused = stripe_post(
            &client,
            &sandbox,
            "/v1/payment_intents",
            Some("k-edge"),
            &form,
        )
        .await
        .expect("answered");
        assert_eq!((refused.status, refused.replayed), (500, false));
    }
    assert!(sandbox.ledger().is_empty());
    sandbox.stop().await;
}
