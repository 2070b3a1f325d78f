//! The keyed operations on an order alone (create it, cancel it) as the SQL that runs inside
//! the claim statement of [`crate::idempotency::claim()`], so that a new key, its work and its
//! record are one statement and one round trip. A new order made with its first attempt
//! (`POST /v1/checkout`) is [`crate::payments::attempts::keyed::Checkout`], which inserts the
//! order as [`CreateOrder`] does.
//!
//! Each work returns a `jsonb` object `{"order": …}` of the row it made (from `RETURNING`),
//! and each replay the same object of the row as it is now; [`read_order`] reads it. Ids are made here (UUIDv7), so
//! the statement needs nothing back from the database before it runs.

use diesel::result::DatabaseErrorKind;
use diesel::sql_types::{BigInt, Jsonb, Nullable, Text, Uuid as SqlUuid};
use serde::Deserialize;
use serde_json::Value;

use super::{NewOrder, Order, OrderRow};
use crate::db::sql::Sql;
use crate::idempotency::{KeyedWork, RecordAs};
use crate::ids::OrderId;
use crate::payments::status::OrderStatus;

pub const ORDER: &str = "order";

/// The order a claim statement returned, made or as it is now (none from a `null`).
pub fn read_order(value: Value) -> serde_json::Result<Option<Order>> {
    #[derive(Deserialize)]
    struct Made {
        order: Option<OrderRow>,
    }
    if value.is_null() {
        return Ok(None);
    }
    let made: Made = serde_json::from_value(value)?;
    Ok(made.order.map(Order::from_row))
}

/// The order a key names, as it is now (`$2` merchant).
const ORDER_NOW: &str = "(SELECT to_jsonb(o) FROM orders o \
     WHERE o.merchant_id = $2 AND o.id = found.resource_id)";
/// `made_order`: a new order from `go`, parameters `$14`–`$19`.
pub(in crate::payments) const INSERT_ORDER: &str = "made_order AS ( \
     INSERT INTO orders (merchant_id, id, amount, currency, merchant_reference, description, \
         metadata) \
     SELECT $2, $14, $15, $16, $17, $18, $19 FROM go RETURNING *)";

pub(in crate::payments) fn is_reference_taken(
    kind: &DatabaseErrorKind,
    constraint: Option<&str>,
) -> bool {
    matches!(kind, DatabaseErrorKind::UniqueViolation)
        && constraint == Some("orders_merchant_reference_key")
}

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

    pub(in crate::payments) fn bind_order<'f>(&'f self, query: Sql<'f>) -> Sql<'f> {
        query
            .bind::<SqlUuid, _>(self.id.0)
            .bind::<BigInt, _>(self.order.amount.get())
            .bind::<Text, _>(self.order.currency.as_str())
            .bind::<Nullable<Text>, _>(self.order.merchant_reference.as_deref())
            .bind::<Nullable<Text>, _>(self.order.description.as_deref())
            .bind::<Jsonb, _>(&self.metadata)
    }
}

impl KeyedWork for CreateOrder<'_> {
    fn resource_type(&self) -> &'static str {
        ORDER
    }
    fn record_as(&self) -> RecordAs {
        RecordAs::Completed { status: 201 }
    }
    fn ctes(&self) -> String {
        format!("{INSERT_ORDER}, done AS (SELECT id AS resource_id FROM made_order)")
    }
    fn fresh(&self) -> String {
        "jsonb_build_object('order', (SELECT to_jsonb(m) FROM made_order m))".into()
    }
    fn replay(&self) -> String {
        format!("jsonb_build_object('order', {ORDER_NOW})")
    }
    fn bind<'f>(&'f self, query: Sql<'f>) -> Sql<'f> {
        self.bind_order(query)
    }
    fn is_refusal(&self, kind: &DatabaseErrorKind, constraint: Option<&str>) -> bool {
        is_reference_taken(kind, constraint)
    }
}

/// `POST /v1/orders/{id}/cancel`: `awaiting_payment → canceled`, by a conditional update
/// (whoever moves the order first wins). Declined when the order is not awaiting payment.
pub struct CancelOrder {
    pub id: OrderId,
}

impl KeyedWork for CancelOrder {
    fn resource_type(&self) -> &'static str {
        ORDER
    }
    fn record_as(&self) -> RecordAs {
        RecordAs::Completed { status: 200 }
    }
    fn ctes(&self) -> String {
        format!(
            "made_order AS ( \
                 UPDATE orders SET status = 'canceled' \
                 WHERE merchant_id = $2 AND id = $14 AND status = '{}' \
                   AND EXISTS (SELECT 1 FROM go) RETURNING *), \
             done AS (SELECT id AS resource_id FROM made_order)",
            OrderStatus::AwaitingPayment.as_str()
        )
    }
    fn fresh(&self) -> String {
        "jsonb_build_object('order', (SELECT to_jsonb(m) FROM made_order m))".into()
    }
    fn replay(&self) -> String {
        format!("jsonb_build_object('order', {ORDER_NOW})")
    }
    fn bind<'f>(&'f self, query: Sql<'f>) -> Sql<'f> {
        query.bind::<SqlUuid, _>(self.id.0)
    }
    fn is_refusal(&self, _: &DatabaseErrorKind, _: Option<&str>) -> bool {
        false
    }
}
