//! `POST /v1/orders/{id}/payments`, transaction 1 for an existing order: the attempt, its
//! timeline row and the key, in the claim statement (whole text:
//! `tests/sql/claim_pay_order.sql`; docs/DESIGN.md, "A payment: two transactions and one
//! provider call"). The order's trigger refuses an order that cannot take an attempt (see
//! [`super::new_attempt`]); the statement then fails whole and the caller says why.

use diesel::result::DatabaseErrorKind;
use diesel::sql_types::Uuid as SqlUuid;

use super::{attempt_now, NewAttempt, Resources};
use crate::db::statement::{Param, Statement};
use crate::idempotency::{ClaimParams, KeyedWork, RecordAs, RecoveryPoint, ResourceType};
use crate::ids::OrderId;
use crate::payments::attempts::refuses_attempt;

/// `POST /v1/orders/{id}/payments`.
pub struct PayOrder<'a> {
    pub order_id: OrderId,
    pub attempt: NewAttempt<'a>,
}

impl KeyedWork for PayOrder<'_> {
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
        let order_id = q.bind::<SqlUuid, _>(self.order_id.0);
        let order_id = order_id.to_string();
        self.attempt
            .insert(q, claim.merchant, claim.key, "go", &order_id);
    }
    fn fresh(&self, q: &mut Statement<'_>) {
        q.push("jsonb_build_object('attempt', (SELECT to_jsonb(m) FROM made_attempt m))");
    }
    fn replay(&self, q: &mut Statement<'_>, merchant: Param) {
        q.push("jsonb_build_object(");
        attempt_now(q, merchant);
        q.push(")");
    }
    fn is_refusal(&self, kind: &DatabaseErrorKind, constraint: Option<&str>) -> bool {
        refuses_attempt(kind, constraint)
    }
}
