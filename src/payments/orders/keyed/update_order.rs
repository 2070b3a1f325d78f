//! `POST /v1/orders/{id}`: the order's metadata changed, inside the claim statement (whole
//! text: `tests/sql/claim_update_order.sql`): the keys given are set, the keys given as `""`
//! removed, the others kept, in one `UPDATE` of the row as it is then, so two changes at once
//! each apply to what the other left. Declined (no row, nothing recorded) when the order is
//! not the merchant's, or when the merged map would hold more than
//! [`MAX_METADATA_KEYS`] keys; the caller then says which.
//!
//! What it relies on: `orders_guard_transition` lets an order's metadata change in any
//! status (it guards the status and the amount), and the column's domain `json_object`.

use diesel::result::DatabaseErrorKind;
use diesel::sql_types::{Array, Jsonb, Text, Uuid as SqlUuid};
use serde_json::Value;

use super::{order_made, order_now, OrderMade};
use crate::db::statement::{Param, Statement};
use crate::idempotency::{ClaimParams, KeyedWork, RecordAs, ResourceType};
use crate::ids::OrderId;
use crate::payments::orders::{MetadataUpdate, MAX_METADATA_KEYS};

/// `POST /v1/orders/{id}`.
pub struct UpdateOrder<'a> {
    id: OrderId,
    set: Value,
    remove: &'a [String],
}

impl<'a> UpdateOrder<'a> {
    pub fn new(id: OrderId, update: &'a MetadataUpdate) -> Self {
        UpdateOrder {
            id,
            set: serde_json::to_value(&update.set).unwrap_or_default(),
            remove: &update.remove,
        }
    }
}

impl KeyedWork for UpdateOrder<'_> {
    type Made = OrderMade;

    fn resource_type(&self) -> ResourceType {
        ResourceType::Order
    }
    fn record_as(&self) -> RecordAs {
        RecordAs::Completed { status: 200 }
    }
    fn ctes<'f>(&'f self, q: &mut Statement<'f>, claim: &ClaimParams) {
        let id = q.bind::<SqlUuid, _>(self.id.0);
        let set = q.bind::<Jsonb, _>(&self.set);
        let remove = q.bind::<Array<Text>, _>(self.remove);
        q.push(format_args!(
            "made_order AS (
    UPDATE orders SET metadata = (metadata || {set}) - {remove}
    WHERE merchant_id = {merchant} AND id = {id} AND EXISTS (SELECT 1 FROM go)
      AND (SELECT count(*) FROM jsonb_object_keys((metadata || {set}) - {remove})) <= {MAX_METADATA_KEYS}
    RETURNING *),
done AS (SELECT id AS resource_id FROM made_order)",
            merchant = claim.merchant,
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
