//! Holds, challenges, captures and cancels against a local HTTP mock, and the notifications
//! that settle them: what the adapter sends and how each answer maps (docs/DESIGN.md, "The
//! provider protocol").

use std::time::Duration;

use chrono::{TimeZone, Utc};
use serde_json::{json, Value};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use super::notification::{verify_delivery, CAPTURE_FAILED};
use super::{payment_request, sign_item, AdyenConfig, AdyenProvider, HmacKey};
use crate::providers::{
    CancelRequest, CaptureMethod, CaptureRequest, ChargeRequest, NextAction, PaymentProvider,
    ProviderCall, ProviderOutcome, ThreeDSecure,
};

const MERCHANT: &str = "PayorchTestMerchant";
const HMAC_KEY: &str = "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056";
const CHALLENGE: &str = "https://checkoutshopper-test.adyen.com/threeDS/redirect?MD=M2R";
const BACK: &str = "https://pay.example/v1/payments/pay_0001/return";

fn provider(base_url: &str) -> AdyenProvider {
    AdyenProvider::new(AdyenConfig {
        base_url: base_url.to_owned(),
        api_key: "AQE_test_holds".into(),
        merchant_account: MERCHANT.into(),
        hmac_keys: vec![HMAC_KEY.into()],
        connect_timeout: Duration::from_millis(300),
        timeout: Duration::from_millis(500),
    })
    .expect("valid config")
}

fn charge(capture_method: CaptureMethod, return_url: Option<&str>) -> ChargeRequest {
    ChargeRequest {
        amount: 4200,
        currency: "eur".into(),
        payment_method: "8415995487234100".into(),
        idempotency_key: "pk_attempt_0001".into(),
        attempt_id: "pay_0001".into(),
        order_id: "ord_0001".into(),
        merchant_id: "mer_0001".into(),
        capture_method,
        return_url: return_url.map(str::to_owned),
        return_route: "https://payorch.example/v1/payments/pay_1/return".into(),
        three_d_secure: ThreeDSecure::Automatic,
    }
}

fn capture() -> CaptureRequest {
    CaptureRequest {
        provider_payment_id: "PSP0001".into(),
        amount: 3000,
        currency: "eur".into(),
        idempotency_key: "ck_capture_0001".into(),
        attempt_id: "pay_0001".into(),
        merchant_id: "mer_0001".into(),
    }
}

fn cancel(provider_payment_id: Option<&str>) -> CancelRequest {
    CancelRequest {
        provider_payment_id: provider_payment_id.map(str::to_owned),
        idempotency_key: "vk_void_0001".into(),
        attempt_id: "pay_0001".into(),
        merchant_id: "mer_0001".into(),
    }
}

fn payment(result_code: &str) -> Value {
    json!({
        "pspReference": "PSP0001", "resultCode": result_code, "merchantReference": "pay_0001",
        "amount": {"value": 4200, "currency": "EUR"}
    })
}

/// A `RedirectShopper` answer as Adyen gives it: no pspReference until the details.
fn redirect(http_method: &str, url: &str) -> Value {
    json!({
        "resultCode": "RedirectShopper",
        "action": {"type": "redirect", "method": http_method, "url": url,
                   "paymentMethodType": "scheme"}
    })
}

fn received(payment_psp: Option<&str>) -> Value {
    let mut body = json!({
        "merchantAccount": MERCHANT, "pspReference": "MOD0001", "reference": "pay_0001",
        "status": "received"
    });
    match payment_psp {
        Some(psp) => body["paymentPspReference"] = json!(psp),
        None => body["paymentReference"] = json!("pay_0001"),
    }
    body
}

fn header(request: &wiremock::Request, name: &str) -> Option<String> {
    request
        .headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

fn body(request: &wiremock::Request) -> Value {
    serde_json::from_slice(&request.body).expect("JSON body")
}

async fn answering(http_method: &str, at: &str, response: ResponseTemplate) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method(http_method))
        .and(path(at))
        .respond_with(response)
        .mount(&server)
        .await;
    server
}

async fn sent(server: &MockServer) -> Vec<wiremock::Request> {
    server.received_requests().await.expect("recording on")
}

/// What leaves doubt: a timeout, a 5xx, a key in flight (409, or 704 as a 422).
fn doubtful_answers() -> Vec<(&'static str, ResponseTemplate)> {
    vec![
        (
            "timeout",
            ResponseTemplate::new(201)
                .set_body_json(received(Some("PSP0001")))
                .set_delay(Duration::from_secs(3)),
        ),
        ("500", ResponseTemplate::new(500).set_body_string("oops")),
        (
            "409",
            ResponseTemplate::new(409).set_body_json(json!({
                "status": 409, "errorCode": "704", "message": "request in progress",
                "errorType": "validation"
            })),
        ),
        (
            "422 704",
            ResponseTemplate::new(422).set_body_json(json!({
                "status": 422, "errorCode": "704",
                "message": "request already processed or in progress", "errorType": "validation"
            })),
        ),
    ]
}

fn assert_unknown(name: &str, call: &ProviderCall) {
    assert!(
        matches!(call.outcome, ProviderOutcome::Unknown { .. }),
        "{name}: {:?}",
        call.outcome
    );
}

#[tokio::test]
async fn a_hold_for_a_present_shopper_asks_for_manual_capture_and_a_return() {
    let server = answering(
        "POST",
        "/v71/payments",
        ResponseTemplate::new(200).set_body_json(payment("Authorised")),
    )
    .await;
    let held = charge(CaptureMethod::Manual, Some(BACK));
    let call = provider(&server.uri()).create_charge(&held).await;
    assert_eq!(
        call.outcome,
        ProviderOutcome::Authorized {
            provider_id: "PSP0001".into(),
            expires_at: None,
        }
    );
    let requests = sent(&server).await;
    let sent_body = body(&requests[0]);
    assert_eq!(
        sent_body["additionalData"],
        json!({"manualCapture": "true"})
    );
    assert_eq!(sent_body["returnUrl"], BACK);
    assert_eq!(sent_body["channel"], "Web");
    assert_eq!(sent_body["shopperInteraction"], "Ecommerce");
    assert_eq!(sent_body["recurringProcessingModel"], "CardOnFile");

    // The same answer to an automatic capture is the money taken, and nobody to redirect
    // means no return and the shopper not in session, as before.
    let server = answering(
        "POST",
        "/v71/payments",
        ResponseTemplate::new(200).set_body_json(payment("Authorised")),
    )
    .await;
    let call = provider(&server.uri())
        .create_charge(&charge(CaptureMethod::Automatic, None))
        .await;
    assert_eq!(
        call.outcome,
        ProviderOutcome::Succeeded {
            provider_id: "PSP0001".into()
        }
    );
    let sent_body = body(&sent(&server).await[0]);
    for absent in ["additionalData", "channel"] {
        assert_eq!(sent_body.get(absent), None, "{absent}");
    }
    assert_eq!(sent_body["shopperInteraction"], "ContAuth");
    // v71's PaymentRequest requires a returnUrl even with no payer: payorch's own route.
    assert_eq!(
        sent_body["returnUrl"],
        "https://payorch.example/v1/payments/pay_1/return"
    );
}

#[test]
fn three_d_secure_is_attempted_only_when_the_charge_requires_it() {
    let automatic = charge(CaptureMethod::Automatic, Some(BACK));
    let required = ChargeRequest {
        three_d_secure: ThreeDSecure::Required,
        ..automatic.clone()
    };
    let json = |req: &ChargeRequest| {
        serde_json::to_value(payment_request(req, "PayorchTest")).expect("serialisable")
    };
    let (mut asked, plain) = (json(&required), json(&automatic));
    assert_eq!(
        asked["authenticationData"],
        json!({"attemptAuthentication": "always"})
    );
    // Nothing else changes, and a charge that does not ask sends neither field.
    asked
        .as_object_mut()
        .expect("an object")
        .remove("authenticationData");
    assert_eq!(asked, plain);
    for absent in ["authenticationData", "threeDS2RequestData"] {
        assert_eq!(plain.get(absent), None, "{absent}");
    }
}

#[test]
fn three_d_secure_is_not_attempted_without_a_payer() {
    let automatic = charge(CaptureMethod::Automatic, None);
    let no_payer = ChargeRequest {
        three_d_secure: ThreeDSecure::Required,
        ..automatic.clone()
    };
    let json = |req: &ChargeRequest| {
        serde_json::to_value(payment_request(req, "PayorchTest")).expect("serialisable")
    };
    let sent = json(&no_payer);
    assert_eq!(sent, json(&automatic));
    assert_eq!(sent["shopperInteraction"], "ContAuth");
    assert_eq!(sent.get("authenticationData"), None);
}

#[tokio::test]
async fn a_get_redirect_is_a_challenge_with_the_return_sent_and_others_are_pending() {
    let server = answering(
        "POST",
        "/v71/payments",
        ResponseTemplate::new(200).set_body_json(redirect("GET", CHALLENGE)),
    )
    .await;
    let call = provider(&server.uri())
        .create_charge(&charge(CaptureMethod::Automatic, Some(BACK)))
        .await;
    assert_eq!(
        call.outcome,
        ProviderOutcome::RequiresAction {
            provider_id: None,
            next_action: NextAction {
                url: CHALLENGE.into(),
                return_url: Some(BACK.into()),
            },
        }
    );

    let native = json!({
        "resultCode": "ChallengeShopper",
        "action": {"type": "threeDS2", "token": "eyJ0", "paymentMethodType": "scheme"}
    });
    for answer in [
        redirect("POST", CHALLENGE),
        redirect("GET", "javascript:alert(1)"),
        native,
    ] {
        let server = answering(
            "POST",
            "/v71/payments",
            ResponseTemplate::new(200).set_body_json(answer.clone()),
        )
        .await;
        let call = provider(&server.uri())
            .create_charge(&charge(CaptureMethod::Automatic, Some(BACK)))
            .await;
        assert_eq!(
            call.outcome,
            ProviderOutcome::Pending { provider_id: None },
            "{answer}"
        );
    }
}

#[tokio::test]
async fn a_capture_is_posted_for_the_payment_and_received_is_pending() {
    let server = answering(
        "POST",
        "/v71/payments/PSP0001/captures",
        ResponseTemplate::new(201).set_body_json(received(Some("PSP0001"))),
    )
    .await;
    let call = provider(&server.uri()).capture(&capture()).await;
    assert_eq!(
        call.outcome,
        ProviderOutcome::Pending {
            provider_id: Some("PSP0001".into())
        }
    );
    assert_eq!(call.http_status, Some(201));
    let requests = sent(&server).await;
    assert_eq!(requests.len(), 1);
    assert_eq!(
        header(&requests[0], "idempotency-key").as_deref(),
        Some("ck_capture_0001")
    );
    assert_eq!(
        header(&requests[0], "x-api-key").as_deref(),
        Some("AQE_test_holds")
    );
    assert_eq!(
        body(&requests[0]),
        json!({
            "merchantAccount": MERCHANT,
            "amount": {"value": 3000, "currency": "EUR"},
            "reference": "pay_0001"
        })
    );
}

#[tokio::test]
async fn a_capture_adyen_refused_is_failed_and_one_that_leaves_doubt_is_unknown() {
    let server = answering(
        "POST",
        "/v71/payments/PSP0001/captures",
        ResponseTemplate::new(422).set_body_json(json!({
            "status": 422, "errorCode": "167", "message": "Original pspReference required",
            "errorType": "validation"
        })),
    )
    .await;
    assert!(matches!(
        provider(&server.uri()).capture(&capture()).await.outcome,
        ProviderOutcome::Failed { ref code, .. } if code == "167"
    ));
    for (name, response) in doubtful_answers() {
        let server = answering("POST", "/v71/payments/PSP0001/captures", response).await;
        let call = provider(&server.uri()).capture(&capture()).await;
        assert_unknown(&format!("capture, {name}"), &call);
        assert_eq!(sent(&server).await.len(), 1, "{name}: sent once");
    }
}

#[tokio::test]
async fn a_cancel_goes_by_the_payment_or_else_by_the_attempts_reference() {
    let server = answering(
        "POST",
        "/v71/payments/PSP0001/cancels",
        ResponseTemplate::new(201).set_body_json(received(Some("PSP0001"))),
    )
    .await;
    let call = provider(&server.uri())
        .cancel(&cancel(Some("PSP0001")))
        .await;
    assert_eq!(
        call.outcome,
        ProviderOutcome::Pending {
            provider_id: Some("PSP0001".into())
        }
    );
    let requests = sent(&server).await;
    assert_eq!(
        header(&requests[0], "idempotency-key").as_deref(),
        Some("vk_void_0001")
    );
    assert_eq!(
        body(&requests[0]),
        json!({"merchantAccount": MERCHANT, "reference": "pay_0001"})
    );

    let server = answering(
        "POST",
        "/v71/cancels",
        ResponseTemplate::new(201).set_body_json(received(None)),
    )
    .await;
    let call = provider(&server.uri()).cancel(&cancel(None)).await;
    assert_eq!(call.outcome, ProviderOutcome::Pending { provider_id: None });
    let requests = sent(&server).await;
    assert_eq!(
        body(&requests[0]),
        json!({"merchantAccount": MERCHANT, "paymentReference": "pay_0001", "reference": "pay_0001"})
    );
    assert_eq!(
        header(&requests[0], "idempotency-key").as_deref(),
        Some("vk_void_0001")
    );

    for (name, response) in doubtful_answers() {
        let server = answering("POST", "/v71/payments/PSP0001/cancels", response).await;
        let call = provider(&server.uri())
            .cancel(&cancel(Some("PSP0001")))
            .await;
        assert_unknown(&format!("cancel, {name}"), &call);
        assert_eq!(sent(&server).await.len(), 1, "{name}: sent once");
    }
}

#[tokio::test]
async fn the_payers_return_is_sent_as_details_and_the_result_code_mapped() {
    let server = answering(
        "POST",
        "/v71/payments/details",
        ResponseTemplate::new(200).set_body_json(payment("Authorised")),
    )
    .await;
    let adapter = provider(&server.uri());
    let params = [
        ("shopperOrder".to_owned(), "12xy".to_owned()),
        ("redirectResult".to_owned(), "X6XtfGC3!Y".to_owned()),
    ];
    // The details call cannot know the capture method: the attempt's decides.
    assert_eq!(
        adapter
            .complete_action("", "pay_0001", &params)
            .await
            .outcome,
        ProviderOutcome::Authorized {
            provider_id: "PSP0001".into(),
            expires_at: None,
        }
    );
    let requests = sent(&server).await;
    assert_eq!(
        body(&requests[0]),
        json!({"details": {"redirectResult": "X6XtfGC3!Y"}})
    );

    // Without the redirectResult there is nothing to ask with.
    let call = adapter.complete_action("", "pay_0001", &params[..1]).await;
    assert_unknown("no redirectResult", &call);
    assert_eq!(call.http_status, None);
    assert_eq!(sent(&server).await.len(), 1);

    // A refused details call says nothing of the payment, which exists already.
    let server = answering(
        "POST",
        "/v71/payments/details",
        ResponseTemplate::new(422).set_body_json(json!({
            "status": 422, "errorCode": "101", "message": "Invalid payment details",
            "errorType": "validation"
        })),
    )
    .await;
    let call = provider(&server.uri())
        .complete_action("", "pay_0001", &params)
        .await;
    assert_unknown("422 to details", &call);

    let server = answering(
        "POST",
        "/v71/payments/details",
        ResponseTemplate::new(200).set_body_json(payment("Refused")),
    )
    .await;
    assert!(matches!(
        provider(&server.uri())
            .complete_action("", "pay_0001", &params)
            .await
            .outcome,
        ProviderOutcome::Failed { .. }
    ));

    // An answer about another attempt's payment (the browser chose the redirectResult).
    let mut elsewhere = payment("Authorised");
    elsewhere["merchantReference"] = json!("pay_9999");
    let server = answering(
        "POST",
        "/v71/payments/details",
        ResponseTemplate::new(200).set_body_json(elsewhere),
    )
    .await;
    let call = provider(&server.uri())
        .complete_action("", "pay_0001", &params)
        .await;
    assert_unknown("merchantReference pay_9999", &call);
}

/// One signed notification item about payment `PSP0001`.
fn item(psp: &str, event_code: &str, success: &str) -> Value {
    let mut item = json!({
        "additionalData": {},
        "amount": {"value": 3000, "currency": "EUR"},
        "eventCode": event_code,
        "eventDate": "2024-06-10T12:00:00+02:00",
        "merchantAccountCode": MERCHANT,
        "merchantReference": "pay_0001",
        "originalReference": "PSP0001",
        "pspReference": psp,
        "reason": "",
        "success": success
    });
    let signature = sign_item(&item, HMAC_KEY).expect("hex key");
    item["additionalData"]["hmacSignature"] = json!(signature);
    item
}

#[test]
fn a_refused_technical_cancel_naming_no_payment_says_none_was_made() {
    // A cancel by reference that found no payment: no `originalReference`.
    let mut none = item("TC1", "TECHNICAL_CANCEL", "false");
    none["originalReference"] = json!("");
    none["amount"] = json!({"value": 0, "currency": "EUR"});
    none["reason"] = json!("No payment was made with this reference");
    none["additionalData"] = json!({});
    let signature = sign_item(&none, HMAC_KEY).expect("hex key");
    none["additionalData"]["hmacSignature"] = json!(signature);
    // One refused about a payment (it was captured): the cancel's refusal, no more.
    let captured = item("TC2", "TECHNICAL_CANCEL", "false");
    let wrapped: Vec<Value> = [none, captured]
        .iter()
        .map(|i| json!({"NotificationRequestItem": i}))
        .collect();
    let delivery = json!({"live": "false", "notificationItems": wrapped}).to_string();
    let key = HmacKey::from_hex(HMAC_KEY).expect("hex key");
    let now = Utc.timestamp_opt(1_718_020_000, 0).single().expect("time");
    let events = verify_delivery(delivery.as_bytes(), &[key], now).expect("verifies");
    assert!(!events[0].modification, "about the charge itself");
    assert!(matches!(
        &events[0].outcome,
        Some(ProviderOutcome::Failed { code, provider_id: None, .. }) if code == crate::providers::NO_RECORD
    ));
    assert_eq!(events[0].amount, None, "a cancel's amount is not checked");
    assert!(events[1].modification);
    assert!(matches!(
        &events[1].outcome,
        Some(ProviderOutcome::Failed { code, .. }) if code == "cancellation_failed"
    ));
}

#[test]
fn capture_and_cancellation_notifications_settle_the_payment_they_name() {
    let items = [
        item("CAP1", "CAPTURE", "true"),
        item("CAP2", "CAPTURE", "false"),
        item("CAP3", CAPTURE_FAILED, "true"),
        item("CAN1", "CANCELLATION", "true"),
        item("CAN2", "CANCELLATION", "false"),
        item("CAN3", "TECHNICAL_CANCEL", "true"),
    ];
    let wrapped: Vec<Value> = items
        .iter()
        .map(|i| json!({"NotificationRequestItem": i}))
        .collect();
    let delivery = json!({"live": "false", "notificationItems": wrapped}).to_string();
    let key = HmacKey::from_hex(HMAC_KEY).expect("hex key");
    let now = Utc.timestamp_opt(1_718_020_000, 0).single().expect("time");
    let events = verify_delivery(delivery.as_bytes(), &[key], now).expect("verifies");

    for event in &events {
        assert!(event.acted_on, "{}", event.id);
        assert_eq!(event.provider_id, "PSP0001", "{}: the payment", event.id);
        assert_eq!(
            event.attempt_id.as_deref(),
            Some("pay_0001"),
            "{}",
            event.id
        );
    }
    let failed = |code: &str| ProviderOutcome::Failed {
        code: code.into(),
        message: format!(
            "the provider says the {} failed",
            code.trim_end_matches("_failed")
        ),
        provider_id: Some("PSP0001".into()),
        decline: None,
    };
    let outcomes: Vec<Option<ProviderOutcome>> = events.iter().map(|e| e.outcome.clone()).collect();
    assert_eq!(
        outcomes,
        [
            Some(ProviderOutcome::Succeeded {
                provider_id: "PSP0001".into()
            }),
            Some(failed("capture_failed")),
            Some(failed("capture_failed")),
            Some(ProviderOutcome::Canceled {
                provider_id: Some("PSP0001".into())
            }),
            Some(failed("cancellation_failed")),
            Some(ProviderOutcome::Canceled {
                provider_id: Some("PSP0001".into())
            }),
        ]
    );
    // A capture's amount may be part of the charge, and a cancel moves no money (a technical
    // cancel of no payment says 0): neither is checked against the charge.
    assert_eq!(events[0].amount, None);
    assert_eq!(events[3].amount, None);
    // Each tells the result of an operation payorch asked for, not the charge's status.
    assert!(events.iter().all(|e| e.modification));
}
