//! `/console` in headless Chromium (see [`crate::browser`]). Screenshots of each state are
//! saved under `target/tmp/screenshots/`.

use std::time::Duration;

use fantoccini::Locator;
use serde_json::json;

use crate::browser::{browser, screenshot, show, text_with};

use crate::helpers::TestApp;
use crate::payments::Route;

#[tokio::test]
async fn a_support_person_finds_a_stuck_payment_sees_its_story_and_reconciles_it() {
    let Some((_driver, client)) = browser().await else {
        return;
    };
    let app = TestApp::spawn_config(|config| {
        config.settings.reconciler.interval = Duration::from_secs(3600);
        config.settings.reconciler.alert_after = Duration::ZERO;
    })
    .await;
    app.sandbox.set_webhook_url(None);
    let (_, pending) = app
        .pay(Route::Checkout, "browser-lost", "pm_sandbox_lost_response")
        .await;
    assert_eq!(pending["status"], "pending");
    let id = pending["id"].as_str().unwrap();

    client.goto(&app.url("/console")).await.unwrap();
    let key = client.find(Locator::Id("key")).await.unwrap();
    key.send_keys(&app.support_key).await.unwrap();
    screenshot(&client, "console-1-key").await;
    key.send_keys("\u{E007}").await.unwrap(); // Enter submits the form.
    let attention = text_with(&client, "attention-lists", id).await;
    assert!(
        attention.contains("Open past the alert age (1)"),
        "{attention}"
    );
    screenshot(&client, "console-2-needs-a-human").await;

    let query = client.find(Locator::Id("query")).await.unwrap();
    query.send_keys("browser-lost").await.unwrap();
    query.send_keys("\u{E007}").await.unwrap();
    let timeline = text_with(&client, "timeline", "provider call").await;
    assert!(
        timeline.contains("pending by provider_response"),
        "{timeline}"
    );
    assert!(timeline.contains("create by api: unknown"), "{timeline}");
    let summary = text_with(&client, "summary", id).await;
    assert!(summary.contains("browser-lost"), "{summary}");
    show(&client, "story").await;
    screenshot(&client, "console-3-story-pending").await;

    client
        .find(Locator::Id("reconcile"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let result = text_with(&client, "reconcile-result", "succeeded").await;
    assert!(result.contains("the payment succeeded"), "{result}");
    let timeline = text_with(&client, "timeline", "succeeded by support").await;
    assert!(timeline.contains("asked by support key"), "{timeline}");
    let results = text_with(&client, "result-list", "succeeded").await;
    assert!(
        !results.contains("pending"),
        "the list is refreshed: {results}"
    );
    show(&client, "story").await;
    screenshot(&client, "console-4-reconciled").await;
    assert_eq!(app.charges_for(id), 1);

    // A refund shows in the story once it is read again.
    let refund = app
        .post_keyed(
            &app.merchant_key,
            &format!("/v1/payments/{id}/refunds"),
            Some("console-refund"),
            Some(json!({"amount": 1000}).to_string()),
        )
        .await;
    assert_eq!(refund.status(), 201);
    let refund: serde_json::Value = refund.json().await.unwrap();
    client
        .find(Locator::Id("reconcile"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let summary = text_with(&client, "summary", "1 refund(s)").await;
    assert!(summary.contains("€10.00 in 1 refund(s)"), "{summary}");
    let timeline = text_with(&client, "timeline", "refund").await;
    assert!(
        timeline.contains("succeeded by provider_response"),
        "{timeline}"
    );
    show(&client, "story").await;
    screenshot(&client, "console-4b-refunded").await;
    // A refund id finds its payment.
    client.refresh().await.unwrap();
    let query = client.find(Locator::Id("query")).await.unwrap();
    query
        .send_keys(refund["id"].as_str().unwrap())
        .await
        .unwrap();
    query.send_keys("\u{E007}").await.unwrap();
    let summary = text_with(&client, "summary", id).await;
    assert!(summary.contains("1 refund(s)"), "{summary}");

    // The key never reaches a URL.
    let url = client.current_url().await.unwrap();
    assert!(!url.as_str().contains("sk_sup"), "{url}");

    client.set_window_size(390, 844).await.unwrap();
    screenshot(&client, "console-5-phone").await;
    client.close().await.unwrap();
}
