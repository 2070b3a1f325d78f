//! `POST /v1/checkout`, transaction 1 for a new order: the order, its first attempt, the
//! timeline row and the key, in the claim statement (whole text:
//! `tests/sql/claim_checkout.sql`). The order is inserted as `POST /v1/orders` inserts it
//! ([`crate::payments::orders::keyed::insert_order`]), so its reference is refused the same
//! way; the attempt as every attempt is ([`super::new_attempt`]).

use diesel::result::DatabaseErrorKind;

use super::{attempt_now, NewAttempt, Resources};
use crate::db::statement::{Param, Statement};
use crate::idempotency::{ClaimParams, KeyedWork, RecordAs, RecoveryPoint, ResourceType};
use crate::payments::orders::keyed::{insert_order, is_reference_taken, CreateOrder};

/// `POST /v1/checkout`.
pub struct Checkout<'a> {
    pub order: CreateOrder<'a>,
    pub attempt: NewAttempt<'a>,
}

impl KeyedWork for Checkout<'_> {
    type Made = Resources;

    fn resource_type(&self) -> ResourceType {
        ResourceType::PaymentAttempt
    }
    fn record_as(&self) -> RecordAs {
        RecordAs::InFlight {
            recovery_point: RecoveryPoint::AttemptCreated,
        }
    }
    fn ctes<'f>(&'f self, q: &mut Statement<'f>, claim: &ClaimParams) {
        insert_order(q, claim.merchant, &self.order, "go");
        q.push(",\n");
        self.attempt
            .insert(q, claim.merchant, claim.key, "made_order", "made_order.id");
    }
    fn fresh(&self, q: &mut Statement<'_>) {
        q.push(
            "jsonb_build_object('order', (SELECT to_jsonb(m) FROM made_order m),
                   'attempt', (SELECT to_jsonb(m) FROM made_attempt m))",
        );
    }
    fn replay(&self, q: &mut Statement<'_>, merchant: Param) {
        q.push(format_args!(
            "jsonb_build_object('order', (
    SELECT to_jsonb(o) FROM orders o JOIN payment_attempts a
        ON a.merchant_id = o.merchant_id AND a.order_id = o.id
    WHERE a.merchant_id = {merchant} AND a.id = found.resource_id), "
        ));
        attempt_now(q, merchant);
        q.push(")");
    }
    fn is_refusal(&self, kind: &DatabaseErrorKind, constraint: Option<&str>) -> bool {
        is_reference_taken(kind, constraint)
    }
}
