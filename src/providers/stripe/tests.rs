//! Holds, challenges, captures and cancels against a local HTTP mock: what the adapter sends
//! and how each answer maps (docs/DESIGN.md, "The provider protocol").

use std::time::Duration;

use chrono::{TimeZone, Utc};
use serde_json::{json, Value};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use super::{create_form, parse_event, StripeConfig, StripeProvider, CARD_HOLD, UNEXPECTED_STATE};
use crate::providers::{
    CancelRequest, CaptureMethod, CaptureRequest, ChargeRequest, NextAction, PaymentProvider,
    ProviderCall, ProviderOutcome, ThreeDSecure,
};

const CREATED: i64 = 1_718_000_000;
const CHALLENGE: &str = "https://hooks.stripe.com/3d_secure_2/hosted?merchant=acct_1";
const BACK: &str = "https://pay.example/v1/payments/pay_0001/return";

fn provider(base_url: &str) -> StripeProvider {
    StripeProvider::new(StripeConfig {
        base_url: base_url.to_owned(),
        secret: "sk_test_holds".into(),
        webhook_secrets: vec!["whsec_holds".into()],
        connect_timeout: Duration::from_millis(300),
        timeout: Duration::from_millis(500),
        webhook_tolerance: Duration::from_secs(300),
    })
    .expect("valid config")
}

fn held_charge() -> ChargeRequest {
    ChargeRequest {
        amount: 4200,
        currency: "eur".into(),
        payment_method: "pm_card_visa".into(),
        idempotency_key: "pk_attempt_0001".into(),
        attempt_id: "pay_0001".into(),
        order_id: "ord_0001".into(),
        merchant_id: "mer_0001".into(),
        capture_method: CaptureMethod::Manual,
        return_url: Some(BACK.into()),
        return_route: "https://payorch.example/v1/payments/pay_1/return".into(),
        three_d_secure: ThreeDSecure::Automatic,
    }
}

fn capture() -> CaptureRequest {
    CaptureRequest {
        provider_payment_id: "pi_1".into(),
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

fn intent(id: &str, status: &str) -> Value {
    json!({
        "id": id, "object": "payment_intent", "amount": 4200, "currency": "eur",
        "status": status, "metadata": {"attempt_id": "pay_0001"}, "created": CREATED,
        "capture_method": "manual"
    })
}

fn challenged(id: &str) -> Value {
    let mut body = intent(id, "requires_action");
    body["next_action"] = json!({
        "type": "redirect_to_url",
        "redirect_to_url": {"url": CHALLENGE, "return_url": BACK}
    });
    body
}

fn unexpected_state(intent: Value) -> ResponseTemplate {
    let status = intent["status"].as_str().unwrap_or_default().to_owned();
    ResponseTemplate::new(400).set_body_json(json!({"error": {
        "type": "invalid_request_error",
        "code": UNEXPECTED_STATE,
        "message": format!("This PaymentIntent's status is {status}."),
        "payment_intent": intent
    }}))
}

fn header(request: &wiremock::Request, name: &str) -> Option<String> {
    request
        .headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

fn form(request: &wiremock::Request) -> Vec<(String, String)> {
    serde_urlencoded::from_bytes(&request.body).expect("form-encoded body")
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

/// What leaves doubt: a timeout, a 5xx, Stripe's 409 for a key in flight, a rate limit.
fn doubtful_answers() -> Vec<(&'static str, ResponseTemplate)> {
    vec![
        (
            "timeout",
            ResponseTemplate::new(200)
                .set_body_json(intent("pi_1", "succeeded"))
                .set_delay(Duration::from_secs(3)),
        ),
        (
            "500",
            ResponseTemplate::new(500).set_body_json(json!({"error": {"type": "api_error"}})),
        ),
        (
            "409",
            ResponseTemplate::new(409).set_body_json(
                json!({"error": {"type": "idempotency_error", "message": "in progress"}}),
            ),
        ),
        (
            "429",
            ResponseTemplate::new(429).set_body_string("slow down"),
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
async fn a_hold_with_a_return_url_is_asked_for_and_read_as_authorized_for_seven_days() {
    let server = answering(
        "POST",
        "/v1/payment_intents",
        ResponseTemplate::new(200).set_body_json(intent("pi_1", "requires_capture")),
    )
    .await;
    let call = provider(&server.uri()).create_charge(&held_charge()).await;
    let created = Utc.timestamp_opt(CREATED, 0).single().expect("time");
    assert_eq!(
        call.outcome,
        ProviderOutcome::Authorized {
            provider_id: "pi_1".into(),
            expires_at: Some(created + CARD_HOLD),
        }
    );
    let requests = sent(&server).await;
    let pairs = form(&requests[0]);
    let names: Vec<&str> = pairs.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(
        names,
        [
            "amount",
            "currency",
            "payment_method",
            "payment_method_types[0]",
            "confirm",
            "capture_method",
            "return_url",
            "metadata[attempt_id]",
            "metadata[order_id]",
            "metadata[merchant_id]"
        ]
    );
    assert!(pairs.contains(&("capture_method".into(), "manual".into())));
    assert!(pairs.contains(&("return_url".into(), BACK.into())));
}

#[test]
fn three_d_secure_is_requested_only_when_the_charge_requires_it() {
    let automatic = held_charge();
    let required = ChargeRequest {
        three_d_secure: ThreeDSecure::Required,
        ..held_charge()
    };
    let asked = create_form(&required);
    let (extra, rest): (Vec<_>, Vec<_>) = asked
        .into_iter()
        .partition(|(name, _)| name.starts_with("payment_method_options"));
    assert_eq!(
        extra,
        [(
            "payment_method_options[card][request_three_d_secure]",
            "any".to_owned()
        )]
    );
    // Nothing else changes, and a charge that does not ask sends no option at all.
    assert_eq!(rest, create_form(&automatic));
    assert!(create_form(&automatic)
        .iter()
        .all(|(name, _)| !name.starts_with("payment_method_options")));
}

#[test]
fn three_d_secure_is_not_requested_without_a_payer() {
    let no_payer = ChargeRequest {
        three_d_secure: ThreeDSecure::Required,
        return_url: None,
        ..held_charge()
    };
    let automatic = ChargeRequest {
        return_url: None,
        ..held_charge()
    };
    assert_eq!(create_form(&no_payer), create_form(&automatic));
    assert!(create_form(&no_payer)
        .iter()
        .all(|(name, _)| !name.starts_with("payment_method_options")));
}

#[tokio::test]
async fn a_challenge_is_a_redirect_only_when_stripe_gives_a_url_a_browser_can_open() {
    let server = answering(
        "POST",
        "/v1/payment_intents",
        ResponseTemplate::new(200).set_body_json(challenged("pi_3ds")),
    )
    .await;
    let call = provider(&server.uri()).create_charge(&held_charge()).await;
    assert_eq!(
        call.outcome,
        ProviderOutcome::RequiresAction {
            provider_id: Some("pi_3ds".into()),
            next_action: NextAction {
                url: CHALLENGE.into(),
                return_url: Some(BACK.into()),
            },
        }
    );

    let pending = ProviderOutcome::Pending {
        provider_id: Some("pi_3ds".into()),
    };
    let mut sdk_only = intent("pi_3ds", "requires_action");
    sdk_only["next_action"] = json!({"type": "use_stripe_sdk", "use_stripe_sdk": {}});
    let mut scripted = challenged("pi_3ds");
    scripted["next_action"]["redirect_to_url"]["url"] = json!("javascript:alert(1)");
    for body in [sdk_only, scripted, intent("pi_3ds", "requires_action")] {
        let server = answering(
            "POST",
            "/v1/payment_intents",
            ResponseTemplate::new(200).set_body_json(body.clone()),
        )
        .await;
        let call = provider(&server.uri()).create_charge(&held_charge()).await;
        assert_eq!(call.outcome, pending, "{body}");
    }
}

#[tokio::test]
async fn a_capture_posts_the_amount_under_its_own_key_and_succeeded_is_captured() {
    let server = answering(
        "POST",
        "/v1/payment_intents/pi_1/capture",
        ResponseTemplate::new(200).set_body_json(intent("pi_1", "succeeded")),
    )
    .await;
    let call = provider(&server.uri()).capture(&capture()).await;
    assert_eq!(
        call.outcome,
        ProviderOutcome::Succeeded {
            provider_id: "pi_1".into()
        }
    );
    let requests = sent(&server).await;
    assert_eq!(requests.len(), 1);
    assert_eq!(
        header(&requests[0], "idempotency-key").as_deref(),
        Some("ck_capture_0001")
    );
    assert_eq!(
        header(&requests[0], "authorization").as_deref(),
        Some("Bearer sk_test_holds")
    );
    assert_eq!(
        form(&requests[0]),
        [("amount_to_capture".to_owned(), "3000".to_owned())]
    );
}

#[tokio::test]
async fn a_capture_the_status_refuses_is_failed_unless_the_intent_was_captured_already() {
    let server = answering(
        "POST",
        "/v1/payment_intents/pi_1/capture",
        unexpected_state(intent("pi_1", "canceled")),
    )
    .await;
    let call = provider(&server.uri()).capture(&capture()).await;
    match &call.outcome {
        ProviderOutcome::Failed {
            code,
            message,
            provider_id,
            decline: None,
        } => {
            assert_eq!(code, UNEXPECTED_STATE);
            assert!(message.contains("canceled"), "{message}");
            assert_eq!(provider_id.as_deref(), Some("pi_1"));
        }
        other => panic!("{other:?}"),
    }

    // Captured by an earlier send whose key Stripe has forgotten: the money is taken.
    let server = answering(
        "POST",
        "/v1/payment_intents/pi_1/capture",
        unexpected_state(intent("pi_1", "succeeded")),
    )
    .await;
    assert_eq!(
        provider(&server.uri()).capture(&capture()).await.outcome,
        ProviderOutcome::Succeeded {
            provider_id: "pi_1".into()
        }
    );

    // More than is held: Stripe refused the request, nothing was captured.
    let server = answering(
        "POST",
        "/v1/payment_intents/pi_1/capture",
        ResponseTemplate::new(400).set_body_json(json!({"error": {
            "type": "invalid_request_error", "code": "amount_too_large",
            "message": "amount_to_capture is greater than amount_capturable"
        }})),
    )
    .await;
    assert!(matches!(
        provider(&server.uri()).capture(&capture()).await.outcome,
        ProviderOutcome::Failed { ref code, .. } if code == "amount_too_large"
    ));
}

#[tokio::test]
async fn a_capture_or_cancel_without_a_clear_answer_is_unknown_never_failed() {
    for (name, response) in doubtful_answers() {
        let server = answering("POST", "/v1/payment_intents/pi_1/capture", response).await;
        let call = provider(&server.uri()).capture(&capture()).await;
        assert_unknown(&format!("capture, {name}"), &call);
        assert_eq!(sent(&server).await.len(), 1, "{name}: sent once");
    }
    for (name, response) in doubtful_answers() {
        let server = answering("POST", "/v1/payment_intents/pi_1/cancel", response).await;
        let call = provider(&server.uri()).cancel(&cancel(Some("pi_1"))).await;
        assert_unknown(&format!("cancel, {name}"), &call);
        assert_eq!(sent(&server).await.len(), 1, "{name}: sent once");
    }
}

#[tokio::test]
async fn a_cancel_releases_the_intent_and_one_already_captured_is_failed() {
    let server = answering(
        "POST",
        "/v1/payment_intents/pi_1/cancel",
        ResponseTemplate::new(200).set_body_json(intent("pi_1", "canceled")),
    )
    .await;
    let call = provider(&server.uri()).cancel(&cancel(Some("pi_1"))).await;
    assert_eq!(
        call.outcome,
        ProviderOutcome::Canceled {
            provider_id: Some("pi_1".into())
        }
    );
    let requests = sent(&server).await;
    assert_eq!(
        header(&requests[0], "idempotency-key").as_deref(),
        Some("vk_void_0001")
    );

    let server = answering(
        "POST",
        "/v1/payment_intents/pi_1/cancel",
        unexpected_state(intent("pi_1", "succeeded")),
    )
    .await;
    assert!(matches!(
        provider(&server.uri()).cancel(&cancel(Some("pi_1"))).await.outcome,
        ProviderOutcome::Failed { ref code, ref message, .. }
            if code == UNEXPECTED_STATE && message.contains("succeeded")
    ));

    // Released by an earlier send: still released.
    let server = answering(
        "POST",
        "/v1/payment_intents/pi_1/cancel",
        unexpected_state(intent("pi_1", "canceled")),
    )
    .await;
    assert_eq!(
        provider(&server.uri())
            .cancel(&cancel(Some("pi_1")))
            .await
            .outcome,
        ProviderOutcome::Canceled {
            provider_id: Some("pi_1".into())
        }
    );
}

#[tokio::test]
async fn a_cancel_without_an_intent_id_sends_nothing_and_is_unknown() {
    // Stripe cancels by id only, and its search is not read-after-write: nothing is asked,
    // and the reconciler's list names the intent first.
    let server = MockServer::start().await;
    let call = provider(&server.uri()).cancel(&cancel(None)).await;
    assert!(
        matches!(call.outcome, ProviderOutcome::Unknown { .. }),
        "{:?}",
        call.outcome
    );
    assert_eq!(call.http_status, None);
    assert!(sent(&server).await.is_empty());
}

#[tokio::test]
async fn the_payers_return_is_read_from_the_intent_itself() {
    let server = answering(
        "GET",
        "/v1/payment_intents/pi_1",
        ResponseTemplate::new(200).set_body_json(intent("pi_1", "requires_capture")),
    )
    .await;
    // What the browser brings back is not believed: the intent says it is held.
    let params = [("redirect_status".to_owned(), "failed".to_owned())];
    let call = provider(&server.uri())
        .complete_action("pi_1", "pay_1", &params)
        .await;
    assert!(
        matches!(call.outcome, ProviderOutcome::Authorized { ref provider_id, .. } if provider_id == "pi_1"),
        "{:?}",
        call.outcome
    );
    assert_eq!(sent(&server).await[0].method.as_str(), "GET");
}

#[test]
fn hold_challenge_and_release_events_are_acted_on() {
    let event = |kind: &str, object: Value| {
        let body = json!({
            "id": format!("evt_{kind}"), "object": "event", "type": kind, "created": CREATED,
            "data": {"object": object}
        });
        parse_event(body.to_string().as_bytes()).expect("an event")
    };
    let held = event(
        "payment_intent.amount_capturable_updated",
        intent("pi_1", "requires_capture"),
    );
    assert!(held.acted_on);
    assert!(matches!(
        held.outcome,
        Some(ProviderOutcome::Authorized {
            expires_at: Some(_),
            ..
        })
    ));
    let challenged = event("payment_intent.requires_action", challenged("pi_1"));
    assert!(challenged.acted_on);
    assert!(matches!(
        challenged.outcome,
        Some(ProviderOutcome::RequiresAction { ref next_action, .. }) if next_action.url == CHALLENGE
    ));
    let released = event("payment_intent.canceled", intent("pi_1", "canceled"));
    assert!(released.acted_on);
    assert_eq!(
        released.outcome,
        Some(ProviderOutcome::Canceled {
            provider_id: Some("pi_1".into())
        })
    );
}
