//! A late approval, as the API shows it (docs/guides/declines.md, "Late approvals"): a
//! provider's approval of a payment payorch had failed, and what payorch did to give the money
//! back.

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::ids::{LateApprovalId, OrderId, PaymentId};
use crate::payments::late_approvals::LateApproval;

/// One late approval.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct LateApprovalView {
    id: LateApprovalId,
    /// Always `late_approval`.
    object: &'static str,
    /// The payment (attempt) payorch had failed and the provider approved.
    payment_id: PaymentId,
    order_id: OrderId,
    provider: String,
    /// The provider's charge that was approved, and is voided or refunded.
    provider_payment_id: String,
    amount: i64,
    currency: String,
    /// `authorized` (the money held: voided) or `succeeded` (taken: refunded).
    approved_as: String,
    /// Who told: `webhook` (the provider's webhook or notification, the one way a late
    /// approval is detected).
    source: String,
    /// `undoing` while the void or refund is asked, then `voided`, `refunded`, or
    /// `undo_failed` (the provider refused: the money is still taken).
    status: String,
    /// What the provider last answered.
    detail: Option<String>,
    /// The provider's id of the void (the charge's) or of the refund.
    provider_undo_id: Option<String>,
    detected_at: DateTime<Utc>,
    undone_at: Option<DateTime<Utc>>,
}

impl From<LateApproval> for LateApprovalView {
    fn from(l: LateApproval) -> Self {
        LateApprovalView {
            id: LateApprovalId(l.id),
            object: "late_approval",
            payment_id: PaymentId(l.attempt_id),
            order_id: OrderId(l.order_id),
            provider: l.provider,
            provider_payment_id: l.provider_payment_id,
            amount: l.amount,
            currency: l.currency,
            approved_as: l.approved_as,
            source: l.source,
            status: l.status,
            detail: l.detail,
            provider_undo_id: l.provider_undo_id,
            detected_at: l.detected_at,
            undone_at: l.undone_at,
        }
    }
}
