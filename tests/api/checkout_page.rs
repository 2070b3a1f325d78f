//! `/checkout` in headless Chromium (see [`crate::browser`]): every client-side rule of
//! docs/guides/checkout.md, "The checkout page", judged by the sandbox ledger (one charge) and by the server's own
//! record of the key each payment was made under. Screenshots of each state are saved under
//! `target/tmp/screenshots/`.

mod three_d_secure;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use fantoccini::actions::{
    InputSource, KeyAction, KeyActions, MouseActions, PointerAction, MOUSE_BUTTON_LEFT,
};
use fantoccini::key::Key;
use fantoccini::{Client, Locator};
use serde_json::{json, Value};

use crate::browser::cdp::PageSocket;
use crate::browser::{browser, devtools, run, screenshot, text_with, text_within};
use crate::helpers::{assert_problem, TestApp, TestConfig};

/// Waits until the page's phase (`ready`, `paying`, `checking`, `paid`, …) is `wanted`.
async fn wait_phase(client: &Client, wanted: &str) {
    wait_phases(client, &[wanted]).await;
}

/// Waits until the page's phase is one of `wanted`.
async fn wait_phases(client: &Client, wanted: &[&str]) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    let mut phase = Value::Null;
    while tokio::time::Instant::now() < deadline {
        phase = run(client, "return document.body.dataset.phase || null").await;
        if wanted.iter().any(|w| phase == *w) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the page never reached {wanted:?}; it is {phase}");
}

/// Opens `/checkout` (a new demo order, or `order`'s) until its form is ready; the order id.
async fn open(client: &Client, app: &TestApp, order: Option<&str>) -> String {
    let path = match order {
        Some(id) => format!("/checkout?order={id}"),
        None => "/checkout".into(),
    };
    client.goto(&app.url(&path)).await.unwrap();
    wait_phase(client, "ready").await;
    text_with(client, "order-id", "ord_").await
}

async fn choose(client: &Client, token: &str) {
    client
        .find(Locator::Css(&format!("input[value=\"{token}\"]")))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
}

async fn click_pay(client: &Client) {
    client
        .find(Locator::Id("pay"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
}

/// The Idempotency-Key the page keeps for `order`'s intent.
async fn stored_key(client: &Client, order: &str) -> String {
    let script =
        format!("return JSON.parse(localStorage.getItem('payorch.checkout.intent.{order}')).key");
    run(client, &script).await.as_str().unwrap().to_owned()
}

/// How many payment requests the page has sent since it loaded.
async fn payment_requests(client: &Client) -> u64 {
    run(
        client,
        "return performance.getEntriesByType('resource')\
           .filter(e => /\\/checkout\\/demo\\/orders\\/[^/]+\\/payments$/.test(e.name)).length",
    )
    .await
    .as_u64()
    .unwrap()
}

/// The order as the merchant API shows it, with its payments.
async fn order_of(app: &TestApp, id: &str) -> Value {
    app.get_as(&app.merchant_key, &format!("/v1/orders/{id}"))
        .await
        .json()
        .await
        .unwrap()
}

/// The client key a payment was made under, as the server recorded it.
async fn key_of_payment(app: &TestApp, id: &str) -> String {
    let story = app.story(id).await;
    story["idempotency_key_name"].as_str().unwrap().to_owned()
}

/// The `id` of the element that has keyboard focus.
async fn focused(client: &Client) -> Value {
    run(
        client,
        "return document.activeElement && document.activeElement.id",
    )
    .await
}

/// The `value` of the element that has keyboard focus.
async fn focused_value(client: &Client) -> Value {
    run(
        client,
        "return document.activeElement && document.activeElement.value",
    )
    .await
}

/// What the test does to an answer to a payment request, once the server has sent it.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Fate {
    /// Never delivered, never failed: a half-open connection.
    Held,
    /// The connection is reset after the answer was sent.
    Reset,
    Delivered,
}

/// One answer the interceptor paused: its status, whether the server replayed it
/// (`Idempotent-Replayed: true`), and what was done to it.
type Paused = (u64, bool, Fate);

/// Pauses every answer to a payment request of `client`'s page at the DevTools `Fetch`
/// domain's Response stage, when the server has sent it (so whatever it says is committed),
/// and does to the n-th what `fates[n]` says; later ones are delivered. The task runs until
/// aborted; the record says what it paused and did.
async fn intercept_answers(
    client: &Client,
    page: &str,
    fates: Vec<Fate>,
) -> (tokio::task::JoinHandle<()>, Arc<Mutex<Vec<Paused>>>) {
    let mut socket = PageSocket::connect(client, page).await;
    socket
        .call(
            "Fetch.enable",
            json!({"patterns": [{
                "urlPattern": "*/checkout/demo/orders/*/payments",
                "requestStage": "Response",
            }]}),
        )
        .await;
    let record = Arc::new(Mutex::new(Vec::new()));
    let seen = record.clone();
    let task = tokio::spawn(async move {
        while let Some(event) = socket.event().await {
            if event["method"] != "Fetch.requestPaused" {
                continue;
            }
            let paused = &event["params"];
            let request = paused["requestId"].clone();
            let replayed = paused["responseHeaders"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|h| {
                    h["name"]
                        .as_str()
                        .unwrap_or("")
                        .eq_ignore_ascii_case("idempotent-replayed")
                        && h["value"] == "true"
                });
            let status = paused["responseStatusCode"].as_u64().unwrap_or(0);
            let n = seen.lock().unwrap().len();
            let fate = fates.get(n).copied().unwrap_or(Fate::Delivered);
            seen.lock().unwrap().push((status, replayed, fate));
            match fate {
                Fate::Held => {}
                Fate::Reset => {
                    let params = json!({"requestId": request, "errorReason": "ConnectionReset"});
                    socket.send("Fetch.failRequest", params).await;
                }
                Fate::Delivered => {
                    socket
                        .send("Fetch.continueRequest", json!({"requestId": request}))
                        .await;
                }
            }
        }
    });
    (task, record)
}

/// The receipt's payment id, once the receipt shows; checks the receipt names the order.
async fn receipt(client: &Client, order: &str) -> String {
    let payment = text_with(client, "receipt-payment", "pay_").await;
    assert_eq!(text_with(client, "receipt-order", order).await, order);
    assert!(text_with(client, "receipt-amount", "25")
        .await
        .contains("25.00"));
    payment
}

#[tokio::test]
async fn a_double_click_and_a_click_then_enter_each_charge_once() {
    let Some((_driver, client)) = browser().await else {
        return;
    };
    let app = TestApp::spawn().await;

    let order = open(&client, &app, None).await;
    screenshot(&client, "checkout-1-form").await;
    // A provider that takes 1.5 s: the second click lands while the first is being paid.
    choose(&client, "pm_sandbox_slow").await;
    let pay = client.find(Locator::Id("pay")).await.unwrap();
    let double_click = MouseActions::new("mouse".into())
        .then(PointerAction::MoveToElement {
            element: pay,
            duration: None,
            x: 0.0,
            y: 0.0,
        })
        .then(PointerAction::Down {
            button: MOUSE_BUTTON_LEFT,
        })
        .then(PointerAction::Up {
            button: MOUSE_BUTTON_LEFT,
        })
        // A person's double click: two clicks some 80 ms apart.
        .then(PointerAction::Pause {
            duration: Duration::from_millis(80),
        })
        .then(PointerAction::Down {
            button: MOUSE_BUTTON_LEFT,
        })
        .then(PointerAction::Up {
            button: MOUSE_BUTTON_LEFT,
        });
    client.perform_actions(double_click).await.unwrap();
    let payment = receipt(&client, &order).await;
    assert_eq!(
        text_with(&client, "receipt-method", "Slow").await,
        "Slow provider"
    );
    screenshot(&client, "checkout-2-receipt").await;
    assert_eq!(payment_requests(&client).await, 1, "the form locked");
    assert_eq!(app.charges_for_order(&order), 1);
    assert_eq!(order_of(&app, &order).await["payments"][0]["id"], payment);

    // A new order: the payer clicks Pay, then presses Enter on the card they chose.
    client
        .find(Locator::Id("new-order"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    wait_phase(&client, "ready").await;
    let second = text_with(&client, "order-id", "ord_").await;
    assert_ne!(second, order, "a new order after a paid one");
    choose(&client, "pm_card_mastercard").await;
    let enter = KeyActions::new("keyboard".into())
        .then(KeyAction::Down {
            value: Key::Enter.into(),
        })
        .then(KeyAction::Up {
            value: Key::Enter.into(),
        });
    client
        .execute(
            "document.querySelector('input[value=pm_card_mastercard]').focus()",
            vec![],
        )
        .await
        .unwrap();
    // The click goes to Pay, the Enter to the focused card: each alone submits the form.
    client
        .execute("document.getElementById('pay').click()", vec![])
        .await
        .unwrap();
    client.perform_actions(enter).await.unwrap();
    let payment = receipt(&client, &second).await;
    assert_eq!(payment_requests(&client).await, 1, "the form locked");
    assert_eq!(app.charges_for_order(&second), 1);
    assert_eq!(order_of(&app, &second).await["payments"][0]["id"], payment);
    client.close().await.unwrap();
}

#[tokio::test]
async fn a_lost_response_shows_checking_status_until_the_reconciler_knows() {
    let Some((_driver, client)) = browser().await else {
        return;
    };
    let app = TestApp::spawn().await;
    // No webhook: only the reconciler can learn what happened.
    app.sandbox.set_webhook_url(None);
    let order = open(&client, &app, None).await;
    choose(&client, "pm_sandbox_lost_response").await;
    click_pay(&client).await;
    text_with(&client, "status", "Checking status…").await;
    // A resend that met the first request still in flight (409) shows "Checking status…"
    // before the payment's id is known; the next resend under the key brings it.
    let waiting = text_within(&client, "waiting-payment", "pay_", Duration::from_secs(40)).await;
    let button = client.find(Locator::Id("pay")).await.unwrap();
    assert_eq!(
        button.attr("aria-busy").await.unwrap().as_deref(),
        Some("true")
    );
    assert!(!button.is_enabled().await.unwrap(), "no paying again");
    // Focus on the status, where it went with the form's lock (and where the page puts it
    // back if a redraw dropped it to the page itself).
    let mut focus = Value::Null;
    for _ in 0..100 {
        focus = focused(&client).await;
        if focus == "status" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(focus, "status", "focus went with the form's lock");
    screenshot(&client, "checkout-3-checking-status").await;

    let payment = receipt(&client, &order).await;
    assert_eq!(
        payment, waiting,
        "the payment it waited for is the one that paid"
    );
    assert_eq!(app.charges_for_order(&order), 1);
    assert_eq!(payment_requests(&client).await, 1);
    client.close().await.unwrap();
}

#[tokio::test]
async fn a_reload_in_the_middle_resumes_the_same_payment() {
    let Some((_driver, client)) = browser().await else {
        return;
    };
    // The provider takes 5 s to answer, so that even on a loaded machine the reloaded page
    // comes back while the payment is still on its way.
    let app = TestApp::spawn_config(|config| config.sandbox.slow_ms = 5000).await;
    let order = open(&client, &app, None).await;
    let key = stored_key(&client, &order).await;
    choose(&client, "pm_sandbox_slow").await;
    click_pay(&client).await;
    text_with(&client, "status", "Processing…").await;
    // The payer reloads before the provider answers.
    tokio::time::sleep(Duration::from_millis(300)).await;
    client.refresh().await.unwrap();
    let url = client.current_url().await.unwrap();
    assert!(
        url.as_str().contains(&order),
        "the address names the order: {url}"
    );
    wait_phases(&client, &["paying", "checking"]).await;
    assert_eq!(
        stored_key(&client, &order).await,
        key,
        "the intent survived"
    );
    screenshot(&client, "checkout-4-after-reload").await;

    let payment = receipt(&client, &order).await;
    assert_eq!(app.charges_for_order(&order), 1);
    let payments = order_of(&app, &order).await["payments"].clone();
    assert_eq!(payments.as_array().unwrap().len(), 1, "{payments}");
    assert_eq!(payments[0]["id"], payment);
    assert_eq!(key_of_payment(&app, &payment).await, key);

    // Reloaded once paid, the page shows the receipt, not the form.
    client.refresh().await.unwrap();
    assert_eq!(receipt(&client, &order).await, payment);
    client.close().await.unwrap();
}

#[tokio::test]
async fn a_request_the_network_dropped_is_retried_with_the_same_key() {
    let Some((driver, client)) = browser().await else {
        return;
    };
    let app = TestApp::spawn().await;
    let order = open(&client, &app, None).await;
    let key = stored_key(&client, &order).await;
    devtools(&driver, &client, "Network.enable", json!({})).await;
    devtools(
        &driver,
        &client,
        "Network.setBlockedURLs",
        json!({"urls": ["*/checkout/demo/orders/*/payments"]}),
    )
    .await;
    click_pay(&client).await;
    let status = text_with(&client, "status", "Trying again with the same payment key").await;
    assert!(status.contains("(1 of 3)"), "{status}");
    screenshot(&client, "checkout-5-retrying").await;
    devtools(
        &driver,
        &client,
        "Network.setBlockedURLs",
        json!({"urls": []}),
    )
    .await;

    let payment = receipt(&client, &order).await;
    assert!(payment_requests(&client).await >= 2, "it was retried");
    assert_eq!(key_of_payment(&app, &payment).await, key);
    assert_eq!(app.charges_for_order(&order), 1);
    client.close().await.unwrap();
}

#[tokio::test]
async fn an_answer_lost_after_the_server_paid_is_asked_for_again_under_the_same_key() {
    let Some((_driver, client)) = browser().await else {
        return;
    };
    let app = TestApp::spawn().await;
    let order = open(&client, &app, None).await;
    let key = stored_key(&client, &order).await;
    // The first answer never comes (a connection gone half-open after the server paid); the
    // second, asked for under the same key, is lost to a reset; the third gets through.
    let (interceptor, paused) =
        intercept_answers(&client, &order, vec![Fate::Held, Fate::Reset]).await;
    click_pay(&client).await;
    text_with(&client, "status", "Processing…").await;
    // Only the page's own deadline on the first request ends the wait.
    text_within(
        &client,
        "status",
        "Payment succeeded",
        Duration::from_secs(60),
    )
    .await;
    let payment = text_with(&client, "receipt-payment", "pay_").await;
    assert_eq!(receipt(&client, &order).await, payment);
    screenshot(&client, "checkout-9-answer-lost-after-paying").await;
    interceptor.abort();
    assert_eq!(
        *paused.lock().unwrap(),
        [
            (201, false, Fate::Held),
            (201, true, Fate::Reset),
            (201, true, Fate::Delivered)
        ],
        "the server paid at the first request and replayed that answer to the next two"
    );
    assert_eq!(app.charges_for_order(&order), 1);
    let payments = order_of(&app, &order).await["payments"].clone();
    assert_eq!(payments.as_array().unwrap().len(), 1, "{payments}");
    assert_eq!(payments[0]["id"], payment);
    assert_eq!(key_of_payment(&app, &payment).await, key);
    client.close().await.unwrap();
}

#[tokio::test]
async fn back_after_paying_shows_the_receipt_not_the_form() {
    let Some((_driver, client)) = browser().await else {
        return;
    };
    let app = TestApp::spawn().await;
    let order = open(&client, &app, None).await;
    // Left with its form ready, this page stays in the browser's back-forward cache as it is.
    run(&client, "window.leftWithTheForm = true; return null").await;
    // The payer comes to the checkout again (the shop's link) and pays there.
    client.goto(&app.url("/checkout")).await.unwrap();
    wait_phase(&client, "ready").await;
    assert_eq!(text_with(&client, "order-id", "ord_").await, order);
    click_pay(&client).await;
    let payment = receipt(&client, &order).await;

    client.back().await.unwrap();
    assert_eq!(
        run(&client, "return window.leftWithTheForm === true").await,
        true,
        "the first page came back from the back-forward cache, as it was left"
    );
    wait_phase(&client, "paid").await;
    assert_eq!(receipt(&client, &order).await, payment);
    let form = client.find(Locator::Id("pay-form")).await.unwrap();
    assert!(!form.is_displayed().await.unwrap(), "no form to pay again");
    screenshot(&client, "checkout-10-back-after-paying").await;
    assert_eq!(app.charges_for_order(&order), 1);
    let payments = order_of(&app, &order).await["payments"].clone();
    assert_eq!(payments.as_array().unwrap().len(), 1, "{payments}");
    client.close().await.unwrap();
}

#[tokio::test]
async fn two_tabs_paying_one_order_charge_once() {
    let Some((_driver, client)) = browser().await else {
        return;
    };
    let app = TestApp::spawn().await;
    let order = open(&client, &app, None).await;
    let first = client.window().await.unwrap();
    let second = client.new_window(true).await.unwrap().handle;
    client.switch_to_window(second.clone()).await.unwrap();
    assert_eq!(open(&client, &app, Some(&order)).await, order);

    // The second tab pays with a slow provider; the first tab, ready to pay, learns of it and
    // waits for that payment instead of making another.
    choose(&client, "pm_sandbox_slow").await;
    click_pay(&client).await;
    client.switch_to_window(first.clone()).await.unwrap();
    choose(&client, "pm_card_visa").await;
    click_pay(&client).await;
    let status = text_with(&client, "status", "…").await;
    assert!(
        status.contains("Processing…") || status.contains("Checking status…"),
        "{status}"
    );
    screenshot(&client, "checkout-6-other-tab-paying").await;
    let paid_here = receipt(&client, &order).await;
    client.switch_to_window(second).await.unwrap();
    let paid_there = receipt(&client, &order).await;
    assert_eq!(paid_here, paid_there);
    assert_eq!(app.charges_for_order(&order), 1);
    let payments = order_of(&app, &order).await["payments"].clone();
    assert_eq!(payments.as_array().unwrap().len(), 1, "{payments}");
    client.close().await.unwrap();
}

#[tokio::test]
async fn a_decline_shows_why_and_the_next_card_is_a_new_intent() {
    let Some((_driver, client)) = browser().await else {
        return;
    };
    let app = TestApp::spawn().await;
    let order = open(&client, &app, None).await;
    let declined_key = stored_key(&client, &order).await;
    choose(&client, "pm_card_chargeDeclined").await;
    click_pay(&client).await;
    let status = text_with(&client, "status", "Declined").await;
    assert!(status.contains("Nothing was charged"), "{status}");
    wait_phase(&client, "ready").await;
    assert_eq!(
        focused_value(&client).await,
        "pm_card_chargeDeclined",
        "focus is back on the form, on the card that was declined"
    );
    screenshot(&client, "checkout-7-declined").await;
    let next_key = stored_key(&client, &order).await;
    assert_ne!(next_key, declined_key, "a new intent, a new key");

    choose(&client, "pm_card_visa").await;
    click_pay(&client).await;
    let payment = receipt(&client, &order).await;
    assert_eq!(key_of_payment(&app, &payment).await, next_key);
    assert_eq!(app.charges_for_order(&order), 1);
    assert_eq!(
        order_of(&app, &order).await["payments"]
            .as_array()
            .unwrap()
            .len(),
        2
    );

    client.set_window_size(390, 844).await.unwrap();
    screenshot(&client, "checkout-8-receipt-phone").await;
    client.close().await.unwrap();
}

#[tokio::test]
async fn the_demo_routes_set_the_price_and_are_off_without_a_demo_merchant() {
    let app = TestApp::spawn().await;
    let page = app.get("/checkout").await;
    assert_eq!(page.status(), 200);
    let policy = page.headers()["content-security-policy"].to_str().unwrap();
    assert!(policy.contains("script-src 'self'"), "{policy}");

    // The payer chooses the card, never the price.
    let made = app
        .client
        .post(app.url("/checkout/demo/orders"))
        .header("Idempotency-Key", "demo-order")
        .json(&json!({"amount": 1, "currency": "usd"}))
        .send()
        .await
        .unwrap();
    assert_eq!(made.status(), 201);
    let made: Value = made.json().await.unwrap();
    assert_eq!(
        (made["amount"].as_i64(), made["currency"].as_str()),
        (Some(2500), Some("eur"))
    );
    let again = app
        .client
        .post(app.url("/checkout/demo/orders"))
        .header("Idempotency-Key", "demo-order")
        .send()
        .await
        .unwrap();
    assert_eq!(again.headers()["idempotent-replayed"], "true");

    // Payment requests follow the merchant API's rules: a key, and valid fields.
    let pay_path = format!(
        "/checkout/demo/orders/{}/payments",
        made["id"].as_str().unwrap()
    );
    let no_key = app
        .client
        .post(app.url(&pay_path))
        .json(&json!({"payment_method": "pm_card_visa"}))
        .send()
        .await
        .unwrap();
    assert_problem(no_key, 400, "idempotency_key_missing").await;
    let card = app
        .client
        .post(app.url(&pay_path))
        .header("Idempotency-Key", "demo-card")
        .json(&json!({"payment_method": "4242 4242 4242 4242"}))
        .send()
        .await
        .unwrap();
    assert_problem(card, 422, "raw_card_data_forbidden").await;

    let off = TestApp::spawn_config(|config: &mut TestConfig| config.demo_checkout = false).await;
    for (method, path) in [
        ("POST", "/checkout/demo/orders".to_string()),
        (
            "GET",
            format!("/checkout/demo/orders/{}", made["id"].as_str().unwrap()),
        ),
    ] {
        let response = off
            .client
            .request(method.parse().unwrap(), off.url(&path))
            .header("Idempotency-Key", "off")
            .send()
            .await
            .unwrap();
        assert_problem(response, 404, "demo_checkout_off").await;
    }
}

/// The demo's routes take no key, so they act only on what the demo made: an order the same
/// merchant made through the API (its metadata, its payments) does not exist to them, and the
/// payer chooses the card and nothing else — not where the bank's check sends the browser
/// back, so payorch's return route cannot be made to redirect to a stranger's site.
#[tokio::test]
async fn the_demo_acts_only_on_its_own_orders_and_takes_only_a_card() {
    let app = TestApp::spawn().await;
    let private = app
        .post_keyed(
            &app.merchant_key,
            "/v1/orders",
            Some("api-order"),
            Some(json!({"amount": 900, "currency": "eur", "metadata": {"vip": "yes"}}).to_string()),
        )
        .await;
    assert_eq!(private.status(), 201);
    let private: Value = private.json().await.unwrap();
    let private_id = private["id"].as_str().unwrap();
    let seen = app
        .client
        .get(app.url(&format!("/checkout/demo/orders/{private_id}")))
        .send()
        .await
        .unwrap();
    assert_problem(seen, 404, "not_found").await;
    let paid = app
        .client
        .post(app.url(&format!("/checkout/demo/orders/{private_id}/payments")))
        .header("Idempotency-Key", "pay-theirs")
        .json(&json!({"payment_method": "pm_card_visa"}))
        .send()
        .await
        .unwrap();
    assert_problem(paid, 404, "not_found").await;
    let api_payment = app
        .post_keyed(
            &app.merchant_key,
            &format!("/v1/orders/{private_id}/payments"),
            Some("api-pay"),
            Some(json!({"payment_method": "pm_card_visa"}).to_string()),
        )
        .await;
    assert_eq!(api_payment.status(), 201);
    let api_payment: Value = api_payment.json().await.unwrap();
    let seen = app
        .client
        .get(app.url(&format!(
            "/checkout/demo/payments/{}",
            api_payment["id"].as_str().unwrap()
        )))
        .send()
        .await
        .unwrap();
    assert_problem(seen, 404, "not_found").await;
    assert_eq!(app.charges(), 1, "only the merchant's own payment charged");

    // The demo's own order: a card, and nothing else.
    let made: Value = app
        .client
        .post(app.url("/checkout/demo/orders"))
        .header("Idempotency-Key", "demo-own")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let order_id = made["id"].as_str().unwrap();
    let pay_path = format!("/checkout/demo/orders/{order_id}/payments");
    for (key, extra) in [
        (
            "steer",
            json!({"return_url": "https://attacker.example/phish"}),
        ),
        ("hold", json!({"capture_method": "manual"})),
    ] {
        let mut body = json!({"payment_method": "pm_card_visa"});
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        let refused = app
            .client
            .post(app.url(&pay_path))
            .header("Idempotency-Key", key)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_problem(refused, 400, "invalid_request").await;
    }
    assert_eq!(app.charges(), 1, "a refused demo payment charged nothing");
    let paid = app
        .client
        .post(app.url(&pay_path))
        .header("Idempotency-Key", "demo-card")
        .json(&json!({"payment_method": "pm_card_threeDSecure2Required"}))
        .send()
        .await
        .unwrap();
    assert_eq!(paid.status(), 201);
    let paid: Value = paid.json().await.unwrap();
    // After the bank's check, payorch's return route sends the payer to the demo's own page.
    let no_redirects = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let back = no_redirects
        .get(app.url(&format!(
            "/v1/payments/{}/return",
            paid["id"].as_str().unwrap()
        )))
        .send()
        .await
        .unwrap();
    assert_eq!(back.status(), 303);
    let location = back.headers()["location"].to_str().unwrap();
    let own_page = app.url(&format!("/checkout?order={order_id}&returning=1"));
    assert!(
        location.starts_with(&own_page),
        "the demo's return URL is its own page, set by the server: {location}"
    );
}
