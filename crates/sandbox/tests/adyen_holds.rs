//! The Adyen face's manual capture, captures and cancels (docs/DESIGN.md, "The provider
//! protocol"): `additionalData.manualCapture` holds; a capture or cancel is answered `201
//! received` and told in a signed `CAPTURE`, `CANCELLATION` or `TECHNICAL_CANCEL`
//! notification; keys replay; the ledger holds the truth.

mod common;

use std::time::Duration;

use common::{adyen_post, client, fast, ledger, start, Receiver, SandboxConfig, SECRET};
use payorch_sandbox::SandboxHandle;
use payorch_wire::adyen::NotificationRequestItem;
use payorch_wire::adyen_hmac::HmacKey;
use serde_json::{json, Value};

const ACCOUNT: &str = "PayorchECOM";

fn payment(reference: &str, token: &str, manual: bool) -> Value {
    let mut body = json!({
        "amount": {"value": 1000, "currency": "EUR"},
        "reference": reference,
        "merchantAccount": ACCOUNT,
        "paymentMethod": {"type": "scheme", "storedPaymentMethodId": token},
        "shopperInteraction": "ContAuth",
        "recurringProcessingModel": "UnscheduledCardOnFile",
        "metadata": {"order_id": "ord_1", "merchant_id": "mer_1"},
    });
    if manual {
        body["additionalData"] = json!({"manualCapture": "true"});
    }
    body
}

async fn with_notifications() -> (SandboxHandle, Receiver) {
    let hook = Receiver::start().await;
    let sandbox = start(SandboxConfig {
        adyen_notification_url: Some(hook.url.clone()),
        ..fast()
    })
    .await;
    (sandbox, hook)
}

/// A payment authorised for a later capture: its pspReference.
async fn held(
    client: &reqwest::Client,
    sandbox: &SandboxHandle,
    reference: &str,
    token: &str,
) -> String {
    let made = adyen_post(
        client,
        sandbox,
        "/v71/payments",
        Some(reference),
        &payment(reference, token, true),
    )
    .await
    .expect("answered");
    assert_eq!(made.status, 200, "{}", made.body);
    assert_eq!(made.body["resultCode"], "Authorised");
    made.body["pspReference"]
        .as_str()
        .expect("named")
        .to_owned()
}

/// The items about `psp` with `event_code`, once there are `count`, each checked against
/// the sandbox's HMAC key.
async fn items(
    hook: &Receiver,
    sandbox: &SandboxHandle,
    psp: &str,
    event_code: &str,
    count: usize,
) -> Vec<Value> {
    let key = HmacKey::from_hex(sandbox.adyen_hmac_key().expose()).expect("a hex key");
    let found = common::eventually(event_code, || {
        let found: Vec<Value> = hook
            .adyen_items(psp)
            .into_iter()
            .filter(|item| item["eventCode"] == event_code)
            .collect();
        (found.len() >= count).then_some(found)
    })
    .await;
    for item in &found {
        let parsed: NotificationRequestItem =
            serde_json::from_value(item.clone()).expect("an item");
        let signature = item["additionalData"]["hmacSignature"]
            .as_str()
            .expect("signed");
        use base64::Engine;
        let signature = base64::engine::general_purpose::STANDARD
            .decode(signature)
            .expect("base64");
        assert!(key.verifies(&parsed, &signature), "{item}");
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_payment_is_captured_once_and_told_by_notification() {
    let (sandbox, hook) = with_notifications().await;
    let client = client(Duration::from_secs(5));
    let psp = held(&client, &sandbox, "att_cap", "pm_card_visa").await;
    let auth = items(&hook, &sandbox, &psp, "AUTHORISATION", 1).await;
    assert_eq!(auth[0]["success"], "true");
    assert_eq!(auth[0]["merchantReference"], "att_cap");
    let book = ledger(&client, &sandbox).await;
    assert_eq!(book["holds"][0]["provider_id"], psp.as_str());
    assert_eq!(book["holds"][0]["protocol"], "adyen");
    assert_eq!(book["holds"][0]["status"], "held");

    let path = format!("/v71/payments/{psp}/captures");
    let capture = |value: i64, currency: &str, account: &str| {
        json!({
            "merchantAccount": account,
            "amount": {"value": value, "currency": currency},
            "reference": "att_cap",
        })
    };
    for (body, code) in [
        (capture(600, "EUR", "Other"), "901"),
        (capture(600, "USD", ACCOUNT), "137"),
        (capture(1001, "EUR", ACCOUNT), "137"),
        (capture(0, "EUR", ACCOUNT), "137"),
    ] {
        let refused = adyen_post(&client, &sandbox, &path, Some("cap-1"), &body)
            .await
            .expect("answered");
        assert_eq!(refused.status, 422, "{body}");
        assert_eq!(refused.body["errorCode"], code, "{body}");
    }
    let unknown = adyen_post(
        &client,
        &sandbox,
        "/v71/payments/pi_nope/captures",
        None,
        &capture(1, "EUR", ACCOUNT),
    )
    .await
    .expect("answered");
    assert_eq!(unknown.status, 422);
    assert_eq!(unknown.body["errorCode"], "167");

    let taken = adyen_post(
        &client,
        &sandbox,
        &path,
        Some("cap-1"),
        &capture(600, "EUR", ACCOUNT),
    )
    .await
    .expect("answered");
    assert_eq!(taken.status, 201, "{}", taken.body);
    let capture_psp = taken.body["pspReference"]
        .as_str()
        .expect("its own")
        .to_owned();
    assert_ne!(capture_psp, psp);
    assert_eq!(
        taken.body,
        json!({
            "status": "received",
            "pspReference": capture_psp,
            "merchantAccount": ACCOUNT,
            "paymentPspReference": psp,
            "reference": "att_cap",
            "amount": {"value": 600, "currency": "EUR"},
        })
    );
    let replay = adyen_post(
        &client,
        &sandbox,
        &path,
        Some("cap-1"),
        &capture(600, "EUR", ACCOUNT),
    )
    .await
    .expect("answered");
    assert_eq!(replay.bytes, taken.bytes);
    let other = adyen_post(
        &client,
        &sandbox,
        &path,
        Some("cap-1"),
        &capture(500, "EUR", ACCOUNT),
    )
    .await
    .expect("answered");
    assert_eq!(
        (other.status, other.body["errorCode"].clone()),
        (422, json!("704"))
    );

    let captured = items(&hook, &sandbox, &psp, "CAPTURE", 1).await;
    assert_eq!(captured[0]["success"], "true");
    assert_eq!(captured[0]["pspReference"], capture_psp.as_str());
    assert_eq!(captured[0]["originalReference"], psp.as_str());
    assert_eq!(captured[0]["merchantReference"], "att_cap");
    assert_eq!(
        captured[0]["amount"],
        json!({"value": 600, "currency": "EUR"})
    );
    assert_eq!(captured[0]["merchantAccountCode"], ACCOUNT);

    // A second capture is taken, and refused by notification: nothing more is taken.
    let second = adyen_post(
        &client,
        &sandbox,
        &path,
        Some("cap-2"),
        &capture(400, "EUR", ACCOUNT),
    )
    .await
    .expect("answered");
    assert_eq!(second.status, 201);
    let told = items(&hook, &sandbox, &psp, "CAPTURE", 2).await;
    assert_eq!(told[1]["success"], "false");
    assert!(!told[1]["reason"].as_str().unwrap_or_default().is_empty());

    let book = ledger(&client, &sandbox).await;
    let captures = book["captures"].as_array().expect("a list");
    let succeeded: Vec<_> = captures
        .iter()
        .filter(|c| c["status"] == "succeeded")
        .collect();
    assert_eq!(succeeded.len(), 1, "{captures:?}");
    assert_eq!(succeeded[0]["capture_id"], capture_psp.as_str());
    assert_eq!(succeeded[0]["idempotency_key"], "cap-1");
    assert_eq!(succeeded[0]["amount"], 600);
    assert_eq!(book["holds"][0]["status"], "captured");
    let charge = book["data"]
        .as_array()
        .expect("a list")
        .iter()
        .find(|entry| entry["provider_id"] == psp.as_str())
        .expect("in the ledger");
    assert_eq!(charge["status"], "succeeded", "captured");
    sandbox.stop().await;
    hook.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_by_psp_or_by_reference_releases_a_hold_that_is_then_never_captured() {
    let (sandbox, hook) = with_notifications().await;
    let client = client(Duration::from_secs(5));
    let cancel = json!({"merchantAccount": ACCOUNT, "reference": "void_ref"});

    let psp = held(&client, &sandbox, "att_void", "pm_card_visa").await;
    let path = format!("/v71/payments/{psp}/cancels");
    let taken = adyen_post(&client, &sandbox, &path, Some("void-1"), &cancel)
        .await
        .expect("answered");
    assert_eq!(taken.status, 201);
    assert_eq!(taken.body["paymentPspReference"], psp.as_str());
    assert_eq!(taken.body["status"], "received");
    assert!(taken.body.get("amount").is_none());
    let canceled = items(&hook, &sandbox, &psp, "CANCELLATION", 1).await;
    assert_eq!(canceled[0]["success"], "true");
    assert_eq!(canceled[0]["originalReference"], psp.as_str());
    assert_eq!(canceled[0]["pspReference"], taken.body["pspReference"]);
    let capture = json!({"merchantAccount": ACCOUNT, "amount": {"value": 1000, "currency": "EUR"}});
    let late = adyen_post(
        &client,
        &sandbox,
        &format!("/v71/payments/{psp}/captures"),
        None,
        &capture,
    )
    .await
    .expect("answered");
    assert_eq!(late.status, 201);
    assert_eq!(
        items(&hook, &sandbox, &psp, "CAPTURE", 1).await[0]["success"],
        "false"
    );

    // The merchant never got this payment's pspReference: it cancels by its own reference.
    let lost = held(&client, &sandbox, "att_lost", "pm_card_visa").await;
    let by_reference =
        json!({"merchantAccount": ACCOUNT, "paymentReference": "att_lost", "reference": "tc_ref"});
    let taken = adyen_post(
        &client,
        &sandbox,
        "/v71/cancels",
        Some("tc-1"),
        &by_reference,
    )
    .await
    .expect("answered");
    assert_eq!(taken.status, 201);
    assert_eq!(taken.body["paymentReference"], "att_lost");
    assert!(taken.body.get("paymentPspReference").is_none());
    let replay = adyen_post(
        &client,
        &sandbox,
        "/v71/cancels",
        Some("tc-1"),
        &by_reference,
    )
    .await
    .expect("answered");
    assert_eq!(replay.bytes, taken.bytes);
    let told = items(&hook, &sandbox, &lost, "TECHNICAL_CANCEL", 1).await;
    assert_eq!(told[0]["success"], "true");
    assert_eq!(told[0]["originalReference"], lost.as_str());
    assert_eq!(told[0]["merchantReference"], "att_lost");

    // No payment has this reference: taken, and told false.
    let nothing = json!({"merchantAccount": ACCOUNT, "paymentReference": "att_never"});
    let taken = adyen_post(&client, &sandbox, "/v71/cancels", None, &nothing)
        .await
        .expect("answered");
    assert_eq!(taken.status, 201);
    let never = common::eventually("TECHNICAL_CANCEL of nothing", || {
        hook.received()
            .iter()
            .flat_map(|d| {
                d["notificationItems"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
            })
            .map(|i| i["NotificationRequestItem"].clone())
            .find(|i| i["merchantReference"] == "att_never")
    })
    .await;
    assert_eq!(never["success"], "false");
    assert_eq!(never["eventCode"], "TECHNICAL_CANCEL");

    // A payment captured at once cannot be canceled: taken, told false.
    let paid = adyen_post(
        &client,
        &sandbox,
        "/v71/payments",
        None,
        &payment("att_paid", "pm_card_visa", false),
    )
    .await
    .expect("answered");
    let paid_psp = paid.body["pspReference"]
        .as_str()
        .expect("named")
        .to_owned();
    let refused = adyen_post(
        &client,
        &sandbox,
        &format!("/v71/payments/{paid_psp}/cancels"),
        None,
        &cancel,
    )
    .await
    .expect("answered");
    assert_eq!(refused.status, 201);
    assert_eq!(
        items(&hook, &sandbox, &paid_psp, "CANCELLATION", 1).await[0]["success"],
        "false"
    );

    let book = ledger(&client, &sandbox).await;
    let voids = book["voids"].as_array().expect("a list");
    assert_eq!(voids.len(), 2, "{voids:?}");
    assert_eq!(voids[0]["provider_id"], psp.as_str());
    assert_eq!(voids[0]["kind"], "cancel");
    assert_eq!(voids[1]["provider_id"], lost.as_str());
    assert_eq!(voids[1]["kind"], "technical_cancel");
    assert_eq!(voids[1]["idempotency_key"], "tc-1");
    for void in voids {
        assert!(
            !book["captures"]
                .as_array()
                .unwrap()
                .iter()
                .any(|c| c["provider_id"] == void["provider_id"] && c["status"] == "succeeded"),
            "a voided hold was captured: {book}"
        );
    }
    sandbox.stop().await;
    hook.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_capture_fault_tokens_fault_the_first_capture_or_cancel_on_the_adyen_face_too() {
    let sandbox = start(fast()).await;
    let patient = client(Duration::from_secs(5));
    let impatient = client(Duration::from_millis(400));
    let capture = json!({"merchantAccount": ACCOUNT, "amount": {"value": 1000, "currency": "EUR"}, "reference": "r"});

    let lost = held(
        &patient,
        &sandbox,
        "att_f_lost",
        "pm_sandbox_capture_lost_response",
    )
    .await;
    let path = format!("/v71/payments/{lost}/captures");
    assert!(
        adyen_post(&impatient, &sandbox, &path, Some("k-lost"), &capture)
            .await
            .is_none()
    );
    let resent = adyen_post(&patient, &sandbox, &path, Some("k-lost"), &capture)
        .await
        .expect("answered");
    assert_eq!(resent.status, 201);
    let captured: Vec<_> = sandbox
        .captures()
        .into_iter()
        .filter(|c| c.provider_id == lost)
        .collect();
    assert_eq!(captured.len(), 1);
    assert_eq!(
        captured[0].capture_id.as_deref(),
        resent.body["pspReference"].as_str()
    );

    let before = held(
        &patient,
        &sandbox,
        "att_f_before",
        "pm_sandbox_capture_error_before",
    )
    .await;
    let path = format!("/v71/payments/{before}/captures");
    let failed = adyen_post(&patient, &sandbox, &path, Some("k-before"), &capture)
        .await
        .expect("answered");
    assert_eq!(failed.status, 500);
    assert_eq!(failed.body["errorType"], "internal");
    assert!(!sandbox.captures().iter().any(|c| c.provider_id == before));
    let retried = adyen_post(&patient, &sandbox, &path, Some("k-before"), &capture)
        .await
        .expect("answered");
    assert_eq!(retried.status, 201);

    let after = held(
        &patient,
        &sandbox,
        "att_f_after",
        "pm_sandbox_capture_error_after",
    )
    .await;
    let by_reference = json!({"merchantAccount": ACCOUNT, "paymentReference": "att_f_after"});
    let failed = adyen_post(
        &patient,
        &sandbox,
        "/v71/cancels",
        Some("k-after"),
        &by_reference,
    )
    .await
    .expect("answered");
    assert_eq!(failed.status, 500);
    assert!(
        sandbox.voids().iter().any(|v| v.provider_id == after),
        "done before the 500"
    );
    let resent = adyen_post(
        &patient,
        &sandbox,
        "/v71/cancels",
        Some("k-after"),
        &by_reference,
    )
    .await
    .expect("answered");
    assert_eq!(resent.status, 201);
    assert_eq!(
        sandbox
            .voids()
            .iter()
            .filter(|v| v.provider_id == after)
            .count(),
        1
    );
    sandbox.stop().await;

    let refusing = start(SandboxConfig {
        error_rate: 1.0,
        ..fast()
    })
    .await;
    for path in [
        "/v71/payments/pi_x/captures",
        "/v71/payments/pi_x/cancels",
        "/v71/cancels",
    ] {
        let answer = adyen_post(&patient, &refusing, path, None, &json!({}))
            .await
            .expect("answered");
        assert_eq!(answer.status, 500, "{path}");
    }
    let unauthorised = patient
        .post(format!("{}/v71/cancels", refusing.base_url()))
        .header("X-API-Key", format!("{SECRET}x"))
        .json(&json!({}))
        .send()
        .await
        .expect("answered");
    assert_eq!(unauthorised.status(), 401);
    refusing.stop().await;
}
