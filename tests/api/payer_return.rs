//! `GET /v1/payments/{id}/return` (docs/guides/three-d-secure.md, "3-D Secure"): the provider sends the payer back to
//! payorch, which asks the provider what the challenge decided, records it, and only then
//! sends the payer on to the merchant's `return_url` with `payment_id`. What the browser
//! brings is never believed: the sandbox ledger and the provider's own answer are the judges.

use std::time::Duration;

use reqwest::redirect::Policy;
use serde_json::{json, Value};

use crate::helpers::{assert_problem, TestApp};

const THREE_D_SECURE: &str = "pm_card_threeDSecure2Required";
const SHOP_PAGE: &str = "https://shop.example/thanks?cart=7";

/// An app where only the payer's return can finish a payment: the sandbox sends no webhooks
/// or notifications, and the reconciler first asks about an open attempt a minute after it
/// was made, long after each test is over.
async fn quiet_app() -> TestApp {
    let app = TestApp::spawn_with(|settings| {
        settings.reconciler.backoff = vec![Duration::from_secs(60)];
    })
    .await;
    app.sandbox.set_webhook_url(None);
    app.sandbox.set_notification_url(None);
    app
}

/// A browser that shows each redirect instead of following it.
fn browser_by_hand() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(Policy::none())
        .build()
        .unwrap()
}

/// A checkout paid with `method` under `key`, sending the payer to `return_url`; the payment.
async fn checkout(app: &TestApp, key: &str, method: &str, return_url: Option<&str>) -> Value {
    let mut body = json!({"amount": 4200, "currency": "eur", "payment_method": method});
    if let Some(url) = return_url {
        body["return_url"] = json!(url);
    }
    let response = app.checkout(key, &body).await;
    assert_eq!(response.status(), 201);
    let answer: Value = response.json().await.unwrap();
    answer["payment"].clone()
}

/// The `Location` of a `303`.
fn see_other(response: &reqwest::Response) -> String {
    assert_eq!(response.status(), 303, "{}", response.url());
    response.headers()["location"].to_str().unwrap().to_owned()
}

/// The payer presses `button` (`complete` or `fail`) on the challenge page of `payment`;
/// where the sandbox sends them.
async fn press(payment: &Value, button: &str) -> String {
    let page = payment["next_action"]["url"].as_str().unwrap();
    let response = browser_by_hand()
        .post(format!("{page}/{button}"))
        .send()
        .await
        .unwrap();
    see_other(&response)
}

/// `(operation, source, outcome)` of every provider call about payment `id`.
async fn calls(app: &TestApp, id: &str) -> Vec<(String, String, String)> {
    let field = |call: &Value, name: &str| call[name].as_str().unwrap().to_owned();
    app.story(id).await["provider_calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                field(c, "operation"),
                field(c, "source"),
                field(c, "outcome"),
            )
        })
        .collect()
}

fn call(operation: &str, outcome: &str) -> (String, String, String) {
    (operation.into(), "api".into(), outcome.into())
}

/// The source of the move that made payment `id` what it is now.
async fn last_move_source(app: &TestApp, id: &str) -> String {
    let story = app.story(id).await;
    let timeline = story["timeline"].as_array().unwrap();
    timeline.last().unwrap()["source"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[tokio::test]
async fn an_unknown_payment_is_a_404_problem() {
    let app = TestApp::spawn().await;
    let unknown = format!("/v1/payments/pay_{}/return", uuid::Uuid::now_v7().simple());
    assert_problem(app.get(&unknown).await, 404, "not_found").await;
    let malformed = "/v1/payments/not-a-payment/return?redirect_status=succeeded";
    assert_problem(app.get(malformed).await, 404, "not_found").await;
}

#[tokio::test]
async fn the_return_follows_the_provider_never_the_query_string() {
    let app = quiet_app().await;
    let payment = checkout(&app, "3ds-stripe", THREE_D_SECURE, Some(SHOP_PAGE)).await;
    let id = payment["id"].as_str().unwrap();
    assert_eq!(payment["status"], "pending", "{payment}");
    assert_eq!(payment["next_action"]["type"], "redirect_to_url");
    // The provider sends the payer back to payorch, not to the shop.
    let route = app.url(&format!("/v1/payments/{id}/return"));
    assert_eq!(payment["next_action"]["return_url"], route.as_str());
    let challenge = payment["next_action"]["url"].as_str().unwrap();
    assert!(
        challenge.starts_with(&app.sandbox.base_url()),
        "{challenge}"
    );

    // Someone claims the challenge passed, naming another intent: payorch asks the provider
    // about the attempt's own intent, which still waits for its payer.
    let forged = format!(
        "{route}?payment_intent=pi_forged&payment_intent_client_secret=pi_forged_secret_x\
         &redirect_status=succeeded"
    );
    let back = browser_by_hand().get(&forged).send().await.unwrap();
    assert_eq!(back.headers()["cache-control"], "no-store");
    assert_eq!(
        see_other(&back),
        format!("{SHOP_PAGE}&payment_id={id}"),
        "the shop's page, with the payment's id and nothing the provider added"
    );
    let now = app.payment(id).await;
    assert_eq!(now["status"], "pending", "{now}");
    assert_eq!(now["next_action"], payment["next_action"]);
    assert_eq!(app.charges_for(id), 0);
    assert_eq!(
        calls(&app, id).await[1..],
        [call("complete_action", "requires_action")]
    );

    // The payer passes the challenge; the bank sends them to payorch's route, which finds
    // the payment paid before the shop's page is shown.
    let to_payorch = press(&payment, "complete").await;
    assert!(to_payorch.starts_with(&format!("{route}?")), "{to_payorch}");
    let back = browser_by_hand().get(&to_payorch).send().await.unwrap();
    assert_eq!(see_other(&back), format!("{SHOP_PAGE}&payment_id={id}"));
    let paid = app.payment(id).await;
    assert_eq!(paid["status"], "succeeded", "{paid}");
    assert_eq!(last_move_source(&app, id).await, "provider_response");
    assert_eq!(app.charges_for(id), 1);
    // The key that made it is complete: a retry replays the final payment.
    let replay = app
        .checkout(
            "3ds-stripe",
            &json!({"amount": 4200, "currency": "eur", "payment_method": THREE_D_SECURE,
                    "return_url": SHOP_PAGE}),
        )
        .await;
    assert_eq!(replay.headers()["idempotent-replayed"], "true");
    let replay: Value = replay.json().await.unwrap();
    assert_eq!(replay["payment"]["status"], "succeeded");

    // Back again (a reload), the payment is final: nothing more is asked.
    let again = browser_by_hand().get(&to_payorch).send().await.unwrap();
    assert_eq!(see_other(&again), format!("{SHOP_PAGE}&payment_id={id}"));
    assert_eq!(
        calls(&app, id).await[1..],
        [
            call("complete_action", "requires_action"),
            call("complete_action", "succeeded")
        ]
    );
}

#[tokio::test]
async fn a_failed_challenge_is_a_decline_and_charges_nothing() {
    let app = quiet_app().await;
    let payment = checkout(&app, "3ds-fail", THREE_D_SECURE, Some(SHOP_PAGE)).await;
    let id = payment["id"].as_str().unwrap();
    let to_payorch = press(&payment, "fail").await;
    let back = browser_by_hand().get(&to_payorch).send().await.unwrap();
    assert_eq!(see_other(&back), format!("{SHOP_PAGE}&payment_id={id}"));
    let failed = app.payment(id).await;
    assert_eq!(failed["status"], "failed", "{failed}");
    assert_eq!(last_move_source(&app, id).await, "provider_response");
    assert_eq!(app.charges_for(id), 0);
    // The order may be paid again.
    assert_eq!(
        app.order(failed["order_id"].as_str().unwrap()).await["status"],
        "awaiting_payment"
    );
}

#[tokio::test]
async fn without_a_challenge_nothing_is_asked_and_without_a_shop_page_a_page_tells() {
    let app = quiet_app().await;
    // Paid at once, with a shop page to go back to: straight there.
    let paid = checkout(&app, "visa-shop", "pm_card_visa", Some(SHOP_PAGE)).await;
    let id = paid["id"].as_str().unwrap();
    let route = format!("/v1/payments/{id}/return?redirect_status=failed");
    let back = browser_by_hand().get(app.url(&route)).send().await.unwrap();
    assert_eq!(see_other(&back), format!("{SHOP_PAGE}&payment_id={id}"));
    assert_eq!(app.payment(id).await["status"], "succeeded");

    // No shop page: payorch's own page says how it went.
    let plain = checkout(&app, "visa-plain", "pm_card_visa", None).await;
    let plain_id = plain["id"].as_str().unwrap();
    let page = app.get(&format!("/v1/payments/{plain_id}/return")).await;
    assert_eq!(page.status(), 200);
    assert_eq!(page.headers()["content-type"], "text/html; charset=utf-8");
    let policy = page.headers()["content-security-policy"].to_str().unwrap();
    assert!(policy.contains("default-src 'none'"), "{policy}");
    let body = page.text().await.unwrap();
    assert!(body.contains(r#"data-status="succeeded""#), "{body}");
    assert!(body.contains(plain_id), "{body}");

    // Neither was a challenge: the provider heard of each only once, when it was made.
    for id in [id, plain_id] {
        assert_eq!(calls(&app, id).await, [call("create", "succeeded")]);
    }
}

#[tokio::test]
async fn through_adyen_the_return_sends_the_details_and_finishes_the_payment() {
    let app = quiet_app().await;
    app.route_to(&["adyen"]).await;
    let payment = checkout(&app, "3ds-adyen", THREE_D_SECURE, Some(SHOP_PAGE)).await;
    let id = payment["id"].as_str().unwrap();
    assert_eq!(payment["status"], "pending", "{payment}");
    assert_eq!(payment["provider"], "adyen");
    // Adyen names the payment only in the answer to its details.
    assert_eq!(payment["provider_payment_id"], Value::Null);

    let to_payorch = press(&payment, "complete").await;
    assert!(to_payorch.contains("redirectResult="), "{to_payorch}");
    let back = browser_by_hand().get(&to_payorch).send().await.unwrap();
    assert_eq!(see_other(&back), format!("{SHOP_PAGE}&payment_id={id}"));
    let paid = app.payment(id).await;
    assert_eq!(paid["status"], "succeeded", "{paid}");
    assert!(paid["provider_payment_id"].is_string(), "{paid}");
    assert_eq!(last_move_source(&app, id).await, "provider_response");
    assert_eq!(app.charges_for(id), 1);
    // The details named the payment (Adyen says "authorised" of a payment it then captures
    // itself), and their merchantReference vouched that it is this attempt's: one call, no
    // lookup (Adyen has none).
    assert_eq!(
        calls(&app, id).await[1..],
        [call("complete_action", "authorized")]
    );
}

#[tokio::test]
async fn another_payments_redirect_result_moves_nothing() {
    let app = quiet_app().await;
    app.route_to(&["adyen"]).await;
    // The payer passes a cheap payment's challenge and keeps its way back ...
    let mut cheap = json!({"amount": 100, "currency": "eur", "payment_method": THREE_D_SECURE,
                           "return_url": SHOP_PAGE});
    let response = app.checkout("cheap", &cheap).await;
    cheap = response.json::<Value>().await.unwrap()["payment"].clone();
    let cheap_id = cheap["id"].as_str().unwrap();
    let cheap_way_back = press(&cheap, "complete").await;
    let redirect_result = reqwest::Url::parse(&cheap_way_back)
        .unwrap()
        .query_pairs()
        .find(|(name, _)| name == "redirectResult")
        .map(|(_, value)| value.into_owned())
        .expect("a redirectResult");

    // ... and brings it to the return route of a dear one, whose challenge nobody passed.
    let dear = checkout(&app, "dear", THREE_D_SECURE, Some(SHOP_PAGE)).await;
    let dear_id = dear["id"].as_str().unwrap();
    let mut forged =
        reqwest::Url::parse(&app.url(&format!("/v1/payments/{dear_id}/return"))).unwrap();
    forged
        .query_pairs_mut()
        .append_pair("redirectResult", &redirect_result);
    let back = browser_by_hand().get(forged).send().await.unwrap();
    assert_eq!(
        see_other(&back),
        format!("{SHOP_PAGE}&payment_id={dear_id}")
    );
    let dear_now = app.payment(dear_id).await;
    assert_eq!(dear_now["status"], "pending", "{dear_now}");
    assert_eq!(dear_now["provider_payment_id"], Value::Null, "{dear_now}");
    assert_eq!(app.charges_for(dear_id), 0);

    // The cheap one's own way back pays the cheap one.
    let back = browser_by_hand().get(&cheap_way_back).send().await.unwrap();
    assert_eq!(
        see_other(&back),
        format!("{SHOP_PAGE}&payment_id={cheap_id}")
    );
    assert_eq!(app.payment(cheap_id).await["status"], "succeeded");
    assert_eq!(app.charges_for(cheap_id), 1);
}

/// `serve` given `flag value`: refused at parse, or the settings it builds.
fn serve_with(flag: &str, value: &str) -> Result<payorch::config::ServeArgs, clap::Error> {
    use clap::Parser;
    let cli = payorch::config::Cli::try_parse_from(["payorch", "serve", flag, value])?;
    let payorch::config::Command::Serve(serve) = cli.command else {
        panic!("serve");
    };
    Ok(*serve)
}

#[test]
fn a_duration_flag_too_big_for_its_arithmetic_is_refused_when_parsed() {
    for flag in [
        "--payer-return-check-secs",
        "--failed-auth-memory-ms",
        "--key-poll-ms",
    ] {
        let refused = serve_with(flag, &u64::MAX.to_string()).expect_err(flag);
        assert_eq!(
            refused.kind(),
            clap::error::ErrorKind::ValueValidation,
            "{flag}"
        );
    }
    // The longest interval accepted builds the throttle it sets.
    let longest = serve_with("--payer-return-check-secs", "86400").expect("a day parses");
    let interval = longest.app_settings().limits.payer_return_check_interval;
    assert_eq!(interval, Duration::from_secs(86_400));
    let _ = payorch::payments::attempts::payer_return::ProviderChecks::new(interval);
}
