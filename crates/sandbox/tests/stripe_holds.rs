//! The Stripe face's authorise-then-capture and cancel (docs/guides/test-cards.md, "The sandbox"): a manual
//! capture holds, a capture takes all or part of the hold once, a cancel releases it, each
//! with Stripe's idempotency, errors and webhooks, and the ledger tells holds, captures and
//! voids apart.

mod common;

use std::time::Duration;

use common::{client, fast, ledger, start, stripe_post, Receiver};
use serde_json::Value;

fn manual(attempt: &str, payment_method: &'static str) -> Vec<(&'static str, String)> {
    vec![
        ("amount", "500".into()),
        ("currency", "eur".into()),
        ("payment_method", payment_method.into()),
        ("confirm", "true".into()),
        ("payment_method_types[0]", "card".into()),
        ("capture_method", "manual".into()),
        ("metadata[attempt_id]", attempt.into()),
    ]
}

fn refs<'a>(form: &'a [(&'a str, String)]) -> Vec<(&'a str, &'a str)> {
    form.iter().map(|(k, v)| (*k, v.as_str())).collect()
}

fn entries<'a>(ledger: &'a Value, list: &str, id: &str) -> Vec<&'a Value> {
    ledger[list]
        .as_array()
        .expect("a list")
        .iter()
        .filter(|entry| entry["provider_id"] == id)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manual_capture_holds_then_captures_once_part_of_it() {
    let hook = Receiver::start().await;
    let sandbox = start(common::SandboxConfig {
        webhook_url: Some(hook.url.clone()),
        ..fast()
    })
    .await;
    let client = client(Duration::from_secs(5));
    let form = manual("hold_1", "pm_card_visa");
    let held = stripe_post(
        &client,
        &sandbox,
        "/v1/payment_intents",
        Some("create-1"),
        &refs(&form),
    )
    .await
    .expect("answered");
    assert_eq!(held.status, 200);
    let id = held.body["id"].as_str().expect("an id").to_owned();
    assert_eq!(held.body["status"], "requires_capture");
    assert_eq!(held.body["capture_method"], "manual");
    assert_eq!(held.body["amount_capturable"], 500);
    assert_eq!(held.body["amount_received"], 0);

    let book = ledger(&client, &sandbox).await;
    let holds = entries(&book, "holds", &id);
    assert_eq!(holds.len(), 1);
    assert_eq!(holds[0]["status"], "held");
    assert_eq!(holds[0]["idempotency_key"], "create-1");
    assert_eq!(holds[0]["attempt_id"], "hold_1");
    assert!(entries(&book, "captures", &id).is_empty());
    let charge = sandbox
        .ledger()
        .into_iter()
        .find(|entry| entry.provider_id == id)
        .expect("in the ledger");
    assert!(!charge.is_charged(), "a hold is no charge");

    // Too much, or nothing: refused, and the hold stays.
    let capture = format!("/v1/payment_intents/{id}/capture");
    let too_much = stripe_post(
        &client,
        &sandbox,
        &capture,
        Some("cap-x"),
        &[("amount_to_capture", "501")],
    )
    .await
    .expect("answered");
    assert_eq!(too_much.status, 400);
    assert_eq!(too_much.body["error"]["type"], "invalid_request_error");
    assert_eq!(too_much.body["error"]["code"], "amount_too_large");
    assert_eq!(too_much.body["error"]["param"], "amount_to_capture");
    let nothing = stripe_post(
        &client,
        &sandbox,
        &capture,
        None,
        &[("amount_to_capture", "0")],
    )
    .await
    .expect("answered");
    assert_eq!(nothing.status, 400);
    assert_eq!(nothing.body["error"]["code"], "parameter_invalid_integer");

    // The refused key was not spent: it captures now, once, and replays byte for byte.
    let captured = stripe_post(
        &client,
        &sandbox,
        &capture,
        Some("cap-x"),
        &[("amount_to_capture", "300")],
    )
    .await
    .expect("answered");
    assert_eq!(captured.status, 200);
    assert_eq!(captured.body["status"], "succeeded");
    assert_eq!(captured.body["amount_received"], 300);
    assert_eq!(captured.body["amount_capturable"], 0);
    assert_eq!(captured.body["amount"], 500);
    let replay = stripe_post(
        &client,
        &sandbox,
        &capture,
        Some("cap-x"),
        &[("amount_to_capture", "300")],
    )
    .await
    .expect("answered");
    assert!(replay.replayed);
    assert_eq!(replay.bytes, captured.bytes);
    let other = stripe_post(
        &client,
        &sandbox,
        &capture,
        Some("cap-x"),
        &[("amount_to_capture", "200")],
    )
    .await
    .expect("answered");
    assert_eq!(other.status, 400);
    assert_eq!(other.body["error"]["type"], "idempotency_error");
    let again = stripe_post(&client, &sandbox, &capture, Some("cap-y"), &[])
        .await
        .expect("answered");
    assert_eq!(again.status, 400);
    assert_eq!(
        again.body["error"]["code"],
        "payment_intent_unexpected_state"
    );
    assert_eq!(again.body["error"]["payment_intent"]["status"], "succeeded");

    let book = ledger(&client, &sandbox).await;
    let captures = entries(&book, "captures", &id);
    assert_eq!(captures.len(), 1, "{captures:?}");
    assert_eq!(captures[0]["amount"], 300);
    assert_eq!(captures[0]["released"], 200);
    assert_eq!(captures[0]["idempotency_key"], "cap-x");
    assert_eq!(captures[0]["attempt_id"], "hold_1");
    assert_eq!(captures[0]["status"], "succeeded");
    assert_eq!(captures[0]["capture_id"], captured.body["latest_charge"]);
    assert_eq!(entries(&book, "holds", &id)[0]["status"], "captured");
    assert_eq!(entries(&book, "holds", &id)[0]["captured"], 300);
    assert!(entries(&book, "data", &id)[0]["status"] == "succeeded");

    // Only what was captured can go back.
    let refund = [("payment_intent", id.as_str()), ("amount", "301")];
    let refused = stripe_post(&client, &sandbox, "/v1/refunds", None, &refund)
        .await
        .expect("answered");
    assert_eq!(refused.body["error"]["code"], "amount_too_large");

    let events = common::eventually("the capture's webhook", || {
        let events = hook.stripe_events(&id);
        (events.len() >= 2).then_some(events)
    })
    .await;
    assert_eq!(
        events,
        [
            "payment_intent.amount_capturable_updated",
            "payment_intent.succeeded"
        ]
    );
    sandbox.stop().await;
    hook.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn of_many_captures_of_one_hold_at_once_one_captures() {
    let sandbox = start(fast()).await;
    let client = client(Duration::from_secs(5));
    let form = manual("hold_race", "pm_card_visa");
    let held = stripe_post(&client, &sandbox, "/v1/payment_intents", None, &refs(&form))
        .await
        .expect("answered");
    let id = held.body["id"].as_str().expect("an id").to_owned();
    let capture = format!("/v1/payment_intents/{id}/capture");
    let cancel = format!("/v1/payment_intents/{id}/cancel");
    // Every request in flight before any is answered: captures and cancels under their own
    // keys, as from replicas that each think the hold is theirs to end.
    let mut racing = tokio::task::JoinSet::new();
    for n in 0..12 {
        let path = if n % 3 == 0 {
            cancel.clone()
        } else {
            capture.clone()
        };
        let (client, base) = (client.clone(), sandbox.base_url());
        racing.spawn(async move {
            let key = format!("race-{n}");
            common::stripe_post_at(&client, &base, &path, Some(&key), &[]).await
        });
    }
    let answers: Vec<common::Answer> = racing
        .join_all()
        .await
        .into_iter()
        .map(|answer| answer.expect("answered"))
        .collect();
    let won: Vec<_> = answers.iter().filter(|a| a.status == 200).collect();
    assert_eq!(won.len(), 1, "{answers:?}");
    for lost in answers.iter().filter(|a| a.status != 200) {
        assert_eq!(
            lost.body["error"]["code"],
            "payment_intent_unexpected_state"
        );
    }
    let book = ledger(&client, &sandbox).await;
    let moved = entries(&book, "captures", &id).len() + entries(&book, "voids", &id).len();
    assert_eq!(moved, 1, "one capture or one void, never both: {book}");
    sandbox.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_releases_a_hold_which_is_then_never_captured() {
    let hook = Receiver::start().await;
    let sandbox = start(common::SandboxConfig {
        webhook_url: Some(hook.url.clone()),
        ..fast()
    })
    .await;
    let client = client(Duration::from_secs(5));
    let form = manual("void_1", "pm_card_visa");
    let held = stripe_post(&client, &sandbox, "/v1/payment_intents", None, &refs(&form))
        .await
        .expect("answered");
    let id = held.body["id"].as_str().expect("an id").to_owned();
    let cancel = format!("/v1/payment_intents/{id}/cancel");

    let bad = stripe_post(
        &client,
        &sandbox,
        &cancel,
        Some("void-k"),
        &[("cancellation_reason", "bored")],
    )
    .await
    .expect("answered");
    assert_eq!(bad.status, 400);
    assert_eq!(bad.body["error"]["param"], "cancellation_reason");
    let reason = [("cancellation_reason", "requested_by_customer")];
    let canceled = stripe_post(&client, &sandbox, &cancel, Some("void-k"), &reason)
        .await
        .expect("answered");
    assert_eq!(canceled.status, 200);
    assert_eq!(canceled.body["status"], "canceled");
    assert_eq!(
        canceled.body["cancellation_reason"],
        "requested_by_customer"
    );
    assert!(canceled.body["canceled_at"].as_i64().is_some());
    assert_eq!(canceled.body["amount_capturable"], 0);
    let replay = stripe_post(&client, &sandbox, &cancel, Some("void-k"), &reason)
        .await
        .expect("answered");
    assert!(replay.replayed);
    assert_eq!(replay.bytes, canceled.bytes);

    let capture = format!("/v1/payment_intents/{id}/capture");
    let late = stripe_post(&client, &sandbox, &capture, Some("late"), &[])
        .await
        .expect("answered");
    assert_eq!(late.status, 400);
    assert_eq!(
        late.body["error"]["code"],
        "payment_intent_unexpected_state"
    );
    let twice = stripe_post(&client, &sandbox, &cancel, Some("void-2"), &[])
        .await
        .expect("answered");
    assert_eq!(twice.status, 400);
    assert_eq!(
        twice.body["error"]["code"],
        "payment_intent_unexpected_state"
    );

    let book = ledger(&client, &sandbox).await;
    let voids = entries(&book, "voids", &id);
    assert_eq!(voids.len(), 1);
    assert_eq!(voids[0]["amount"], 500);
    assert_eq!(voids[0]["idempotency_key"], "void-k");
    assert_eq!(voids[0]["reason"], "requested_by_customer");
    assert_eq!(entries(&book, "holds", &id)[0]["status"], "voided");
    assert!(entries(&book, "captures", &id).is_empty());

    // Retrieve and search show the canceled hold as it is.
    let got = common::get(&client, &sandbox, &format!("/v1/payment_intents/{id}")).await;
    assert_eq!(got.body["cancellation_reason"], "requested_by_customer");
    assert_eq!(got.body["capture_method"], "manual");
    let found = common::get(
        &client,
        &sandbox,
        "/v1/payment_intents/search?query=status:%27canceled%27",
    )
    .await;
    assert_eq!(found.body["data"][0]["id"], id.as_str());

    let events = common::eventually("the cancel's webhook", || {
        let events = hook.stripe_events(&id);
        (events.len() >= 2).then_some(events)
    })
    .await;
    assert_eq!(
        events,
        [
            "payment_intent.amount_capturable_updated",
            "payment_intent.canceled"
        ]
    );
    sandbox.stop().await;
    hook.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_is_allowed_where_stripe_allows_it() {
    let sandbox = start(common::SandboxConfig {
        processing_ms: 60_000,
        ..fast()
    })
    .await;
    let client = client(Duration::from_secs(5));
    let create = |payment_method: &'static str, confirm: &'static str| {
        vec![
            ("amount", "900"),
            ("currency", "usd"),
            ("payment_method", payment_method),
            ("confirm", confirm),
            ("payment_method_types[0]", "card"),
        ]
    };
    for (form, status) in [
        (create("pm_sandbox_processing", "true"), "processing"),
        (create("pm_card_visa", "false"), "requires_confirmation"),
    ] {
        let made = stripe_post(&client, &sandbox, "/v1/payment_intents", None, &form)
            .await
            .expect("answered");
        assert_eq!(made.body["status"], status);
        let cancel = format!(
            "/v1/payment_intents/{}/cancel",
            made.body["id"].as_str().unwrap()
        );
        let canceled = stripe_post(&client, &sandbox, &cancel, None, &[])
            .await
            .expect("answered");
        assert_eq!(canceled.body["status"], "canceled", "from {status}");
    }
    let book = ledger(&client, &sandbox).await;
    assert!(
        book["voids"].as_array().unwrap().is_empty(),
        "nothing was held"
    );
    sandbox.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manual_capture_of_a_processing_card_is_authorised_when_it_settles() {
    let sandbox = start(fast()).await;
    let client = client(Duration::from_secs(5));
    let form = manual("slow_bank", "pm_sandbox_processing");
    let made = stripe_post(&client, &sandbox, "/v1/payment_intents", None, &refs(&form))
        .await
        .expect("answered");
    assert_eq!(made.body["status"], "processing");
    let path = format!("/v1/payment_intents/{}", made.body["id"].as_str().unwrap());
    let settled = common::eventually("the settlement", || {
        let ledger = sandbox.holds();
        ledger.first().cloned()
    })
    .await;
    assert_eq!(settled.status, "held");
    let got = common::get(&client, &sandbox, &path).await;
    assert_eq!(got.body["status"], "requires_capture");
    assert_eq!(got.body["amount_capturable"], 500);
    assert!(got.body["latest_charge"].as_str().is_some());
    sandbox.stop().await;
}
