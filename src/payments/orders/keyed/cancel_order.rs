//! `POST /v1/orders/{id}/cancel`: `awaiting_payment → canceled`, inside the claim statement
//! (whole text: `tests/sql/claim_cancel_order.sql`), by a conditional update: whoever moves
//! the order first wins. Declined (no row, nothing recorded) when the order is not awaiting
//! payment; the caller then says why.
//!
//! What it relies on (docs/DESIGN.md, "Orders"): `orders_guard_transition` allows only the
//! order's own moves, so a cancel can never undo a payment that moved it on.

use diesel::result::DatabaseErrorKind;
use diesel::sql_types::Uuid as SqlUuid;

use super::{order_made, order_now, OrderMade};
use crate::db::statement::{Param, Statement};
use crate::idempotency::{ClaimParams, KeyedWork, RecordAs, ResourceType};
use crate::ids::OrderId;
use crate::payments::status::OrderStatus;

/// `POST /v1/orders/{id}/cancel`.
pub struct CancelOrder {
    pub id: OrderId,
}

impl KeyedWork for CancelOrder {
    type Made = OrderMade;

    fn resource_type(&self) -> ResourceType {
        ResourceType::Order
    }
    fn record_as(&self) -> RecordAs {
        RecordAs::Completed { status: 200 }
    }
    fn ctes<'f>(&'f self, q: &mut Statement<'f>, claim: &ClaimParams) {
        let id = q.bind::<SqlUuid, _>(self.id.0);
        q.push(format_args!(
            "made_order AS (
    UPDATE orders SET status = {canceled}
    WHERE merchant_id = {merchant} AND id = {id} AND status = {awaiting}
      AND EXISTS (SELECT 1 FROM go) RETURNING *),
done AS (SELECT id AS resource_id FROM made_order)",
            merchant = claim.merchant,
            canceled = OrderStatus::Canceled.sql(),
            awaiting = OrderStatus::AwaitingPayment.sql(),
        ));
    }
    fn fresh(&self, q: &mut Statement<'_>) {
        order_made(q);
    }
    fn replay(&self, q: &mut Statement<'_>, merchant: Param) {
        order_now(q, merchant);
    }
    fn is_refusal(&self, _: &DatabaseErrorKind, _: Option<&str>) -> bool {
        false
    }
}
