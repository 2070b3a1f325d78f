//! The sandbox over real HTTP, driven through the Stripe adapter and raw requests: the
//! payment_method table (docs/guides/test-cards.md, "The sandbox"), Stripe's idempotency semantics, faults, the
//! ledger and signed webhooks (docs/DESIGN.md, "Webhooks"); and the Adyen face's refunds,
//! driven through the Adyen adapter, with the same semantics and signed notifications.

use std::time::{Duration, Instant};

use chrono::Utc;
use futures_util::future::join_all;
use payorch::providers::adyen::notification::{verify_delivery, REFUND};
use payorch::providers::adyen::{
    outcome_for_response, refund_request, AdyenConfig, AdyenProvider, Call, HmacKey,
};
use payorch::providers::stripe::IntentStatus;
use payorch::providers::stripe::{StripeConfig, StripeProvider};
use payorch::providers::{
    CaptureMethod, ChargeRequest, PaymentProvider, ProviderOutcome, RefundRequest, SendWindow,
    ThreeDSecure,
};
use payorch_sandbox::{self as sandbox, LedgerEntry, SandboxConfig, SandboxHandle};
use serde_json::Value;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const SECRET: &str = "sk_test_sandbox";
const WEBHOOK_SECRET: &str = "whsec_sandbox";

/// Short delays so the whole file runs in seconds.
fn fast() -> SandboxConfig {
    SandboxConfig {
        slow_ms: 300,
        processing_ms: 200,
        webhook_retry_ms: 50,
        webhook_delay_ms: 0,
        ..SandboxConfig::default()
    }
}

/// The sandbox's search without its lag (Stripe's search is up to an hour behind; the
/// sandbox's default is a minute), for the tests of the search itself.
fn searchable_at_once() -> SandboxConfig {
    SandboxConfig {
        search_lag_secs: 0,
        ..fast()
    }
}

async fn start(config: SandboxConfig) -> SandboxHandle {
    sandbox::start(config).await.expect("sandbox starts")
}

fn adapter(sandbox: &SandboxHandle, timeout: Duration) -> StripeProvider {
    StripeProvider::new(StripeConfig {
        base_url: sandbox.base_url(),
        secret: SECRET.into(),
        webhook_secrets: vec![WEBHOOK_SECRET.into()],
        connect_timeout: Duration::from_secs(1),
        timeout,
        webhook_tolerance: Duration::from_secs(300),
    })
    .expect("adapter config")
}

fn charge(payment_method: &str, attempt: &str) -> ChargeRequest {
    ChargeRequest {
        amount: 1999,
        currency: "eur".into(),
        payment_method: payment_method.into(),
        idempotency_key: format!("key_{attempt}"),
        attempt_id: attempt.into(),
        order_id: format!("ord_{attempt}"),
        merchant_id: "mer_test".into(),
        capture_method: CaptureMethod::Automatic,
        return_url: None,
        return_route: format!("http://127.0.0.1:1/v1/payments/{attempt}/return"),
        three_d_secure: ThreeDSecure::Automatic,
    }
}

/// A send window around now: what the reconciler lists for an attempt made in a test.
fn just_now() -> SendWindow {
    SendWindow {
        from: Utc::now() - chrono::Duration::seconds(30),
        until: Utc::now(),
    }
}

fn charges_for<'a>(ledger: &'a [LedgerEntry], attempt: &str) -> Vec<&'a LedgerEntry> {
    ledger
        .iter()
        .filter(|e| e.attempt_id.as_deref() == Some(attempt))
        .collect()
}

/// A raw create with `reqwest`, for checks on exact bytes and status codes.
async fn raw_create(
    client: &reqwest::Client,
    sandbox: &SandboxHandle,
    key: &str,
    form: &[(&str, &str)],
) -> (u16, Vec<u8>, Option<String>) {
    let response = client
        .post(format!("{}/v1/payment_intents", sandbox.base_url()))
        .bearer_auth(SECRET)
        .header("Idempotency-Key", key)
        .form(form)
        .send()
        .await
        .expect("sandbox answers");
    let status = response.status().as_u16();
    let replayed = response
        .headers()
        .get("Idempotent-Replayed")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let body = response.bytes().await.expect("body").to_vec();
    (status, body, replayed)
}

fn visa_form(attempt: &str) -> Vec<(&'static str, String)> {
    vec![
        ("amount", "500".into()),
        ("currency", "usd".into()),
        ("payment_method", "pm_card_visa".into()),
        ("confirm", "true".into()),
        ("payment_method_types[0]", "card".into()),
        ("metadata[attempt_id]", attempt.into()),
    ]
}

fn as_refs<'a>(form: &'a [(&'a str, String)]) -> Vec<(&'a str, &'a str)> {
    form.iter().map(|(k, v)| (*k, v.as_str())).collect()
}

async fn eventually<T>(what: &str, mut probe: impl AsyncFnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if let Some(value) = probe().await {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn card_tokens_succeed_or_decline_as_the_table_says() {
    let sandbox = start(fast()).await;
    let adapter = adapter(&sandbox, Duration::from_secs(5));

    for (pm, attempt) in [("pm_card_visa", "a_visa"), ("pm_card_mastercard", "a_mc")] {
        let call = adapter.create_charge(&charge(pm, attempt)).await;
        assert!(
            matches!(call.outcome, ProviderOutcome::Succeeded { .. }),
            "{pm}: {:?}",
            call.outcome
        );
        assert_eq!(call.http_status, Some(200));
    }
    let declined = adapter
        .create_charge(&charge("pm_card_chargeDeclined", "a_declined"))
        .await;
    assert!(matches!(
        &declined.outcome,
        ProviderOutcome::Failed { code, provider_id: Some(_), .. } if code == "generic_decline"
    ));
    assert_eq!(declined.http_status, Some(402));
    let insufficient = adapter
        .create_charge(&charge(
            "pm_card_chargeDeclinedInsufficientFunds",
            "a_funds",
        ))
        .await;
    assert!(matches!(
        &insufficient.outcome,
        ProviderOutcome::Failed { code, message, .. }
            if code == "insufficient_funds" && message.contains("insufficient funds")
    ));
    let unknown_method = adapter.create_charge(&charge("pm_nope", "a_nope")).await;
    assert!(
        matches!(
            &unknown_method.outcome,
            ProviderOutcome::Failed { code, provider_id: None, decline: Some(decline), .. }
                if code == "provider_rejected"
                    && decline.provider_code.as_deref() == Some("resource_missing")
        ),
        "{:?}",
        unknown_method.outcome
    );

    let ledger = sandbox.ledger();
    for (attempt, status) in [
        ("a_visa", "succeeded"),
        ("a_mc", "succeeded"),
        ("a_declined", "requires_payment_method"),
        ("a_funds", "requires_payment_method"),
    ] {
        let entries = charges_for(&ledger, attempt);
        assert_eq!(entries.len(), 1, "{attempt}");
        assert_eq!(entries[0].status, status, "{attempt}");
        assert_eq!(entries[0].amount, 1999);
        let key = format!("key_{attempt}");
        assert_eq!(entries[0].idempotency_key.as_deref(), Some(key.as_str()));
    }
    assert!(charges_for(&ledger, "a_nope").is_empty());
    sandbox.stop().await;
}

/// Each declining test payment method, charged through payorch's Stripe adapter and its
/// Adyen adapter, is one decline: the same payorch code and class, each with its provider's
/// own code (docs/guides/test-cards.md, "Declines").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_decline_token_is_the_same_decline_through_both_adapters() {
    let sandbox = start(fast()).await;
    let stripe = adapter(&sandbox, Duration::from_secs(5));
    let adyen = adyen_adapter(&sandbox);
    let decline_of = |outcome: &ProviderOutcome, what: &str| match outcome {
        ProviderOutcome::Failed {
            code,
            decline: Some(decline),
            ..
        } => {
            assert_eq!(code, decline.code.as_str(), "{what}");
            decline.clone()
        }
        other => panic!("{what}: {other:?}"),
    };
    let mut differ = Vec::new();
    for row in sandbox::DECLINES {
        let token = row.token.expect("a token");
        let through_stripe = stripe
            .create_charge(&charge(token, &format!("s_{token}")))
            .await;
        assert_eq!(through_stripe.http_status, Some(402), "{token}");
        let through_stripe = decline_of(&through_stripe.outcome, token);
        let through_adyen = adyen
            .create_charge(&charge(token, &format!("a_{token}")))
            .await;
        let through_adyen = decline_of(&through_adyen.outcome, token);
        let stripe_code = match row.decline_code {
            Some(decline_code) => format!("{}/{decline_code}", row.code),
            None => row.code.to_owned(),
        };
        assert_eq!(through_stripe.provider_code, Some(stripe_code), "{token}");
        assert_eq!(
            through_adyen.provider_code.as_deref(),
            Some(row.adyen.code),
            "{token}"
        );
        if (through_stripe.code, through_stripe.class) != (through_adyen.code, through_adyen.class)
        {
            differ.push(format!(
                "{token}: {:?}/{:?} through Stripe, {:?}/{:?} through Adyen",
                through_stripe.code, through_stripe.class, through_adyen.code, through_adyen.class
            ));
        }
    }
    assert!(differ.is_empty(), "{differ:#?}");
    assert!(sandbox.ledger().iter().all(|e| !e.is_charged()));
    sandbox.stop().await;
}

/// 3-D Secure requested through payorch's adapters (docs/guides/test-cards.md, "3-D Secure
/// requested"): the decline that asked for authentication, asked again with 3-D Secure, is a
/// challenge through both, so the step-up retry sends its payer to one; nothing is charged
/// before the payer passes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_d_secure_requested_makes_an_authentication_decline_a_challenge_through_both_adapters(
) {
    let sandbox = start(fast()).await;
    let stripe = adapter(&sandbox, Duration::from_secs(5));
    let adyen = adyen_adapter(&sandbox);
    let token = "pm_sandbox_decline_authentication_required";
    let providers: [(&str, &dyn PaymentProvider); 2] = [("stripe", &stripe), ("adyen", &adyen)];
    for (name, provider) in providers {
        let with_payer = |attempt: String| ChargeRequest {
            return_url: Some(format!("http://127.0.0.1:1/v1/payments/{attempt}/return")),
            ..charge(token, &attempt)
        };
        let plain = provider
            .create_charge(&with_payer(format!("{name}_plain")))
            .await;
        match &plain.outcome {
            ProviderOutcome::Failed { code, .. } => {
                assert_eq!(code, "authentication_required", "{name}")
            }
            other => panic!("{name}: {other:?}"),
        }
        let asked = ChargeRequest {
            three_d_secure: ThreeDSecure::Required,
            ..with_payer(format!("{name}_asked"))
        };
        match provider.create_charge(&asked).await.outcome {
            ProviderOutcome::RequiresAction { next_action, .. } => assert!(
                next_action
                    .url
                    .starts_with(&format!("{}/__sandbox/3ds/", sandbox.base_url())),
                "{name}: {next_action:?}"
            ),
            other => panic!("{name}: {other:?}"),
        }
    }
    assert!(sandbox.ledger().iter().all(|e| !e.is_charged()));
    sandbox.stop().await;
}

/// The sandbox's mixes (docs/guides/test-cards.md, "Approval rates and outages") read through
/// payorch's adapters: two sandboxes of one seed, one spoken to as Stripe and one as Adyen,
/// as two providers of a route. The same key gives the same outcome through both: the same
/// decline code and class (the class the mix drew it from), an approval, an unknown for every
/// outage but `refused`, which alone is "not processed"; a second run of the same keys gives
/// the same again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mixed_draw_is_one_outcome_through_both_adapters() {
    use payorch::providers::decline::FailureClass;
    let mix = sandbox::Mix::parse(
        "approval=0.4,soft=0.4,hard=0.4,authentication_required=0.2,outage=0.25,\
         outages=error_before+error_after+dropped+refused",
    )
    .expect("mix");
    let mixed = || SandboxConfig {
        stripe_mix: mix.clone(),
        adyen_mix: mix.clone(),
        mix_seed: 7,
        ..fast()
    };
    let (stripe_sandbox, adyen_sandbox) = (start(mixed()).await, start(mixed()).await);
    let stripe = adapter(&stripe_sandbox, Duration::from_secs(5));
    let adyen = adyen_adapter(&adyen_sandbox);
    // What an outcome says, in words both adapters can be compared by.
    let said = |outcome: &ProviderOutcome| match outcome {
        ProviderOutcome::Succeeded { .. } => "approved".to_owned(),
        ProviderOutcome::Failed {
            decline: Some(decline),
            ..
        } => format!("{:?}/{:?}", decline.code, decline.class),
        ProviderOutcome::Unknown { .. } => "unknown".to_owned(),
        ProviderOutcome::Unavailable { .. } => "unavailable".to_owned(),
        other => panic!("{other:?}"),
    };
    let expected = |drawn: sandbox::Drawn| match drawn {
        sandbox::Drawn::Approved => None,
        sandbox::Drawn::Outage(sandbox::Outage::Refused) => Some("unavailable"),
        sandbox::Drawn::Outage(_) => Some("unknown"),
        sandbox::Drawn::Declined(_) => Some("declined"),
    };
    let mut seen = std::collections::BTreeMap::<String, usize>::new();
    for i in 0..80 {
        let attempt = format!("mix_{i}");
        let request = charge("pm_card_visa", &attempt);
        let drawn = mix.draw(7, Some(&request.idempotency_key), None);
        let through_stripe = said(&stripe.create_charge(&request).await.outcome);
        let through_adyen = said(&adyen.create_charge(&request).await.outcome);
        assert_eq!(through_stripe, through_adyen, "{attempt}: {drawn:?}");
        match (expected(drawn), drawn) {
            (None, _) => assert_eq!(through_stripe, "approved", "{attempt}"),
            (Some("declined"), sandbox::Drawn::Declined(row)) => {
                let token = row.token.expect("a token");
                let class = if sandbox::SOFT.contains(&token) {
                    FailureClass::Soft
                } else if sandbox::HARD.contains(&token) {
                    FailureClass::Hard
                } else {
                    FailureClass::AuthenticationRequired
                };
                assert!(
                    through_stripe.ends_with(&format!("/{class:?}")),
                    "{attempt}: {token} is {through_stripe}, drawn as {class:?}"
                );
            }
            (Some(word), _) => assert_eq!(through_stripe, word, "{attempt}"),
        }
        *seen.entry(through_stripe).or_default() += 1;
    }
    // The seed gives a bit of everything.
    for word in ["approved", "unknown", "unavailable"] {
        assert!(seen.contains_key(word), "{word} never drawn: {seen:?}");
    }
    assert!(seen.len() >= 6, "{seen:?}");
    stripe_sandbox.stop().await;
    adyen_sandbox.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn declined_card_answers_stripes_402_error_shape() {
    let sandbox = start(fast()).await;
    let client = reqwest::Client::new();
    let form = [
        ("amount", "700"),
        ("currency", "eur"),
        ("payment_method", "pm_card_chargeDeclinedInsufficientFunds"),
        ("confirm", "true"),
        ("payment_method_types[0]", "card"),
        ("metadata[attempt_id]", "a_shape"),
    ];
    let (status, body, _) = raw_create(&client, &sandbox, "k_shape", &form).await;
    assert_eq!(status, 402);
    let body: Value = serde_json::from_slice(&body).expect("json");
    let error = &body["error"];
    assert_eq!(error["type"], "card_error");
    assert_eq!(error["code"], "card_declined");
    assert_eq!(error["decline_code"], "insufficient_funds");
    assert_eq!(error["payment_intent"]["object"], "payment_intent");
    assert_eq!(error["payment_intent"]["status"], "requires_payment_method");
    assert_eq!(error["payment_intent"]["metadata"]["attempt_id"], "a_shape");
    assert!(error["payment_intent"]["id"]
        .as_str()
        .is_some_and(|id| id.starts_with("pi_")));
    sandbox.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn processing_is_pending_then_succeeds() {
    let sandbox = start(fast()).await;
    let adapter = adapter(&sandbox, Duration::from_secs(5));
    let call = adapter
        .create_charge(&charge("pm_sandbox_processing", "a_proc"))
        .await;
    let ProviderOutcome::Pending {
        provider_id: Some(id),
    } = call.outcome
    else {
        panic!("expected pending with an id, got {:?}", call.outcome);
    };
    assert_eq!(
        charges_for(&sandbox.ledger(), "a_proc")[0].status,
        "processing"
    );
    let settled = eventually("the intent to settle", async || {
        match adapter.retrieve(&id).await.outcome {
            ProviderOutcome::Succeeded { provider_id } => Some(provider_id),
            _ => None,
        }
    })
    .await;
    assert_eq!(settled, id);
    assert_eq!(
        charges_for(&sandbox.ledger(), "a_proc")[0].status,
        "succeeded"
    );
    sandbox.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_succeeds_after_slow_ms() {
    let sandbox = start(fast()).await;
    let call = adapter(&sandbox, Duration::from_secs(5))
        .create_charge(&charge("pm_sandbox_slow", "a_slow"))
        .await;
    assert!(matches!(call.outcome, ProviderOutcome::Succeeded { .. }));
    assert!(
        call.latency >= Duration::from_millis(300),
        "{:?}",
        call.latency
    );
    assert_eq!(charges_for(&sandbox.ledger(), "a_slow").len(), 1);
    sandbox.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn error_before_is_unknown_and_charges_nothing() {
    let sandbox = start(fast()).await;
    let adapter = adapter(&sandbox, Duration::from_secs(5));
    let request = charge("pm_sandbox_error_before", "a_before");
    let call = adapter.create_charge(&request).await;
    assert!(matches!(call.outcome, ProviderOutcome::Unknown { .. }));
    assert_eq!(call.http_status, Some(500));
    assert!(sandbox.ledger().is_empty());
    assert_eq!(
        adapter
            .find_by_attempt("a_before", just_now())
            .await
            .outcome,
        ProviderOutcome::NotFound
    );
    sandbox.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn error_after_charges_and_a_resend_replays_the_500_but_the_list_tells() {
    let sandbox = start(fast()).await;
    let adapter = adapter(&sandbox, Duration::from_secs(5));
    let request = charge("pm_sandbox_error_after", "a_after");
    let call = adapter.create_charge(&request).await;
    assert!(matches!(call.outcome, ProviderOutcome::Unknown { .. }));
    assert_eq!(call.http_status, Some(500));
    let ledger = sandbox.ledger();
    let charged = charges_for(&ledger, "a_after");
    assert_eq!(charged.len(), 1);
    assert_eq!(charged[0].status, "succeeded");

    // Stripe saves a key's first result, a 500 included: a resend learns nothing more.
    let resend = adapter.create_charge(&request).await;
    assert!(matches!(resend.outcome, ProviderOutcome::Unknown { .. }));
    assert_eq!(resend.http_status, Some(500));
    // The read-after-write list of the window does.
    assert_eq!(
        adapter.find_by_attempt("a_after", just_now()).await.outcome,
        ProviderOutcome::Succeeded {
            provider_id: charged[0].provider_id.clone()
        }
    );
    assert_eq!(charges_for(&sandbox.ledger(), "a_after").len(), 1);
    sandbox.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_response_is_unknown_after_timeout_and_a_resend_returns_the_same_charge() {
    let sandbox = start(fast()).await;
    let adapter = adapter(&sandbox, Duration::from_millis(500));
    let request = charge("pm_sandbox_lost_response", "a_lost");

    let call = adapter.create_charge(&request).await;
    assert!(
        matches!(&call.outcome, ProviderOutcome::Unknown { reason } if reason.contains("timeout")),
        "{:?}",
        call.outcome
    );
    assert_eq!(call.http_status, None);
    assert!(call.latency >= Duration::from_millis(500));
    let ledger = sandbox.ledger();
    let charged = charges_for(&ledger, "a_lost");
    assert_eq!(
        charged.len(),
        1,
        "the provider charged although nobody heard"
    );
    assert_eq!(charged[0].status, "succeeded");

    let resend = adapter.create_charge(&request).await;
    assert_eq!(
        resend.outcome,
        ProviderOutcome::Succeeded {
            provider_id: charged[0].provider_id.clone()
        }
    );
    assert_eq!(sandbox.ledger().len(), 1, "the resend charged nothing more");
    sandbox.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_of_a_key_returns_the_first_response_byte_for_byte_and_charges_once() {
    let sandbox = start(fast()).await;
    let client = reqwest::Client::new();
    let form = visa_form("a_replay");
    let first = raw_create(&client, &sandbox, "k_replay", &as_refs(&form)).await;
    let second = raw_create(&client, &sandbox, "k_replay", &as_refs(&form)).await;
    assert_eq!(first.0, 200);
    assert_eq!(second.0, first.0);
    assert_eq!(second.1, first.1, "identical body bytes");
    assert_eq!(first.2, None);
    assert_eq!(second.2.as_deref(), Some("true"));
    assert_eq!(sandbox.ledger().len(), 1);

    // A declined answer is replayed just the same.
    let mut declined = visa_form("a_replay_declined");
    declined[2].1 = "pm_card_chargeDeclined".into();
    let first = raw_create(&client, &sandbox, "k_declined", &as_refs(&declined)).await;
    let second = raw_create(&client, &sandbox, "k_declined", &as_refs(&declined)).await;
    assert_eq!((first.0, second.0), (402, 402));
    assert_eq!(first.1, second.1);
    assert_eq!(sandbox.ledger().len(), 2);
    sandbox.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn same_key_with_other_parameters_is_400_idempotency_error() {
    let sandbox = start(fast()).await;
    let client = reqwest::Client::new();
    let form = visa_form("a_mismatch");
    let (status, _, _) = raw_create(&client, &sandbox, "k_mismatch", &as_refs(&form)).await;
    assert_eq!(status, 200);
    let mut other = form.clone();
    other[0].1 = "501".into();
    let (status, body, _) = raw_create(&client, &sandbox, "k_mismatch", &as_refs(&other)).await;
    assert_eq!(status, 400);
    let body: Value = serde_json::from_slice(&body).expect("json");
    assert_eq!(body["error"]["type"], "idempotency_error");
    assert_eq!(sandbox.ledger().len(), 1);
    assert_eq!(sandbox.ledger()[0].amount, 500);
    sandbox.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn same_key_while_the_first_is_in_flight_is_409() {
    let sandbox = start(SandboxConfig {
        slow_ms: 800,
        ..fast()
    })
    .await;
    let client = reqwest::Client::new();
    let mut form = visa_form("a_inflight");
    form[2].1 = "pm_sandbox_slow".into();
    let form = as_refs(&form);
    let first = raw_create(&client, &sandbox, "k_inflight", &form);
    let second = async {
        tokio::time::sleep(Duration::from_millis(200)).await;
        raw_create(&client, &sandbox, "k_inflight", &form).await
    };
    let (first, second) = tokio::join!(first, second);
    assert_eq!(first.0, 200);
    assert_eq!(second.0, 409);
    let body: Value = serde_json::from_slice(&second.1).expect("json");
    assert_eq!(body["error"]["type"], "idempotency_error");
    assert_eq!(sandbox.ledger().len(), 1);
    sandbox.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_concurrent_requests_with_one_key_charge_exactly_once() {
    let sandbox = start(fast()).await;
    let client = reqwest::Client::new();
    for (pm, key) in [
        ("pm_card_visa", "k_fifty_visa"),
        ("pm_sandbox_slow", "k_fifty_slow"),
    ] {
        let mut form = visa_form(key);
        form[2].1 = pm.into();
        let form = as_refs(&form);
        let answers = join_all((0..50).map(|_| raw_create(&client, &sandbox, key, &form))).await;
        let mut ids = Vec::new();
        for (status, body, _) in &answers {
            match status {
                200 => {
                    let body: Value = serde_json::from_slice(body).expect("json");
                    ids.push(body["id"].as_str().unwrap_or_default().to_owned());
                }
                409 => {}
                other => panic!("{pm}: unexpected status {other}"),
            }
        }
        assert!(!ids.is_empty(), "{pm}: at least the first request succeeds");
        assert!(ids.iter().all(|id| id == &ids[0]), "{pm}: one intent id");
        let ledger = sandbox.ledger();
        let charges: Vec<_> = ledger
            .iter()
            .filter(|e| e.idempotency_key.as_deref() == Some(key))
            .collect();
        assert_eq!(charges.len(), 1, "{pm}: exactly one charge");
        assert_eq!(charges[0].provider_id, ids[0]);
    }
    sandbox.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_without_the_secret_are_401_and_charge_nothing() {
    let sandbox = start(fast()).await;
    let client = reqwest::Client::new();
    let form = visa_form("a_unauth");
    for auth in [None, Some("sk_test_wrong")] {
        let mut request = client
            .post(format!("{}/v1/payment_intents", sandbox.base_url()))
            .form(&form);
        if let Some(secret) = auth {
            request = request.bearer_auth(secret);
        }
        let response = request.send().await.expect("answer");
        assert_eq!(response.status().as_u16(), 401);
        let body: Value = response.json().await.expect("json");
        assert_eq!(body["error"]["type"], "invalid_request_error");
    }
    assert!(sandbox.ledger().is_empty());
    sandbox.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retrieve_and_search_find_charges_and_report_missing_ones() {
    let sandbox = start(searchable_at_once()).await;
    let adapter = adapter(&sandbox, Duration::from_secs(5));
    let call = adapter
        .create_charge(&charge("pm_card_visa", "a_find"))
        .await;
    let id = call.outcome.provider_id().expect("id").to_owned();
    assert_eq!(
        adapter.retrieve(&id).await.outcome,
        ProviderOutcome::Succeeded {
            provider_id: id.clone()
        }
    );
    assert_eq!(
        adapter.find_by_attempt("a_find", just_now()).await.outcome,
        ProviderOutcome::Succeeded {
            provider_id: id.clone()
        }
    );
    let missing = adapter.retrieve("pi_doesnotexist").await;
    assert_eq!(missing.outcome, ProviderOutcome::NotFound);
    assert_eq!(missing.http_status, Some(404));
    assert_eq!(
        adapter.find_by_attempt("a_never", just_now()).await.outcome,
        ProviderOutcome::NotFound
    );

    let search: Value = reqwest::Client::new()
        .get(format!("{}/v1/payment_intents/search", sandbox.base_url()))
        .bearer_auth(SECRET)
        .query(&[("query", "metadata['attempt_id']:'a_find'")])
        .send()
        .await
        .expect("answer")
        .json()
        .await
        .expect("json");
    assert_eq!(search["object"], "search_result");
    assert_eq!(search["has_more"], false);
    assert_eq!(search["data"][0]["id"], id.as_str());
    sandbox.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ledger_endpoint_lists_every_charge_with_key_and_attempt() {
    let sandbox = start(fast()).await;
    let adapter = adapter(&sandbox, Duration::from_secs(5));
    adapter
        .create_charge(&charge("pm_card_visa", "a_ledger"))
        .await;
    let ledger: Value = reqwest::get(format!("{}/__sandbox/ledger", sandbox.base_url()))
        .await
        .expect("answer")
        .json()
        .await
        .expect("json");
    let entries = ledger["data"].as_array().expect("data array");
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0]["idempotency_key"], "key_a_ledger");
    assert_eq!(entries[0]["attempt_id"], "a_ledger");
    assert_eq!(entries[0]["amount"], 1999);
    assert_eq!(entries[0]["status"], "succeeded");
    assert!(entries[0]["provider_id"]
        .as_str()
        .is_some_and(|id| id.starts_with("pi_")));
    sandbox.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn global_error_rate_answers_500_before_anything_happens() {
    let sandbox = start(SandboxConfig {
        error_rate: 1.0,
        ..fast()
    })
    .await;
    let call = adapter(&sandbox, Duration::from_secs(5))
        .create_charge(&charge("pm_card_visa", "a_rate"))
        .await;
    assert!(matches!(call.outcome, ProviderOutcome::Unknown { .. }));
    assert_eq!(call.http_status, Some(500));
    assert!(sandbox.ledger().is_empty());
    sandbox.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_closes_the_listener() {
    let sandbox = start(fast()).await;
    let url = format!("{}/__sandbox/ledger", sandbox.base_url());
    assert!(reqwest::get(&url).await.is_ok());
    sandbox.stop().await;
    assert!(reqwest::get(&url).await.is_err());
}

// --- webhooks -----------------------------------------------------------------------

/// A webhook receiver that answers 200.
async fn receiver() -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/webhooks/stripe"))
        .respond_with(ResponseTemplate::new(200))
        .mount(&server)
        .await;
    server
}

/// Deliveries received so far, verified with payorch's verifier: (event id, type, status).
async fn deliveries(
    server: &MockServer,
    verifier: &StripeProvider,
) -> Vec<(String, String, Option<IntentStatus>)> {
    let requests = server.received_requests().await.unwrap_or_default();
    requests
        .iter()
        .map(|r| {
            let header = r
                .headers
                .get("stripe-signature")
                .and_then(|v| v.to_str().ok());
            let event = verifier
                .verify_webhook(&r.body, header, Utc::now())
                .expect("every delivery is correctly signed");
            let status = event.raw["data"]["object"]["status"]
                .as_str()
                .map(IntentStatus::parse);
            (event.id, event.event_type, status)
        })
        .collect()
}

async fn wait_for_deliveries(
    server: &MockServer,
    verifier: &StripeProvider,
    count: usize,
) -> Vec<(String, String, Option<IntentStatus>)> {
    eventually("webhook deliveries", async || {
        let got = deliveries(server, verifier).await;
        (got.len() >= count).then_some(got)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_changes_send_signed_webhooks_the_verifier_accepts() {
    let hook = receiver().await;
    let sandbox = start(fast()).await;
    sandbox.set_webhook_url(Some(format!("{}/v1/webhooks/stripe", hook.uri())));
    let adapter = adapter(&sandbox, Duration::from_secs(5));

    adapter
        .create_charge(&charge("pm_card_chargeDeclined", "a_hook_declined"))
        .await;
    let got = wait_for_deliveries(&hook, &adapter, 1).await;
    assert_eq!(got[0].1, "payment_intent.payment_failed");
    assert_eq!(got[0].2, Some(IntentStatus::RequiresPaymentMethod));

    adapter
        .create_charge(&charge("pm_sandbox_processing", "a_hook_processing"))
        .await;
    let got = wait_for_deliveries(&hook, &adapter, 3).await;
    let types: Vec<&str> = got[1..].iter().map(|(_, t, _)| t.as_str()).collect();
    assert_eq!(
        types,
        ["payment_intent.processing", "payment_intent.succeeded"]
    );

    let requests = hook.received_requests().await.unwrap_or_default();
    let event: Value = serde_json::from_slice(&requests[2].body).expect("json");
    assert_eq!(event["object"], "event");
    assert_eq!(
        event["data"]["object"]["metadata"]["attempt_id"],
        "a_hook_processing"
    );
    assert!(event["id"]
        .as_str()
        .is_some_and(|id| id.starts_with("evt_")));
    sandbox.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_deliveries_are_retried_with_the_same_event() {
    let hook = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(500))
        .up_to_n_times(2)
        .with_priority(1)
        .mount(&hook)
        .await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200))
        .with_priority(2)
        .mount(&hook)
        .await;
    let sandbox = start(SandboxConfig {
        webhook_url: Some(hook.uri()),
        ..fast()
    })
    .await;
    let adapter = adapter(&sandbox, Duration::from_secs(5));
    adapter
        .create_charge(&charge("pm_card_visa", "a_retry"))
        .await;
    let got = wait_for_deliveries(&hook, &adapter, 3).await;
    // Give a wrongly continuing retry loop the chance to show itself.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let got_later = deliveries(&hook, &adapter).await;
    assert_eq!(got_later.len(), 3, "retries stop at the first 2xx");
    assert!(got
        .iter()
        .all(|(id, t, _)| id == &got[0].0 && t == "payment_intent.succeeded"));
    sandbox.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duplicate_rate_one_delivers_every_event_twice() {
    let hook = receiver().await;
    let sandbox = start(SandboxConfig {
        webhook_url: Some(format!("{}/v1/webhooks/stripe", hook.uri())),
        webhook_duplicate_rate: 1.0,
        ..fast()
    })
    .await;
    let adapter = adapter(&sandbox, Duration::from_secs(5));
    adapter
        .create_charge(&charge("pm_card_visa", "a_dup"))
        .await;
    let got = wait_for_deliveries(&hook, &adapter, 2).await;
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].0, got[1].0, "the same event id twice");
    assert_eq!(sandbox.ledger().len(), 1);
    sandbox.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reorder_delivers_the_later_status_first() {
    let hook = receiver().await;
    let sandbox = start(SandboxConfig {
        webhook_url: Some(format!("{}/v1/webhooks/stripe", hook.uri())),
        webhook_reorder: true,
        webhook_reorder_window_ms: 600,
        processing_ms: 100,
        ..fast()
    })
    .await;
    let adapter = adapter(&sandbox, Duration::from_secs(5));
    adapter
        .create_charge(&charge("pm_sandbox_processing", "a_reorder"))
        .await;
    let got = wait_for_deliveries(&hook, &adapter, 2).await;
    let types: Vec<&str> = got.iter().map(|(_, t, _)| t.as_str()).collect();
    assert_eq!(
        types,
        ["payment_intent.succeeded", "payment_intent.processing"]
    );
    sandbox.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_webhook_urls_take_the_deliveries_in_turn() {
    let (first, second) = (receiver().await, receiver().await);
    let sandbox = start(SandboxConfig {
        webhook_url: Some(format!(
            "{}/v1/webhooks/stripe, {}/v1/webhooks/stripe",
            first.uri(),
            second.uri()
        )),
        ..fast()
    })
    .await;
    let adapter = adapter(&sandbox, Duration::from_secs(5));
    for n in 0..4 {
        adapter
            .create_charge(&charge("pm_card_visa", &format!("a_turn_{n}")))
            .await;
    }
    let on_first = wait_for_deliveries(&first, &adapter, 2).await;
    let on_second = wait_for_deliveries(&second, &adapter, 2).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(deliveries(&first, &adapter).await.len(), 2);
    assert_eq!(deliveries(&second, &adapter).await.len(), 2);
    let mut ids: Vec<String> = on_first.into_iter().chain(on_second).map(|d| d.0).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(
        ids.len(),
        4,
        "each event once, on one receiver or the other"
    );
    sandbox.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhook_delay_holds_the_first_delivery_back() {
    let hook = receiver().await;
    let sandbox = start(SandboxConfig {
        webhook_url: Some(format!("{}/v1/webhooks/stripe", hook.uri())),
        webhook_delay_ms: 400,
        ..fast()
    })
    .await;
    let adapter = adapter(&sandbox, Duration::from_secs(5));
    let sent = Instant::now();
    adapter
        .create_charge(&charge("pm_card_visa", "a_delay"))
        .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(deliveries(&hook, &adapter).await.is_empty());
    wait_for_deliveries(&hook, &adapter, 1).await;
    assert!(sent.elapsed() >= Duration::from_millis(400));
    sandbox.stop().await;
}

/// A raw call with the secret, for the endpoints payorch's adapter does not use.
async fn raw(
    client: &reqwest::Client,
    sandbox: &SandboxHandle,
    method: reqwest::Method,
    path: &str,
    form: &[(&str, &str)],
) -> (u16, Value) {
    let response = client
        .request(method, format!("{}{path}", sandbox.base_url()))
        .bearer_auth(SECRET)
        .form(form)
        .send()
        .await
        .expect("sandbox answers");
    let status = response.status().as_u16();
    (status, response.json().await.expect("json"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_pages_end_and_show_every_intent_once() {
    let sandbox = start(searchable_at_once()).await;
    let client = reqwest::Client::new();
    for i in 0..7 {
        let form = visa_form("paged");
        let key = format!("page-{i}");
        raw_create(&client, &sandbox, &key, &as_refs(&form)).await;
    }
    let mut seen = Vec::new();
    let mut page: Option<String> = None;
    for _ in 0..10 {
        let mut query = vec![
            ("query", "metadata['attempt_id']:'paged'".to_string()),
            ("limit", "3".to_string()),
        ];
        if let Some(page) = &page {
            query.push(("page", page.clone()));
        }
        let result: Value = client
            .get(format!("{}/v1/payment_intents/search", sandbox.base_url()))
            .bearer_auth(SECRET)
            .query(&query)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        for intent in result["data"].as_array().unwrap() {
            seen.push(intent["id"].as_str().unwrap().to_string());
        }
        assert_eq!(
            result["has_more"],
            result["next_page"].is_string(),
            "{result}"
        );
        match result["next_page"].as_str() {
            Some(next) => page = Some(next.to_string()),
            None => break,
        }
    }
    let mut unique = seen.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(seen.len(), 7, "every intent, and the paging ends: {seen:?}");
    assert_eq!(unique.len(), 7);
    sandbox.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retrieve_shows_the_charge_the_webhook_named() {
    let hook = receiver().await;
    let sandbox = start(fast()).await;
    sandbox.set_webhook_url(Some(format!("{}/v1/webhooks/stripe", hook.uri())));
    let adapter = adapter(&sandbox, Duration::from_secs(5));
    let client = reqwest::Client::new();
    adapter
        .create_charge(&charge("pm_card_visa", "charge_now"))
        .await;
    adapter
        .create_charge(&charge("pm_sandbox_processing", "charge_later"))
        .await;
    wait_for_deliveries(&hook, &adapter, 3).await;
    let requests = hook.received_requests().await.unwrap_or_default();
    let mut checked = 0;
    for request in &requests {
        let event: Value = serde_json::from_slice(&request.body).unwrap();
        if event["type"] != "payment_intent.succeeded" {
            continue;
        }
        let object = &event["data"]["object"];
        assert!(object["latest_charge"].is_string(), "{event}");
        let id = object["id"].as_str().unwrap();
        let (status, now) = raw(
            &client,
            &sandbox,
            reqwest::Method::GET,
            &format!("/v1/payment_intents/{id}"),
            &[],
        )
        .await;
        assert_eq!(status, 200);
        assert_eq!(now["latest_charge"], object["latest_charge"]);
        // Events carry Stripe's envelope fields.
        assert_eq!(event["pending_webhooks"], 1);
        assert!(event["request"].is_object(), "{event}");
        checked += 1;
    }
    assert_eq!(checked, 2, "both paths to succeeded");
    sandbox.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn basic_auth_with_the_secret_as_user_name_is_accepted() {
    use base64::Engine;
    let sandbox = start(fast()).await;
    let client = reqwest::Client::new();
    let get = |auth: String| {
        client
            .get(format!("{}/v1/payment_intents", sandbox.base_url()))
            .header("authorization", auth)
            .send()
    };
    let encode = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    assert_eq!(
        get(format!("Basic {}", encode(&format!("{SECRET}:"))))
            .await
            .unwrap()
            .status(),
        200
    );
    assert_eq!(
        get(format!("Basic {}", encode("sk_test_wrong:")))
            .await
            .unwrap()
            .status(),
        401
    );
    assert_eq!(get(format!("Bearer {SECRET}")).await.unwrap().status(), 200);
    sandbox.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn intents_carry_stripes_fields() {
    let sandbox = start(fast()).await;
    let client = reqwest::Client::new();
    let form = visa_form("fields");
    let (status, body, _) = raw_create(&client, &sandbox, "fields-1", &as_refs(&form)).await;
    assert_eq!(status, 200);
    let intent: Value = serde_json::from_slice(&body).unwrap();
    let id = intent["id"].as_str().unwrap();
    assert!(intent["client_secret"]
        .as_str()
        .is_some_and(|s| s.starts_with(&format!("{id}_secret_"))));
    assert_eq!(intent["payment_method_types"], serde_json::json!(["card"]));
    assert_eq!(intent["amount_capturable"], 0);
    assert!(intent.as_object().unwrap().contains_key("next_action"));
    assert!(intent["next_action"].is_null());
    sandbox.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_confirm_and_cancel_behave_as_stripes() {
    let sandbox = start(fast()).await;
    let client = reqwest::Client::new();
    let post = reqwest::Method::POST;
    let unconfirmed = |attempt: &'static str| {
        vec![
            ("amount", "700"),
            ("currency", "eur"),
            ("payment_method", "pm_card_visa"),
            ("metadata[attempt_id]", attempt),
        ]
    };
    let (_, first) = raw(
        &client,
        &sandbox,
        post.clone(),
        "/v1/payment_intents",
        &unconfirmed("to_confirm"),
    )
    .await;
    assert_eq!(first["status"], "requires_confirmation");
    let (_, second) = raw(
        &client,
        &sandbox,
        post.clone(),
        "/v1/payment_intents",
        &unconfirmed("to_cancel"),
    )
    .await;
    assert!(
        sandbox.ledger().is_empty(),
        "nothing confirmed, nothing charged"
    );

    // List: newest first, paged by id.
    let (status, list) = raw(
        &client,
        &sandbox,
        reqwest::Method::GET,
        "/v1/payment_intents?limit=1",
        &[],
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(list["object"], "list");
    assert_eq!(list["data"][0]["id"], second["id"]);
    assert_eq!(list["has_more"], true);
    let after = format!(
        "/v1/payment_intents?limit=1&starting_after={}",
        second["id"].as_str().unwrap()
    );
    let (_, rest) = raw(&client, &sandbox, reqwest::Method::GET, &after, &[]).await;
    assert_eq!(rest["data"][0]["id"], first["id"]);
    assert_eq!(rest["has_more"], false);

    // Confirm charges once, under its own key; a replay of the key charges nothing more.
    let confirm = format!(
        "/v1/payment_intents/{}/confirm",
        first["id"].as_str().unwrap()
    );
    for _ in 0..2 {
        let response = client
            .post(format!("{}{confirm}", sandbox.base_url()))
            .bearer_auth(SECRET)
            .header("Idempotency-Key", "confirm-1")
            .form(&[("payment_method", "pm_card_visa")])
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        let confirmed: Value = response.json().await.unwrap();
        assert_eq!(confirmed["status"], "succeeded");
        assert_eq!(confirmed["id"], first["id"]);
    }
    let ledger = sandbox.ledger();
    assert_eq!(charges_for(&ledger, "to_confirm").len(), 1);

    // Cancel: before money moves only.
    let cancel = format!(
        "/v1/payment_intents/{}/cancel",
        second["id"].as_str().unwrap()
    );
    let (status, canceled) = raw(
        &client,
        &sandbox,
        post.clone(),
        &cancel,
        &[("cancellation_reason", "abandoned")],
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(canceled["status"], "canceled");
    assert_eq!(canceled["cancellation_reason"], "abandoned");
    let cancel_paid = format!(
        "/v1/payment_intents/{}/cancel",
        first["id"].as_str().unwrap()
    );
    let (status, refused) = raw(&client, &sandbox, post, &cancel_paid, &[]).await;
    assert_eq!(status, 400);
    assert_eq!(refused["error"]["code"], "payment_intent_unexpected_state");
    assert_eq!(charges_for(&sandbox.ledger(), "to_cancel").len(), 0);
    sandbox.stop().await;
}

// --- the sandbox's memory (docs/operations/running.md, "The sandbox's memory") -----------------------------

/// A sandbox that keeps `intents` intents (and refunds) and `answers` answers.
fn keeping(intents: usize, answers: usize) -> SandboxConfig {
    SandboxConfig {
        keep_intents: intents,
        keep_answers: answers,
        ..fast()
    }
}

async fn paid(adapter: &StripeProvider, attempt: &str) -> String {
    match adapter
        .create_charge(&charge("pm_card_visa", attempt))
        .await
        .outcome
    {
        ProviderOutcome::Succeeded { provider_id } => provider_id,
        other => panic!("{attempt}: {other:?}"),
    }
}

async fn ledger_json(sandbox: &SandboxHandle) -> Value {
    reqwest::get(format!("{}/__sandbox/ledger", sandbox.base_url()))
        .await
        .expect("answer")
        .json()
        .await
        .expect("json")
}

fn is_unknown(call: &payorch::providers::ProviderCall) -> bool {
    matches!(call.outcome, ProviderOutcome::Unknown { .. }) && call.http_status == Some(410)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_window_the_ledger_lists_what_it_keeps_and_counts_what_it_forgot() {
    let sandbox = start(keeping(3, 2)).await;
    let adapter = adapter(&sandbox, Duration::from_secs(5));
    let nothing = ledger_json(&sandbox).await;
    assert_eq!(nothing["forgotten"]["intents"], 0, "{nothing}");
    assert_eq!(nothing["forgotten"]["since"], Value::Null, "{nothing}");
    for attempt in ["w0", "w1", "w2", "w3", "w4"] {
        paid(&adapter, attempt).await;
    }
    let ledger = ledger_json(&sandbox).await;
    let kept: Vec<&str> = ledger["data"]
        .as_array()
        .expect("data")
        .iter()
        .filter_map(|e| e["attempt_id"].as_str())
        .collect();
    assert_eq!(kept, ["w2", "w3", "w4"], "{ledger}");
    assert_eq!(ledger["window"]["intents"], 3, "{ledger}");
    assert_eq!(ledger["window"]["answers"], 2, "{ledger}");
    let forgotten = &ledger["forgotten"];
    assert_eq!(forgotten["intents"], 2, "{ledger}");
    assert_eq!(forgotten["entries"], 2, "{ledger}");
    assert_eq!(forgotten["charged"], 2, "{ledger}");
    assert_eq!(forgotten["refunds"], 0, "{ledger}");
    let now = Utc::now().timestamp();
    for at in ["since", "created_up_to"] {
        let when = forgotten[at].as_i64().unwrap_or_default();
        assert!((now - 60..=now).contains(&when), "{at}: {ledger}");
    }
    // In process, the same.
    assert_eq!(sandbox.forgotten().charged, 2);
    assert_eq!(sandbox.ledger().len(), 3);
    sandbox.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forgotten_charge_is_never_answered_as_one_never_made() {
    let sandbox = start(keeping(2, 2)).await;
    let adapter = adapter(&sandbox, Duration::from_secs(5));
    let first = paid(&adapter, "f0").await;
    assert!(!is_unknown(
        &adapter.find_by_attempt("f_never", just_now()).await
    ));
    paid(&adapter, "f1").await;
    paid(&adapter, "f2").await;

    // payorch's reconciler must not read "no record" (and fail a charged payment): the
    // answers leave it unknown.
    assert!(is_unknown(&adapter.retrieve(&first).await));
    assert!(is_unknown(&adapter.find_by_attempt("f0", just_now()).await));
    // Nor can a search tell a never-made charge from a forgotten one any more.
    assert!(is_unknown(
        &adapter.find_by_attempt("f_never", just_now()).await
    ));
    // An id it never made is still one it never made.
    assert_eq!(
        adapter.retrieve("pi_doesnotexist").await.outcome,
        ProviderOutcome::NotFound
    );
    let (status, body) = raw(
        &reqwest::Client::new(),
        &sandbox,
        reqwest::Method::GET,
        &format!("/v1/payment_intents/{first}"),
        &[],
    )
    .await;
    assert_eq!(status, 410);
    assert_eq!(body["error"]["code"], "sandbox_forgotten", "{body}");
    // A refund of it is refused as it is: nothing went back.
    let refund = adapter
        .create_refund(&RefundRequest {
            provider_payment_id: first,
            amount: 100,
            currency: "eur".into(),
            idempotency_key: "key_re_forgotten".into(),
            refund_id: "re_forgotten".into(),
            payment_id: "pay_forgotten".into(),
            merchant_id: "mer_test".into(),
            reason: None,
        })
        .await;
    assert!(
        matches!(&refund.outcome, ProviderOutcome::Failed { code, .. } if code == "sandbox_forgotten"),
        "{refund:?}"
    );
    assert!(sandbox.refunds().is_empty());
    sandbox.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inside_the_window_retrieve_search_and_replay_answer_as_before() {
    let sandbox = start(keeping(3, 1)).await;
    let adapter = adapter(&sandbox, Duration::from_secs(5));
    let client = reqwest::Client::new();
    let form = visa_form("in_window");
    let (status, first, replayed) = raw_create(&client, &sandbox, "k_in", &as_refs(&form)).await;
    assert_eq!((status, replayed), (200, None));
    let again = raw_create(&client, &sandbox, "k_in", &as_refs(&form)).await;
    assert_eq!(again, (200, first.clone(), Some("true".into())));

    // Another key's answer takes the one answer kept; the intent is still kept, so the replay
    // is made from it: the same bytes, and still no second charge.
    raw_create(&client, &sandbox, "k_other", &as_refs(&visa_form("other"))).await;
    let again = raw_create(&client, &sandbox, "k_in", &as_refs(&form)).await;
    assert_eq!(again, (200, first.clone(), Some("true".into())));
    let mut other_amount = form.clone();
    other_amount[0].1 = "501".into();
    let (status, _, _) = raw_create(&client, &sandbox, "k_in", &as_refs(&other_amount)).await;
    assert_eq!(status, 400, "the key still knows its parameters");
    assert_eq!(charges_for(&sandbox.ledger(), "in_window").len(), 1);

    let id = serde_json::from_slice::<Value>(&first).expect("json")["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let succeeded = ProviderOutcome::Succeeded {
        provider_id: id.clone(),
    };
    assert_eq!(adapter.retrieve(&id).await.outcome, succeeded);
    assert_eq!(
        adapter
            .find_by_attempt("in_window", just_now())
            .await
            .outcome,
        succeeded
    );
    let ledger = ledger_json(&sandbox).await;
    assert_eq!(ledger["window"]["answers"], 1, "{ledger}");
    assert_eq!(ledger["forgotten"]["intents"], 0, "{ledger}");
    assert_eq!(sandbox.forgotten(), payorch_sandbox::Forgotten::default());
    sandbox.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_charge_whose_refunds_were_forgotten_gives_no_list_rather_than_a_short_one() {
    let sandbox = start(keeping(2, 2)).await;
    let adapter = adapter(&sandbox, Duration::from_secs(5));
    let id = paid(&adapter, "r0").await;
    let refund = |n: usize, amount: i64| RefundRequest {
        provider_payment_id: id.clone(),
        amount,
        currency: "eur".into(),
        idempotency_key: format!("key_re_{n}"),
        refund_id: format!("re_{n}"),
        payment_id: "pay_r0".into(),
        merchant_id: "mer_test".into(),
        reason: None,
    };
    for n in 0..3 {
        let call = adapter.create_refund(&refund(n, 100)).await;
        assert!(
            matches!(call.outcome, ProviderOutcome::Succeeded { .. }),
            "{call:?}"
        );
    }
    let ledger = ledger_json(&sandbox).await;
    assert_eq!(
        ledger["refunds"].as_array().map(Vec::len),
        Some(2),
        "{ledger}"
    );
    assert_eq!(ledger["forgotten"]["refunds"], 1, "{ledger}");
    assert_eq!(ledger["forgotten"]["intents"], 0, "{ledger}");
    // The first refund is no longer listed: a search for it must not say "never made".
    assert!(is_unknown(&adapter.find_refund(&id, "re_0").await));
    // What the forgotten refund took back still counts: 1999 - 300 is left, not 1999 - 200.
    let call = adapter.create_refund(&refund(3, 1700)).await;
    assert!(
        matches!(&call.outcome, ProviderOutcome::Failed { code, .. } if code == "amount_too_large"),
        "{call:?}"
    );
    sandbox.stop().await;
}

// --- the Adyen face's refunds -------------------------------------------------------

const MERCHANT_ACCOUNT: &str = "SandboxTestAccount";

fn adyen_adapter(sandbox: &SandboxHandle) -> AdyenProvider {
    AdyenProvider::new(AdyenConfig::new(
        sandbox.base_url(),
        SECRET,
        MERCHANT_ACCOUNT,
        vec![sandbox.adyen_hmac_key()],
    ))
    .expect("adapter config")
}

/// An Adyen payment of 1999 (eur) made through payorch's adapter: its pspReference.
async fn adyen_paid(adapter: &AdyenProvider, payment_method: &str, attempt: &str) -> String {
    match adapter
        .create_charge(&charge(payment_method, attempt))
        .await
        .outcome
    {
        ProviderOutcome::Succeeded { provider_id } => provider_id,
        other => panic!("{payment_method}: {other:?}"),
    }
}

/// A refund of `amount` of the payment `psp`, as payorch asks for one.
fn adyen_refund(psp: &str, refund_id: &str, amount: i64) -> RefundRequest {
    RefundRequest {
        provider_payment_id: psp.into(),
        amount,
        currency: "eur".into(),
        idempotency_key: format!("key_{refund_id}"),
        refund_id: refund_id.into(),
        payment_id: "pay_refunded".into(),
        merchant_id: "mer_test".into(),
        reason: None,
    }
}

/// A raw refund request with the adapter's body, under `key`, with `api_key` as
/// `X-API-Key` (none: no header): (status, body).
async fn raw_adyen_refund(
    client: &reqwest::Client,
    sandbox: &SandboxHandle,
    key: &str,
    api_key: Option<&str>,
    request: &RefundRequest,
) -> (u16, Vec<u8>) {
    let mut call = client
        .post(format!(
            "{}/v71/payments/{}/refunds",
            sandbox.base_url(),
            request.provider_payment_id
        ))
        .header("Idempotency-Key", key)
        .json(&refund_request(request, MERCHANT_ACCOUNT));
    if let Some(api_key) = api_key {
        call = call.header("X-API-Key", api_key);
    }
    let response = call.send().await.expect("sandbox answers");
    let status = response.status().as_u16();
    (status, response.bytes().await.expect("body").to_vec())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adyen_refunds_replay_by_key_refuse_other_parameters_and_more_than_is_left() {
    let sandbox = start(fast()).await;
    let adapter = adyen_adapter(&sandbox);
    let client = reqwest::Client::new();
    let psp = adyen_paid(&adapter, "pm_card_visa", "a_refunded").await;

    let first = adyen_refund(&psp, "re_first", 1500);
    let (status, body) = raw_adyen_refund(&client, &sandbox, "rk-1", Some(SECRET), &first).await;
    assert_eq!(status, 201);
    let answer: Value = serde_json::from_slice(&body).expect("json");
    let refund_psp = answer["pspReference"].as_str().expect("a pspReference");
    assert_eq!(answer["status"], "received");
    assert_eq!(answer["paymentPspReference"], psp.as_str());
    assert_eq!(answer["reference"], "re_first");
    assert_eq!(answer["merchantAccount"], MERCHANT_ACCOUNT);
    assert_eq!(
        answer["amount"],
        serde_json::json!({"value": 1500, "currency": "EUR"})
    );
    assert_eq!(
        outcome_for_response(Call::CreateRefund, status, &body),
        ProviderOutcome::Pending {
            provider_id: Some(refund_psp.to_owned())
        }
    );

    // The same key and body: the first answer, byte for byte, and no second refund.
    let again = raw_adyen_refund(&client, &sandbox, "rk-1", Some(SECRET), &first).await;
    assert_eq!(again, (status, body.clone()));
    // The same key with another amount: Adyen's 704, which payorch reads as unknown.
    let other = adyen_refund(&psp, "re_first", 1000);
    let (status, refused) = raw_adyen_refund(&client, &sandbox, "rk-1", Some(SECRET), &other).await;
    assert_eq!(status, 422);
    let refused: Value = serde_json::from_slice(&refused).expect("json");
    assert_eq!(refused["errorCode"], "704");
    // More than is left (499): refused, nothing made, and payorch reads it as failed.
    let too_much = adyen_refund(&psp, "re_too_much", 500);
    let (status, refused) =
        raw_adyen_refund(&client, &sandbox, "rk-2", Some(SECRET), &too_much).await;
    assert_eq!(status, 422);
    assert!(matches!(
        outcome_for_response(Call::CreateRefund, status, &refused),
        ProviderOutcome::Failed { .. }
    ));
    let refused: Value = serde_json::from_slice(&refused).expect("json");
    assert_eq!(refused["errorCode"], "137");
    assert!(
        refused["message"].as_str().unwrap().contains("(499)"),
        "{refused}"
    );
    // What is left is refunded.
    let rest = adapter
        .create_refund(&adyen_refund(&psp, "re_rest", 499))
        .await;
    assert!(
        matches!(rest.outcome, ProviderOutcome::Pending { .. }),
        "{rest:?}"
    );

    // Without the API key, or with another: 401, nothing made, nothing shown.
    let last = adyen_refund(&psp, "re_unauthorised", 1);
    for api_key in [None, Some("sk_test_wrong")] {
        let (status, _) = raw_adyen_refund(&client, &sandbox, "rk-3", api_key, &last).await;
        assert_eq!(status, 401, "{api_key:?}");
    }
    // Adyen has no lookup of a refund (Checkout API v71): the adapter asks nothing, and the
    // sandbox has no such path.
    assert!(matches!(
        adapter.retrieve_refund(refund_psp).await.outcome,
        ProviderOutcome::Unknown { .. }
    ));
    let no_lookup = client
        .get(format!("{}/v71/refunds/{refund_psp}", sandbox.base_url()))
        .header("x-api-key", SECRET)
        .send()
        .await
        .expect("sandbox answers");
    assert_eq!(no_lookup.status(), 404);

    // The ledger: two Adyen refunds, under payorch's refund ids, adding up to the charge.
    let refunds = sandbox.refunds();
    let listed: Vec<(&str, Option<&str>, i64)> = refunds
        .iter()
        .map(|r| (r.protocol.as_str(), r.refund_id.as_deref(), r.amount))
        .collect();
    assert_eq!(
        listed,
        [
            ("adyen", Some("re_first"), 1500),
            ("adyen", Some("re_rest"), 499)
        ]
    );
    sandbox.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adyen_refund_notifications_are_signed_and_name_payorchs_refund() {
    let hook = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/webhooks/adyen"))
        .respond_with(ResponseTemplate::new(200).set_body_string("[accepted]"))
        .mount(&hook)
        .await;
    let sandbox = start(fast()).await;
    sandbox.set_notification_url(Some(format!("{}/v1/webhooks/adyen", hook.uri())));
    let adapter = adyen_adapter(&sandbox);
    // The payment carries the refund fault: its refunds fail after `--processing-ms`.
    let failing = adyen_paid(&adapter, "pm_card_visa+sandbox_failure", "a_refund_fails").await;
    let refunded = adyen_paid(&adapter, "pm_card_visa", "a_refund_succeeds").await;
    let unknown_fault = adapter
        .create_charge(&charge("pm_card_visa+sandbox_nope", "a_no_such_fault"))
        .await;
    assert!(
        matches!(&unknown_fault.outcome, ProviderOutcome::Failed { message, .. } if message.contains("sandbox_lost_response")),
        "{unknown_fault:?}"
    );
    adapter
        .create_refund(&adyen_refund(&failing, "re_fails", 1000))
        .await;
    adapter
        .create_refund(&adyen_refund(&refunded, "re_succeeds", 1000))
        .await;

    // Two authorisations, then one REFUND each, every item signed as payorch verifies it.
    let key = HmacKey::from_hex(sandbox.adyen_hmac_key().expose()).expect("a hex key");
    let notices = eventually("refund notifications", async || {
        let requests = hook.received_requests().await.unwrap_or_default();
        let notices: Vec<_> = requests
            .iter()
            .flat_map(|r| {
                verify_delivery(&r.body, std::slice::from_ref(&key), Utc::now())
                    .expect("every item correctly signed")
            })
            .filter(|event| event.event_type == REFUND)
            .collect();
        (notices.len() >= 2).then_some(notices)
    })
    .await;
    assert_eq!(notices.len(), 2, "{notices:?}");
    for (payment, refund_id, succeeded) in [
        (&refunded, "re_succeeds", true),
        (&failing, "re_fails", false),
    ] {
        let event = notices
            .iter()
            .find(|e| e.provider_id == *payment)
            .expect("a notification about the payment");
        let notice = event.refund.as_ref().expect("a refund notice");
        assert_eq!(notice.refund_id.as_deref(), Some(refund_id));
        assert_eq!(notice.amount, 1000);
        assert_eq!(
            matches!(notice.outcome, ProviderOutcome::Succeeded { .. }),
            succeeded,
            "{notice:?}"
        );
    }
    sandbox.stop().await;
}
