//! The keyed statements of a payment attempt, one file each, whole text in `tests/sql/`:
//!
//! | statement | file | transaction | finishes the key? |
//! |---|---|---|---|
//! | pay an order: the attempt, its timeline row, the key | [`pay_order`] | 1 (the claim) | opens it in flight |
//! | checkout: the order, its attempt, the timeline row, the key | [`checkout`] | 1 (the claim) | opens it in flight |
//! | the provider's answer: move, timeline, call log, key | [`record_answer`] | 2 | yes, consuming the [`InFlightKey`](crate::idempotency::InFlightKey) |
//! | failover: the next attempt, its timeline row, the key moved onto it | [`fail_over`] | 2' | hands the key on |
//!
//! (docs/DESIGN.md, "A payment: two transactions and one provider call", "The write path".)
//!
//! Each claim work returns a `jsonb` object `{"order": …, "attempt": …}` of the rows it made
//! (from `RETURNING`), and each replay the same object of the rows as they are now; the claim
//! decodes it once as [`Resources`]. Ids are made here (UUIDv7), so the statement needs
//! nothing back from the database before it runs.

pub mod checkout;
pub mod fail_over;
pub mod new_attempt;
pub mod pay_order;
pub mod record_answer;

use serde::Deserialize;

pub use checkout::Checkout;
pub use new_attempt::NewAttempt;
pub use pay_order::PayOrder;

use super::{AttemptRow, PaymentAttempt};
use crate::db::statement::{Param, Statement};
use crate::payments::orders::{Order, OrderRow};

/// The rows a claim statement returned, made or as they are now.
#[derive(Default, Deserialize)]
pub struct Resources {
    order: Option<OrderRow>,
    attempt: Option<AttemptRow>,
}

impl Resources {
    pub fn attempt_and_order(self) -> (Option<PaymentAttempt>, Option<Order>) {
        (
            self.attempt.map(Into::into),
            self.order.map(Order::from_row),
        )
    }
}

/// A replay's `jsonb` member: the attempt a key names, as it is now.
fn attempt_now(q: &mut Statement<'_>, merchant: Param) {
    q.push(format_args!(
        "'attempt', (
    SELECT to_jsonb(a) FROM payment_attempts a
    WHERE a.merchant_id = {merchant} AND a.id = found.resource_id)"
    ));
}

#[cfg(test)]
mod tests {
    use chrono::Utc;

    use super::*;
    use crate::db::snapshot::assert_sql_snapshot;
    use crate::idempotency::claim::snapshot::claim_text;
    use crate::idempotency::Operation;
    use crate::ids::OrderId;
    use crate::payments::orders::keyed::CreateOrder;
    use crate::payments::orders::OrderFields;

    #[test]
    fn the_claim_statements_of_a_payment_read_as_their_snapshots() {
        let attempt = || NewAttempt::new("pm_card_visa", "sandbox", Utc::now());
        let pay = PayOrder {
            order_id: OrderId::new(),
            attempt: attempt(),
        };
        assert_sql_snapshot(
            "claim_pay_order",
            &claim_text(Operation::CreatePayment, &pay),
        );
        let order = OrderFields {
            amount: Some(1999.into()),
            currency: Some("EUR".into()),
            ..OrderFields::default()
        }
        .validate()
        .expect("valid order");
        let checkout = Checkout {
            order: CreateOrder::new(&order),
            attempt: attempt(),
        };
        assert_sql_snapshot(
            "claim_checkout",
            &claim_text(Operation::Checkout, &checkout),
        );
    }
}
