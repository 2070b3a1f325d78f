//! The Stripe PaymentIntents adapter (docs/DESIGN.md, "The provider protocol"). It speaks to
//! Stripe itself and to the sandbox.

use std::time::Duration;

use crate::secret::Secret;

use async_trait::async_trait;
use chrono::{DateTime, TimeZone, Utc};
use reqwest::{Method, Url};

use super::http_call::{self, DEFAULT_CONNECT_TIMEOUT, DEFAULT_TIMEOUT};
use super::{
    signature, CancelRequest, CaptureMethod, CaptureRequest, ChargeRequest, DisputeNotice, Lookups,
    PaymentProvider, ProviderCall, ProviderOutcome, RefundNotice, RefundRequest, SendWindow,
    ThreeDSecure, WebhookError, WebhookEvent,
};
use super::{AcceptDisputeRequest, DisputeEvidenceRequest};

mod balance;
mod declines;
pub mod disputes;
mod intent_status;
mod mapping;
#[cfg(test)]
mod tests;

pub use declines::{advice_of, decline, BY_CODE, BY_DECLINE_CODE};
pub use intent_status::IntentStatus;
pub use mapping::{
    outcome_for_intent, outcome_for_response, outcome_for_view, Call, IntentView, CARD_HOLD,
    UNEXPECTED_STATE,
};
// Stripe's JSON shapes, shared with the sandbox (`payorch-wire`).
pub use payorch_wire::stripe as wire;

/// The API version payorch speaks, sent as `Stripe-Version` on every request: without it the
/// account's default version, which its owner may change, would decide what payorch must
/// parse. The contract payorch is checked against is Stripe's OpenAPI document of this
/// version (fixtures/contracts/README.md).
pub const API_VERSION: &str = "2023-08-16";

/// How far either side of an attempt's send window the list of intents reaches: the two
/// clocks' disagreement, and a request Stripe began just as payorch's gave up.
pub const LIST_MARGIN: chrono::Duration = chrono::Duration::minutes(5);

/// At most this many pages of 100 intents are read for one attempt. A window busier than
/// that stays unknown (and is counted for a human), never read as "no record".
pub const LIST_PAGES: usize = 50;

/// How to reach a Stripe-protocol provider.
#[derive(Debug, Clone)]
pub struct StripeConfig {
    /// e.g. `https://api.stripe.com` or the sandbox's `http://127.0.0.1:PORT`.
    pub base_url: String,
    /// The API secret key, sent as `Authorization: Bearer`.
    pub secret: Secret,
    /// Every webhook secret currently accepted (more than one while rotating).
    pub webhook_secrets: Vec<Secret>,
    pub connect_timeout: Duration,
    /// The whole call, connect to last body byte.
    pub timeout: Duration,
    /// Allowed distance between a webhook's signed timestamp and now.
    pub webhook_tolerance: Duration,
}

impl StripeConfig {
    /// A config with the default timeouts and webhook tolerance (docs/operations/configuration.md,
    /// "Configuration reference").
    pub fn new(
        base_url: impl Into<String>,
        secret: impl Into<Secret>,
        webhook_secrets: Vec<Secret>,
    ) -> Self {
        Self {
            base_url: base_url.into(),
            secret: secret.into(),
            webhook_secrets,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            timeout: DEFAULT_TIMEOUT,
            webhook_tolerance: signature::DEFAULT_TOLERANCE,
        }
    }
}

/// Why a [`StripeProvider`] could not be built.
#[derive(Debug, thiserror::Error)]
pub enum StripeSetupError {
    #[error("provider base URL {url:?} is not a valid http(s) URL")]
    InvalidBaseUrl { url: String },
    #[error("the provider secret key is empty")]
    EmptySecret,
    #[error("no webhook secret configured")]
    NoWebhookSecret,
    #[error("could not build the HTTP client: {0}")]
    Client(#[from] reqwest::Error),
}

/// The Stripe-protocol adapter.
#[derive(Debug, Clone)]
pub struct StripeProvider {
    client: http_call::Client,
    base_url: Url,
    secret: Secret,
    webhook_secrets: Vec<Secret>,
    webhook_tolerance: Duration,
}

impl StripeProvider {
    pub fn new(config: StripeConfig) -> Result<Self, StripeSetupError> {
        let base_url = http_call::base_url(&config.base_url).ok_or_else(|| {
            StripeSetupError::InvalidBaseUrl {
                url: config.base_url.clone(),
            }
        })?;
        if config.secret.is_empty() {
            return Err(StripeSetupError::EmptySecret);
        }
        if config.webhook_secrets.iter().all(|s| s.is_empty()) {
            return Err(StripeSetupError::NoWebhookSecret);
        }
        let client = http_call::client(config.connect_timeout, config.timeout)?;
        Ok(Self {
            client,
            base_url,
            secret: config.secret,
            webhook_secrets: config
                .webhook_secrets
                .into_iter()
                .filter(|s| !s.is_empty())
                .collect(),
            webhook_tolerance: config.webhook_tolerance,
        })
    }

    /// `base_url` joined with path segments, each percent-encoded.
    fn url(&self, segments: &[&str]) -> Url {
        http_call::join(&self.base_url, segments)
    }

    /// Send one request, once, and map whatever happens to an outcome.
    async fn call(&self, call: Call, request: reqwest::RequestBuilder) -> ProviderCall {
        self.call_with(call, request, |status, body| {
            outcome_for_response(call, status, body)
        })
        .await
    }

    /// [`call`](Self::call) with its own mapping of an HTTP answer; Stripe's key and API
    /// version on every request.
    async fn call_with(
        &self,
        call: Call,
        request: reqwest::RequestBuilder,
        map: impl FnOnce(u16, &[u8]) -> ProviderOutcome,
    ) -> ProviderCall {
        let request = request
            .bearer_auth(self.secret.expose())
            .header("Stripe-Version", API_VERSION);
        self.client.send("stripe", call, request, map).await
    }
}

/// The form body of a create, in a fixed order (docs/DESIGN.md, "The provider protocol").
/// Stripe captures automatically unless told, so `capture_method` is sent only for a hold;
/// `return_url` lets Stripe answer a challenge with a redirect payorch can hand the payer.
/// `payment_method_types[0]=card` names the one kind payorch charges: without it, API version
/// 2023-08-16 turns on automatic payment methods, and refuses a confirm with no `return_url`.
/// A charge that asks for 3-D Secure says so with [`REQUEST_THREE_D_SECURE`], but only with a
/// `return_url`: without a payer to send to the bank, a challenge could only hang until it
/// is abandoned. One that does not ask sends nothing, and Stripe's own rules (Radar, the
/// issuer) decide as before.
pub fn create_form(req: &ChargeRequest) -> Vec<(&'static str, String)> {
    let mut form = vec![
        ("amount", req.amount.to_string()),
        ("currency", req.currency.clone()),
        ("payment_method", req.payment_method.clone()),
        ("payment_method_types[0]", "card".to_owned()),
        ("confirm", "true".to_owned()),
    ];
    if req.capture_method == CaptureMethod::Manual {
        form.push(("capture_method", CaptureMethod::Manual.as_str().to_owned()));
    }
    if let Some(return_url) = &req.return_url {
        form.push(("return_url", return_url.clone()));
    }
    if req.three_d_secure == ThreeDSecure::Required && req.return_url.is_some() {
        let (name, value) = REQUEST_THREE_D_SECURE;
        form.push((name, value.to_owned()));
    }
    form.extend([
        ("metadata[attempt_id]", req.attempt_id.clone()),
        ("metadata[order_id]", req.order_id.clone()),
        ("metadata[merchant_id]", req.merchant_id.clone()),
    ]);
    form
}

/// What asks Stripe for 3-D Secure on a card payment. The pinned API version (2023-08-16,
/// fixtures/contracts/stripe) knows two values, `automatic` (Stripe decides, the default) and
/// `any` (authenticate whenever the card supports 3-D Secure; the issuer may still let it
/// through without a challenge); `challenge`, which insists on one, came with a later version.
pub const REQUEST_THREE_D_SECURE: (&str, &str) = (
    "payment_method_options[card][request_three_d_secure]",
    "any",
);

/// The form body of a capture: the same on every resend of one capture.
pub fn capture_form(req: &CaptureRequest) -> Vec<(&'static str, String)> {
    vec![("amount_to_capture", req.amount.to_string())]
}

/// The form body of a refund, in a fixed order: the same on every resend of one refund.
pub fn refund_form(req: &RefundRequest) -> Vec<(&'static str, String)> {
    let mut form = vec![
        ("payment_intent", req.provider_payment_id.clone()),
        ("amount", req.amount.to_string()),
        ("metadata[refund_id]", req.refund_id.clone()),
        ("metadata[payment_id]", req.payment_id.clone()),
        ("metadata[merchant_id]", req.merchant_id.clone()),
    ];
    if let Some(reason) = &req.reason {
        form.push(("metadata[reason]", reason.clone()));
    }
    form
}

/// The refund event types payorch acts on, each carrying a Refund object. `charge.refunded`
/// carries a Charge whose refunds also arrive as these, so it is recorded `ignored`.
pub const REFUND_EVENTS: [&str; 3] = ["refund.created", "refund.updated", "refund.failed"];

/// The event types payorch acts on; others are recorded `ignored`. A hold is told by
/// `amount_capturable_updated` (the intent is `requires_capture`), a challenge by
/// `requires_action`, a capture by `succeeded` and a release by `canceled`.
pub const ACTED_ON_EVENTS: [&str; 6] = [
    "payment_intent.succeeded",
    "payment_intent.payment_failed",
    "payment_intent.processing",
    "payment_intent.canceled",
    "payment_intent.amount_capturable_updated",
    "payment_intent.requires_action",
];

#[async_trait]
impl PaymentProvider for StripeProvider {
    fn signature_header(&self) -> Option<&'static str> {
        Some(signature::HEADER)
    }

    fn name(&self) -> &'static str {
        "stripe"
    }

    fn lookups(&self) -> Lookups {
        Lookups::ReadAfterWrite
    }

    async fn create_charge(&self, req: &ChargeRequest) -> ProviderCall {
        let request = self
            .client
            .request(Method::POST, self.url(&["v1", "payment_intents"]))
            .header("Idempotency-Key", &req.idempotency_key)
            .form(&create_form(req));
        self.call(Call::Create, request).await
    }

    async fn retrieve(&self, provider_id: &str) -> ProviderCall {
        let request = self.client.request(
            Method::GET,
            self.url(&["v1", "payment_intents", provider_id]),
        );
        self.call(Call::Retrieve, request).await
    }

    /// Pages through `GET /v1/payment_intents` over the window: Stripe's list APIs are
    /// read-after-write, its search is not ("up to an hour behind during outages"), so only
    /// a whole window listed without the attempt proves there is no intent.
    async fn find_by_attempt(&self, attempt_id: &str, window: SendWindow) -> ProviderCall {
        let created = [
            ("created[gte]", (window.from - LIST_MARGIN).timestamp()),
            ("created[lte]", (window.until + LIST_MARGIN).timestamp()),
        ];
        let mut found = Vec::new();
        let mut latency = Duration::ZERO;
        let mut starting_after: Option<String> = None;
        for _ in 0..LIST_PAGES {
            let mut query: Vec<(&str, String)> = created
                .iter()
                .map(|(name, at)| (*name, at.to_string()))
                .collect();
            query.push(("limit", "100".to_owned()));
            if let Some(after) = starting_after.take() {
                query.push(("starting_after", after));
            }
            let request = self
                .client
                .request(Method::GET, self.url(&["v1", "payment_intents"]))
                .query(&query);
            let mut page = None;
            let mut call = self
                .call_with(Call::List, request, |status, body| match status {
                    200..=299 => match mapping::intent_page(body, attempt_id) {
                        Ok(read) => {
                            page = Some(read);
                            ProviderOutcome::NotFound
                        }
                        Err(reason) => ProviderOutcome::Unknown { reason },
                    },
                    _ => outcome_for_response(Call::List, status, body),
                })
                .await;
            latency += call.latency;
            call.latency = latency;
            let Some(page) = page else {
                return call;
            };
            found.extend(page.matches);
            match (page.has_more, page.last_id) {
                (true, Some(last)) => starting_after = Some(last),
                // "More" with nothing to go on from: not the whole window.
                (true, None) => {
                    call.outcome = ProviderOutcome::Unknown {
                        reason: "an empty page of intents that says there are more".into(),
                    };
                    return call;
                }
                (false, _) => {
                    call.outcome = mapping::outcome_for_matches(&found);
                    return call;
                }
            }
        }
        ProviderCall {
            outcome: match mapping::outcome_for_matches(&found) {
                ProviderOutcome::NotFound => ProviderOutcome::Unknown {
                    reason: format!(
                        "more than {LIST_PAGES} pages of intents in the attempt's window: \
                         not all read"
                    ),
                },
                outcome => outcome,
            },
            http_status: Some(200),
            latency,
        }
    }

    async fn create_refund(&self, req: &RefundRequest) -> ProviderCall {
        let request = self
            .client
            .request(Method::POST, self.url(&["v1", "refunds"]))
            .header("Idempotency-Key", &req.idempotency_key)
            .form(&refund_form(req));
        self.call(Call::CreateRefund, request).await
    }

    async fn retrieve_refund(&self, provider_refund_id: &str) -> ProviderCall {
        let request = self.client.request(
            Method::GET,
            self.url(&["v1", "refunds", provider_refund_id]),
        );
        self.call(Call::RetrieveRefund, request).await
    }

    async fn find_refund(&self, provider_payment_id: &str, refund_id: &str) -> ProviderCall {
        let request = self
            .client
            .request(Method::GET, self.url(&["v1", "refunds"]))
            .query(&[("payment_intent", provider_payment_id), ("limit", "100")]);
        self.call_with(Call::ListRefunds, request, |status, body| match status {
            200..=299 => mapping::refund_in_list(body, refund_id),
            _ => outcome_for_response(Call::ListRefunds, status, body),
        })
        .await
    }

    async fn capture(&self, req: &CaptureRequest) -> ProviderCall {
        let request = self
            .client
            .request(
                Method::POST,
                self.url(&["v1", "payment_intents", &req.provider_payment_id, "capture"]),
            )
            .header("Idempotency-Key", &req.idempotency_key)
            .form(&capture_form(req));
        self.call(Call::Capture, request).await
    }

    async fn cancel(&self, req: &CancelRequest) -> ProviderCall {
        match &req.provider_payment_id {
            Some(id) => self.cancel_intent(id, &req.idempotency_key).await,
            None => self.cancel_by_attempt(req).await,
        }
    }

    async fn submit_dispute_evidence(&self, req: &DisputeEvidenceRequest) -> ProviderCall {
        self.submit_evidence(req).await
    }

    async fn accept_dispute(&self, req: &AcceptDisputeRequest) -> ProviderCall {
        self.close_dispute(req).await
    }

    /// The intent's own status is the truth: what Stripe appends to the return URL
    /// (`payment_intent`, `redirect_status`) comes through the payer's browser and is not read.
    async fn complete_action(
        &self,
        provider_id: &str,
        _attempt_id: &str,
        _params: &[(String, String)],
    ) -> ProviderCall {
        if provider_id.is_empty() {
            return ProviderCall::unsent_unknown("no payment intent to look up");
        }
        self.retrieve(provider_id).await
    }

    /// `GET /v1/balance_transactions` over the `created` seconds not read yet
    /// (`balance.rs`).
    async fn settlement_entries(
        &self,
        query: &super::settlement::SettlementQuery,
    ) -> super::settlement::SettlementRead {
        balance::read(self, query).await
    }

    fn verify_delivery(
        &self,
        raw_body: &[u8],
        signature_header: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<Vec<WebhookEvent>, WebhookError> {
        self.verify_webhook(raw_body, signature_header, now)
            .map(|event| vec![event])
    }
}

impl StripeProvider {
    async fn cancel_intent(&self, id: &str, idempotency_key: &str) -> ProviderCall {
        let no_parameters: [(&str, &str); 0] = [];
        let request = self
            .client
            .request(
                Method::POST,
                self.url(&["v1", "payment_intents", id, "cancel"]),
            )
            .header("Idempotency-Key", idempotency_key)
            .form(&no_parameters);
        self.call(Call::Cancel, request).await
    }

    /// A cancel of an attempt whose intent payorch has not learnt yet: Stripe cancels only by
    /// id, so nothing is sent. The reconciler's list names the intent (or proves there is
    /// none), and the void is resent by id once it is known.
    async fn cancel_by_attempt(&self, req: &CancelRequest) -> ProviderCall {
        ProviderCall::unsent_unknown(format!(
            "attempt {}'s intent is not known yet: Stripe cancels by id only",
            req.attempt_id
        ))
    }

    /// Check a Stripe event's signature (`Stripe-Signature`) and parse it.
    pub fn verify_webhook(
        &self,
        raw_body: &[u8],
        signature_header: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<WebhookEvent, WebhookError> {
        let header = signature_header.ok_or(WebhookError::MissingHeader)?;
        signature::verify(
            raw_body,
            header,
            &self.webhook_secrets,
            now,
            self.webhook_tolerance,
        )?;
        parse_event(raw_body)
    }
}

/// Parse a (verified) event body. Only the envelope and `data.object.id` are required, so
/// events about other objects still parse and can be recorded as ignored.
pub fn parse_event(raw_body: &[u8]) -> Result<WebhookEvent, WebhookError> {
    let raw: serde_json::Value =
        serde_json::from_slice(raw_body).map_err(|e| WebhookError::BadJson(e.to_string()))?;
    let text = |v: &serde_json::Value, field: &str| v.get(field)?.as_str().map(str::to_owned);
    let missing = |what: &str| WebhookError::BadJson(format!("missing {what}"));

    let id = text(&raw, "id").ok_or_else(|| missing("id"))?;
    let event_type = text(&raw, "type").ok_or_else(|| missing("type"))?;
    let created = raw
        .get("created")
        .and_then(serde_json::Value::as_i64)
        .and_then(|t| Utc.timestamp_opt(t, 0).single())
        .ok_or_else(|| missing("created"))?;
    let object = raw
        .get("data")
        .and_then(|d| d.get("object"))
        .ok_or_else(|| missing("data.object"))?;
    let provider_id = text(object, "id").ok_or_else(|| missing("data.object.id"))?;
    let attempt_id = object.get("metadata").and_then(|m| text(m, "attempt_id"));
    let acted_on = ACTED_ON_EVENTS.contains(&event_type.as_str());
    let error = object.get("last_payment_error").filter(|e| !e.is_null());
    let status = object.get("status").and_then(serde_json::Value::as_str);
    let outcome = status.filter(|_| acted_on).map(|status| {
        outcome_for_view(&IntentView {
            id: &provider_id,
            status,
            created: object.get("created").and_then(serde_json::Value::as_i64),
            failure_kind: error.and_then(|e| e.get("type")?.as_str()),
            failure_code: error.and_then(|e| e.get("code")?.as_str()),
            decline_code: error.and_then(|e| e.get("decline_code")?.as_str()),
            failure_message: error.and_then(|e| e.get("message")?.as_str()),
            advice: error.map(advice_of).unwrap_or_default(),
            next_action: object.get("next_action").filter(|a| !a.is_null()),
        })
    });
    let amount = object.get("amount").and_then(serde_json::Value::as_i64);
    let currency = text(object, "currency");
    // A refund whose nullable `status` or `metadata` came null is still about a refund: its
    // outcome is then pending, and an event without payorch's refund id changes nothing.
    let refund = REFUND_EVENTS
        .contains(&event_type.as_str())
        .then(|| mapping::RefundView::read(object))
        .flatten()
        .map(|refund| RefundNotice {
            refund_id: refund.refund_id().map(str::to_owned),
            provider_refund_id: refund.id.clone(),
            outcome: mapping::outcome_for_refund(&refund),
            amount: refund.amount,
        });
    let dispute = dispute_notice(&event_type, object);
    let acted_on = acted_on || refund.is_some() || dispute.is_some();

    Ok(WebhookEvent {
        id,
        event_type,
        created,
        attempt_id,
        provider_id,
        acted_on,
        modification: false,
        outcome,
        amount,
        currency,
        refund,
        dispute,
        raw: crate::providers::kept::stripe_event(&raw),
    })
}

/// A `charge.dispute.*` event's dispute object, in payorch's words (docs/guides/disputes.md).
/// A dispute of no PaymentIntent (a charge made outside payorch) or of a status payorch has
/// no word for is not one payorch can apply: `None`, and the event is recorded ignored.
fn dispute_notice(event_type: &str, object: &serde_json::Value) -> Option<DisputeNotice> {
    use crate::providers::dispute;
    if !dispute::STRIPE_DISPUTE_EVENTS.contains(&event_type) {
        return None;
    }
    let text = |field: &str| object.get(field)?.as_str().map(str::to_owned);
    // `payment_intent` is an id, or the object when expanded.
    let intent = object.get("payment_intent").and_then(|pi| {
        pi.as_str()
            .or_else(|| pi.get("id")?.as_str())
            .map(str::to_owned)
    })?;
    let (status, stage) = dispute::stripe_status(object.get("status")?.as_str()?)?;
    let provider_reason = text("reason").unwrap_or_default();
    Some(DisputeNotice {
        provider_dispute_id: text("id")?,
        provider_payment_id: Some(intent),
        attempt_id: None,
        status,
        stage,
        amount: object.get("amount")?.as_i64()?,
        currency: text("currency")?.to_ascii_lowercase(),
        reason: dispute::stripe_reason(&provider_reason),
        provider_reason,
        evidence_due_by: dispute::stripe_due_by(
            object.get("evidence_details").and_then(|e| e.get("due_by")),
        ),
        unclear: None,
    })
}
