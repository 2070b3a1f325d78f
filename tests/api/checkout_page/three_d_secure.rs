//! The checkout page with a card whose bank asks the payer to confirm (docs/guides/three-d-secure.md, "3-D Secure"):
//! the page sends the payer to the sandbox's challenge page, the bank sends them back through
//! payorch's return route, and the page shows what became of the one payment. Judged by the
//! sandbox ledger: one charge at most, and one payment at the provider per order, so one
//! challenge, whatever the payer does in between.

use std::time::Duration;

use fantoccini::{Client, Locator};

use super::{choose, click_pay, open, order_of, receipt, stored_key, wait_phase};
use crate::browser::{browser, run, screenshot, show, text_with};
use crate::helpers::TestApp;

const THREE_D_SECURE: &str = "pm_card_threeDSecure2Required";

/// An app in which only the payer's return finishes a challenged payment: the sandbox sends no
/// webhooks, and the reconciler first asks about an open payment a minute after it was made.
async fn quiet_app() -> TestApp {
    let app = TestApp::spawn_with(|settings| {
        settings.reconciler.backoff = vec![Duration::from_secs(60)];
    })
    .await;
    app.sandbox.set_webhook_url(None);
    app
}

/// Waits until the browser is at an address starting with `prefix`; the address.
async fn wait_address(client: &Client, prefix: &str) -> String {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    let mut address = String::new();
    while tokio::time::Instant::now() < deadline {
        address = client.current_url().await.unwrap().to_string();
        if address.starts_with(prefix) {
            return address;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the browser never went to {prefix}…; it is at {address}");
}

/// Pays the open order with the 3-D Secure card and waits at the bank's page; its address.
async fn pay_until_the_bank_asks(client: &Client, app: &TestApp) -> String {
    choose(client, THREE_D_SECURE).await;
    click_pay(client).await;
    wait_address(
        client,
        &format!("{}/__sandbox/3ds/", app.sandbox.base_url()),
    )
    .await
}

/// The payer presses `button` (`complete` or `fail`) on the bank's page.
async fn press(client: &Client, button: &str) {
    client
        .find(Locator::Id(button))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
}

/// What the sandbox holds for `order`: every payment it was asked to make, whatever became of
/// it. One means one challenge.
fn provider_payments(app: &TestApp, order: &str) -> usize {
    app.sandbox
        .ledger()
        .iter()
        .filter(|entry| entry.order_id.as_deref() == Some(order))
        .count()
}

/// The waiting page of a payment that waits for its bank: its id, and the way back to the
/// bank's check it offers.
async fn waiting_for_the_bank(client: &Client) -> (String, String) {
    wait_phase(client, "checking").await;
    text_with(client, "status", "Checking status…").await;
    let payment = text_with(client, "waiting-payment", "pay_").await;
    text_with(client, "challenge", "continue to your bank's check").await;
    let link = client.find(Locator::Id("challenge-link")).await.unwrap();
    let href = link.prop("href").await.unwrap().unwrap_or_default();
    (payment, href)
}

/// The payments of `order` the merchant API shows.
async fn payments_of(app: &TestApp, order: &str) -> Vec<serde_json::Value> {
    order_of(app, order).await["payments"]
        .as_array()
        .unwrap()
        .clone()
}

#[tokio::test]
async fn a_confirmed_bank_check_shows_the_receipt_and_charges_once() {
    let Some((_driver, client)) = browser().await else {
        return;
    };
    let app = quiet_app().await;
    let order = open(&client, &app, None).await;
    let key = stored_key(&client, &order).await;
    pay_until_the_bank_asks(&client, &app).await;
    screenshot(&client, "checkout-11-bank-check").await;
    press(&client, "complete").await;

    let payment = receipt(&client, &order).await;
    assert_eq!(
        text_with(&client, "receipt-method", "3-D Secure").await,
        "3-D Secure test card"
    );
    screenshot(&client, "checkout-12-back-from-the-bank-paid").await;
    let address = client.current_url().await.unwrap();
    assert_eq!(
        address.query(),
        Some(format!("order={order}").as_str()),
        "the address names the order only, so a reload is not a return: {address}"
    );
    assert_eq!(app.charges_for_order(&order), 1);
    assert_eq!(provider_payments(&app, &order), 1);
    let payments = payments_of(&app, &order).await;
    assert_eq!(payments.len(), 1, "{payments:?}");
    assert_eq!(payments[0]["id"], payment);
    assert_eq!(super::key_of_payment(&app, &payment).await, key);
    // No webhook, no reconciler yet: payorch's return route finished it before the page
    // showed anything.
    let story = app.story(&payment).await;
    let last = story["timeline"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(
        (last["to"].as_str(), last["source"].as_str()),
        (Some("succeeded"), Some("provider_response"))
    );
    client.close().await.unwrap();
}

#[tokio::test]
async fn a_failed_bank_check_charges_nothing_and_the_next_card_is_a_new_intent() {
    let Some((_driver, client)) = browser().await else {
        return;
    };
    let app = quiet_app().await;
    let order = open(&client, &app, None).await;
    let first_key = stored_key(&client, &order).await;
    pay_until_the_bank_asks(&client, &app).await;
    press(&client, "fail").await;

    let status = text_with(&client, "status", "Authentication failed").await;
    assert!(
        status.contains("Authentication failed or was abandoned — you were not charged"),
        "{status}"
    );
    wait_phase(&client, "ready").await;
    screenshot(&client, "checkout-13-bank-check-failed").await;
    assert_eq!(app.charges_for_order(&order), 0);
    let next_key = stored_key(&client, &order).await;
    assert_ne!(next_key, first_key, "a new intent, a new key");

    choose(&client, "pm_card_visa").await;
    click_pay(&client).await;
    let payment = receipt(&client, &order).await;
    assert_eq!(super::key_of_payment(&app, &payment).await, next_key);
    assert_eq!(app.charges_for_order(&order), 1);
    assert_eq!(payments_of(&app, &order).await.len(), 2);
    client.close().await.unwrap();
}

#[tokio::test]
async fn leaving_the_bank_check_unfinished_waits_and_charges_nothing() {
    let Some((_driver, client)) = browser().await else {
        return;
    };
    let app = quiet_app().await;
    let order = open(&client, &app, None).await;
    let bank = pay_until_the_bank_asks(&client, &app).await;
    // The payer goes back to the shop without answering the bank.
    client.back().await.unwrap();
    wait_address(&client, &app.url("/checkout")).await;
    let (payment, offered) = waiting_for_the_bank(&client).await;
    assert_eq!(offered, bank, "the same check, not a new one");
    let button = client.find(Locator::Id("pay")).await.unwrap();
    assert!(!button.is_enabled().await.unwrap(), "no paying again");
    show(&client, "status").await;
    screenshot(&client, "checkout-14-bank-check-left").await;
    // The page stays: it does not send the payer back to the bank on its own.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        client
            .current_url()
            .await
            .unwrap()
            .as_str()
            .starts_with(&app.url("/checkout")),
        "the page stayed"
    );
    assert_eq!(app.charges_for_order(&order), 0);
    assert_eq!(provider_payments(&app, &order), 1);
    assert_eq!(app.payment(&payment).await["status"], "pending");
    client.close().await.unwrap();
}

#[tokio::test]
async fn a_reload_or_a_second_tab_during_the_bank_check_follows_the_same_payment() {
    let Some((_driver, client)) = browser().await else {
        return;
    };
    let app = quiet_app().await;
    let order = open(&client, &app, None).await;
    let key = stored_key(&client, &order).await;
    let first = client.window().await.unwrap();
    let bank = pay_until_the_bank_asks(&client, &app).await;

    // The checkout page again while the bank waits, then a reload of it.
    let second = client.new_window(true).await.unwrap().handle;
    client.switch_to_window(second.clone()).await.unwrap();
    client
        .goto(&app.url(&format!("/checkout?order={order}")))
        .await
        .unwrap();
    let (payment, offered) = waiting_for_the_bank(&client).await;
    assert_eq!(offered, bank);
    client.refresh().await.unwrap();
    assert_eq!(
        waiting_for_the_bank(&client).await,
        (payment.clone(), bank.clone())
    );
    assert_eq!(
        stored_key(&client, &order).await,
        key,
        "the intent survived"
    );

    // Back before the bank decided (its return could not learn the outcome): still waiting
    // for the same payment, and the address no longer says it is a return.
    let early_return = format!("/checkout?order={order}&returning=1&payment_id={payment}");
    client.goto(&app.url(&early_return)).await.unwrap();
    assert_eq!(
        waiting_for_the_bank(&client).await,
        (payment.clone(), bank.clone())
    );
    let address = client.current_url().await.unwrap();
    assert_eq!(address.query(), Some(format!("order={order}").as_str()));
    show(&client, "status").await;
    screenshot(&client, "checkout-15-reload-during-bank-check").await;
    assert_eq!(provider_payments(&app, &order), 1, "one challenge");
    assert_eq!(payments_of(&app, &order).await.len(), 1);

    // The payer answers the bank in the first tab; both tabs show the one payment paid.
    client.switch_to_window(first).await.unwrap();
    press(&client, "complete").await;
    assert_eq!(receipt(&client, &order).await, payment);
    client.switch_to_window(second).await.unwrap();
    assert_eq!(receipt(&client, &order).await, payment);
    assert_eq!(app.charges_for_order(&order), 1);
    assert_eq!(provider_payments(&app, &order), 1);
    assert_eq!(super::key_of_payment(&app, &payment).await, key);
    assert_eq!(
        run(&client, "return document.body.dataset.phase").await,
        "paid"
    );
    client.close().await.unwrap();
}
