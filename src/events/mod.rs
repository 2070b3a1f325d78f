//! Merchant events: every change a merchant cares about, kept in the outbox and pushed to
//! its webhook endpoints (docs/guides/events.md, "Events and webhook endpoints"; docs/DESIGN.md, "The
//! outbox").
//!
//! payorch's code never writes an event: the triggers of the `…_merchant_events` migration
//! do, in the statement that makes the change, whoever makes it. What the code does is read
//! them: an event keeps the rows as they were at that moment (`snapshot`), decoded here into
//! the same domain values `GET` shows, so an event's object is the resource as `GET` showed it
//! then. The request that caused a change names itself to the triggers from the statements
//! that write its key ([`crate::idempotency::origin`]).

pub mod deliveries;
pub mod disabled;
pub mod endpoints;
pub mod list;
pub mod reaper;
pub mod redeliver;

pub mod safe_url;
pub mod schedule;
pub mod signing;

use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

use crate::db::schema::merchant_events;
use crate::db::scope::find_in_scope;
use crate::db::PgConn;
use crate::ids::{EventId, MerchantId, OrderId};
use crate::payments::snapshot::{self, Dispute, LateApproval, Order, PaymentAttempt, Refund};
use crate::words::words;

words! {
    /// What changed (`merchant_events.type`, the `event_type` domain of the migration).
    #[derive(Serialize, Deserialize, utoipa::ToSchema)]
    pub enum EventType {
        /// A payment's outcome is not known yet (the first time only).
        #[serde(rename = "payment.pending")]
        PaymentPending => "payment.pending",
        /// The payer must pass a 3-D Secure challenge: `data.object.next_action` says where.
        #[serde(rename = "payment.requires_action")]
        PaymentRequiresAction => "payment.requires_action",
        /// The money is held for a later capture (`capture_method: manual`).
        #[serde(rename = "payment.authorized")]
        PaymentAuthorized => "payment.authorized",
        #[serde(rename = "payment.succeeded")]
        PaymentSucceeded => "payment.succeeded",
        #[serde(rename = "payment.failed")]
        PaymentFailed => "payment.failed",
        /// Nothing was taken: a hold released, or a challenge abandoned.
        #[serde(rename = "payment.canceled")]
        PaymentCanceled => "payment.canceled",
        #[serde(rename = "refund.succeeded")]
        RefundSucceeded => "refund.succeeded",
        #[serde(rename = "refund.failed")]
        RefundFailed => "refund.failed",
        #[serde(rename = "order.paid")]
        OrderPaid => "order.paid",
        #[serde(rename = "order.canceled")]
        OrderCanceled => "order.canceled",
        /// All that was paid for the order is given back.
        #[serde(rename = "order.refunded")]
        OrderRefunded => "order.refunded",
        /// A provider approved a payment payorch had failed (docs/guides/declines.md, "Late
        /// approvals"): the money is being given back.
        #[serde(rename = "late_approval.detected")]
        LateApprovalDetected => "late_approval.detected",
        /// The late approval's hold is released.
        #[serde(rename = "late_approval.voided")]
        LateApprovalVoided => "late_approval.voided",
        /// The late approval's capture is refunded in full.
        #[serde(rename = "late_approval.refunded")]
        LateApprovalRefunded => "late_approval.refunded",
        /// The provider refused to give the money back: it is still taken, act on it.
        #[serde(rename = "late_approval.undo_failed")]
        LateApprovalUndoFailed => "late_approval.undo_failed",
        /// A payer's bank asks about a payment or takes its money back (docs/guides/disputes.md).
        #[serde(rename = "dispute.created")]
        DisputeCreated => "dispute.created",
        /// A dispute moved on (evidence under review, a later stage).
        #[serde(rename = "dispute.updated")]
        DisputeUpdated => "dispute.updated",
        /// A dispute was won, lost, or its inquiry closed.
        #[serde(rename = "dispute.closed")]
        DisputeClosed => "dispute.closed",
    }
}

/// The request that caused a change, as its event names it; `None` on an event when a
/// webhook, the reconciler or support made the change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct EventRequest {
    /// The request's `X-Request-Id`.
    pub id: String,
    /// The request's `Idempotency-Key`.
    pub idempotency_key: String,
}

/// The resource an event is about, as it was at that moment.
#[derive(Debug, Clone)]
pub enum EventObject {
    /// A payment and its refunds (`GET /v1/payments/{id}`).
    Payment {
        payment: Box<PaymentAttempt>,
        refunds: Vec<Refund>,
    },
    /// An order and its payments, newest first (`GET /v1/orders/{id}`).
    Order {
        order: Box<Order>,
        payments: Vec<PaymentAttempt>,
    },
    Refund(Box<Refund>),
    /// A provider's approval of a failed payment, and what payorch did about it.
    LateApproval(Box<LateApproval>),
    /// A dispute, with whether it came on refunded money (`refunded_before`, `overlap`).
    Dispute(Box<Dispute>),
}

/// An event as the outbox keeps it.
#[derive(Debug, Clone)]
pub struct Event {
    pub id: EventId,
    /// The order events were written in: the list's order and its cursor.
    pub seq: i64,
    pub merchant_id: MerchantId,
    pub event_type: EventType,
    pub order_id: OrderId,
    pub resource_id: Uuid,
    pub object: EventObject,
    pub request: Option<EventRequest>,
    pub created_at: DateTime<Utc>,
}

/// The row; its `snapshot` is decoded by [`Event::from_row`]. Also read by name, beside a
/// delivery the worker takes (`delivery::take`).
#[derive(Debug, Clone, Queryable, Selectable, QueryableByName)]
#[diesel(table_name = merchant_events)]
pub struct EventRow {
    id: Uuid,
    seq: i64,
    merchant_id: Uuid,
    event_type: String,
    resource_id: Uuid,
    order_id: Uuid,
    snapshot: Value,
    request: Option<Value>,
    created_at: DateTime<Utc>,
}

/// An event row the code cannot read: a type or snapshot this version does not know (a newer
/// replica wrote it, or someone wrote the table by hand). Never shown half-read.
#[derive(Debug, thiserror::Error)]
#[error("event {id} cannot be read: {reason}")]
pub struct UnreadableEvent {
    pub id: EventId,
    pub reason: String,
}

#[derive(Debug, thiserror::Error)]
pub enum EventsError {
    #[error(transparent)]
    Db(#[from] diesel::result::Error),
    #[error(transparent)]
    Unreadable(#[from] UnreadableEvent),
}

impl Event {
    pub fn from_row(row: EventRow) -> Result<Event, UnreadableEvent> {
        let id = EventId(row.id);
        let unreadable = |reason: String| UnreadableEvent { id, reason };
        let event_type = EventType::parse(&row.event_type)
            .ok_or_else(|| unreadable(format!("unknown type {:?}", row.event_type)))?;
        let bad_snapshot = |e: serde_json::Error| unreadable(format!("snapshot: {e}"));
        let object = match event_type {
            EventType::PaymentPending
            | EventType::PaymentRequiresAction
            | EventType::PaymentAuthorized
            | EventType::PaymentSucceeded
            | EventType::PaymentFailed
            | EventType::PaymentCanceled => {
                let (payment, refunds) = snapshot::payment(row.snapshot).map_err(bad_snapshot)?;
                EventObject::Payment {
                    payment: Box::new(payment),
                    refunds,
                }
            }
            EventType::OrderPaid | EventType::OrderCanceled | EventType::OrderRefunded => {
                let (order, payments) = snapshot::order(row.snapshot).map_err(bad_snapshot)?;
                EventObject::Order {
                    order: Box::new(order),
                    payments,
                }
            }
            EventType::RefundSucceeded | EventType::RefundFailed => {
                let refund = snapshot::refund(row.snapshot).map_err(bad_snapshot)?;
                EventObject::Refund(Box::new(refund))
            }
            EventType::LateApprovalDetected
            | EventType::LateApprovalVoided
            | EventType::LateApprovalRefunded
            | EventType::LateApprovalUndoFailed => {
                let late = snapshot::late_approval(row.snapshot).map_err(bad_snapshot)?;
                EventObject::LateApproval(Box::new(late))
            }
            EventType::DisputeCreated | EventType::DisputeUpdated | EventType::DisputeClosed => {
                let dispute = snapshot::dispute(row.snapshot).map_err(bad_snapshot)?;
                EventObject::Dispute(Box::new(dispute))
            }
        };
        let request = row
            .request
            .map(serde_json::from_value)
            .transpose()
            .map_err(|e| unreadable(format!("request: {e}")))?;
        Ok(Event {
            id,
            seq: row.seq,
            merchant_id: MerchantId(row.merchant_id),
            event_type,
            order_id: OrderId(row.order_id),
            resource_id: row.resource_id,
            object,
            request,
            created_at: row.created_at,
        })
    }
}

/// The event `id`, if `scope` (a merchant, or `None` for support) may see it.
pub async fn find_event(
    conn: &mut PgConn,
    scope: Option<MerchantId>,
    id: EventId,
) -> Result<Option<Event>, EventsError> {
    let query = merchant_events::table
        .select(EventRow::as_select())
        .into_boxed();
    let id = merchant_events::id.eq(id.0);
    let row = find_in_scope(conn, query, id, merchant_events::merchant_id, scope).await?;
    Ok(row.map(Event::from_row).transpose()?)
}

/// The events of one order (a payment's story), oldest first.
pub async fn events_of_order(
    conn: &mut PgConn,
    merchant: MerchantId,
    order: OrderId,
) -> Result<Vec<Event>, EventsError> {
    let rows = merchant_events::table
        .filter(merchant_events::merchant_id.eq(merchant.0))
        .filter(merchant_events::order_id.eq(order.0))
        .order(merchant_events::seq)
        .select(EventRow::as_select())
        .load(conn)
        .await?;
    Ok(rows
        .into_iter()
        .map(Event::from_row)
        .collect::<Result<_, _>>()?)
}

#[cfg(test)]
mod tests {
    use super::EventType;

    #[test]
    fn every_event_type_reads_back_as_itself() {
        for t in EventType::ALL {
            assert_eq!(EventType::parse(t.as_str()), Some(t));
        }
    }
}
