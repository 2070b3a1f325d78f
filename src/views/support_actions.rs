//! A support action as the payment's story shows it (docs/guides/support.md, "Support").

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
    /// What it was after; `{"error": code}` when the action failed; null while the outcome
    /// is unknown.
    #[schema(value_type = Option<Object>)]
    after: Option<serde_json::Value>,
    /// When it was asked (a redelivery or routing change: done).
    at: DateTime<Utc>,
    /// `recorded`, or `unknown`: a reconcile or void is on record as asked before it is
    /// taken, and its outcome when it has answered; an outcome missing means the action is
    /// still running, or its process stopped before it could say (look at the target's own
    /// state).
    outcome: &'static str,
    /// When the outcome was recorded; null while it is unknown.
    answered_at: Option<DateTime<Utc>>,
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
            outcome: if a.answered_at.is_some() {
                "recorded"
            } else {
                "unknown"
            },
            answered_at: a.answered_at,
        }
    }
}
