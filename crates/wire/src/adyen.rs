//! Adyen Checkout API JSON shapes (API version 71), as far as payorch and the sandbox use
//! them.
//!
//! Deserialisation is lenient (unknown fields ignored, optional ones defaulted) because
//! Adyen adds fields without notice; serialisation writes Adyen's camelCase names, in the
//! declared order, so one request serialises to the same bytes on every resend.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize};

/// An amount in minor units with its ISO 4217 currency code (Adyen wants it uppercase).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Amount {
    pub value: i64,
    pub currency: String,
}

/// `POST /v71/payments` body: a payment with a stored card, without the shopper present.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PaymentRequest {
    pub amount: Amount,
    /// payorch's attempt id: what notifications name as `merchantReference`.
    pub reference: String,
    pub merchant_account: String,
    pub payment_method: PaymentMethod,
    /// `ContAuth`: a payment with stored details, the shopper not in session.
    pub shopper_interaction: String,
    /// `UnscheduledCardOnFile`: a one-off payment with stored card details.
    pub recurring_processing_model: String,
    pub metadata: PaymentMetadata,
}

/// `paymentMethod` of a payment with stored details.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PaymentMethod {
    /// `scheme`: a card.
    #[serde(rename = "type")]
    pub kind: String,
    pub stored_payment_method_id: String,
}

/// `metadata` of a payment: payorch's ids, for whoever reads the payment at Adyen.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PaymentMetadata {
    pub order_id: String,
    pub merchant_id: String,
}

/// A payment response: the answer to a create, and what payorch's lookups return.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PaymentResponse {
    /// `Authorised`, `Refused`, `Cancelled`, `Pending`, `Received`, `Error`, or an action
    /// the shopper must take (`RedirectShopper`, `ChallengeShopper`, …).
    pub result_code: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub psp_reference: Option<String>,
    /// The payment's `reference` (payorch's attempt id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merchant_reference: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refusal_reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refusal_reason_code: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub amount: Option<Amount>,
}

/// A list of payment responses (`GET /v71/payments?reference=…`, served by the sandbox).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PaymentList {
    pub data: Vec<PaymentResponse>,
}

/// `POST /v71/payments/{pspReference}/refunds` body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RefundRequest {
    pub amount: Amount,
    /// payorch's refund id: what notifications name as `merchantReference`.
    pub reference: String,
    pub merchant_account: String,
}

/// A refund response: the answer to a refund request (`status: received`), and what
/// payorch's refund lookups return (then also `pending`, `succeeded` or `failed`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RefundResponse {
    pub status: String,
    /// The refund's own reference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub psp_reference: Option<String>,
    /// The refunded payment's reference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payment_psp_reference: Option<String>,
    /// payorch's refund id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merchant_account: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub amount: Option<Amount>,
}

/// A list of refund responses (`GET /v71/payments/{psp}/refunds?reference=…`, served by the
/// sandbox).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefundList {
    pub data: Vec<RefundResponse>,
}

/// An error answer (`ServiceError`): `422` for a request Adyen validated and refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceError {
    #[serde(default)]
    pub status: Option<u16>,
    #[serde(default)]
    pub error_code: Option<String>,
    #[serde(default)]
    pub message: Option<String>,
    #[serde(default)]
    pub error_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub psp_reference: Option<String>,
}

/// The event codes payorch acts on (the sandbox sends them); other items are recorded
/// `ignored`.
pub const AUTHORISATION: &str = "AUTHORISATION";
pub const REFUND: &str = "REFUND";
pub const REFUND_FAILED: &str = "REFUND_FAILED";

/// A notification delivery: `{"live": "false", "notificationItems": [...]}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Notification {
    #[serde(default, deserialize_with = "text_or_empty")]
    pub live: String,
    pub notification_items: Vec<NotificationItem>,
}

/// One element of `notificationItems`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NotificationItem {
    #[serde(rename = "NotificationRequestItem")]
    pub item: NotificationRequestItem,
}

/// A notification item. Text fields Adyen leaves out read as empty strings, which is also
/// how the HMAC signing string spells them.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NotificationRequestItem {
    #[serde(default)]
    pub additional_data: BTreeMap<String, serde_json::Value>,
    #[serde(default)]
    pub amount: Option<NotificationAmount>,
    #[serde(default, deserialize_with = "text_or_empty")]
    pub event_code: String,
    #[serde(default, deserialize_with = "text_or_empty")]
    pub event_date: String,
    #[serde(default, deserialize_with = "text_or_empty")]
    pub merchant_account_code: String,
    #[serde(default, deserialize_with = "text_or_empty")]
    pub merchant_reference: String,
    #[serde(default, deserialize_with = "text_or_empty")]
    pub original_reference: String,
    #[serde(default, deserialize_with = "text_or_empty")]
    pub psp_reference: String,
    #[serde(default, deserialize_with = "text_or_empty")]
    pub reason: String,
    /// `"true"` or `"false"`, as text.
    #[serde(default, deserialize_with = "text_or_empty")]
    pub success: String,
}

/// A notification item's `amount`; either part may be absent.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct NotificationAmount {
    #[serde(default)]
    pub value: Option<i64>,
    #[serde(default)]
    pub currency: Option<String>,
}

/// A text field that may be absent or `null`: both read as `""`.
fn text_or_empty<'de, D: Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    Ok(Option::<String>::deserialize(deserializer)?.unwrap_or_default())
}
