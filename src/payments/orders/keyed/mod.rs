//! The keyed statements of an order alone, one file each: [`create_order`],
//! [`cancel_order`] and [`update_order`], the work that runs inside the claim statement of
//! [`crate::idempotency::claim()`], so that a new key, its work and its record are one
//! statement and one round trip (their whole text: `tests/sql/claim_<operation>.sql`). A new order made with its first attempt
//! (`POST /v1/checkout`) is [`crate::payments::attempts::keyed::checkout`], which inserts
//! the order as [`CreateOrder`] does.
//!
//! Each work returns a `jsonb` object `{"order": …}` of the row it made (from `RETURNING`),
//! and each replay the same object of the row as it is now; the claim decodes it once as
//! [`OrderMade`]. Ids are made here (UUIDv7), so the statement needs nothing back from the
//! database before it runs.

pub mod cancel_order;
pub mod create_order;
pub mod update_order;

use diesel::result::DatabaseErrorKind;
use serde::Deserialize;

pub use cancel_order::CancelOrder;
pub use create_order::{insert_order, CreateOrder};
pub use update_order::UpdateOrder;

use super::{Order, OrderRow};
use crate::db::statement::{Param, Statement};

/// What an order's keyed statement made, or its replay read.
#[derive(Default, Deserialize)]
pub struct OrderMade {
    order: Option<OrderRow>,
}

impl OrderMade {
    pub fn order(self) -> Option<Order> {
        self.order.map(Order::from_row)
    }
}

/// A replay's `jsonb`: the order a key names, as it is now.
fn order_now(q: &mut Statement<'_>, merchant: Param) {
    q.push(format_args!(
        "jsonb_build_object('order', (
    SELECT to_jsonb(o) FROM orders o
    WHERE o.merchant_id = {merchant} AND o.id = found.resource_id))"
    ));
}

/// What a new order made by `made_order` was: `{"order": …}`.
fn order_made(q: &mut Statement<'_>) {
    q.push("jsonb_build_object('order', (SELECT to_jsonb(m) FROM made_order m))");
}

/// The one refusal of a new order: its `merchant_reference` is taken
/// (`orders_merchant_reference_key`); ids are fresh UUIDv7s.
pub(in crate::payments) fn is_reference_taken(
    kind: &DatabaseErrorKind,
    constraint: Option<&str>,
) -> bool {
    matches!(kind, DatabaseErrorKind::UniqueViolation)
        && constraint == Some("orders_merchant_reference_key")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::snapshot::assert_sql_snapshot;
    use crate::idempotency::claim::snapshot::claim_text;
    use crate::idempotency::Operation;
    use crate::ids::OrderId;
    use crate::payments::orders::OrderFields;

    #[test]
    fn the_claim_statements_of_an_order_read_as_their_snapshots() {
        let fields = OrderFields {
            amount: Some(1999.into()),
            currency: Some("EUR".into()),
            merchant_reference: Some("ref-1".into()),
            description: Some("two tickets".into()),
            metadata: None,
            checkout_demo: false,
        };
        let order = fields.validate().expect("valid order");
        let sql = claim_text(Operation::CreateOrder, &CreateOrder::new(&order));
        assert_sql_snapshot("claim_create_order", &sql);
        let sql = claim_text(Operation::CancelOrder, &CancelOrder { id: OrderId::new() });
        assert_sql_snapshot("claim_cancel_order", &sql);
        let update = crate::payments::orders::MetadataUpdate::parse(Some(
            [
                ("note".to_owned(), "gift".to_owned()),
                ("old".to_owned(), String::new()),
            ]
            .into(),
        ))
        .expect("a valid change");
        let sql = claim_text(
            Operation::UpdateOrder,
            &UpdateOrder::new(OrderId::new(), &update),
        );
        assert_sql_snapshot("claim_update_order", &sql);
    }
}
