//! One decline vocabulary through both protocols (docs/guides/declines.md, "Codes"; the test
//! payment methods: docs/guides/test-cards.md, "Declines"): a card declined for one reason is
//! the same `failure_code` and `failure_class` on the payment whether it went through the
//! Stripe-protocol provider or the Adyen-protocol one, with the provider's own code kept
//! beside them in `provider_failure_code`; and so whichever way the decline was told: by the
//! provider's answer, by a Stripe webhook alone, or by an Adyen `AUTHORISATION` notification
//! alone (which names no code, only the reason in Adyen's words). The support story and the
//! `payment.failed` events show the same. The expected code and class of each test payment
//! method are the last column of the docs' table, so the page and payorch cannot part.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{json, Value};

use payorch_sandbox::{Decline, AUTHENTICATION_FAILED, DECLINES};

use crate::helpers::{eventually, TestApp, TestConfig};
use crate::payments::Route;
use crate::webhooks::event;

const THREE_D_SECURE: &str = "pm_card_threeDSecure2Required";

/// docs/guides/test-cards.md as it was when the tests were built: an edit to the page made
/// while they run is read by the next build, not half-way through a run.
const TEST_CARDS: &str = include_str!("../../docs/guides/test-cards.md");

/// Every declining test payment method with its decline, and the failed challenge, which a
/// webhook or a notification can tell alone.
fn told_declines() -> impl Iterator<Item = (&'static str, &'static Decline)> {
    DECLINES
        .iter()
        .map(|d| (d.token.unwrap(), d))
        .chain([(THREE_D_SECURE, &AUTHENTICATION_FAILED)])
}

/// `payment method → (failure_code, failure_class)` as docs/guides/test-cards.md,
/// "Declines", lists them.
fn documented() -> BTreeMap<String, (String, String)> {
    let section = TEST_CARDS
        .split("\n### Declines\n")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .expect("docs/guides/test-cards.md has a Declines section");
    section
        .lines()
        .filter(|line| line.starts_with("| `pm_"))
        .map(|row| {
            let cells: Vec<&str> = row.trim_matches('|').split(" | ").collect();
            let token = cells[0].trim().split('`').nth(1).unwrap().to_owned();
            let last = cells.last().unwrap().trim();
            let code = last.split('`').nth(1).unwrap().to_owned();
            let class = last
                .split('(')
                .nth(1)
                .and_then(|rest| rest.split([')', ':']).next())
                .unwrap()
                .to_owned();
            (token, (code, class))
        })
        .collect()
}

/// What payorch must say of `token`'s decline: the docs' code and class.
fn expected(docs: &BTreeMap<String, (String, String)>, token: &str) -> (String, String) {
    docs.get(token)
        .cloned()
        .unwrap_or_else(|| panic!("{token} is not in docs/guides/test-cards.md, \"Declines\""))
}

/// The payment `id` is failed with `code` and `class`, and the provider's own code for
/// `decline` beside them.
async fn declined_as(
    app: &TestApp,
    id: &str,
    (code, class): &(String, String),
    provider: &str,
    decline: &Decline,
    what: &str,
) {
    let payment = app.payment(id).await;
    assert_eq!(payment["status"], "failed", "{what}: {payment}");
    assert_eq!(payment["failure_code"], code.as_str(), "{what}: {payment}");
    assert_eq!(
        payment["failure_class"],
        class.as_str(),
        "{what}: {payment}"
    );
    let raw = payment["provider_failure_code"]
        .as_str()
        .unwrap_or_else(|| panic!("{what}: no provider_failure_code: {payment}"));
    // Stripe's `code/decline_code` (or the one present); Adyen's `refusalReasonCode`, which a
    // notification's reason is read back to.
    let said = match (provider, decline.decline_code) {
        ("stripe", Some(decline_code)) => format!("{}/{decline_code}", decline.code),
        ("stripe", None) => decline.code.to_owned(),
        _ => decline.adyen.code.to_owned(),
    };
    assert_eq!(raw, said, "{what}: {payment}");
}

/// Told by the answer: every declining test payment method through each provider.
#[tokio::test]
async fn each_decline_is_one_code_and_class_through_both_providers() {
    let app = TestApp::spawn().await;
    // The answers decide, not a webhook or notification that may come first.
    app.sandbox.set_webhook_url(None);
    app.sandbox.set_notification_url(None);
    let docs = expected_all(&documented());
    for decline in DECLINES {
        let token = decline.token.unwrap();
        for provider in ["stripe", "adyen"] {
            let what = format!("{token} through {provider}");
            let attempt = app
                .pay_through(provider, &format!("{provider}-{token}"), token)
                .await;
            assert_eq!(attempt["status"], "failed", "{what}: {attempt}");
            let id = attempt["id"].as_str().unwrap();
            declined_as(&app, id, &docs[token], provider, decline, &what).await;
            assert_eq!(app.charges_for(id), 0, "{what}");
            // Support's story shows the payment as the merchant's view does.
            let story = app.story(id).await;
            let payment = app.payment(id).await;
            for field in ["failure_code", "failure_class", "provider_failure_code"] {
                assert_eq!(story["payment"][field], payment[field], "{what}: {field}");
            }
        }
    }
    // Each `payment.failed` event carries the payment as `GET` shows it, class and all.
    let response = app
        .get_as(
            &app.merchant_key,
            "/v1/events?type=payment.failed&limit=100",
        )
        .await;
    assert_eq!(response.status(), 200);
    let events: Value = response.json().await.unwrap();
    let events = events["data"].as_array().unwrap();
    assert_eq!(events.len(), DECLINES.len() * 2);
    for event in events {
        let object = &event["data"]["object"];
        let payment = app.payment(object["id"].as_str().unwrap()).await;
        for field in ["failure_code", "failure_class", "provider_failure_code"] {
            assert!(payment[field].is_string(), "{field}: {payment}");
            assert_eq!(object[field], payment[field], "{field}: {event}");
        }
    }
}

/// Every declining token of the sandbox is in the docs' table, and nothing else is.
fn expected_all(
    docs: &BTreeMap<String, (String, String)>,
) -> BTreeMap<&'static str, (String, String)> {
    let tokens: BTreeMap<&'static str, (String, String)> = DECLINES
        .iter()
        .map(|d| d.token.unwrap())
        .chain([THREE_D_SECURE])
        .map(|token| (token, expected(docs, token)))
        .collect();
    assert_eq!(tokens.len(), docs.len(), "{docs:?}");
    tokens
}

/// An app whose provider leaves `pm_sandbox_processing` processing for an hour and whose
/// reconciler sleeps, so that only the webhook or notification a test sends tells an attempt's
/// end. Its provider calls may take 5 s, not the test apps' usual 1 s: the attempt must have
/// its provider's charge id, which only the create's answer gives here, and a loaded machine
/// can take longer than 1 s to answer (a timeout leaves the attempt without it).
async fn told_only_by_the_test() -> TestApp {
    TestApp::spawn_config(|config: &mut TestConfig| {
        config.provider_timeout = Duration::from_secs(5);
        // The key's lease outlasts the slowest answer, as in every test app.
        config.settings.idempotency.lease = Duration::from_secs(10);
        config.sandbox.processing_ms = 3_600_000;
        config.settings.reconciler.interval = Duration::from_secs(3600);
        config.settings.reconciler.backoff = vec![Duration::from_secs(3600)];
    })
    .await
}

/// A checkout with `pm_sandbox_processing` under `key`: pending, with the provider's charge
/// id the notification must name (waited for, should the answer be recorded after the
/// checkout's own answer).
async fn pending_with_its_charge(app: &TestApp, key: &str) -> Value {
    let (status, attempt) = app.pay(Route::Checkout, key, "pm_sandbox_processing").await;
    assert_eq!(status, 201, "{key}: {attempt}");
    assert_eq!(attempt["status"], "pending", "{key}: {attempt}");
    let id = attempt["id"].as_str().unwrap().to_owned();
    let known = eventually(Duration::from_secs(10), || {
        let id = id.clone();
        async move { app.payment(&id).await["provider_payment_id"].is_string() }
    })
    .await;
    let attempt = app.payment(&id).await;
    assert!(
        known && attempt["provider_payment_id"].is_string(),
        "{key}: no provider_payment_id to tell the decline by: {attempt}"
    );
    assert_eq!(attempt["status"], "pending", "{key}: {attempt}");
    attempt
}

/// Told by a Stripe webhook alone: the attempt was left pending (`pm_sandbox_processing`,
/// which the sandbox keeps `processing` here), then a signed `payment_intent.payment_failed`
/// carries the decline's `last_payment_error` as the sandbox words it.
#[tokio::test]
async fn a_decline_told_by_a_stripe_webhook_is_the_same() {
    let app = told_only_by_the_test().await;
    app.sandbox.set_webhook_url(None);
    let docs = expected_all(&documented());
    for (token, decline) in told_declines() {
        let what = format!("{token} by a Stripe webhook");
        let attempt = pending_with_its_charge(&app, &format!("webhook-{token}")).await;
        let mut body: Value =
            serde_json::from_str(&event("payment_failed", &format!("evt_{token}"), &attempt))
                .unwrap();
        let object = &mut body["data"]["object"];
        object["payment_method"] = json!(token);
        object["last_payment_error"] = serde_json::to_value(decline.last_payment_error()).unwrap();
        let receipt = app.deliver_signed(&body.to_string()).await;
        assert_eq!(receipt["outcome"], "applied", "{what}: {receipt}");
        let id = attempt["id"].as_str().unwrap();
        declined_as(&app, id, &docs[token], "stripe", decline, &what).await;
    }
}

/// Told by an Adyen `AUTHORISATION` notification alone: the attempt was left `Received`
/// (`pm_sandbox_processing`, its own notification not delivered), then a signed refusal
/// carries the decline's reason in Adyen's words and its `additionalData`, as the sandbox's
/// notification would.
#[tokio::test]
async fn a_decline_told_by_an_adyen_notification_alone_is_the_same() {
    let app = told_only_by_the_test().await;
    app.route_to(&["adyen"]).await;
    app.sandbox.set_notification_url(None);
    let key = app.sandbox.adyen_hmac_key();
    let docs = expected_all(&documented());
    for (token, decline) in told_declines() {
        let what = format!("{token} by an Adyen notification");
        let attempt = pending_with_its_charge(&app, &format!("notified-{token}")).await;
        let id = attempt["id"].as_str().unwrap();
        let mut additional = json!({});
        if let Some(raw) = decline.adyen.raw {
            additional["refusalReasonRaw"] = json!(raw);
        }
        if let Some(advice) = decline.adyen.merchant_advice {
            additional["merchantAdviceCode"] = json!(advice);
        }
        let refusal = json!({
            "additionalData": additional,
            "amount": {"value": 4200, "currency": "EUR"},
            "eventCode": "AUTHORISATION",
            "eventDate": "2026-11-27T10:00:00+01:00",
            "merchantAccountCode": payorch::wiring::SANDBOX_MERCHANT_ACCOUNT,
            "merchantReference": id,
            "pspReference": attempt["provider_payment_id"],
            "paymentMethod": decline.adyen.brand,
            "reason": decline.adyen.reason,
            "success": "false",
        });
        let answer = app.notify(&[refusal], key.expose()).await;
        assert_eq!(answer.status(), 200, "{what}");
        declined_as(&app, id, &docs[token], "adyen", decline, &what).await;
    }
}

/// The sandbox itself telling it: a payer fails the 3-D Secure challenge and never comes
/// back to payorch, so only the provider's webhook (Stripe) or notification (Adyen) tells
/// the decline; both are `authentication_failed`.
#[tokio::test]
async fn a_failed_challenge_told_by_the_provider_alone_is_the_same_through_both() {
    let app = TestApp::spawn_with(|settings| {
        settings.reconciler.interval = Duration::from_secs(3600);
        settings.reconciler.backoff = vec![Duration::from_secs(3600)];
    })
    .await;
    let docs = expected_all(&documented());
    let browser = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    for provider in ["stripe", "adyen"] {
        let what = format!("a failed challenge through {provider}");
        app.route_to(&[provider]).await;
        let body = json!({
            "amount": 4200, "currency": "eur", "payment_method": THREE_D_SECURE,
            "return_url": "https://shop.example/thanks",
        });
        let response = app.checkout(&format!("challenge-{provider}"), &body).await;
        assert_eq!(response.status(), 201, "{what}");
        let payment = response.json::<Value>().await.unwrap()["payment"].clone();
        assert_eq!(payment["status"], "pending", "{what}: {payment}");
        let page = payment["next_action"]["url"].as_str().unwrap();
        let pressed = browser.post(format!("{page}/fail")).send().await.unwrap();
        assert_eq!(pressed.status(), 303, "{what}");
        let id = payment["id"].as_str().unwrap().to_owned();
        let told = eventually(Duration::from_secs(20), || {
            let app = &app;
            let id = id.clone();
            async move { app.payment(&id).await["status"] == "failed" }
        })
        .await;
        assert!(told, "{what}: never told");
        let story = app.story(&id).await;
        let last = story["timeline"]
            .as_array()
            .unwrap()
            .last()
            .unwrap()
            .clone();
        assert_eq!(last["source"], "webhook", "{what}: {story}");
        declined_as(
            &app,
            &id,
            &docs[THREE_D_SECURE],
            provider,
            &AUTHENTICATION_FAILED,
            &what,
        )
        .await;
        assert_eq!(app.charges_for(&id), 0, "{what}");
    }
}
