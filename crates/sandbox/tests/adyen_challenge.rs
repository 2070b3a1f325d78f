//! 3-D Secure on the Adyen face (docs/DESIGN.md, "The provider protocol"):
//! `pm_card_threeDSecure2Required` answers `RedirectShopper` with a GET `redirect` action to
//! the sandbox's challenge page; the shopper comes back to `returnUrl` with a
//! `redirectResult`, which `/v71/payments/details` turns into the outcome, the same each time;
//! the `AUTHORISATION` notification is sent when the shopper decides.

mod common;

use std::time::Duration;

use common::{adyen_post, client, fast, ledger, location, press, start, Receiver, SandboxConfig};
use payorch_sandbox::SandboxHandle;
use serde_json::{json, Value};

const ACCOUNT: &str = "PayorchECOM";
const RETURN_URL: &str = "https://shop.example/adyen/back";

fn challenged(reference: &str, return_url: Option<&str>, manual: bool) -> Value {
    let mut body = json!({
        "amount": {"value": 2500, "currency": "EUR"},
        "reference": reference,
        "merchantAccount": ACCOUNT,
        "paymentMethod": {"type": "scheme", "storedPaymentMethodId": "pm_card_threeDSecure2Required"},
        "shopperInteraction": "Ecommerce",
        "recurringProcessingModel": "CardOnFile",
        "channel": "Web",
        "metadata": {"order_id": "ord_1", "merchant_id": "mer_1"},
    });
    if let Some(url) = return_url {
        body["returnUrl"] = json!(url);
    }
    if manual {
        body["additionalData"] = json!({"manualCapture": "true"});
    }
    body
}

/// A payment sent to its challenge: the page's URL.
async fn redirected(client: &reqwest::Client, sandbox: &SandboxHandle, body: &Value) -> String {
    let made = adyen_post(
        client,
        sandbox,
        "/v71/payments",
        Some(body["reference"].as_str().unwrap()),
        body,
    )
    .await
    .expect("answered");
    assert_eq!(made.status, 200, "{}", made.body);
    assert_eq!(made.body["resultCode"], "RedirectShopper");
    made.body["action"]["url"]
        .as_str()
        .expect("a URL")
        .to_owned()
}

fn redirect_result(url: &str) -> String {
    let url = reqwest::Url::parse(url).expect("a URL");
    let pairs: Vec<(String, String)> = url.query_pairs().into_owned().collect();
    assert_eq!(pairs.len(), 1, "{url}");
    assert_eq!(pairs[0].0, "redirectResult");
    pairs[0].1.clone()
}

async fn details(
    client: &reqwest::Client,
    sandbox: &SandboxHandle,
    redirect_result: &str,
) -> common::Answer {
    let body = json!({"details": {"redirectResult": redirect_result}});
    adyen_post(client, sandbox, "/v71/payments/details", None, &body)
        .await
        .expect("answered")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shopper_who_completes_the_challenge_is_authorised_once() {
    let hook = Receiver::start().await;
    let sandbox = start(SandboxConfig {
        adyen_notification_url: Some(hook.url.clone()),
        ..fast()
    })
    .await;
    let client = client(Duration::from_secs(5));
    let body = challenged("att_3ds", Some(RETURN_URL), false);
    let made = adyen_post(&client, &sandbox, "/v71/payments", Some("k-3ds"), &body)
        .await
        .expect("answered");
    let page = made.body["action"]["url"]
        .as_str()
        .expect("a URL")
        .to_owned();
    let psp = page.rsplit('/').next().expect("an id").to_owned();
    assert_eq!(
        made.body["action"],
        json!({
            "type": "redirect",
            "method": "GET",
            "url": format!("{}/__sandbox/3ds/{psp}", sandbox.base_url()),
            "paymentMethodType": "scheme",
        })
    );
    assert!(
        made.body.get("pspReference").is_none(),
        "named only after the details"
    );
    assert_eq!(made.body["merchantReference"], "att_3ds");
    let replay = adyen_post(&client, &sandbox, "/v71/payments", Some("k-3ds"), &body)
        .await
        .expect("answered");
    assert_eq!(replay.body, made.body);
    // Adyen has no lookup; the ledger knows the payment waits for its shopper.
    let book = ledger(&client, &sandbox).await;
    let waiting = book["data"]
        .as_array()
        .expect("a list")
        .iter()
        .find(|entry| entry["attempt_id"] == "att_3ds")
        .expect("in the ledger");
    assert_eq!(waiting["status"], "requires_action");
    assert_eq!(waiting["provider_id"], psp.as_str());
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        hook.adyen_items(&psp).is_empty(),
        "Adyen says nothing before the shopper decides"
    );

    let html = client
        .get(&page)
        .send()
        .await
        .expect("the page")
        .text()
        .await
        .expect("html");
    assert!(
        html.contains("id=\"complete\"") && html.contains("id=\"fail\""),
        "{html}"
    );
    let done = press(&client, &format!("{page}/complete")).await;
    assert_eq!(done.status(), 303);
    let back = location(&done);
    assert!(
        back.starts_with(&format!("{RETURN_URL}?redirectResult=")),
        "{back}"
    );
    let result = redirect_result(&back);

    for _ in 0..2 {
        let authorised = details(&client, &sandbox, &result).await;
        assert_eq!(authorised.status, 200);
        assert_eq!(authorised.body["resultCode"], "Authorised");
        assert_eq!(authorised.body["pspReference"], psp.as_str());
        assert_eq!(authorised.body["merchantReference"], "att_3ds");
        assert_eq!(
            authorised.body["amount"],
            json!({"value": 2500, "currency": "EUR"})
        );
    }
    let auth = common::eventually("AUTHORISATION", || {
        let items = hook.adyen_items(&psp);
        (!items.is_empty()).then_some(items)
    })
    .await;
    assert_eq!(auth.len(), 1);
    assert_eq!(auth[0]["eventCode"], "AUTHORISATION");
    assert_eq!(auth[0]["success"], "true");
    assert_eq!(auth[0]["merchantReference"], "att_3ds");
    let again = press(&client, &format!("{page}/complete")).await;
    assert_eq!(again.status(), 200);
    let charged: Vec<_> = sandbox
        .ledger()
        .into_iter()
        .filter(|e| e.is_charged())
        .collect();
    assert_eq!(charged.len(), 1);
    assert_eq!(charged[0].idempotency_key.as_deref(), Some("k-3ds"));

    for garbage in ["", "bm90IGEgcmVzdWx0", "%%%"] {
        let refused = details(&client, &sandbox, garbage).await;
        assert_eq!(refused.status, 422, "{garbage:?}");
    }
    let missing = adyen_post(
        &client,
        &sandbox,
        "/v71/payments/details",
        None,
        &json!({"details": {}}),
    )
    .await
    .expect("answered");
    assert_eq!(missing.status, 422);
    sandbox.stop().await;
    hook.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shopper_who_fails_is_refused_and_one_with_nowhere_to_go_back_closes_the_page() {
    let hook = Receiver::start().await;
    let sandbox = start(SandboxConfig {
        adyen_notification_url: Some(hook.url.clone()),
        ..fast()
    })
    .await;
    let client = client(Duration::from_secs(5));
    let page = redirected(
        &client,
        &sandbox,
        &challenged("att_fail", Some(RETURN_URL), false),
    )
    .await;
    let psp = page.rsplit('/').next().expect("an id").to_owned();
    let failed = press(&client, &format!("{page}/fail")).await;
    assert_eq!(failed.status(), 303);
    let refused = details(&client, &sandbox, &redirect_result(&location(&failed))).await;
    assert_eq!(refused.body["resultCode"], "Refused");
    assert_eq!(refused.body["refusalReason"], "3D Not Authenticated");
    assert_eq!(refused.body["refusalReasonCode"], "11");
    assert_eq!(refused.body["pspReference"], psp.as_str());
    let auth = common::eventually("AUTHORISATION", || {
        let items = hook.adyen_items(&psp);
        (!items.is_empty()).then_some(items)
    })
    .await;
    assert_eq!(auth[0]["success"], "false");
    assert_eq!(auth[0]["reason"], "3D Not Authenticated");

    let page = redirected(&client, &sandbox, &challenged("att_nowhere", None, false)).await;
    let done = press(&client, &format!("{page}/complete")).await;
    assert_eq!(done.status(), 200);
    let html = done.text().await.expect("html");
    assert!(html.contains("You may close this page"), "{html}");
    assert_eq!(
        sandbox.ledger().iter().filter(|e| e.is_charged()).count(),
        1
    );
    sandbox.stop().await;
    hook.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_challenge_left_and_canceled_by_reference_charges_nothing_and_a_passed_one_can_hold() {
    let sandbox = start(fast()).await;
    let client = client(Duration::from_secs(5));

    let page = redirected(
        &client,
        &sandbox,
        &challenged("att_gone", Some(RETURN_URL), false),
    )
    .await;
    let by_reference = json!({"merchantAccount": ACCOUNT, "paymentReference": "att_gone"});
    let taken = adyen_post(&client, &sandbox, "/v71/cancels", None, &by_reference)
        .await
        .expect("answered");
    assert_eq!(taken.status, 201);
    let late = press(&client, &format!("{page}/complete")).await;
    assert_eq!(late.status(), 200);
    assert!(late
        .text()
        .await
        .unwrap()
        .contains("data-status=\"canceled\""));
    assert!(!sandbox.ledger().iter().any(|e| e.is_charged()));

    let page = redirected(
        &client,
        &sandbox,
        &challenged("att_hold", Some(RETURN_URL), true),
    )
    .await;
    let psp = page.rsplit('/').next().expect("an id").to_owned();
    let done = press(&client, &format!("{page}/complete")).await;
    let authorised = details(&client, &sandbox, &redirect_result(&location(&done))).await;
    assert_eq!(authorised.body["resultCode"], "Authorised");
    let book = ledger(&client, &sandbox).await;
    let hold = &book["holds"][0];
    assert_eq!(hold["provider_id"], psp.as_str());
    assert_eq!(hold["status"], "held");
    let capture = json!({"merchantAccount": ACCOUNT, "amount": {"value": 2500, "currency": "EUR"}});
    let taken = adyen_post(
        &client,
        &sandbox,
        &format!("/v71/payments/{psp}/captures"),
        None,
        &capture,
    )
    .await
    .expect("answered");
    assert_eq!(taken.status, 201);
    // The details answer what the authentication came to, whatever happened since.
    let again = details(&client, &sandbox, &redirect_result(&location(&done))).await;
    assert_eq!(again.body, authorised.body);
    assert_eq!(sandbox.captures().len(), 1);
    sandbox.stop().await;
}
