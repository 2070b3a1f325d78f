//! 3-D Secure on the Stripe face (docs/guides/test-cards.md, "The sandbox"): `pm_card_threeDSecure2Required` waits
//! in `requires_action` with a redirect to the sandbox's own challenge page, whose first
//! button pressed decides; the customer comes back to `return_url` with Stripe's parameters.

mod common;

use std::time::Duration;

use common::{client, fast, ledger, location, press, start, stripe_post, Receiver};
use serde_json::Value;

const RETURN_URL: &str = "https://shop.example/paid?order=42";

fn three_ds(attempt: &str, capture_method: &'static str) -> Vec<(&'static str, String)> {
    vec![
        ("amount", "1999".into()),
        ("currency", "eur".into()),
        ("payment_method", "pm_card_threeDSecure2Required".into()),
        ("confirm", "true".into()),
        ("capture_method", capture_method.into()),
        ("return_url", RETURN_URL.into()),
        ("metadata[attempt_id]", attempt.into()),
    ]
}

fn refs<'a>(form: &'a [(&'a str, String)]) -> Vec<(&'a str, &'a str)> {
    form.iter().map(|(k, v)| (*k, v.as_str())).collect()
}

/// The query of `url` as pairs.
fn query(url: &str) -> Vec<(String, String)> {
    reqwest::Url::parse(url)
        .expect("a URL")
        .query_pairs()
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}

async fn waiting(
    client: &reqwest::Client,
    sandbox: &payorch_sandbox::SandboxHandle,
    attempt: &str,
    capture_method: &'static str,
) -> Value {
    let form = three_ds(attempt, capture_method);
    let made = stripe_post(
        client,
        sandbox,
        "/v1/payment_intents",
        Some(attempt),
        &refs(&form),
    )
    .await
    .expect("answered");
    assert_eq!(made.status, 200, "{:?}", made.body);
    assert_eq!(made.body["status"], "requires_action");
    made.body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_challenge_completed_charges_once_and_sends_the_customer_back() {
    let hook = Receiver::start().await;
    let sandbox = start(common::SandboxConfig {
        webhook_url: Some(hook.url.clone()),
        ..fast()
    })
    .await;
    let client = client(Duration::from_secs(5));

    // Stripe wants somewhere to send the customer back to.
    let mut no_way_back = three_ds("3ds_none", "automatic");
    no_way_back.retain(|(name, _)| *name != "return_url");
    let refused = stripe_post(
        &client,
        &sandbox,
        "/v1/payment_intents",
        Some("3ds_none"),
        &refs(&no_way_back),
    )
    .await
    .expect("answered");
    assert_eq!(refused.status, 400);
    assert_eq!(refused.body["error"]["type"], "invalid_request_error");
    assert_eq!(refused.body["error"]["param"], "return_url");

    let intent = waiting(&client, &sandbox, "3ds_ok", "automatic").await;
    let id = intent["id"].as_str().expect("an id");
    let page_url = format!("{}/__sandbox/3ds/{id}", sandbox.base_url());
    assert_eq!(
        intent["next_action"],
        serde_json::json!({
            "type": "redirect_to_url",
            "redirect_to_url": {"url": page_url, "return_url": RETURN_URL},
        })
    );
    assert_eq!(intent["amount_received"], 0);
    let entry = sandbox
        .ledger()
        .into_iter()
        .find(|e| e.provider_id == id)
        .expect("kept");
    assert!(!entry.is_charged(), "nothing charged before the challenge");

    let page = client.get(&page_url).send().await.expect("the page");
    assert_eq!(page.status(), 200);
    assert!(page.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/html"));
    let html = page.text().await.expect("html");
    assert!(html.contains("id=\"complete\""), "{html}");
    assert!(html.contains("id=\"fail\""), "{html}");
    assert!(
        html.contains(&format!("action=\"/__sandbox/3ds/{id}/complete\"")),
        "{html}"
    );
    assert!(!html.contains("src="), "no external assets: {html}");

    let done = press(&client, &format!("{page_url}/complete")).await;
    assert_eq!(done.status(), 303);
    let back = location(&done);
    assert!(back.starts_with("https://shop.example/paid?"), "{back}");
    let secret = intent["client_secret"].as_str().expect("a secret");
    assert_eq!(
        query(&back),
        [
            ("order".to_owned(), "42".to_owned()),
            ("payment_intent".to_owned(), id.to_owned()),
            ("payment_intent_client_secret".to_owned(), secret.to_owned()),
            ("redirect_status".to_owned(), "succeeded".to_owned()),
        ]
    );
    let paid = common::get(&client, &sandbox, &format!("/v1/payment_intents/{id}")).await;
    assert_eq!(paid.body["status"], "succeeded");
    assert_eq!(paid.body["amount_received"], 1999);
    assert!(paid.body["next_action"].is_null());

    // Pressed again, or the other button: the page tells what happened, nothing moves.
    for button in ["complete", "fail"] {
        let again = press(&client, &format!("{page_url}/{button}")).await;
        assert_eq!(again.status(), 200);
        let html = again.text().await.expect("html");
        assert!(html.contains("data-status=\"succeeded\""), "{html}");
    }
    let shown = client.get(&page_url).send().await.expect("the page");
    assert!(!shown.text().await.unwrap().contains("id=\"complete\""));

    let charged: Vec<_> = sandbox
        .ledger()
        .into_iter()
        .filter(|e| e.provider_id == id && e.is_charged())
        .collect();
    assert_eq!(charged.len(), 1);
    assert_eq!(charged[0].idempotency_key.as_deref(), Some("3ds_ok"));
    let events = common::eventually("the webhooks", || {
        let events = hook.stripe_events(id);
        (events.len() >= 2).then_some(events)
    })
    .await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        hook.stripe_events(id),
        events,
        "no webhook for the later presses"
    );
    assert_eq!(
        events,
        ["payment_intent.requires_action", "payment_intent.succeeded"]
    );
    sandbox.stop().await;
    hook.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_challenge_failed_declines_with_stripes_authentication_error() {
    let hook = Receiver::start().await;
    let sandbox = start(common::SandboxConfig {
        webhook_url: Some(hook.url.clone()),
        ..fast()
    })
    .await;
    let client = client(Duration::from_secs(5));
    let intent = waiting(&client, &sandbox, "3ds_fail", "automatic").await;
    let id = intent["id"].as_str().expect("an id");
    let failed = press(
        &client,
        &format!("{}/__sandbox/3ds/{id}/fail", sandbox.base_url()),
    )
    .await;
    assert_eq!(failed.status(), 303);
    let back = query(&location(&failed));
    assert!(back.contains(&("redirect_status".to_owned(), "failed".to_owned())));

    let declined = common::get(&client, &sandbox, &format!("/v1/payment_intents/{id}")).await;
    assert_eq!(declined.body["status"], "requires_payment_method");
    let error = &declined.body["last_payment_error"];
    // Stripe's words for a payer who failed the challenge (not `authentication_required`,
    // which asks for a challenge).
    assert_eq!(error["type"], "invalid_request_error");
    assert_eq!(error["code"], "payment_intent_authentication_failure");
    assert!(error.get("decline_code").is_none(), "{error}");
    assert!(error["message"].as_str().is_some());
    assert!(declined.body["next_action"].is_null());
    assert!(!sandbox.ledger().iter().any(|e| e.is_charged()));
    let events = common::eventually("the webhooks", || {
        let events = hook.stripe_events(id);
        (events.len() >= 2).then_some(events)
    })
    .await;
    assert_eq!(
        events,
        [
            "payment_intent.payment_failed",
            "payment_intent.requires_action"
        ]
    );
    sandbox.stop().await;
    hook.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_challenge_of_a_manual_capture_holds_and_one_canceled_meanwhile_charges_nothing() {
    let sandbox = start(fast()).await;
    let client = client(Duration::from_secs(5));
    let held = waiting(&client, &sandbox, "3ds_hold", "manual").await;
    let id = held["id"].as_str().expect("an id");
    let done = press(
        &client,
        &format!("{}/__sandbox/3ds/{id}/complete", sandbox.base_url()),
    )
    .await;
    assert_eq!(done.status(), 303);
    assert!(query(&location(&done)).contains(&("redirect_status".into(), "succeeded".into())));
    let got = common::get(&client, &sandbox, &format!("/v1/payment_intents/{id}")).await;
    assert_eq!(got.body["status"], "requires_capture");
    assert_eq!(got.body["amount_capturable"], 1999);
    let book = ledger(&client, &sandbox).await;
    assert_eq!(book["holds"][0]["provider_id"], id);
    assert_eq!(book["holds"][0]["idempotency_key"], "3ds_hold");

    // The customer left the page; the merchant cancels; the customer comes back and presses.
    let left = waiting(&client, &sandbox, "3ds_left", "automatic").await;
    let left_id = left["id"].as_str().expect("an id");
    let cancel = format!("/v1/payment_intents/{left_id}/cancel");
    let canceled = stripe_post(
        &client,
        &sandbox,
        &cancel,
        Some("cancel-left"),
        &[("cancellation_reason", "abandoned")],
    )
    .await
    .expect("answered");
    assert_eq!(canceled.body["status"], "canceled");
    assert!(canceled.body["next_action"].is_null());
    let late = press(
        &client,
        &format!("{}/__sandbox/3ds/{left_id}/complete", sandbox.base_url()),
    )
    .await;
    assert_eq!(late.status(), 200);
    assert!(late
        .text()
        .await
        .unwrap()
        .contains("data-status=\"canceled\""));
    let got = common::get(&client, &sandbox, &format!("/v1/payment_intents/{left_id}")).await;
    assert_eq!(got.body["status"], "canceled");
    assert_eq!(got.body["amount_received"], 0);
    let book = ledger(&client, &sandbox).await;
    assert!(
        book["voids"].as_array().unwrap().is_empty(),
        "nothing was held"
    );

    let unknown = client
        .get(format!("{}/__sandbox/3ds/pi_nope", sandbox.base_url()))
        .send()
        .await
        .expect("answered");
    assert_eq!(unknown.status(), 404);
    sandbox.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_confirm_of_a_three_ds_card_takes_its_return_url() {
    let sandbox = start(fast()).await;
    let client = client(Duration::from_secs(5));
    let form = [("amount", "700"), ("currency", "eur")];
    let made = stripe_post(&client, &sandbox, "/v1/payment_intents", None, &form)
        .await
        .expect("answered");
    let confirm = format!(
        "/v1/payment_intents/{}/confirm",
        made.body["id"].as_str().unwrap()
    );
    let token = ("payment_method", "pm_card_threeDSecure2Required");
    let refused = stripe_post(&client, &sandbox, &confirm, Some("c1"), &[token])
        .await
        .expect("answered");
    assert_eq!(refused.status, 400);
    assert_eq!(refused.body["error"]["param"], "return_url");
    let confirmed = stripe_post(
        &client,
        &sandbox,
        &confirm,
        Some("c1"),
        &[token, ("return_url", RETURN_URL)],
    )
    .await
    .expect("answered");
    assert_eq!(confirmed.body["status"], "requires_action");
    assert_eq!(
        confirmed.body["next_action"]["redirect_to_url"]["return_url"],
        RETURN_URL
    );
    let without_confirm = [
        ("amount", "700"),
        ("currency", "eur"),
        ("return_url", RETURN_URL),
    ];
    let refused = stripe_post(
        &client,
        &sandbox,
        "/v1/payment_intents",
        None,
        &without_confirm,
    )
    .await
    .expect("answered");
    assert_eq!(refused.status, 400);
    assert_eq!(refused.body["error"]["param"], "return_url");
    sandbox.stop().await;
}
