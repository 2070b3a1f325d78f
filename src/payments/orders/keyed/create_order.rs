//! `POST /v1/orders`: the order, inside the claim statement (whole text:
//! `tests/sql/claim_create_order.sql`).
//!
//! What it relies on (docs/DESIGN.md, "Orders"): `orders_merchant_reference_key` refuses a
//! second order under one `merchant_reference` (the statement fails whole, no key is
//! recorded, and the answer names the order that has it); the order's CHECKs hold its amount
//! and currency; it starts `awaiting_payment` by the column's default.

use diesel::result::DatabaseErrorKind;
use diesel::sql_types::{BigInt, Bool, Jsonb, Nullable, Text, Uuid as SqlUuid};
use serde_json::Value;

use super::{is_reference_taken, order_made, order_now, OrderMade};
use crate::db::statement::{Param, Statement};
use crate::idempotency::{ClaimParams, KeyedWork, RecordAs, ResourceType};
use crate::ids::OrderId;
use crate::payments::orders::NewOrder;

/// `POST /v1/orders`.
pub struct CreateOrder<'a> {
    id: OrderId,
    order: &'a NewOrder,
    metadata: Value,
}

impl<'a> CreateOrder<'a> {
    pub fn new(order: &'a NewOrder) -> Self {
        CreateOrder {
            id: OrderId::new(),
            order,
            metadata: serde_json::to_value(&order.metadata).unwrap_or_default(),
        }
    }
}

/// The CTE `made_order`: `order`, inserted from the row of `from` (`go`, or any relation
/// that has its row exactly when the work runs).
pub fn insert_order<'f>(
    q: &mut Statement<'f>,
    merchant: Param,
    order: &'f CreateOrder<'_>,
    from: &str,
) {
    let id = q.bind::<SqlUuid, _>(order.id.0);
    let amount = q.bind::<BigInt, _>(order.order.amount.get());
    let currency = q.bind::<Text, _>(order.order.currency.as_str());
    let reference = q.bind::<Nullable<Text>, _>(order.order.merchant_reference.as_deref());
    let description = q.bind::<Nullable<Text>, _>(order.order.description.as_deref());
    let metadata = q.bind::<Jsonb, _>(&order.metadata);
    let checkout_demo = q.bind::<Bool, _>(order.order.checkout_demo);
    q.push(format_args!(
        "made_order AS (
    INSERT INTO orders (merchant_id, id, amount, currency, merchant_reference, description,
        metadata, checkout_demo)
    SELECT {merchant}, {id}, {amount}, {currency}, {reference}, {description}, {metadata},
        {checkout_demo}
    FROM {from} RETURNING *)"
    ));
}

impl KeyedWork for CreateOrder<'_> {
    type Made = OrderMade;

    fn resource_type(&self) -> ResourceType {
        ResourceType::Order
    }
    fn record_as(&self) -> RecordAs {
        RecordAs::Completed { status: 201 }
    }
    fn ctes<'f>(&'f self, q: &mut Statement<'f>, claim: &ClaimParams) {
        insert_order(q, claim.merchant, self, "go");
        q.push(",\ndone AS (SELECT id AS resource_id FROM made_order)");
    }
    fn fresh(&self, q: &mut Statement<'_>) {
        order_made(q);
    }
    fn replay(&self, q: &mut Statement<'_>, merchant: Param) {
        order_now(q, merchant);
    }
    fn is_refusal(&self, kind: &DatabaseErrorKind, constraint: Option<&str>) -> bool {
        is_reference_taken(kind, constraint)
    }
}
