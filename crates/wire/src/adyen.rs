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

/// `POST /v71/payments` body: a payment with a stored card, the shopper in session or not.
/// The fields after `metadata` are left out when empty, so a payment without them is the
/// same bytes as before they existed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PaymentRequest {
    pub amount: Amount,
    /// payorch's attempt id: what notifications name as `merchantReference`.
    pub reference: String,
    pub merchant_account: String,
    pub payment_method: PaymentMethod,
    /// `ContAuth`: the shopper not in session; `Ecommerce`: the shopper in session online.
    pub shopper_interaction: String,
    /// `UnscheduledCardOnFile`: a one-off payment with stored card details, the shopper not
    /// in session; `CardOnFile`: the shopper in session pays with them.
    pub recurring_processing_model: String,
    pub metadata: PaymentMetadata,
    /// `manualCapture: "true"`: authorise only, and hold the money until a capture.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub additional_data: BTreeMap<String, String>,
    /// Where a redirect (3-D Secure) sends the shopper back, `redirectResult` added to its
    /// query.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub return_url: Option<String>,
    /// `Web`: the shopper is in a browser.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel: Option<String>,
    /// Asks for 3-D Secure whatever Adyen's own rules (Dynamic 3D Secure) would decide; left
    /// out, they decide.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authentication_data: Option<AuthenticationData>,
}

/// `authenticationData` of a payment (added in v69).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuthenticationData {
    /// `always`: perform 3-D Secure (the issuer may still approve without a challenge);
    /// `never`: do not, and a payment the regulations require it for is declined.
    pub attempt_authentication: String,
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
    /// A refusal's `inferredRefusalReason`, `refusalReasonRaw` and `merchantAdviceCode`,
    /// among others. Values are read as JSON, not text: one unexpected value must not make
    /// the whole answer unreadable.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub additional_data: BTreeMap<String, serde_json::Value>,
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

/// `action` of a payment response that needs the shopper (`resultCode` `RedirectShopper`):
/// send the shopper to `url` with `method`. Read apart from [`PaymentResponse`], whose
/// fields payorch's adapter builds in its tests: `serde_json::from_slice::<PaymentAction>`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Action {
    /// `redirect`.
    #[serde(rename = "type")]
    pub kind: String,
    /// `GET`: the shopper's browser opens `url`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// `scheme`: a card.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payment_method_type: Option<String>,
}

/// The `action` of a payment response, if any.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct PaymentAction {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<Action>,
}

/// `POST /v71/payments/details` body once the shopper is back from a redirect: the
/// `redirectResult` Adyen added to the `returnUrl`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PaymentDetailsRequest {
    pub details: PaymentDetails,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PaymentDetails {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redirect_result: Option<String>,
}

/// `POST /v71/payments/{paymentPspReference}/captures` body: capture `amount` (at most what
/// was authorised, in its currency) of a payment authorised with
/// `additionalData.manualCapture = "true"`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CaptureRequest {
    pub merchant_account: String,
    pub amount: Amount,
    /// The merchant's reference of this capture.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<String>,
}

/// `POST /v71/payments/{paymentPspReference}/cancels` body: release an authorisation that
/// was not captured.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CancelRequest {
    pub merchant_account: String,
    /// The merchant's reference of this cancel.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<String>,
}

/// `POST /v71/cancels` body: cancel the payment the merchant made with `payment_reference`
/// (its `reference`), for when the merchant never got the payment's `pspReference`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StandaloneCancelRequest {
    pub merchant_account: String,
    pub payment_reference: String,
    /// The merchant's reference of this cancel.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<String>,
}

/// The answer to a capture or a cancel: `201` with `status: received`, before the outcome,
/// which arrives as a `CAPTURE`, `CANCELLATION` or `TECHNICAL_CANCEL` notification whose
/// `pspReference` is this one and whose `originalReference` is the payment's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModificationResponse {
    /// Always `received`.
    pub status: String,
    /// The capture's or cancel's own reference.
    pub psp_reference: String,
    pub merchant_account: String,
    /// The payment's `pspReference` (captures and cancels of a payment by it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payment_psp_reference: Option<String>,
    /// The payment's `reference` (`POST /v71/cancels`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payment_reference: Option<String>,
    /// The request's own `reference`, if it had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<String>,
    /// What a capture captures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub amount: Option<Amount>,
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

// The event codes of captures and cancels, which the sandbox sends as Adyen does.

/// The outcome of a capture (`success` `true` or `false`).
pub const CAPTURE: &str = "CAPTURE";
/// The outcome of a cancel by the payment's `pspReference`.
pub const CANCELLATION: &str = "CANCELLATION";
/// The outcome of a cancel by the payment's `reference` (`POST /v71/cancels`).
pub const TECHNICAL_CANCEL: &str = "TECHNICAL_CANCEL";

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
