//! Faults around captures and cancels (lib.rs, "Fault model"): `pm_sandbox_capture_*`
//! payments authorise as a good card does and fault their first capture or cancel; the
//! global knobs fault every one. A resend under the same key gets the key's first result:
//! what was done after a lost answer, the `500` after a fault's `500` (Stripe saves it), so a
//! careful client captures a hold at most once whatever the faults, and learns what a `500`
//! hid by retrieving the intent.

mod common;

use std::time::{Duration, Instant};

use common::{client, fast, start, stripe_post, SandboxConfig};
use payorch_sandbox::SandboxHandle;

/// A held payment made with `payment_method`: its id.
async fn hold(client: &reqwest::Client, sandbox: &SandboxHandle, payment_method: &str) -> String {
    let form = [
        ("amount", "800"),
        ("currency", "eur"),
        ("payment_method", payment_method),
        ("confirm", "true"),
        ("payment_method_types[0]", "card"),
        ("capture_method", "manual"),
        ("metadata[attempt_id]", payment_method),
    ];
    let held = stripe_post(client, sandbox, "/v1/payment_intents", None, &form)
        .await
        .expect("the authorisation is answered");
    assert_eq!(held.body["status"], "requires_capture", "{payment_method}");
    held.body["id"].as_str().expect("an id").to_owned()
}

fn captures_of(sandbox: &SandboxHandle, id: &str) -> Vec<payorch_sandbox::CaptureEntry> {
    let captures = sandbox.captures();
    captures
        .into_iter()
        .filter(|c| c.provider_id == id)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_capture_answer_is_had_again_under_its_key_and_captures_once() {
    let sandbox = start(fast()).await;
    let patient = client(Duration::from_secs(5));
    let id = hold(&patient, &sandbox, "pm_sandbox_capture_lost_response").await;
    let capture = format!("/v1/payment_intents/{id}/capture");

    let impatient = client(Duration::from_millis(400));
    let lost = stripe_post(&impatient, &sandbox, &capture, Some("cap-1"), &[]).await;
    assert!(lost.is_none(), "the first capture is never answered");
    let made = captures_of(&sandbox, &id);
    assert_eq!(made.len(), 1, "but it was made");
    assert_eq!(made[0].idempotency_key.as_deref(), Some("cap-1"));

    let resent = stripe_post(&patient, &sandbox, &capture, Some("cap-1"), &[])
        .await
        .expect("the resend is answered");
    assert!(resent.replayed);
    assert_eq!(resent.body["status"], "succeeded");
    assert_eq!(resent.body["amount_received"], 800);
    let other_key = stripe_post(&patient, &sandbox, &capture, Some("cap-2"), &[])
        .await
        .expect("answered");
    assert_eq!(
        other_key.body["error"]["code"],
        "payment_intent_unexpected_state"
    );
    assert_eq!(captures_of(&sandbox, &id).len(), 1);
    sandbox.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_before_does_nothing_and_an_error_after_did_it_and_each_key_replays_its_500() {
    let sandbox = start(fast()).await;
    let client = client(Duration::from_secs(5));

    let before = hold(&client, &sandbox, "pm_sandbox_capture_error_before").await;
    let capture = format!("/v1/payment_intents/{before}/capture");
    let failed = stripe_post(&client, &sandbox, &capture, Some("b-1"), &[])
        .await
        .expect("answered");
    assert_eq!(failed.status, 500);
    assert_eq!(failed.body["error"]["type"], "api_error");
    assert!(
        captures_of(&sandbox, &before).is_empty(),
        "nothing was done"
    );
    let retried = stripe_post(&client, &sandbox, &capture, Some("b-1"), &[])
        .await
        .expect("answered");
    assert_eq!(
        (retried.status, retried.replayed),
        (500, true),
        "the key's first result was the 500"
    );
    assert_eq!(retried.bytes, failed.bytes);
    assert!(captures_of(&sandbox, &before).is_empty());
    let other_key = stripe_post(&client, &sandbox, &capture, Some("b-2"), &[])
        .await
        .expect("answered");
    assert_eq!(other_key.status, 200, "the fault was the first call's only");
    assert_eq!(captures_of(&sandbox, &before).len(), 1);

    let after = hold(&client, &sandbox, "pm_sandbox_capture_error_after").await;
    let cancel = format!("/v1/payment_intents/{after}/cancel");
    let failed = stripe_post(&client, &sandbox, &cancel, Some("a-1"), &[])
        .await
        .expect("answered");
    assert_eq!(failed.status, 500);
    let voids = sandbox.voids();
    assert!(
        voids.iter().any(|v| v.provider_id == after),
        "the cancel was made"
    );
    let resent = stripe_post(&client, &sandbox, &cancel, Some("a-1"), &[])
        .await
        .expect("answered");
    assert!(resent.replayed);
    assert_eq!(
        (resent.status, &resent.bytes),
        (500, &failed.bytes),
        "the resend learns nothing more than the first answer"
    );
    let now = common::get(&client, &sandbox, &format!("/v1/payment_intents/{after}")).await;
    assert_eq!(now.body["status"], "canceled", "a retrieve tells");
    let capture = format!("/v1/payment_intents/{after}/capture");
    let too_late = stripe_post(&client, &sandbox, &capture, Some("a-2"), &[])
        .await
        .expect("answered");
    assert_eq!(too_late.status, 400, "a voided hold is never captured");
    assert!(captures_of(&sandbox, &after).is_empty());
    sandbox.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fault_token_charges_as_a_good_card_when_captured_at_once() {
    let sandbox = start(fast()).await;
    let client = client(Duration::from_secs(5));
    let form = [
        ("amount", "800"),
        ("currency", "eur"),
        ("payment_method", "pm_sandbox_capture_error_after"),
        ("confirm", "true"),
        ("payment_method_types[0]", "card"),
    ];
    let paid = stripe_post(&client, &sandbox, "/v1/payment_intents", None, &form)
        .await
        .expect("answered");
    assert_eq!(paid.status, 200);
    assert_eq!(paid.body["status"], "succeeded");
    sandbox.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_global_knobs_fault_captures_and_cancels_too() {
    // Every request refused before it is read: captures and cancels as creates.
    let refusing = start(SandboxConfig {
        error_rate: 1.0,
        ..fast()
    })
    .await;
    let client = client(Duration::from_secs(5));
    for path in ["capture", "cancel"] {
        let answer = stripe_post(
            &client,
            &refusing,
            &format!("/v1/payment_intents/pi_x/{path}"),
            None,
            &[],
        )
        .await
        .expect("answered");
        assert_eq!(answer.status, 500, "{path}");
    }
    refusing.stop().await;

    // Every answer lost after the work is done, and every answer late.
    let losing = start(SandboxConfig {
        lost_response_rate: 1.0,
        latency_ms: 300,
        ..fast()
    })
    .await;
    let impatient = common::client(Duration::from_millis(900));
    let form = [
        ("amount", "800"),
        ("currency", "eur"),
        ("payment_method", "pm_card_visa"),
        ("confirm", "true"),
        ("payment_method_types[0]", "card"),
        ("capture_method", "manual"),
    ];
    assert!(
        stripe_post(&impatient, &losing, "/v1/payment_intents", Some("h"), &form)
            .await
            .is_none()
    );
    let id = losing.holds().first().expect("held").provider_id.clone();
    let capture = format!("/v1/payment_intents/{id}/capture");
    assert!(stripe_post(&impatient, &losing, &capture, Some("c"), &[])
        .await
        .is_none());
    assert_eq!(losing.captures().len(), 1, "done, though not answered");
    let started = Instant::now();
    let resent = stripe_post(&impatient, &losing, &capture, Some("c"), &[])
        .await
        .expect("a replay is answered");
    assert!(
        started.elapsed() >= Duration::from_millis(300),
        "latency applies"
    );
    assert!(resent.replayed);
    assert_eq!(losing.captures().len(), 1);
    losing.stop().await;
}
