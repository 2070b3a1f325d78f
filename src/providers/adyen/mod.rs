//! The Adyen Checkout API adapter (docs/DESIGN.md, "The provider protocol"). It speaks to
//! Adyen itself and to the sandbox, and asks only what Checkout API v71 has: no lookup of a
//! payment or a refund exists, so outcomes come from answers, same-key resends and
//! notifications (docs/DESIGN.md, "What proves what").

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use reqwest::{header, Method, Url};

use super::http_call::{self, DEFAULT_CONNECT_TIMEOUT, DEFAULT_TIMEOUT};
use super::{AcceptDisputeRequest, DisputeEvidenceRequest};
use super::{
    CancelRequest, CaptureMethod, CaptureRequest, ChargeRequest, Lookups, PaymentProvider,
    ProviderCall, ProviderOutcome, RefundRequest, SendWindow, ThreeDSecure, WebhookError,
    WebhookEvent,
};
use crate::secret::Secret;

mod declines;
pub mod disputes;
mod mapping;
pub mod notification;
mod refusal;
mod settlement_report;
#[cfg(test)]
mod tests;

pub use declines::{
    decline, decline_by_reason, rejected, BY_INFERRED, BY_RAW, BY_REFUSAL, INVALID_CARD_NUMBER,
};
pub use mapping::{
    outcome_for_modification, outcome_for_payment, outcome_for_refund, outcome_for_response, Call,
};
pub use notification::{event_id, sign_item, signing_string, HmacKey};
// Adyen's JSON shapes, shared with the sandbox (`payorch-wire`).
pub use payorch_wire::adyen as wire;

/// The Checkout API version every path starts with.
pub const API_VERSION: &str = "v71";

/// The body of the `200` Adyen expects for a notification delivery it may stop resending.
pub const ACKNOWLEDGEMENT: &str = "[accepted]";

/// How to reach an Adyen-protocol provider.
#[derive(Debug, Clone)]
pub struct AdyenConfig {
    /// e.g. `https://checkout-test.adyen.com` or the sandbox's `http://127.0.0.1:PORT`.
    pub base_url: String,
    /// The API key, sent as `X-API-Key`.
    pub api_key: Secret,
    /// The merchant account every payment and refund is made under.
    pub merchant_account: String,
    /// Hex-encoded notification HMAC keys; more than one while rotating.
    pub hmac_keys: Vec<Secret>,
    pub connect_timeout: Duration,
    /// The whole call, connect to last body byte.
    pub timeout: Duration,
}

impl AdyenConfig {
    /// A config with the default timeouts (docs/operations/configuration.md,
    /// "Configuration reference").
    pub fn new(
        base_url: impl Into<String>,
        api_key: impl Into<Secret>,
        merchant_account: impl Into<String>,
        hmac_keys: Vec<Secret>,
    ) -> Self {
        Self {
            base_url: base_url.into(),
            api_key: api_key.into(),
            merchant_account: merchant_account.into(),
            hmac_keys,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            timeout: DEFAULT_TIMEOUT,
        }
    }
}

/// Why an [`AdyenProvider`] could not be built.
#[derive(Debug, thiserror::Error)]
pub enum AdyenSetupError {
    #[error("provider base URL {url:?} is not a valid http(s) URL")]
    InvalidBaseUrl { url: String },
    #[error("the provider API key is empty")]
    EmptyApiKey,
    #[error("the merchant account is empty")]
    EmptyMerchantAccount,
    #[error("no notification HMAC key configured")]
    NoHmacKey,
    /// Counted from 1 among the configured keys; the key itself is never shown.
    #[error("notification HMAC key {position} is not hex")]
    InvalidHmacKey { position: usize },
    #[error("could not build the HTTP client: {0}")]
    Client(#[from] reqwest::Error),
}

/// The Adyen-protocol adapter.
#[derive(Debug, Clone)]
pub struct AdyenProvider {
    client: http_call::Client,
    base_url: Url,
    api_key: Secret,
    merchant_account: String,
    hmac_keys: Vec<HmacKey>,
    /// The Disputes API's base (`disputes::disputes_url`): the Checkout host's until
    /// [`with_disputes_host`](Self::with_disputes_host) names Adyen's own.
    disputes_url: Url,
}

impl AdyenProvider {
    pub fn new(config: AdyenConfig) -> Result<Self, AdyenSetupError> {
        let base_url = http_call::base_url(&config.base_url).ok_or_else(|| {
            AdyenSetupError::InvalidBaseUrl {
                url: config.base_url.clone(),
            }
        })?;
        if config.api_key.is_empty() {
            return Err(AdyenSetupError::EmptyApiKey);
        }
        if config.merchant_account.trim().is_empty() {
            return Err(AdyenSetupError::EmptyMerchantAccount);
        }
        // Empty entries are skipped (as for Stripe's secrets); a key that is there but not
        // hex is a mistake to name now, not a notification refused later.
        let mut hmac_keys = Vec::new();
        for (index, key) in config.hmac_keys.iter().enumerate() {
            if key.trim().is_empty() {
                continue;
            }
            let key = HmacKey::from_hex(key).ok_or(AdyenSetupError::InvalidHmacKey {
                position: index + 1,
            })?;
            hmac_keys.push(key);
        }
        if hmac_keys.is_empty() {
            return Err(AdyenSetupError::NoHmacKey);
        }
        let client = http_call::client(config.connect_timeout, config.timeout)?;
        Ok(Self {
            client,
            disputes_url: disputes::disputes_url(&base_url),
            base_url,
            api_key: config.api_key,
            merchant_account: config.merchant_account,
            hmac_keys,
        })
    }

    /// Adyen serves its Disputes API on another host than Checkout (`https://ca-test.adyen.com`,
    /// live `https://ca-live.adyen.com`); the sandbox serves both on one.
    pub fn with_disputes_host(mut self, host: &str) -> Result<Self, AdyenSetupError> {
        let host = http_call::base_url(host).ok_or_else(|| AdyenSetupError::InvalidBaseUrl {
            url: host.to_owned(),
        })?;
        self.disputes_url = disputes::disputes_url(&host);
        Ok(self)
    }

    /// `base_url` joined with `API_VERSION` and path segments, each percent-encoded.
    fn url(&self, segments: &[&str]) -> Url {
        let path: Vec<&str> = std::iter::once(API_VERSION)
            .chain(segments.iter().copied())
            .collect();
        http_call::join(&self.base_url, &path)
    }

    fn request(&self, method: Method, segments: &[&str]) -> reqwest::RequestBuilder {
        self.client
            .request(method, self.url(segments))
            .header("X-API-Key", self.api_key.expose())
            .header(header::ACCEPT, "application/json")
    }

    /// Send one request, once, and map whatever happens to an outcome.
    async fn call(&self, call: Call, request: reqwest::RequestBuilder) -> ProviderCall {
        self.call_with(call, request, |status, body| {
            outcome_for_response(call, status, body)
        })
        .await
    }

    /// [`call`](Self::call) with its own mapping of an HTTP answer.
    async fn call_with(
        &self,
        call: Call,
        request: reqwest::RequestBuilder,
        map: impl FnOnce(u16, &[u8]) -> ProviderOutcome,
    ) -> ProviderCall {
        self.client.send("adyen", call, request, map).await
    }
}

/// The body of a create (docs/DESIGN.md, "The provider protocol"): the same on every resend
/// of one attempt, so Adyen's idempotency sees one request.
///
/// A `return_url` means a payer is there to follow a redirect: the payment is made as the
/// shopper's own (`Ecommerce`, `CardOnFile`, in a browser), which the issuer may challenge.
/// Without one nobody could be sent anywhere, and the payment is made with the shopper not
/// in session (`ContAuth`, `UnscheduledCardOnFile`), which the issuer does not challenge.
/// v71's `PaymentRequest` requires a `returnUrl` either way, so such a payment names
/// payorch's own return route for the attempt.
///
/// A charge that asks for 3-D Secure sends `authenticationData.attemptAuthentication:
/// "always"`, which overrides Adyen's Dynamic 3D Secure rules; the issuer still chooses
/// between a challenge and a frictionless approval. Only with a payer (a `return_url`):
/// a challenge without one could only hang until it is abandoned, and a `ContAuth` payment
/// is not the payer's to authenticate. No `threeDS2RequestData`: its challenge
/// indicator (`threeDSRequestorChallengeInd`) belongs to the native 3-D Secure 2 flow, whose
/// device data payorch does not collect; the redirect that follows is Adyen's own page.
pub fn payment_request(req: &ChargeRequest, merchant_account: &str) -> wire::PaymentRequest {
    let shopper_present = req.return_url.is_some();
    let (shopper_interaction, recurring_processing_model) = if shopper_present {
        ("Ecommerce", "CardOnFile")
    } else {
        ("ContAuth", "UnscheduledCardOnFile")
    };
    let mut additional_data = std::collections::BTreeMap::new();
    if req.capture_method == CaptureMethod::Manual {
        additional_data.insert("manualCapture".to_owned(), "true".to_owned());
    }
    wire::PaymentRequest {
        amount: amount(req.amount, &req.currency),
        reference: req.attempt_id.clone(),
        merchant_account: merchant_account.to_owned(),
        payment_method: wire::PaymentMethod {
            kind: "scheme".to_owned(),
            stored_payment_method_id: req.payment_method.clone(),
        },
        shopper_interaction: shopper_interaction.to_owned(),
        recurring_processing_model: recurring_processing_model.to_owned(),
        metadata: wire::PaymentMetadata {
            order_id: req.order_id.clone(),
            merchant_id: req.merchant_id.clone(),
        },
        additional_data,
        return_url: Some(req.return_url.clone().unwrap_or(req.return_route.clone())),
        channel: shopper_present.then(|| "Web".to_owned()),
        authentication_data: (shopper_present && req.three_d_secure == ThreeDSecure::Required)
            .then(|| wire::AuthenticationData {
                attempt_authentication: ATTEMPT_AUTHENTICATION.to_owned(),
            }),
    }
}

/// `authenticationData.attemptAuthentication` of a charge that asks for 3-D Secure.
pub const ATTEMPT_AUTHENTICATION: &str = "always";

/// The body of a capture: its reference is the attempt's, so its notification names the
/// attempt as `merchantReference`.
pub fn capture_request(req: &CaptureRequest, merchant_account: &str) -> wire::CaptureRequest {
    wire::CaptureRequest {
        merchant_account: merchant_account.to_owned(),
        amount: amount(req.amount, &req.currency),
        reference: Some(req.attempt_id.clone()),
    }
}

fn amount(value: i64, currency: &str) -> wire::Amount {
    wire::Amount {
        value,
        currency: currency.to_ascii_uppercase(),
    }
}

/// The body of a refund: the same on every resend of one refund.
pub fn refund_request(req: &RefundRequest, merchant_account: &str) -> wire::RefundRequest {
    wire::RefundRequest {
        amount: amount(req.amount, &req.currency),
        reference: req.refund_id.clone(),
        merchant_account: merchant_account.to_owned(),
    }
}

#[async_trait]
impl PaymentProvider for AdyenProvider {
    fn name(&self) -> &'static str {
        "adyen"
    }

    /// Adyen signs each notification item inside the body.
    fn signature_header(&self) -> Option<&'static str> {
        None
    }

    fn acknowledgement(&self) -> Option<&'static str> {
        Some(ACKNOWLEDGEMENT)
    }

    fn lookups(&self) -> Lookups {
        Lookups::NotificationsOnly
    }

    async fn create_charge(&self, req: &ChargeRequest) -> ProviderCall {
        let request = self
            .request(Method::POST, &["payments"])
            .header("Idempotency-Key", &req.idempotency_key)
            .json(&payment_request(req, &self.merchant_account));
        let mut call = self.call(Call::Create(req.capture_method), request).await;
        // Adyen's action does not repeat the returnUrl it will send the payer back to.
        if let ProviderOutcome::RequiresAction { next_action, .. } = &mut call.outcome {
            next_action.return_url = next_action.return_url.take().or(req.return_url.clone());
        }
        call
    }

    /// Adyen's Checkout API has no lookup of a payment: nothing is sent.
    async fn retrieve(&self, _provider_id: &str) -> ProviderCall {
        no_lookup("a payment")
    }

    /// Adyen's Checkout API has no lookup of a payment: nothing is sent.
    async fn find_by_attempt(&self, _attempt_id: &str, _window: SendWindow) -> ProviderCall {
        no_lookup("a payment")
    }

    async fn create_refund(&self, req: &RefundRequest) -> ProviderCall {
        let request = self
            .request(
                Method::POST,
                &["payments", &req.provider_payment_id, "refunds"],
            )
            .header("Idempotency-Key", &req.idempotency_key)
            .json(&refund_request(req, &self.merchant_account));
        self.call(Call::CreateRefund, request).await
    }

    /// Adyen's Checkout API has no lookup of a refund: nothing is sent.
    async fn retrieve_refund(&self, _provider_refund_id: &str) -> ProviderCall {
        no_lookup("a refund")
    }

    /// Adyen's Checkout API has no lookup of a refund: nothing is sent.
    async fn find_refund(&self, _provider_payment_id: &str, _refund_id: &str) -> ProviderCall {
        no_lookup("a refund")
    }

    /// Adyen takes the capture (`201 received`) and tells its outcome in a `CAPTURE`
    /// notification.
    async fn capture(&self, req: &CaptureRequest) -> ProviderCall {
        let request = self
            .request(
                Method::POST,
                &["payments", &req.provider_payment_id, "captures"],
            )
            .header("Idempotency-Key", &req.idempotency_key)
            .json(&capture_request(req, &self.merchant_account));
        self.call(Call::Capture, request).await
    }

    /// By the payment's pspReference when known (a `CANCELLATION` notification tells the
    /// outcome), else by the attempt's reference (`TECHNICAL_CANCEL`).
    async fn cancel(&self, req: &CancelRequest) -> ProviderCall {
        let reference = Some(req.attempt_id.clone());
        let merchant_account = self.merchant_account.clone();
        let request = match &req.provider_payment_id {
            Some(psp) => self
                .request(Method::POST, &["payments", psp, "cancels"])
                .json(&wire::CancelRequest {
                    merchant_account,
                    reference,
                }),
            None => self
                .request(Method::POST, &["cancels"])
                .json(&wire::StandaloneCancelRequest {
                    merchant_account,
                    payment_reference: req.attempt_id.clone(),
                    reference,
                }),
        };
        let request = request.header("Idempotency-Key", &req.idempotency_key);
        self.call(Call::Cancel, request).await
    }

    /// `POST /payments/details` with the `redirectResult` Adyen added to the return URL; the
    /// answer names the payment, so `provider_id` is not needed, and its `merchantReference`
    /// must be the attempt's: the browser chose the `redirectResult`, and one passed
    /// challenge must not pay another attempt.
    async fn submit_dispute_evidence(&self, req: &DisputeEvidenceRequest) -> ProviderCall {
        self.submit_evidence(req).await
    }

    async fn accept_dispute(&self, req: &AcceptDisputeRequest) -> ProviderCall {
        self.accept(req).await
    }

    async fn complete_action(
        &self,
        _provider_id: &str,
        attempt_id: &str,
        params: &[(String, String)],
    ) -> ProviderCall {
        let Some(redirect_result) = params
            .iter()
            .find(|(name, _)| name == "redirectResult")
            .map(|(_, value)| value.clone())
        else {
            return ProviderCall::unsent_unknown("the payer came back without a redirectResult");
        };
        let request = self.request(Method::POST, &["payments", "details"]).json(
            &wire::PaymentDetailsRequest {
                details: wire::PaymentDetails {
                    redirect_result: Some(redirect_result),
                },
            },
        );
        self.call_with(Call::Details, request, |status, body| {
            mapping::details_for(attempt_id, status, body)
        })
        .await
    }

    /// The settlement details reports of the batches closed since the last read
    /// (`settlement_report.rs`).
    async fn settlement_entries(
        &self,
        query: &super::settlement::SettlementQuery,
    ) -> super::settlement::SettlementRead {
        settlement_report::read(self, query).await
    }

    fn verify_delivery(
        &self,
        raw_body: &[u8],
        _signature_header: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<Vec<WebhookEvent>, WebhookError> {
        notification::verify_delivery(raw_body, &self.hmac_keys, now)
    }
}

/// The answer of a lookup Adyen's Checkout API does not have (docs/DESIGN.md, "What proves
/// what"): unknown, with no request sent. Callers that know the provider's [`Lookups`] never
/// ask; this only keeps a stray question from reading as an answer.
fn no_lookup(what: &str) -> ProviderCall {
    ProviderCall::unsent_unknown(format!(
        "Adyen has no lookup of {what}: its outcome comes by notification"
    ))
}
