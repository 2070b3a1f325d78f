//! 3-D Secure requested on a charge (docs/guides/test-cards.md, "3-D Secure requested"),
//! through each face: a decline that asked for authentication is challenged instead, and the
//! payer who passes is charged once; an ordinary card is approved without a challenge; any
//! other decline stays itself; a mix's draw of the authentication class is challenged too.

mod common;

use std::time::Duration;

use common::{adyen_post, client, fast, location, press, start, stripe_post, SandboxConfig};
use payorch_sandbox::{Mix, SandboxHandle};
use serde_json::{json, Value};

const RETURN_URL: &str = "https://shop.example/back";
const ASKS: &str = "pm_sandbox_decline_authentication_required";

/// Every declining charge draws a decline that asks for authentication.
fn only_authentication_declines() -> SandboxConfig {
    let mix = "approval=0,soft=0,hard=0,authentication_required=1";
    SandboxConfig {
        stripe_mix: Mix::parse(mix).expect("mix"),
        adyen_mix: Mix::parse(mix).expect("mix"),
        ..fast()
    }
}

async fn stripe_charge(
    client: &reqwest::Client,
    sandbox: &SandboxHandle,
    token: &str,
    key: &str,
    three_d_secure: bool,
) -> common::Answer {
    let mut form = vec![
        ("amount", "1999"),
        ("currency", "eur"),
        ("payment_method", token),
        ("payment_method_types[0]", "card"),
        ("confirm", "true"),
        ("return_url", RETURN_URL),
        ("metadata[attempt_id]", key),
    ];
    if three_d_secure {
        form.push((
            "payment_method_options[card][request_three_d_secure]",
            "any",
        ));
    }
    stripe_post(client, sandbox, "/v1/payment_intents", Some(key), &form)
        .await
        .expect("answered")
}

fn charged_once(sandbox: &SandboxHandle, id: &str) {
    let charged: Vec<_> = sandbox
        .ledger()
        .into_iter()
        .filter(|e| e.provider_id == id && e.is_charged())
        .collect();
    assert_eq!(charged.len(), 1, "{id}: {charged:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stripe_a_decline_asking_for_authentication_is_challenged_when_3ds_is_requested() {
    let sandbox = start(only_authentication_declines()).await;
    let client = client(Duration::from_secs(5));

    let declined = stripe_charge(&client, &sandbox, ASKS, "s-plain", false).await;
    assert_eq!(declined.status, 402, "{}", declined.body);
    assert_eq!(
        declined.body["error"]["decline_code"],
        "authentication_required"
    );

    for (token, key) in [(ASKS, "s-asked"), ("pm_sandbox_mix_0", "s-mixed")] {
        let asked = stripe_charge(&client, &sandbox, token, key, true).await;
        assert_eq!(asked.status, 200, "{token}: {}", asked.body);
        assert_eq!(asked.body["status"], "requires_action", "{token}");
        let id = asked.body["id"].as_str().expect("an id").to_owned();
        let page = asked.body["next_action"]["redirect_to_url"]["url"]
            .as_str()
            .expect("a challenge")
            .to_owned();
        assert_eq!(page, format!("{}/__sandbox/3ds/{id}", sandbox.base_url()));
        let done = press(&client, &format!("{page}/complete")).await;
        assert_eq!(done.status(), 303);
        assert!(location(&done).starts_with(RETURN_URL), "{token}");
        let paid = common::get(&client, &sandbox, &format!("/v1/payment_intents/{id}")).await;
        assert_eq!(paid.body["status"], "succeeded", "{token}");
        charged_once(&sandbox, &id);
    }

    // Frictionless: an ordinary card asked for 3-D Secure is approved at once.
    let sandbox = start(fast()).await;
    let approved = stripe_charge(&client, &sandbox, "pm_card_visa", "s-visa", true).await;
    assert_eq!(approved.body["status"], "succeeded", "{}", approved.body);
    // No authentication cures a lack of funds.
    let broke = stripe_charge(
        &client,
        &sandbox,
        "pm_card_chargeDeclinedInsufficientFunds",
        "s-broke",
        true,
    )
    .await;
    assert_eq!(broke.status, 402);
    assert_eq!(broke.body["error"]["decline_code"], "insufficient_funds");
    // A value the pinned API version does not have is refused.
    let refused = stripe_post(
        &client,
        &sandbox,
        "/v1/payment_intents",
        Some("s-challenge"),
        &[
            ("amount", "1999"),
            ("currency", "eur"),
            ("payment_method", "pm_card_visa"),
            ("payment_method_types[0]", "card"),
            ("confirm", "true"),
            (
                "payment_method_options[card][request_three_d_secure]",
                "challenge",
            ),
        ],
    )
    .await
    .expect("answered");
    assert_eq!(refused.status, 400);
    assert_eq!(
        refused.body["error"]["param"],
        "payment_method_options[card][request_three_d_secure]"
    );
}

fn adyen_body(token: &str, reference: &str, three_d_secure: bool) -> Value {
    let mut body = json!({
        "amount": {"value": 2500, "currency": "EUR"},
        "reference": reference,
        "merchantAccount": "PayorchECOM",
        "paymentMethod": {"type": "scheme", "storedPaymentMethodId": token},
        "shopperInteraction": "Ecommerce",
        "recurringProcessingModel": "CardOnFile",
        "channel": "Web",
        "returnUrl": RETURN_URL,
        "metadata": {"order_id": "ord_1", "merchant_id": "mer_1"},
    });
    if three_d_secure {
        body["authenticationData"] = json!({"attemptAuthentication": "always"});
    }
    body
}

async fn adyen_charge(
    client: &reqwest::Client,
    sandbox: &SandboxHandle,
    token: &str,
    reference: &str,
    three_d_secure: bool,
) -> common::Answer {
    let body = adyen_body(token, reference, three_d_secure);
    adyen_post(client, sandbox, "/v71/payments", Some(reference), &body)
        .await
        .expect("answered")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adyen_a_decline_asking_for_authentication_is_challenged_when_3ds_is_requested() {
    let sandbox = start(only_authentication_declines()).await;
    let client = client(Duration::from_secs(5));

    let refused = adyen_charge(&client, &sandbox, ASKS, "a-plain", false).await;
    assert_eq!(refused.body["resultCode"], "Refused", "{}", refused.body);
    assert_eq!(refused.body["refusalReasonCode"], "38");

    for (token, reference) in [(ASKS, "a-asked"), ("pm_sandbox_mix_0", "a-mixed")] {
        let asked = adyen_charge(&client, &sandbox, token, reference, true).await;
        assert_eq!(
            asked.body["resultCode"], "RedirectShopper",
            "{token}: {}",
            asked.body
        );
        let page = asked.body["action"]["url"]
            .as_str()
            .expect("a challenge")
            .to_owned();
        let done = press(&client, &format!("{page}/complete")).await;
        assert_eq!(done.status(), 303);
        let back = reqwest::Url::parse(&location(&done)).expect("a URL");
        let (name, redirect_result) = back.query_pairs().next().expect("redirectResult");
        assert_eq!(name, "redirectResult");
        let details = json!({"details": {"redirectResult": redirect_result}});
        let decided = adyen_post(&client, &sandbox, "/v71/payments/details", None, &details)
            .await
            .expect("answered");
        assert_eq!(decided.body["resultCode"], "Authorised", "{token}");
        assert_eq!(decided.body["merchantReference"], reference);
        let psp = decided.body["pspReference"].as_str().expect("named");
        charged_once(&sandbox, psp);
    }

    let sandbox = start(fast()).await;
    let approved = adyen_charge(&client, &sandbox, "pm_card_visa", "a-visa", true).await;
    assert_eq!(
        approved.body["resultCode"], "Authorised",
        "{}",
        approved.body
    );
    let broke = adyen_charge(
        &client,
        &sandbox,
        "pm_card_chargeDeclinedInsufficientFunds",
        "a-broke",
        true,
    )
    .await;
    assert_eq!(broke.body["resultCode"], "Refused");
    assert_eq!(broke.body["refusalReasonCode"], "12");
}
