//! What an event keeps of payments, read back as payments' own values: the rows the triggers
//! of the `…_merchant_events` migration put in an event's `snapshot` (docs/DESIGN.md, "The
//! outbox"), decoded into the values `GET` shows, so that an event's object is the resource as
//! `GET` showed it then. The one interface `events` reads payments by (docs/DESIGN.md,
//! "Modules and their dependencies"; `scripts/layout_check.py` holds it to this file): the
//! rows' shapes stay payments' own, and a column added to them changes this file, not events.

use serde::Deserialize;
use serde_json::Value;

use super::attempts::AttemptRow;
pub use super::attempts::PaymentAttempt;
use super::disputes::DisputeRow;
pub use super::disputes::DisputeView as Dispute;
pub use super::late_approvals::LateApproval;
pub use super::orders::Order;
use super::orders::OrderRow;
pub use super::refunds::Refund;
use super::refunds::RefundRow;

#[derive(Deserialize)]
struct PaymentSnapshot {
    payment: AttemptRow,
    refunds: Vec<RefundRow>,
}

#[derive(Deserialize)]
struct OrderSnapshot {
    order: OrderRow,
    payments: Vec<AttemptRow>,
}

#[derive(Deserialize)]
struct LateApprovalSnapshot {
    late_approval: LateApproval,
}

#[derive(Deserialize)]
struct RefundSnapshot {
    refund: RefundRow,
}

/// A payment's event's snapshot: the payment and its refunds.
pub fn payment(snapshot: Value) -> Result<(PaymentAttempt, Vec<Refund>), serde_json::Error> {
    let s: PaymentSnapshot = serde_json::from_value(snapshot)?;
    Ok((
        s.payment.into(),
        s.refunds.into_iter().map(Into::into).collect(),
    ))
}

/// An order's event's snapshot: the order and its payments, newest first.
pub fn order(snapshot: Value) -> Result<(Order, Vec<PaymentAttempt>), serde_json::Error> {
    let s: OrderSnapshot = serde_json::from_value(snapshot)?;
    Ok((
        Order::from_row(s.order),
        s.payments.into_iter().map(Into::into).collect(),
    ))
}

/// A refund's event's snapshot: the refund.
pub fn refund(snapshot: Value) -> Result<Refund, serde_json::Error> {
    let s: RefundSnapshot = serde_json::from_value(snapshot)?;
    Ok(s.refund.into())
}

/// A late approval's event's snapshot: the late approval.
pub fn late_approval(snapshot: Value) -> Result<LateApproval, serde_json::Error> {
    let s: LateApprovalSnapshot = serde_json::from_value(snapshot)?;
    Ok(s.late_approval)
}

#[derive(Deserialize)]
struct DisputeSnapshot {
    dispute: DisputeRow,
}

/// A dispute's event's snapshot: the dispute, as `GET` shows it.
pub fn dispute(snapshot: Value) -> Result<Dispute, serde_json::Error> {
    let s: DisputeSnapshot = serde_json::from_value(snapshot)?;
    Ok(s.dispute.into())
}
