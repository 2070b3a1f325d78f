//! Stripe's JSON shapes, as far as payorch and the sandbox use them.
//!
//! Deserialisation is lenient (unknown fields ignored, optional ones defaulted) because
//! Stripe adds fields without notice; serialisation (the sandbox) writes Stripe's shapes.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// A PaymentIntent (`object: "payment_intent"`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PaymentIntent {
    pub id: String,
    #[serde(default = "payment_intent_object")]
    pub object: String,
    pub amount: i64,
    #[serde(default)]
    pub amount_received: i64,
    pub currency: String,
    pub status: String,
    #[serde(default)]
    pub payment_method: Option<String>,
    #[serde(default)]
    pub metadata: BTreeMap<String, String>,
    #[serde(default)]
    pub last_payment_error: Option<LastPaymentError>,
    #[serde(default)]
    pub latest_charge: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default = "automatic")]
    pub capture_method: String,
    #[serde(default = "automatic")]
    pub confirmation_method: String,
    pub created: i64,
    #[serde(default)]
    pub livemode: bool,
    /// `{id}_secret_{random}`: what a browser confirms the intent with.
    #[serde(default)]
    pub client_secret: Option<String>,
    #[serde(default)]
    pub payment_method_types: Vec<String>,
    #[serde(default)]
    pub amount_capturable: i64,
    #[serde(default)]
    pub next_action: Option<serde_json::Value>,
    #[serde(default)]
    pub canceled_at: Option<i64>,
    #[serde(default)]
    pub cancellation_reason: Option<String>,
}

/// `next_action` of a PaymentIntent waiting for its customer (`requires_action`), as far as
/// payorch and the sandbox use it: a redirect to the card issuer's challenge (3-D Secure).
/// `PaymentIntent::next_action` stays the raw JSON, as Stripe has other kinds of action;
/// read it as this with `serde_json::from_value`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NextAction {
    /// `redirect_to_url`; other kinds (`use_stripe_sdk`, …) carry no `redirect_to_url`.
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redirect_to_url: Option<RedirectToUrl>,
}

/// Where to send the customer (`url`), and where the challenge sends them back when it is
/// over (`return_url`, the create's or confirm's), with `payment_intent`,
/// `payment_intent_client_secret` and `redirect_status` added to its query.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RedirectToUrl {
    pub url: String,
    #[serde(default)]
    pub return_url: Option<String>,
}

/// A Refund (`object: "refund"`) of a PaymentIntent's charge.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refund {
    pub id: String,
    #[serde(default = "refund_object")]
    pub object: String,
    pub amount: i64,
    pub currency: String,
    /// `pending`, `requires_action`, `succeeded`, `failed` or `canceled`.
    pub status: String,
    #[serde(default)]
    pub payment_intent: Option<String>,
    #[serde(default)]
    pub reason: Option<String>,
    /// Why a `failed` refund failed (`lost_or_stolen_card`, `expired_or_canceled_card`, …).
    /// Stripe's OpenAPI document makes it optional, not nullable: left out, never `null`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_reason: Option<String>,
    #[serde(default)]
    pub metadata: BTreeMap<String, String>,
    pub created: i64,
}

fn refund_object() -> String {
    "refund".to_owned()
}

fn payment_intent_object() -> String {
    "payment_intent".to_owned()
}

fn automatic() -> String {
    "automatic".to_owned()
}

/// `last_payment_error` on a PaymentIntent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LastPaymentError {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub code: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decline_code: Option<String>,
    #[serde(default)]
    pub message: Option<String>,
}

/// An error answer: `{"error": {…}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    pub error: ApiError,
}

/// The `error` object of an error answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiError {
    /// `card_error`, `invalid_request_error`, `idempotency_error`, `api_error`, …
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decline_code: Option<String>,
    #[serde(default)]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub param: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payment_intent: Option<PaymentIntent>,
}

/// `GET /v1/payment_intents/search` answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SearchResult {
    pub object: String,
    pub data: Vec<PaymentIntent>,
    #[serde(default)]
    pub has_more: bool,
    #[serde(default)]
    pub next_page: Option<String>,
    #[serde(default)]
    pub url: Option<String>,
}

/// A webhook event whose `data.object` is a PaymentIntent (or, for refund events, a Refund).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event<O = PaymentIntent> {
    pub id: String,
    pub object: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub created: i64,
    #[serde(default)]
    pub livemode: bool,
    #[serde(default)]
    pub api_version: Option<String>,
    pub data: EventData<O>,
    /// Webhooks still to be delivered for this event.
    #[serde(default)]
    pub pending_webhooks: i64,
    /// The API request that caused the event; `id` and `idempotency_key` are null for events
    /// the provider makes on its own (a settlement).
    #[serde(default)]
    pub request: Option<EventRequest>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventRequest {
    pub id: Option<String>,
    pub idempotency_key: Option<String>,
}

/// `GET /v1/payment_intents` answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListResult {
    pub object: String,
    pub data: Vec<PaymentIntent>,
    #[serde(default)]
    pub has_more: bool,
    pub url: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventData<O = PaymentIntent> {
    pub object: O,
}
