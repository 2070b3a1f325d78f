//! `POST /v1/payments/{id}/refunds`, step 1: the refund, its timeline row and the key, in the
//! claim statement (whole text: `tests/sql/claim_create_refund.sql`). `amount` `None` is
//! "what is left", decided by the trigger under the payment's lock.
//!
//! What it relies on (docs/DESIGN.md, "Refunds"): `refunds_hold_amount` locks the payment,
//! refuses a refund of a payment that did not succeed (`refunds_payment_refundable`) or past
//! what is left (`refunds_within_payment`), fills in the order and currency, and holds the
//! amount; the statement then fails whole and the caller says why.

use chrono::{DateTime, Utc};
use diesel::result::DatabaseErrorKind;
use diesel::sql_types::{BigInt, Nullable, Text, Timestamptz, Uuid as SqlUuid};

use super::RefundMade;
use crate::db::statement::{Param, Statement};
use crate::idempotency::{ClaimParams, KeyedWork, RecordAs, RecoveryPoint, ResourceType};
use crate::ids::{PaymentId, RefundId};
use crate::payments::attempts::Source;
use crate::payments::refunds::provider_refund_key;
use crate::payments::status::AttemptStatus;

/// `POST /v1/payments/{id}/refunds`, step 1.
pub struct CreateRefund<'a> {
    pub id: RefundId,
    pub payment_id: PaymentId,
    pub amount: Option<i64>,
    pub reason: Option<&'a str>,
    pub first_check_at: DateTime<Utc>,
    provider_key: String,
}

impl<'a> CreateRefund<'a> {
    pub fn new(
        payment_id: PaymentId,
        amount: Option<i64>,
        reason: Option<&'a str>,
        first_check_at: DateTime<Utc>,
    ) -> Self {
        let id = RefundId::new();
        CreateRefund {
            id,
            payment_id,
            amount,
            reason,
            first_check_at,
            provider_key: provider_refund_key(id),
        }
    }
}

impl KeyedWork for CreateRefund<'_> {
    type Made = RefundMade;

    fn resource_type(&self) -> ResourceType {
        ResourceType::Refund
    }
    fn record_as(&self) -> RecordAs {
        RecordAs::InFlight {
            recovery_point: RecoveryPoint::RefundCreated,
        }
    }
    fn ctes<'f>(&'f self, q: &mut Statement<'f>, claim: &ClaimParams) {
        let id = q.bind::<SqlUuid, _>(self.id.0);
        let payment = q.bind::<SqlUuid, _>(self.payment_id.0);
        let amount = q.bind::<Nullable<BigInt>, _>(self.amount);
        let reason = q.bind::<Nullable<Text>, _>(self.reason);
        let provider_key = q.bind::<Text, _>(&self.provider_key);
        let check = q.bind::<Timestamptz, _>(self.first_check_at);
        let ClaimParams { merchant, key } = *claim;
        // `order_id` and `currency` are the payment's, set by the trigger; a refund goes to
        // the provider that took the payment.
        q.push(format_args!(
            "made_refund AS (
    INSERT INTO refunds (merchant_id, id, payment_id, order_id, status, amount, currency,
        reason, provider, provider_idempotency_key, idempotency_key, next_check_at)
    SELECT {merchant}, {id}, {payment}, NULL, {created}, {amount}, NULL, {reason},
        (SELECT provider FROM payment_attempts WHERE merchant_id = {merchant} AND id = {payment}),
        {provider_key}, {key}, {check}
    FROM go RETURNING *),
refund_timeline AS (
    INSERT INTO refund_transitions (merchant_id, refund_id, from_status, to_status, source)
    SELECT merchant_id, id, NULL, status, {api} FROM made_refund),
done AS (SELECT id AS resource_id FROM made_refund)",
            created = AttemptStatus::Created.sql(),
            api = Source::Api.sql(),
        ));
    }
    fn fresh(&self, q: &mut Statement<'_>) {
        q.push("jsonb_build_object('refund', (SELECT to_jsonb(m) FROM made_refund m))");
    }
    fn replay(&self, q: &mut Statement<'_>, merchant: Param) {
        q.push(format_args!(
            "jsonb_build_object('refund', (
    SELECT to_jsonb(r) FROM refunds r
    WHERE r.merchant_id = {merchant} AND r.id = found.resource_id))"
        ));
    }
    fn is_refusal(&self, kind: &DatabaseErrorKind, constraint: Option<&str>) -> bool {
        matches!(
            (kind, constraint),
            (
                DatabaseErrorKind::CheckViolation,
                Some("refunds_payment_refundable" | "refunds_within_payment")
            )
        )
    }
}
