//! Every declining test payment method is declined with the same reason through both faces,
//! each in its provider's words (`declines`): the Stripe face's 402 `error` and the intent's
//! `last_payment_error` and webhook carry the row's `type`, `code`, `decline_code` and
//! `message` and nothing Stripe's pinned API version lacks; the Adyen face's `Refused`
//! answer carries the row's `refusalReasonCode`, Adyen's name for it, and its raw answer and
//! advice in `additionalData`, and its `AUTHORISATION` notification the same reason and
//! `additionalData`. A failed 3-D Secure challenge reads as Stripe's
//! `payment_intent_authentication_failure` on the Stripe face.

mod common;

use std::time::Duration;

use common::{adyen_post, client, fast, start, stripe_post, Receiver};
use payorch_sandbox::{Decline, SandboxConfig, DECLINES};
use serde_json::{json, Value};

/// Fields of a decline that later Stripe API versions added and the pinned one (2023-08-16)
/// does not have: the Stripe face never sends them.
const NEWER_STRIPE_FIELDS: [&str; 3] =
    ["advice_code", "network_advice_code", "network_decline_code"];

fn stripe_error_is(error: &Value, decline: &Decline) {
    assert_eq!(error["type"], decline.kind, "{error}");
    assert_eq!(error["code"], decline.code, "{error}");
    assert_eq!(
        error.get("decline_code").and_then(Value::as_str),
        decline.decline_code,
        "{error}"
    );
    assert_eq!(error["message"], decline.message, "{error}");
    for field in NEWER_STRIPE_FIELDS {
        assert!(error.get(field).is_none(), "{field} in {error}");
    }
}

fn additional_data_is(data: &Value, decline: &Decline) {
    assert_eq!(
        data.get("refusalReasonRaw").and_then(Value::as_str),
        decline.adyen.raw,
        "{data}"
    );
    assert_eq!(
        data.get("merchantAdviceCode").and_then(Value::as_str),
        decline.adyen.merchant_advice,
        "{data}"
    );
}

#[tokio::test]
async fn each_decline_reads_the_same_through_both_faces() {
    let hook = Receiver::start().await;
    let sandbox = start(SandboxConfig {
        webhook_url: Some(hook.url.clone()),
        adyen_notification_url: Some(hook.url.clone()),
        ..fast()
    })
    .await;
    let client = client(Duration::from_secs(5));
    for decline in DECLINES {
        let token = decline.token.expect("a token");

        let form = [
            ("amount", "1000"),
            ("currency", "eur"),
            ("payment_method", token),
            ("confirm", "true"),
            ("payment_method_types[0]", "card"),
            ("metadata[attempt_id]", token),
        ];
        let answer = stripe_post(&client, &sandbox, "/v1/payment_intents", Some(token), &form)
            .await
            .expect("answered");
        assert_eq!(answer.status, 402, "{token}: {}", answer.body);
        let error = &answer.body["error"];
        stripe_error_is(error, decline);
        let intent = &error["payment_intent"];
        assert_eq!(intent["status"], "requires_payment_method", "{token}");
        stripe_error_is(&intent["last_payment_error"], decline);
        let id = intent["id"].as_str().expect("an id").to_owned();
        let event = common::eventually("payment_intent.payment_failed", || {
            hook.received().into_iter().find(|event| {
                event["type"] == "payment_intent.payment_failed"
                    && event["data"]["object"]["id"] == id.as_str()
            })
        })
        .await;
        stripe_error_is(&event["data"]["object"]["last_payment_error"], decline);

        let body = json!({
            "amount": {"value": 1000, "currency": "EUR"},
            "reference": format!("att-{token}"),
            "merchantAccount": "PayorchECOM",
            "paymentMethod": {"type": "scheme", "storedPaymentMethodId": token},
        });
        let key = format!("adyen-{token}");
        let refused = adyen_post(&client, &sandbox, "/v71/payments", Some(&key), &body)
            .await
            .expect("answered");
        assert_eq!(refused.status, 200, "{token}: {}", refused.body);
        assert_eq!(refused.body["resultCode"], "Refused", "{}", refused.body);
        assert_eq!(
            refused.body["refusalReasonCode"], decline.adyen.code,
            "{token}"
        );
        assert_eq!(
            refused.body["refusalReason"], decline.adyen.reason,
            "{token}"
        );
        additional_data_is(&refused.body["additionalData"], decline);
        let psp = refused.body["pspReference"]
            .as_str()
            .expect("a psp")
            .to_owned();
        let item = common::eventually("AUTHORISATION", || hook.adyen_items(&psp).pop()).await;
        assert_eq!(item["eventCode"], "AUTHORISATION");
        assert_eq!(item["success"], "false");
        // A notification names no code: the reason in Adyen's words is all it says of it.
        assert_eq!(item["reason"], decline.adyen.reason, "{token}: {item}");
        assert_eq!(item["paymentMethod"], decline.adyen.brand, "{token}");
        additional_data_is(&item["additionalData"], decline);
    }
    sandbox.stop().await;
    hook.stop().await;
}

/// Two declines never say the same in Adyen's words unless they mean the same: where a
/// `refusalReasonCode` is shared, the raw answer or the advice tells them apart.
#[test]
fn no_two_declines_are_one_refusal() {
    for (n, a) in DECLINES.iter().enumerate() {
        for b in &DECLINES[n + 1..] {
            assert_ne!(
                (a.adyen.code, a.adyen.raw, a.adyen.merchant_advice),
                (b.adyen.code, b.adyen.raw, b.adyen.merchant_advice),
                "{:?} and {:?}",
                a.token,
                b.token
            );
        }
    }
}

/// docs/guides/test-cards.md, "Declines", lists every decline as the sandbox answers it: each
/// token once, with its Stripe `code` / `decline_code` and its Adyen `refusalReasonCode`,
/// name, raw answer and advice.
#[test]
fn the_declines_table_of_the_docs_is_the_sandbox_s() {
    let page = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/guides/test-cards.md"
    ))
    .expect("docs/guides/test-cards.md");
    let section = page
        .split("\n### Declines\n")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .expect("a Declines section");
    let rows: Vec<&str> = section
        .lines()
        .filter(|line| line.starts_with("| `pm_"))
        .collect();
    for decline in DECLINES {
        let token = decline.token.expect("a token");
        let listed: Vec<&&str> = rows
            .iter()
            .filter(|row| row.starts_with(&format!("| `{token}` |")))
            .collect();
        assert_eq!(listed.len(), 1, "{token} listed once: {rows:#?}");
        let cells: Vec<&str> = listed[0].split(" | ").collect();
        let stripe = format!(
            "`{}` / `{}`",
            decline.code,
            decline.decline_code.expect("a decline_code")
        );
        assert_eq!(cells[1], stripe, "{token}");
        let mut adyen = format!("`{}` {}", decline.adyen.code, decline.adyen.reason);
        if let Some(raw) = decline.adyen.raw {
            adyen.push_str(&format!("; raw `{raw}`"));
        }
        if let Some(advice) = decline.adyen.merchant_advice {
            adyen.push_str(&format!(", `merchantAdviceCode` `{advice}`"));
        }
        assert!(
            cells[2].starts_with(&adyen),
            "{token}: {} is not {adyen}",
            cells[2]
        );
    }
    assert_eq!(
        rows.len(),
        DECLINES.len() + 1,
        "each decline, and the failed challenge: {rows:#?}"
    );
}
