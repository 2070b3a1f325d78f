//! The sandbox's disputes against the providers' published contracts (fixtures/contracts/):
//! the Stripe face's `charge.dispute.*` events (`event`, their object `dispute`) and its
//! Disputes API answers; the Adyen face's dispute notifications (the Webhooks-v1 webhook of
//! each `eventCode`) and its DisputeService v30 answers. Each request the test makes is
//! checked against the contract first, so the sandbox is held to what a client may send.

mod common;

use std::time::Duration;

use base64::Engine;
use common::{
    adyen_post, client, eventually, fast, get, start, stripe_post, Receiver, SandboxConfig,
};
use payorch_contract::{report, Contract};
use serde_json::{json, Value};

const FORM: &str = "application/x-www-form-urlencoded";
const ACCOUNT: &str = "PayorchECOM";

fn check_answer(
    findings: &mut Vec<String>,
    contract: &Contract,
    method: &str,
    path: &str,
    answer: &common::Answer,
) {
    if let Err(v) = contract.validate_response(method, path, answer.status, &answer.bytes) {
        findings.push(format!(
            "{method} {path} answered {}, which breaks the contract:\n{}\n  answer: {}",
            answer.status,
            report(&v),
            String::from_utf8_lossy(&answer.bytes)
        ));
    }
}

fn checked_form(path: &str, form: &[(&str, &str)]) {
    let body = serde_urlencoded::to_string(form).expect("a form");
    if let Err(v) = Contract::stripe().validate_request("POST", path, FORM, body.as_bytes()) {
        panic!(
            "the test's own POST {path} {body} breaks the contract:\n{}",
            report(&v)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stripe_dispute_events_and_answers_keep_the_contract() {
    let hook = Receiver::start().await;
    let sandbox = start(SandboxConfig {
        webhook_url: Some(hook.url.clone()),
        dispute_after_ms: 50,
        ..fast()
    })
    .await;
    let client = client(Duration::from_secs(5));
    let mut findings = Vec::new();
    let mut disputes = Vec::new();
    for (token, attempt) in [
        ("pm_card_createDispute", "at_c1"),
        ("pm_card_createDisputeInquiry", "at_c2"),
        ("pm_sandbox_dispute_won", "at_c3"),
    ] {
        let paid = stripe_post(
            &client,
            &sandbox,
            "/v1/payment_intents",
            None,
            &[
                ("amount", "2000"),
                ("currency", "eur"),
                ("payment_method", token),
                ("payment_method_types[]", "card"),
                ("confirm", "true"),
                ("metadata[attempt_id]", attempt),
            ],
        )
        .await
        .expect("answered");
        let pi = paid.body["id"].as_str().expect("an id").to_owned();
        let id = eventually("the dispute", || {
            sandbox
                .disputes()
                .into_iter()
                .find(|d| d.payment_intent == pi)
                .map(|d| d.id)
        })
        .await;
        disputes.push(id);
    }
    let evidence = [
        ("evidence[uncategorized_text]", "losing_evidence"),
        ("evidence[product_description]", "A blue mug"),
        ("submit", "true"),
    ];
    let path = format!("/v1/disputes/{}", disputes[0]);
    checked_form(&path, &evidence);
    let answer = stripe_post(&client, &sandbox, &path, Some("ev"), &evidence)
        .await
        .expect("answered");
    check_answer(&mut findings, Contract::stripe(), "POST", &path, &answer);
    let close = format!("/v1/disputes/{}/close", disputes[1]);
    checked_form(&close, &[]);
    let answer = stripe_post(&client, &sandbox, &close, None, &[])
        .await
        .expect("answered");
    check_answer(&mut findings, Contract::stripe(), "POST", &close, &answer);
    // A refusal is Stripe's error shape too.
    let answer = stripe_post(&client, &sandbox, &close, None, &[])
        .await
        .expect("answered");
    check_answer(&mut findings, Contract::stripe(), "POST", &close, &answer);
    for path in [
        format!("/v1/disputes/{}", disputes[2]),
        "/v1/disputes?limit=2".to_owned(),
        "/v1/disputes/du_none".to_owned(),
    ] {
        let answer = get(&client, &sandbox, &path).await;
        let bare = path.split('?').next().unwrap_or_default();
        check_answer(&mut findings, Contract::stripe(), "GET", bare, &answer);
    }
    // Every event so far: the lost one's and the won one's closing included.
    eventually("the decided disputes", || {
        let closed = hook
            .received()
            .iter()
            .filter(|e| e["type"] == "charge.dispute.closed")
            .count();
        (closed >= 3).then_some(())
    })
    .await;
    let stripe = Contract::stripe();
    for event in hook.received() {
        let object = &event["data"]["object"];
        if object["object"] != "dispute" {
            continue;
        }
        let what = format!("event {} {}", event["type"], event["id"]);
        if let Err(v) = stripe.validate_schema("event", &event) {
            findings.push(format!("{what} breaks `event`:\n{}", report(&v)));
        }
        if let Err(v) = stripe.validate_schema("dispute", object) {
            findings.push(format!(
                "{what} breaks `dispute`:\n{}\n  {object}",
                report(&v)
            ));
        }
    }
    assert!(findings.is_empty(), "{}", findings.join("\n\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adyen_dispute_notifications_and_dispute_service_keep_the_contract() {
    let hook = Receiver::start().await;
    let sandbox = start(SandboxConfig {
        adyen_notification_url: Some(hook.url.clone()),
        dispute_after_ms: 50,
        ..fast()
    })
    .await;
    let client = client(Duration::from_secs(5));
    let mut findings = Vec::new();
    let mut psps = Vec::new();
    for (token, reference) in [
        ("pm_sandbox_dispute_second_chargeback", "at_a1"),
        ("pm_sandbox_dispute_prearbitration_won", "at_a2"),
        ("pm_sandbox_dispute_escalated", "at_a3"),
        ("pm_card_createDisputeInquiry", "at_a4"),
        ("pm_card_createDispute", "at_a5"),
    ] {
        let paid = adyen_post(
            &client,
            &sandbox,
            "/v71/payments",
            None,
            &json!({
                "amount": {"value": 1500, "currency": "EUR"},
                "reference": reference,
                "merchantAccount": ACCOUNT,
                "paymentMethod": {"type": "scheme", "storedPaymentMethodId": token},
            }),
        )
        .await
        .expect("answered");
        psps.push(
            paid.body["pspReference"]
                .as_str()
                .expect("a psp")
                .to_owned(),
        );
    }
    let dispute_of = |psp: &str| {
        sandbox
            .disputes()
            .into_iter()
            .find(|d| d.payment_intent == psp)
            .map(|d| d.id)
    };
    let inquiry = eventually("the inquiry", || dispute_of(&psps[3])).await;
    let chargeback = eventually("the chargeback", || dispute_of(&psps[4])).await;
    let contract = Contract::adyen_disputes();
    let base = "/ca/services/DisputeService/v30";
    let named =
        |dispute: &str| json!({"merchantAccountCode": ACCOUNT, "disputePspReference": dispute});
    let mut supplied = named(&inquiry);
    supplied["defenseDocuments"] = json!([{
        "content": base64::engine::general_purpose::STANDARD.encode("winning_evidence"),
        "contentType": "text/plain",
        "defenseDocumentTypeCode": "DefenseMaterial",
    }]);
    let mut defended = named(&chargeback);
    defended["defenseReasonCode"] = json!("SupplyDefenseMaterial");
    for (operation, body) in [
        ("retrieveApplicableDefenseReasons", named(&chargeback)),
        ("supplyDefenseDocument", supplied),
        ("defendDispute", defended),
        ("acceptDispute", named(&chargeback)),
        ("acceptDispute", named("du_none")),
    ] {
        let path = format!("{base}/{operation}");
        let bytes = serde_json::to_vec(&body).expect("JSON");
        if let Err(v) = contract.validate_request("POST", &path, "application/json", &bytes) {
            panic!(
                "the test's own {operation} breaks the contract:\n{}",
                report(&v)
            );
        }
        let answer = adyen_post(&client, &sandbox, &path, None, &body)
            .await
            .expect("answered");
        check_answer(&mut findings, contract, "POST", &path, &answer);
    }
    // Each script's last notification: the whole run of them is in.
    eventually("every stage told", || {
        let codes: Vec<String> = hook
            .received()
            .iter()
            .flat_map(|d| {
                d["notificationItems"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
            })
            .filter_map(|i| {
                i["NotificationRequestItem"]["eventCode"]
                    .as_str()
                    .map(str::to_owned)
            })
            .collect();
        [
            "SECOND_CHARGEBACK",
            "PREARBITRATION_WON",
            "CHARGEBACK_REVERSED",
        ]
        .iter()
        .all(|code| codes.iter().any(|c| c == code))
        .then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let webhooks = Contract::adyen_webhooks();
    let mut codes = Vec::new();
    for delivery in hook.received() {
        for wrapper in delivery["notificationItems"]
            .as_array()
            .cloned()
            .unwrap_or_default()
        {
            let code = wrapper["NotificationRequestItem"]["eventCode"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            if code == "AUTHORISATION" {
                continue;
            }
            let one = json!({"live": delivery["live"], "notificationItems": [wrapper]});
            let bytes = serde_json::to_vec(&one).expect("JSON");
            if let Err(v) = webhooks.validate_webhook(&code, &bytes) {
                findings.push(format!(
                    "notification {code:?} breaks the contract:\n{}\n  {one}",
                    report(&v)
                ));
            }
            codes.push(code);
        }
    }
    codes.sort();
    codes.dedup();
    let expected: Vec<Value> = [
        "CHARGEBACK",
        "CHARGEBACK_REVERSED",
        "DISPUTE_DEFENSE_PERIOD_ENDED",
        "INFORMATION_SUPPLIED",
        "NOTIFICATION_OF_CHARGEBACK",
        "PREARBITRATION_WON",
        "REQUEST_FOR_INFORMATION",
        "SECOND_CHARGEBACK",
    ]
    .iter()
    .map(|c| json!(c))
    .collect();
    assert_eq!(json!(codes), json!(expected));
    assert!(findings.is_empty(), "{}", findings.join("\n\n"));
}
