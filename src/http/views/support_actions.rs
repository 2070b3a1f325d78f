//! A support action as the payment's story shows it (README, "Support").

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::ids::{ApiKeyId, EventId, MerchantId, PaymentId, RefundId};
use crate::payments::support::audit::RecordedAction;

/// What a support key did, with the state before and after.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct SupportAction {
    /// The support key that did it (`key_…`).
    key_id: ApiKeyId,
    /// The key's name when it acted: the person.
    key_name: String,
    /// The key's role when it acted: `read` or `operate`.
    role: String,
    /// `reconcile_payment`, `void_payment`, `reconcile_refund`, `redeliver_event` or
    /// `change_routing`.
    action: String,
    /// `payment`, `refund`, `event` or `merchant`.
    target_kind: String,
    /// The resource acted on (`pay_…`, `re_…`, `evt_…`, `mer_…`).
    target_id: String,
    /// What it was before (for a reconcile or void, its status).
    #[schema(value_type = Option<Object>)]
    before: Option<serde_json::Value>,
    /// What it was after; `{"error": code}` when the action failed.
    #[schema(value_type = Option<Object>)]
    after: Option<serde_json::Value>,
    at: DateTime<Utc>,
}

impl From<RecordedAction> for SupportAction {
    fn from(a: RecordedAction) -> Self {
        let target_id = match a.target_kind.as_str() {
            "payment" => PaymentId(a.target_id).to_string(),
            "refund" => RefundId(a.target_id).to_string(),
            "event" => EventId(a.target_id).to_string(),
            "merchant" => MerchantId(a.target_id).to_string(),
            _ => a.target_id.to_string(),
        };
        SupportAction {
            key_id: a.key_id,
            key_name: a.key_name,
            role: a.role,
            action: a.action,
            target_kind: a.target_kind,
            target_id,
            before: a.before,
            after: a.after,
            at: a.at,
        }
    }
}
