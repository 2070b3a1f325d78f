//! The Adyen adapter against a local HTTP mock: the exact wire format it sends and how
//! every kind of answer maps to a `ProviderOutcome` (docs/DESIGN.md, "The provider
//! protocol"), plus notification HMAC signatures checked against an independently computed
//! test vector.

use std::time::Duration;

use chrono::{TimeZone, Utc};
use payorch::providers::adyen::{sign_item, AdyenConfig, AdyenProvider, AdyenSetupError};
use payorch::providers::decline::{Advice, Decline, DeclineCode};
use payorch::providers::{
    CaptureMethod, ChargeRequest, Lookups, PaymentProvider, ProviderCall, ProviderOutcome,
    RefundNotice, RefundRequest, SendWindow, ThreeDSecure, WebhookError,
};
use serde_json::{json, Value};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const API_KEY: &str = "AQE_test_adapter_key";
const MERCHANT: &str = "PayorchTestMerchant";
/// Hex HMAC keys: the current one, and a newer one a rotation adds.
const HMAC_KEY: &str = "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056";
const HMAC_KEY_NEW: &str = "00112233445566778899AABBCCDDEEFF00112233445566778899AABBCCDDEEFF";

/// base64(HMAC-SHA256(hex-decoded HMAC_KEY,
/// "7914073381342284::PayorchTestMerchant:pay_0001:4200:EUR:AUTHORISATION:true")), computed
/// outside this code base with a standard HMAC library.
const VECTOR_SIGNATURE: &str = "MmCGZG4M5EvfQnb/VEtJf61TUazBn6nMFjyW5JfeZeU=";

fn config(base_url: &str, hmac_keys: &[&str]) -> AdyenConfig {
    AdyenConfig {
        base_url: base_url.to_owned(),
        api_key: API_KEY.into(),
        merchant_account: MERCHANT.into(),
        hmac_keys: hmac_keys.iter().map(|&k| k.into()).collect(),
        connect_timeout: Duration::from_millis(300),
        timeout: Duration::from_millis(500),
    }
}

fn provider(base_url: &str) -> AdyenProvider {
    AdyenProvider::new(config(base_url, &[HMAC_KEY])).expect("valid config")
}

fn charge() -> ChargeRequest {
    ChargeRequest {
        amount: 4200,
        currency: "eur".into(),
        payment_method: "8415995487234100".into(),
        idempotency_key: "pk_attempt_0001".into(),
        attempt_id: "pay_0001".into(),
        order_id: "ord_0001".into(),
        merchant_id: "mer_0001".into(),
        capture_method: CaptureMethod::Automatic,
        return_url: None,
        return_route: "https://payorch.example/v1/payments/pay_0001/return".into(),
        three_d_secure: ThreeDSecure::Automatic,
    }
}

fn refund() -> RefundRequest {
    RefundRequest {
        provider_payment_id: "PSP0001".into(),
        amount: 1500,
        currency: "eur".into(),
        idempotency_key: "rk_refund_0001".into(),
        refund_id: "ref_0001".into(),
        payment_id: "pay_0001".into(),
        merchant_id: "mer_0001".into(),
        reason: Some("requested_by_customer".into()),
    }
}

fn payment(result_code: &str, psp: &str) -> Value {
    json!({
        "pspReference": psp, "resultCode": result_code, "merchantReference": "pay_0001",
        "amount": {"value": 4200, "currency": "EUR"}
    })
}

fn header(request: &wiremock::Request, name: &str) -> Option<String> {
    request
        .headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

/// Answer every create with `response`, make one call, return it and the mock.
async fn create_answered_with(response: ResponseTemplate) -> (ProviderCall, MockServer) {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v71/payments"))
        .respond_with(response)
        .mount(&server)
        .await;
    let call = provider(&server.uri()).create_charge(&charge()).await;
    (call, server)
}

fn is_unknown(outcome: &ProviderOutcome) -> bool {
    matches!(outcome, ProviderOutcome::Unknown { .. })
}

#[tokio::test]
async fn create_sends_adyens_json_with_api_key_and_idempotency_key_the_same_on_resend() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v71/payments"))
        .respond_with(ResponseTemplate::new(200).set_body_json(payment("Authorised", "PSP0001")))
        .mount(&server)
        .await;
    let adapter = provider(&server.uri());
    let first = adapter.create_charge(&charge()).await;
    assert_eq!(
        first.outcome,
        ProviderOutcome::Succeeded {
            provider_id: "PSP0001".into()
        }
    );
    assert_eq!(first.http_status, Some(200));
    let requests = server.received_requests().await.expect("recording on");
    assert_eq!(requests.len(), 1, "exactly one request, no retries");
    let request = &requests[0];
    assert_eq!(request.method.as_str(), "POST");
    assert_eq!(request.url.path(), "/v71/payments");
    assert_eq!(request.url.query(), None);
    assert_eq!(header(request, "x-api-key").as_deref(), Some(API_KEY));
    assert_eq!(
        header(request, "idempotency-key").as_deref(),
        Some("pk_attempt_0001")
    );
    assert_eq!(
        header(request, "content-type").as_deref(),
        Some("application/json")
    );
    assert_eq!(header(request, "authorization"), None);
    let body: Value = serde_json::from_slice(&request.body).expect("JSON body");
    assert_eq!(
        body,
        json!({
            "amount": {"value": 4200, "currency": "EUR"},
            "reference": "pay_0001",
            "merchantAccount": "PayorchTestMerchant",
            "paymentMethod": {"type": "scheme", "storedPaymentMethodId": "8415995487234100"},
            "shopperInteraction": "ContAuth",
            "recurringProcessingModel": "UnscheduledCardOnFile",
            "metadata": {"order_id": "ord_0001", "merchant_id": "mer_0001"},
            // v71 requires it even with no payer there: payorch's own return route.
            "returnUrl": "https://payorch.example/v1/payments/pay_0001/return"
        })
    );

    // A resend of the same attempt: the same key and the same bytes.
    adapter.create_charge(&charge()).await;
    let requests = server.received_requests().await.expect("recording on");
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[1].body, requests[0].body);
    assert_eq!(
        header(&requests[1], "idempotency-key").as_deref(),
        Some("pk_attempt_0001")
    );
}

#[tokio::test]
async fn each_result_code_maps_to_its_outcome() {
    let pending = ProviderOutcome::Pending {
        provider_id: Some("PSP_R".into()),
    };
    let cases = [
        (
            "Authorised",
            ProviderOutcome::Succeeded {
                provider_id: "PSP_R".into(),
            },
        ),
        (
            "Refused",
            ProviderOutcome::Failed {
                code: "declined".into(),
                message: "the payment was refused".into(),
                provider_id: Some("PSP_R".into()),
                decline: Some(Decline::new(
                    DeclineCode::Declined,
                    "refused",
                    Advice::default(),
                )),
            },
        ),
        (
            "Cancelled",
            ProviderOutcome::Canceled {
                provider_id: Some("PSP_R".into()),
            },
        ),
        ("Pending", pending.clone()),
        ("Received", pending.clone()),
        ("RedirectShopper", pending.clone()),
        ("ChallengeShopper", pending.clone()),
        ("IdentifyShopper", pending.clone()),
        ("PresentToShopper", pending.clone()),
        ("SomethingNew", pending),
    ];
    for (result_code, expected) in cases {
        let (call, _server) = create_answered_with(
            ResponseTemplate::new(200).set_body_json(payment(result_code, "PSP_R")),
        )
        .await;
        assert_eq!(call.outcome, expected, "resultCode {result_code}");
    }
}

#[tokio::test]
async fn refused_carries_adyens_reason_and_code() {
    let mut body = payment("Refused", "PSP_D");
    body["refusalReason"] = json!("Not enough balance");
    body["refusalReasonCode"] = json!("12");
    let (call, _server) =
        create_answered_with(ResponseTemplate::new(200).set_body_json(body)).await;
    assert_eq!(
        call.outcome,
        ProviderOutcome::Failed {
            code: "insufficient_funds".into(),
            message: "Not enough balance".into(),
            provider_id: Some("PSP_D".into()),
            decline: Some(Decline::new(
                DeclineCode::InsufficientFunds,
                "12",
                Advice::default()
            )),
        }
    );
}

#[tokio::test]
async fn result_code_error_and_an_unreadable_body_are_unknown() {
    for response in [
        ResponseTemplate::new(200).set_body_json(payment("Error", "PSP_E")),
        ResponseTemplate::new(200).set_body_string("<html>"),
        ResponseTemplate::new(200).set_body_json(json!({"pspReference": "PSP_E"})),
        // Authorised, but no reference to name the charge by.
        ResponseTemplate::new(200).set_body_json(json!({"resultCode": "Authorised"})),
    ] {
        let (call, _server) = create_answered_with(response).await;
        assert!(is_unknown(&call.outcome), "{:?}", call.outcome);
    }
}

#[tokio::test]
async fn http_422_is_failed_with_adyens_error_code() {
    let body = json!({
        "status": 422, "errorCode": "101", "message": "Invalid card number",
        "errorType": "validation", "pspReference": "PSP_422"
    });
    let (call, _server) =
        create_answered_with(ResponseTemplate::new(422).set_body_json(body)).await;
    assert_eq!(
        call.outcome,
        ProviderOutcome::Failed {
            code: "invalid_number".into(),
            message: "Invalid card number".into(),
            provider_id: None,
            decline: Some(Decline::new(
                DeclineCode::InvalidNumber,
                "101",
                Advice::default()
            )),
        }
    );
    assert_eq!(call.http_status, Some(422));
}

#[tokio::test]
async fn answers_that_leave_doubt_are_unknown_and_sent_once() {
    let service_error = |status: u16, code: &str, kind: &str| json!({"status": status, "errorCode": code, "message": "m", "errorType": kind});
    let cases = [
        (
            "409",
            ResponseTemplate::new(409).set_body_json(service_error(409, "704", "validation")),
        ),
        (
            "422 idempotency 704",
            ResponseTemplate::new(422).set_body_json(json!({
                "status": 422, "errorCode": "704",
                "message": "request already processed or in progress", "errorType": "validation"
            })),
        ),
        (
            "429",
            ResponseTemplate::new(429).set_body_string("slow down"),
        ),
        (
            "500",
            ResponseTemplate::new(500).set_body_json(service_error(500, "905", "internal")),
        ),
        ("503", ResponseTemplate::new(503)),
    ];
    for (name, response) in cases {
        let (call, server) = create_answered_with(response).await;
        assert!(is_unknown(&call.outcome), "{name}: {:?}", call.outcome);
        assert!(call.http_status.is_some(), "{name}");
        let sent = server.received_requests().await.map(|r| r.len());
        assert_eq!(
            sent,
            Some(1),
            "{name}: the adapter never retries on its own"
        );
    }
}

#[tokio::test]
async fn a_payment_refused_for_our_credentials_was_not_processed() {
    for (status, code) in [(401, "000"), (403, "010")] {
        let body =
            json!({"status": status, "errorCode": code, "message": "m", "errorType": "security"});
        let (call, server) =
            create_answered_with(ResponseTemplate::new(status).set_body_json(body)).await;
        assert!(
            matches!(call.outcome, ProviderOutcome::Unavailable { .. }),
            "{status}: {:?}",
            call.outcome
        );
        assert_eq!(call.http_status, Some(status));
        assert_eq!(server.received_requests().await.map(|r| r.len()), Some(1));
    }
}

#[tokio::test]
async fn a_redirect_is_not_followed_and_is_unknown() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v71/payments"))
        .respond_with(ResponseTemplate::new(307).insert_header("Location", "/elsewhere"))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/elsewhere"))
        .respond_with(ResponseTemplate::new(200).set_body_json(payment("Authorised", "PSP_X")))
        .mount(&server)
        .await;
    let call = provider(&server.uri()).create_charge(&charge()).await;
    assert!(is_unknown(&call.outcome), "{:?}", call.outcome);
    assert_eq!(call.http_status, Some(307));
    assert_eq!(server.received_requests().await.map(|r| r.len()), Some(1));
}

#[tokio::test]
async fn timeout_is_unknown_without_status() {
    let (call, server) = create_answered_with(
        ResponseTemplate::new(200)
            .set_body_json(payment("Authorised", "PSP_LATE"))
            .set_delay(Duration::from_secs(3)),
    )
    .await;
    assert!(is_unknown(&call.outcome), "{:?}", call.outcome);
    assert_eq!(call.http_status, None);
    assert!(call.latency >= Duration::from_millis(500));
    assert!(call.latency < Duration::from_secs(2), "{:?}", call.latency);
    assert_eq!(server.received_requests().await.map(|r| r.len()), Some(1));
}

#[tokio::test]
async fn connection_refused_is_unavailable_and_a_reset_after_sending_is_unknown() {
    // Refused: bind a port, then free it. Not one byte of the request left.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let refused_url = format!("http://{}", listener.local_addr().expect("addr"));
    drop(listener);
    let call = provider(&refused_url).create_charge(&charge()).await;
    assert!(
        matches!(call.outcome, ProviderOutcome::Unavailable { .. }),
        "{:?}",
        call.outcome
    );
    assert_eq!(call.http_status, None);

    // Reset: accept, read the request, close without answering: it may have been acted on.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let reset_url = format!("http://{}", listener.local_addr().expect("addr"));
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let mut buf = [0u8; 4096];
            let _ = tokio::io::AsyncReadExt::read(&mut socket, &mut buf).await;
            drop(socket);
        }
    });
    let call = provider(&reset_url).create_charge(&charge()).await;
    assert!(is_unknown(&call.outcome), "{:?}", call.outcome);
    assert_eq!(call.http_status, None);
}

#[tokio::test]
async fn adyen_has_no_lookups_so_none_is_sent_and_none_is_ever_an_answer() {
    // Checkout API v71 has no GET of a payment or a refund (fixtures/contracts): outcomes
    // come from answers, resends and notifications (docs/DESIGN.md, "What proves what").
    let server = MockServer::start().await;
    let adapter = provider(&server.uri());
    assert_eq!(adapter.lookups(), Lookups::NotificationsOnly);
    let window = SendWindow {
        from: Utc::now(),
        until: Utc::now(),
    };
    for call in [
        adapter.retrieve("PSP_KNOWN").await,
        adapter.find_by_attempt("pay_0001", window).await,
        adapter.retrieve_refund("RF0001").await,
        adapter.find_refund("PSP0001", "ref_0001").await,
    ] {
        assert!(is_unknown(&call.outcome), "{:?}", call.outcome);
        assert_eq!(call.http_status, None);
    }
    let requests = server.received_requests().await.expect("recording on");
    assert!(requests.is_empty(), "{requests:?}");
}

#[tokio::test]
async fn refund_sends_adyens_json_and_received_is_pending() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v71/payments/PSP0001/refunds"))
        .respond_with(ResponseTemplate::new(201).set_body_json(json!({
            "status": "received", "pspReference": "RF0001", "paymentPspReference": "PSP0001",
            "reference": "ref_0001", "merchantAccount": MERCHANT,
            "amount": {"value": 1500, "currency": "EUR"}
        })))
        .mount(&server)
        .await;
    let adapter = provider(&server.uri());
    let call = adapter.create_refund(&refund()).await;
    assert_eq!(
        call.outcome,
        ProviderOutcome::Pending {
            provider_id: Some("RF0001".into())
        }
    );
    adapter.create_refund(&refund()).await;
    let requests = server.received_requests().await.expect("recording on");
    assert_eq!(requests.len(), 2, "one request per call");
    let request = &requests[0];
    assert_eq!(request.method.as_str(), "POST");
    assert_eq!(request.url.path(), "/v71/payments/PSP0001/refunds");
    assert_eq!(header(request, "x-api-key").as_deref(), Some(API_KEY));
    assert_eq!(
        header(request, "idempotency-key").as_deref(),
        Some("rk_refund_0001")
    );
    assert_eq!(
        header(request, "content-type").as_deref(),
        Some("application/json")
    );
    let body: Value = serde_json::from_slice(&request.body).expect("JSON body");
    assert_eq!(
        body,
        json!({
            "amount": {"value": 1500, "currency": "EUR"},
            "reference": "ref_0001",
            "merchantAccount": "PayorchTestMerchant"
        })
    );
    assert_eq!(
        requests[1].body, requests[0].body,
        "the same bytes on resend"
    );
}

#[tokio::test]
async fn a_refused_refund_is_failed_and_doubt_is_unknown() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v71/payments/PSP0001/refunds"))
        .respond_with(ResponseTemplate::new(422).set_body_json(json!({
            "status": 422, "errorCode": "167", "message": "Original pspReference required",
            "errorType": "validation"
        })))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/v71/payments/PSP_DOWN/refunds"))
        .respond_with(ResponseTemplate::new(500))
        .mount(&server)
        .await;
    let adapter = provider(&server.uri());
    assert_eq!(
        adapter.create_refund(&refund()).await.outcome,
        ProviderOutcome::Failed {
            code: "167".into(),
            message: "Original pspReference required".into(),
            provider_id: None,
            decline: None,
        }
    );
    let mut down = refund();
    down.provider_payment_id = "PSP_DOWN".into();
    assert!(is_unknown(&adapter.create_refund(&down).await.outcome));
}

/// A notification item, signed under `key` unless `key` is `None`.
fn item(
    psp: &str,
    original: &str,
    reference: &str,
    value: i64,
    event_code: &str,
    success: &str,
    key: Option<&str>,
) -> Value {
    let mut item = json!({
        "additionalData": {},
        "amount": {"value": value, "currency": "EUR"},
        "eventCode": event_code,
        "eventDate": "2024-06-10T12:00:00+02:00",
        "merchantAccountCode": MERCHANT,
        "merchantReference": reference,
        "pspReference": psp,
        "reason": "",
        "success": success
    });
    if !original.is_empty() {
        item["originalReference"] = json!(original);
    }
    if let Some(key) = key {
        let signature = sign_item(&item, key).expect("hex key");
        item["additionalData"]["hmacSignature"] = json!(signature);
    }
    item
}

fn delivery(items: &[Value]) -> Vec<u8> {
    let items: Vec<Value> = items
        .iter()
        .map(|i| json!({"NotificationRequestItem": i}))
        .collect();
    serde_json::to_vec(&json!({"live": "false", "notificationItems": items})).expect("json")
}

fn now() -> chrono::DateTime<Utc> {
    Utc.timestamp_opt(1_718_020_000, 0).single().expect("time")
}

#[test]
fn the_signer_reproduces_the_independently_computed_vector() {
    let vector = json!({
        "amount": {"value": 4200, "currency": "EUR"},
        "eventCode": "AUTHORISATION",
        "merchantAccountCode": "PayorchTestMerchant",
        "merchantReference": "pay_0001",
        "pspReference": "7914073381342284",
        "success": "true"
    });
    assert_eq!(
        sign_item(&vector, HMAC_KEY).as_deref(),
        Some(VECTOR_SIGNATURE)
    );
    // And a delivery carrying the pasted signature verifies.
    let mut signed = vector.clone();
    signed["additionalData"] = json!({"hmacSignature": VECTOR_SIGNATURE});
    let events = provider("http://127.0.0.1:9")
        .verify_delivery(&delivery(&[signed]), None, now())
        .expect("the vector verifies");
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].id, "7914073381342284:AUTHORISATION:true");
    assert_eq!(sign_item(&vector, "not hex"), None);
}

#[test]
fn a_delivery_of_two_authorisations_is_two_events() {
    let adapter = provider("http://127.0.0.1:9");
    let body = delivery(&[
        item(
            "PSP_OK",
            "",
            "pay_0001",
            4200,
            "AUTHORISATION",
            "true",
            Some(HMAC_KEY),
        ),
        item(
            "PSP_NO",
            "",
            "pay_0002",
            990,
            "AUTHORISATION",
            "false",
            Some(HMAC_KEY),
        ),
    ]);
    assert_eq!(adapter.signature_header(), None);
    assert_eq!(adapter.acknowledgement(), Some("[accepted]"));
    let events = adapter
        .verify_delivery(&body, None, now())
        .expect("verifies");
    assert_eq!(events.len(), 2);

    let ok = &events[0];
    assert_eq!(ok.id, "PSP_OK:AUTHORISATION:true");
    assert_eq!(ok.event_type, "AUTHORISATION");
    assert_eq!(ok.attempt_id.as_deref(), Some("pay_0001"));
    assert_eq!(ok.provider_id, "PSP_OK");
    assert!(ok.acted_on);
    assert_eq!(
        ok.outcome,
        Some(ProviderOutcome::Authorized {
            provider_id: "PSP_OK".into(),
            expires_at: None,
        })
    );
    assert_eq!(ok.amount, Some(4200));
    assert_eq!(ok.currency.as_deref(), Some("eur"));
    assert_eq!(ok.created.timestamp(), 1_718_013_600);
    assert_eq!(ok.raw["pspReference"], "PSP_OK");
    assert!(ok.refund.is_none());

    let refused = &events[1];
    assert_eq!(refused.id, "PSP_NO:AUTHORISATION:false");
    assert_eq!(refused.attempt_id.as_deref(), Some("pay_0002"));
    assert_eq!(
        refused.outcome,
        Some(ProviderOutcome::Failed {
            code: "declined".into(),
            message: "the payment was refused".into(),
            provider_id: Some("PSP_NO".into()),
            decline: Some(Decline::new(
                DeclineCode::Declined,
                "refused",
                Advice::default()
            )),
        })
    );
    assert_eq!(refused.amount, Some(990));
}

#[test]
fn refund_items_carry_a_refund_notice_and_other_codes_are_ignored() {
    let adapter = provider("http://127.0.0.1:9");
    let body = delivery(&[
        item(
            "RF_OK",
            "PSP0001",
            "ref_0001",
            1500,
            "REFUND",
            "true",
            Some(HMAC_KEY),
        ),
        item(
            "RF_BAD",
            "PSP0001",
            "ref_0002",
            700,
            "REFUND_FAILED",
            "true",
            Some(HMAC_KEY),
        ),
        item(
            "RP0001",
            "",
            "",
            0,
            "REPORT_AVAILABLE",
            "true",
            Some(HMAC_KEY),
        ),
    ]);
    let events = adapter
        .verify_delivery(&body, None, now())
        .expect("verifies");
    assert_eq!(events.len(), 3);

    let refunded = &events[0];
    assert_eq!(refunded.id, "RF_OK:REFUND:true");
    assert!(refunded.acted_on);
    assert_eq!(refunded.provider_id, "PSP0001");
    assert_eq!(refunded.attempt_id, None);
    assert_eq!(refunded.outcome, None);
    assert_eq!(
        refunded.refund,
        Some(RefundNotice {
            refund_id: Some("ref_0001".into()),
            provider_refund_id: "RF_OK".into(),
            outcome: ProviderOutcome::Succeeded {
                provider_id: "RF_OK".into()
            },
            amount: 1500,
        })
    );

    let failed = events[1].refund.as_ref().expect("a refund notice");
    assert_eq!(failed.refund_id.as_deref(), Some("ref_0002"));
    assert_eq!(failed.amount, 700);
    assert!(
        matches!(&failed.outcome, ProviderOutcome::Failed { code, .. } if code == "refund_failed"),
        "{:?}",
        failed.outcome
    );

    let report = &events[2];
    assert_eq!(report.event_type, "REPORT_AVAILABLE");
    assert!(!report.acted_on);
    assert_eq!(report.outcome, None);
    assert_eq!(report.refund, None);
}

#[test]
fn one_tampered_item_refuses_the_whole_delivery() {
    let adapter = provider("http://127.0.0.1:9");
    let good = item(
        "PSP_OK",
        "",
        "pay_0001",
        4200,
        "AUTHORISATION",
        "true",
        Some(HMAC_KEY),
    );
    let mut tampered = item(
        "PSP_T",
        "",
        "pay_0002",
        4200,
        "AUTHORISATION",
        "false",
        Some(HMAC_KEY),
    );
    tampered["amount"]["value"] = json!(1);
    assert_eq!(
        adapter.verify_delivery(&delivery(&[good.clone(), tampered]), None, now()),
        Err(WebhookError::NoMatchingSignature)
    );
    let mut flipped = good.clone();
    flipped["success"] = json!("false");
    assert_eq!(
        adapter.verify_delivery(&delivery(&[flipped]), None, now()),
        Err(WebhookError::NoMatchingSignature)
    );
    let mut garbled = good;
    garbled["additionalData"]["hmacSignature"] = json!("not base64 at all!");
    assert_eq!(
        adapter.verify_delivery(&delivery(&[garbled]), None, now()),
        Err(WebhookError::NoMatchingSignature)
    );
}

#[test]
fn a_wrong_key_or_a_missing_signature_is_refused() {
    let adapter = provider("http://127.0.0.1:9");
    let wrong = item(
        "PSP_W",
        "",
        "pay_0001",
        4200,
        "AUTHORISATION",
        "true",
        Some(HMAC_KEY_NEW),
    );
    assert_eq!(
        adapter.verify_delivery(&delivery(&[wrong]), None, now()),
        Err(WebhookError::NoMatchingSignature)
    );
    let good = item(
        "PSP_OK",
        "",
        "pay_0001",
        4200,
        "AUTHORISATION",
        "true",
        Some(HMAC_KEY),
    );
    let unsigned = item("PSP_U", "", "pay_0002", 4200, "AUTHORISATION", "true", None);
    assert_eq!(
        adapter.verify_delivery(&delivery(&[good, unsigned]), None, now()),
        Err(WebhookError::UnsignedItem("PSP_U".into()))
    );
}

#[test]
fn a_second_configured_key_is_accepted_while_rotating() {
    let adapter =
        AdyenProvider::new(config("http://127.0.0.1:9", &[HMAC_KEY, HMAC_KEY_NEW])).expect("ok");
    let body = delivery(&[
        item(
            "PSP_OLD",
            "",
            "pay_0001",
            4200,
            "AUTHORISATION",
            "true",
            Some(HMAC_KEY),
        ),
        item(
            "PSP_NEW",
            "",
            "pay_0002",
            4200,
            "AUTHORISATION",
            "true",
            Some(HMAC_KEY_NEW),
        ),
    ]);
    let events = adapter.verify_delivery(&body, None, now()).expect("both");
    assert_eq!(events.len(), 2);
}

#[test]
fn bodies_that_are_not_notifications_are_bad_json() {
    let adapter = provider("http://127.0.0.1:9");
    for body in [
        &b"not json"[..],
        b"[1,2]",
        br#"{"live":"false"}"#,
        br#"{"live":"false","notificationItems":[]}"#,
        br#"{"live":"false","notificationItems":[{"other":{}}]}"#,
    ] {
        assert!(
            matches!(
                adapter.verify_delivery(body, None, now()),
                Err(WebhookError::BadJson(_))
            ),
            "{}",
            String::from_utf8_lossy(body)
        );
    }
}

#[test]
fn setup_refuses_a_bad_url_empty_key_or_account_and_bad_hmac_keys() {
    assert!(AdyenProvider::new(config("http://127.0.0.1:1", &[HMAC_KEY])).is_ok());
    assert!(matches!(
        AdyenProvider::new(config("not a url", &[HMAC_KEY])),
        Err(AdyenSetupError::InvalidBaseUrl { .. })
    ));
    assert!(matches!(
        AdyenProvider::new(config("ftp://127.0.0.1:1", &[HMAC_KEY])),
        Err(AdyenSetupError::InvalidBaseUrl { .. })
    ));
    let mut no_key = config("http://127.0.0.1:1", &[HMAC_KEY]);
    no_key.api_key = "".into();
    assert!(matches!(
        AdyenProvider::new(no_key),
        Err(AdyenSetupError::EmptyApiKey)
    ));
    let mut no_account = config("http://127.0.0.1:1", &[HMAC_KEY]);
    no_account.merchant_account = " ".into();
    assert!(matches!(
        AdyenProvider::new(no_account),
        Err(AdyenSetupError::EmptyMerchantAccount)
    ));
    assert!(matches!(
        AdyenProvider::new(config("http://127.0.0.1:1", &[])),
        Err(AdyenSetupError::NoHmacKey)
    ));
    assert!(matches!(
        AdyenProvider::new(config("http://127.0.0.1:1", &[""])),
        Err(AdyenSetupError::NoHmacKey)
    ));
    assert!(matches!(
        AdyenProvider::new(config("http://127.0.0.1:1", &[HMAC_KEY, "zz-not-hex"])),
        Err(AdyenSetupError::InvalidHmacKey { position: 2 })
    ));
    let defaults = AdyenConfig::new(
        "http://127.0.0.1:1",
        API_KEY,
        MERCHANT,
        vec![HMAC_KEY.into()],
    );
    assert_eq!(
        defaults.timeout,
        payorch::providers::http_call::DEFAULT_TIMEOUT
    );
    assert!(!format!("{:?}", provider("http://127.0.0.1:1")).contains(API_KEY));
}
