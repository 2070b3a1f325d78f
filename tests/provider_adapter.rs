//! The Stripe adapter against a local HTTP mock: the exact wire format it sends and how
//! every kind of answer maps to a `ProviderOutcome` (docs/DESIGN.md, "The provider
//! protocol"), plus webhook signatures checked against independently computed fixtures
//! (docs/DESIGN.md, "Webhooks").

use std::time::Duration;

use chrono::{TimeZone, Utc};
use payorch::providers::decline::{Advice, Decline, DeclineCode};
use payorch::providers::signature;
use payorch::providers::stripe::{StripeConfig, StripeProvider};
use payorch::providers::{
    CaptureMethod, ChargeRequest, PaymentProvider, ProviderCall, ProviderOutcome, RefundRequest,
    SendWindow, ThreeDSecure, WebhookError,
};
use serde_json::json;
use wiremock::matchers::{method, path, query_param};
use wiremock::{Mock, MockServer, ResponseTemplate};

const SECRET: &str = "sk_test_adapter";

fn provider(base_url: &str) -> StripeProvider {
    StripeProvider::new(StripeConfig {
        base_url: base_url.to_owned(),
        secret: SECRET.into(),
        webhook_secrets: vec!["whsec_fixture_secret_1".into()],
        connect_timeout: Duration::from_millis(300),
        timeout: Duration::from_millis(500),
        webhook_tolerance: Duration::from_secs(300),
    })
    .expect("valid config")
}

fn charge() -> ChargeRequest {
    ChargeRequest {
        amount: 4200,
        currency: "eur".into(),
        payment_method: "pm_card_visa".into(),
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

fn intent(id: &str, status: &str) -> serde_json::Value {
    json!({
        "id": id, "object": "payment_intent", "amount": 4200, "currency": "eur",
        "status": status, "metadata": {"attempt_id": "pay_0001"},
        "last_payment_error": null, "created": 1718000000
    })
}

/// Answer every create with `response`, make one call, return it and the mock.
async fn create_answered_with(response: ResponseTemplate) -> (ProviderCall, MockServer) {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/payment_intents"))
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
async fn create_sends_the_stripe_form_with_bearer_and_idempotency_key() {
    let (call, server) =
        create_answered_with(ResponseTemplate::new(200).set_body_json(intent("pi_1", "succeeded")))
            .await;
    assert_eq!(
        call.outcome,
        ProviderOutcome::Succeeded {
            provider_id: "pi_1".into()
        }
    );
    let requests = server.received_requests().await.expect("recording on");
    assert_eq!(requests.len(), 1, "exactly one request, no retries");
    let request = &requests[0];
    assert_eq!(request.method.as_str(), "POST");
    assert_eq!(request.url.path(), "/v1/payment_intents");
    assert_eq!(request.url.query(), None);
    let header = |name: &str| {
        request
            .headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    assert_eq!(
        header("authorization").as_deref(),
        Some("Bearer sk_test_adapter")
    );
    assert_eq!(
        header("idempotency-key").as_deref(),
        Some("pk_attempt_0001")
    );
    assert_eq!(
        header("content-type").as_deref(),
        Some("application/x-www-form-urlencoded")
    );
    let form: Vec<(String, String)> =
        serde_urlencoded::from_bytes(&request.body).expect("form-encoded body");
    let expected: Vec<(String, String)> = [
        ("amount", "4200"),
        ("currency", "eur"),
        ("payment_method", "pm_card_visa"),
        ("payment_method_types[0]", "card"),
        ("confirm", "true"),
        ("metadata[attempt_id]", "pay_0001"),
        ("metadata[order_id]", "ord_0001"),
        ("metadata[merchant_id]", "mer_0001"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    assert_eq!(form, expected);
    // Brackets are percent-encoded, as Stripe's own libraries send them.
    let raw = String::from_utf8_lossy(&request.body);
    assert!(raw.contains("metadata%5Battempt_id%5D=pay_0001"), "{raw}");
    assert_eq!(call.http_status, Some(200));
}

#[tokio::test]
async fn succeeded_processing_and_requires_action_intents_map_by_status() {
    let cases = [
        (
            "succeeded",
            ProviderOutcome::Succeeded {
                provider_id: "pi_s".into(),
            },
        ),
        (
            "processing",
            ProviderOutcome::Pending {
                provider_id: Some("pi_s".into()),
            },
        ),
        (
            "requires_action",
            ProviderOutcome::Pending {
                provider_id: Some("pi_s".into()),
            },
        ),
        (
            "canceled",
            ProviderOutcome::Canceled {
                provider_id: Some("pi_s".into()),
            },
        ),
    ];
    for (status, expected) in cases {
        let (call, _server) =
            create_answered_with(ResponseTemplate::new(200).set_body_json(intent("pi_s", status)))
                .await;
        assert_eq!(call.outcome, expected, "status {status}");
    }
}

#[tokio::test]
async fn requires_payment_method_is_failed_with_the_last_payment_error() {
    let mut body = intent("pi_d", "requires_payment_method");
    body["last_payment_error"] = json!({
        "type": "card_error", "code": "card_declined", "message": "Your card was declined."
    });
    let (call, _server) =
        create_answered_with(ResponseTemplate::new(200).set_body_json(body)).await;
    assert_eq!(
        call.outcome,
        ProviderOutcome::Failed {
            code: "generic_decline".into(),
            message: "Your card was declined.".into(),
            provider_id: Some("pi_d".into()),
            decline: Some(Decline::new(
                DeclineCode::GenericDecline,
                "card_declined",
                Advice::default()
            )),
        }
    );
}

#[tokio::test]
async fn http_402_card_error_is_failed_with_stripes_code_and_intent() {
    let body = json!({"error": {
        "type": "card_error", "code": "card_declined", "decline_code": "insufficient_funds",
        "message": "Your card has insufficient funds.",
        "payment_intent": intent("pi_402", "requires_payment_method")
    }});
    let (call, _server) =
        create_answered_with(ResponseTemplate::new(402).set_body_json(body)).await;
    assert_eq!(
        call.outcome,
        ProviderOutcome::Failed {
            code: "insufficient_funds".into(),
            message: "Your card has insufficient funds.".into(),
            provider_id: Some("pi_402".into()),
            decline: Some(Decline::new(
                DeclineCode::InsufficientFunds,
                "card_declined/insufficient_funds",
                Advice::default()
            )),
        }
    );
    assert_eq!(call.http_status, Some(402));
}

#[tokio::test]
async fn definitive_400_invalid_request_is_failed() {
    let body = json!({"error": {
        "type": "invalid_request_error", "code": "resource_missing", "param": "payment_method",
        "message": "No such PaymentMethod: 'pm_nope'"
    }});
    let (call, _server) =
        create_answered_with(ResponseTemplate::new(400).set_body_json(body)).await;
    assert_eq!(
        call.outcome,
        ProviderOutcome::Failed {
            code: "provider_rejected".into(),
            message: "No such PaymentMethod: 'pm_nope'".into(),
            provider_id: None,
            decline: Some(Decline::new(
                DeclineCode::ProviderRejected,
                "resource_missing",
                Advice::default()
            )),
        }
    );
}

#[tokio::test]
async fn answers_that_leave_doubt_are_unknown_and_sent_once() {
    let idempotency = json!({"error": {"type": "idempotency_error", "message": "Keys for idempotent requests can only be used with the same parameters"}});
    let in_flight = json!({"error": {"type": "idempotency_error", "message": "in progress"}});
    let cases = [
        (
            "400 idempotency_error",
            ResponseTemplate::new(400).set_body_json(idempotency),
        ),
        ("409", ResponseTemplate::new(409).set_body_json(in_flight)),
        (
            "429",
            ResponseTemplate::new(429).set_body_string("slow down"),
        ),
        (
            "500",
            ResponseTemplate::new(500).set_body_json(json!({"error": {"type": "api_error"}})),
        ),
        (
            "502",
            ResponseTemplate::new(502).set_body_string("bad gateway"),
        ),
        ("503", ResponseTemplate::new(503)),
        (
            "200 with garbage",
            ResponseTemplate::new(200).set_body_string("<html>"),
        ),
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
async fn a_create_refused_for_our_credentials_was_not_processed() {
    for status in [401, 403] {
        let (call, server) = create_answered_with(
            ResponseTemplate::new(status).set_body_json(
                json!({"error": {"type": "invalid_request_error", "message": "Invalid API Key provided"}}),
            ),
        )
        .await;
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
async fn timeout_is_unknown_without_status() {
    let (call, server) = create_answered_with(
        ResponseTemplate::new(200)
            .set_body_json(intent("pi_late", "succeeded"))
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
async fn retrieve_gets_the_intent_by_id_and_maps_404_to_not_found() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/v1/payment_intents/pi_known"))
        .respond_with(ResponseTemplate::new(200).set_body_json(intent("pi_known", "succeeded")))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/v1/payment_intents/pi_missing"))
        .respond_with(ResponseTemplate::new(404).set_body_json(json!({"error": {
            "type": "invalid_request_error", "code": "resource_missing", "param": "intent",
            "message": "No such payment_intent: 'pi_missing'"
        }})))
        .mount(&server)
        .await;
    let adapter = provider(&server.uri());
    assert_eq!(
        adapter.retrieve("pi_known").await.outcome,
        ProviderOutcome::Succeeded {
            provider_id: "pi_known".into()
        }
    );
    let missing = adapter.retrieve("pi_missing").await;
    assert_eq!(missing.outcome, ProviderOutcome::NotFound);
    assert_eq!(missing.http_status, Some(404));
    let requests = server.received_requests().await.expect("recording on");
    assert!(requests.iter().all(|r| r
        .headers
        .get("authorization")
        .is_some_and(|v| v == "Bearer sk_test_adapter")));
    assert!(requests
        .iter()
        .all(|r| r.headers.get("idempotency-key").is_none()));
}

/// A mock that gives `response` to every `http_method` request at `at`.
async fn answering(http_method: &str, at: &str, response: ResponseTemplate) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method(http_method))
        .and(path(at))
        .respond_with(response)
        .mount(&server)
        .await;
    server
}

/// The attempt's window: 12:00:00 to 12:00:10 UTC on the day of `intent`'s `created`.
fn window() -> SendWindow {
    let from = chrono::DateTime::from_timestamp(1_718_000_000, 0).unwrap();
    SendWindow {
        from,
        until: from + chrono::Duration::seconds(10),
    }
}

fn other_intent(id: &str) -> serde_json::Value {
    let mut other = intent(id, "succeeded");
    other["metadata"] = json!({"attempt_id": "pay_someone_else"});
    other
}

#[tokio::test]
async fn find_by_attempt_lists_the_window_page_by_page_and_never_searches() {
    let server = MockServer::start().await;
    // Page two: after the last intent of page one.
    Mock::given(method("GET"))
        .and(path("/v1/payment_intents"))
        .and(query_param("starting_after", "pi_other_2"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "object": "list", "data": [intent("pi_found", "processing")],
            "has_more": false, "url": "/v1/payment_intents"
        })))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/v1/payment_intents"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "object": "list", "data": [other_intent("pi_other_1"), other_intent("pi_other_2")],
            "has_more": true, "url": "/v1/payment_intents"
        })))
        .mount(&server)
        .await;
    let adapter = provider(&server.uri());
    assert_eq!(
        adapter.find_by_attempt("pay_0001", window()).await.outcome,
        ProviderOutcome::Pending {
            provider_id: Some("pi_found".into())
        }
    );
    // Every intent of the window read, none of the attempt's: no record.
    assert_eq!(
        adapter
            .find_by_attempt("pay_nobody", window())
            .await
            .outcome,
        ProviderOutcome::NotFound
    );
    let requests = server.received_requests().await.unwrap();
    assert_eq!(requests.len(), 4);
    for request in &requests {
        assert_eq!(request.url.path(), "/v1/payment_intents");
        let query: Vec<(String, String)> = request.url.query_pairs().into_owned().collect();
        let value = |name: &str| {
            query
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.as_str())
        };
        // Five minutes either side of the window, for the two clocks.
        assert_eq!(value("created[gte]"), Some("1717999700"));
        assert_eq!(value("created[lte]"), Some("1718000310"));
        assert_eq!(value("limit"), Some("100"));
        assert_eq!(
            request
                .headers
                .get("stripe-version")
                .map(|v| v.to_str().unwrap()),
            Some(payorch::providers::stripe::API_VERSION)
        );
    }
}

#[tokio::test]
async fn an_unreadable_page_or_an_error_is_never_no_record() {
    for answer in [
        ResponseTemplate::new(200).set_body_string("{\"object\":\"list\",\"data\":[{\"id\":1}]}"),
        ResponseTemplate::new(500).set_body_json(json!({"error": {"type": "api_error"}})),
        ResponseTemplate::new(404).set_body_json(
            json!({"error": {"type": "invalid_request_error", "code": "resource_missing"}}),
        ),
    ] {
        let server = answering("GET", "/v1/payment_intents", answer).await;
        let outcome = provider(&server.uri())
            .find_by_attempt("pay_0001", window())
            .await
            .outcome;
        assert!(
            matches!(outcome, ProviderOutcome::Unknown { .. }),
            "{outcome:?}"
        );
    }
}

#[tokio::test]
async fn a_refund_with_null_status_or_metadata_is_pending_or_unknown_never_failed() {
    // Stripe's document makes a Refund's `status` and `metadata` nullable.
    let refund = json!({
        "id": "re_1", "object": "refund", "amount": 500, "currency": "eur",
        "status": null, "metadata": null, "payment_intent": "pi_1", "created": 1718000000
    });
    let server = answering(
        "POST",
        "/v1/refunds",
        ResponseTemplate::new(200).set_body_json(refund.clone()),
    )
    .await;
    let request = RefundRequest {
        provider_payment_id: "pi_1".into(),
        amount: 500,
        currency: "eur".into(),
        idempotency_key: "rk_1".into(),
        refund_id: "ref_1".into(),
        payment_id: "pay_0001".into(),
        merchant_id: "mer_0001".into(),
        reason: None,
    };
    assert_eq!(
        provider(&server.uri())
            .create_refund(&request)
            .await
            .outcome,
        ProviderOutcome::Pending {
            provider_id: Some("re_1".into())
        }
    );
    // In a list, a refund with null metadata could be the one looked for.
    let server = answering(
        "GET",
        "/v1/refunds",
        ResponseTemplate::new(200).set_body_json(json!({
            "object": "list", "data": [refund], "has_more": false, "url": "/v1/refunds"
        })),
    )
    .await;
    let outcome = provider(&server.uri())
        .find_refund("pi_1", "ref_1")
        .await
        .outcome;
    assert!(
        matches!(outcome, ProviderOutcome::Unknown { .. }),
        "{outcome:?}"
    );
}

fn fixture(name: &str) -> (Vec<u8>, String) {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/webhooks/");
    let body = std::fs::read(format!("{dir}{name}.json")).expect("fixture body");
    let header = std::fs::read_to_string(format!("{dir}{name}.header")).expect("fixture header");
    (body, header.trim().to_owned())
}

#[test]
fn signer_reproduces_the_independently_computed_fixture_signatures() {
    let (body, header) = fixture("payment_intent.succeeded");
    assert_eq!(
        signature::header_value(&["whsec_fixture_secret_1"], 1718000005, &body),
        header
    );
    let (body, header) = fixture("payment_intent.payment_failed");
    assert_eq!(
        signature::header_value(
            &["whsec_fixture_old", "whsec_fixture_secret_1"],
            1718000105,
            &body
        ),
        header
    );
}

#[test]
fn verifier_accepts_fixture_events_and_parses_them() {
    let adapter = provider("http://127.0.0.1:9");
    let (body, header) = fixture("payment_intent.succeeded");
    let now = Utc
        .timestamp_opt(1718000005 + 60, 0)
        .single()
        .expect("time");
    let event = adapter
        .verify_webhook(&body, Some(&header), now)
        .expect("fixture verifies");
    assert_eq!(event.id, "evt_3PfixtureSucceeded0001");
    assert_eq!(event.event_type, "payment_intent.succeeded");
    assert_eq!(event.provider_id, "pi_3PfixtureIntent000001");
    assert_eq!(
        event.attempt_id.as_deref(),
        Some("pay_0190f1c2-7a3b-7c4d-8e5f-0123456789ab")
    );
    assert!(event.acted_on);
    assert_eq!(
        event.outcome,
        Some(ProviderOutcome::Succeeded {
            provider_id: "pi_3PfixtureIntent000001".into()
        })
    );
    assert_eq!(event.created.timestamp(), 1718000000);

    // Signed under two secrets; this verifier knows only the newer one.
    let (body, header) = fixture("payment_intent.payment_failed");
    let now = Utc.timestamp_opt(1718000105, 0).single().expect("time");
    let event = adapter
        .verify_webhook(&body, Some(&header), now)
        .expect("rotated fixture verifies");
    assert_eq!(
        event.outcome,
        Some(ProviderOutcome::Failed {
            code: "insufficient_funds".into(),
            message: "Your card has insufficient funds.".into(),
            provider_id: Some("pi_3PfixtureIntent000002".into()),
            decline: Some(Decline::new(
                DeclineCode::InsufficientFunds,
                "card_declined/insufficient_funds",
                Advice::default()
            )),
        })
    );
}

#[test]
fn verifier_refuses_tampered_stale_and_unsigned_fixtures() {
    let adapter = provider("http://127.0.0.1:9");
    let (body, header) = fixture("payment_intent.succeeded");
    let now = Utc.timestamp_opt(1718000005, 0).single().expect("time");

    let mut tampered = body.clone();
    let at = tampered
        .windows(4)
        .position(|w| w == b"4200")
        .expect("amount in fixture");
    tampered[at] = b'9';
    assert_eq!(
        adapter.verify_webhook(&tampered, Some(&header), now),
        Err(WebhookError::NoMatchingSignature)
    );
    assert_eq!(
        adapter.verify_webhook(&body, None, now),
        Err(WebhookError::MissingHeader)
    );
    assert!(matches!(
        adapter.verify_webhook(&body, Some("v1=abc"), now),
        Err(WebhookError::MalformedHeader(_))
    ));
    let late = Utc
        .timestamp_opt(1718000005 + 301, 0)
        .single()
        .expect("time");
    assert!(matches!(
        adapter.verify_webhook(&body, Some(&header), late),
        Err(WebhookError::TimestampOutsideTolerance { .. })
    ));
    // A correctly signed body that is not an event.
    let header = signature::header_value(&["whsec_fixture_secret_1"], 1718000005, b"[1,2]");
    assert!(matches!(
        adapter.verify_webhook(b"[1,2]", Some(&header), now),
        Err(WebhookError::BadJson(_))
    ));
}

#[test]
fn setup_refuses_a_bad_base_url_or_empty_secret() {
    let mut config = StripeConfig::new("not a url", SECRET, vec!["whsec_x".into()]);
    assert!(StripeProvider::new(config.clone()).is_err());
    config.base_url = "http://127.0.0.1:1".into();
    assert!(StripeProvider::new(config.clone()).is_ok());
    config.secret = "".into();
    assert!(StripeProvider::new(config).is_err());
}
