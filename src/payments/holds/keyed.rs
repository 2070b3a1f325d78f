//! `POST /v1/payments/{id}/capture` and `…/cancel`, step 1: the operation `created` and the
//! key, in the claim statement (whole text: `tests/sql/claim_capture_payment.sql`). The
//! database decides whether the hold may take it (`hold_operations_check_hold`: a capture of
//! a manual `authorized` payment within its amount, a void of an `authorized` or `pending`
//! one; `hold_operations_one_per_hold`: no second live operation); the statement then fails
//! whole, nothing is recorded, and the caller says why.

use chrono::{DateTime, Utc};
use diesel::result::DatabaseErrorKind;
use diesel::sql_types::{BigInt, Nullable, Text, Timestamptz, Uuid as SqlUuid};
use serde::Deserialize;

use super::{provider_hold_key, HoldKind, HoldOperation, HoldOperationRow};
use crate::db::statement::{Param, Statement};
use crate::idempotency::{ClaimParams, KeyedWork, RecordAs, RecoveryPoint, ResourceType};
use crate::ids::{HoldOperationId, PaymentId};
use crate::payments::attempts::{AttemptRow, PaymentAttempt, Source};
use crate::payments::status::AttemptStatus;

/// A capture or void of `payment_id`'s hold, asked for by `source`.
pub struct StartHoldOperation<'a> {
    pub id: HoldOperationId,
    pub payment_id: PaymentId,
    pub kind: HoldKind,
    /// A capture's amount; `None`: the whole hold (or a void).
    pub amount: Option<i64>,
    pub source: Source,
    pub reason: Option<&'a str>,
    pub first_check_at: DateTime<Utc>,
    provider_key: String,
}

impl<'a> StartHoldOperation<'a> {
    pub fn new(
        payment_id: PaymentId,
        kind: HoldKind,
        amount: Option<i64>,
        source: Source,
        reason: Option<&'a str>,
        first_check_at: DateTime<Utc>,
    ) -> Self {
        let id = HoldOperationId::new();
        StartHoldOperation {
            id,
            payment_id,
            kind,
            amount,
            source,
            reason,
            first_check_at,
            provider_key: provider_hold_key(id),
        }
    }

    /// The CTE `made_operation` from the rows of `from`, for the merchant `merchant`, recording
    /// the client's key `key` (an SQL expression; `NULL` for the reconciler's own voids).
    pub(super) fn insert<'f>(
        &'f self,
        q: &mut Statement<'f>,
        merchant: Param,
        key: &str,
        from: &str,
    ) {
        let id = q.bind::<SqlUuid, _>(self.id.0);
        let payment = q.bind::<SqlUuid, _>(self.payment_id.0);
        let kind = q.bind::<Text, _>(self.kind.as_str());
        let amount = q.bind::<Nullable<BigInt>, _>(self.amount);
        let source = q.bind::<Text, _>(self.source.as_str());
        let reason = q.bind::<Nullable<Text>, _>(self.reason);
        let provider_key = q.bind::<Text, _>(&self.provider_key);
        let check = q.bind::<Timestamptz, _>(self.first_check_at);
        // `order_id`, `currency`, `provider` and a whole-hold amount are the payment's, set by
        // the trigger under the payment's row lock.
        q.push(format_args!(
            "made_operation AS (
    INSERT INTO hold_operations (merchant_id, id, payment_id, order_id, kind, status, amount,
        currency, provider, provider_idempotency_key, source, reason, idempotency_key,
        next_check_at)
    SELECT {merchant}, {id}, {payment}, NULL, {kind}, {created}, {amount}, NULL, NULL,
        {provider_key}, {source}, {reason}, {key}, {check}
    FROM {from} RETURNING *)",
            created = AttemptStatus::Created.sql(),
        ));
    }
}

impl KeyedWork for StartHoldOperation<'_> {
    type Made = HoldMade;

    fn resource_type(&self) -> ResourceType {
        ResourceType::HoldOperation
    }
    fn record_as(&self) -> RecordAs {
        RecordAs::InFlight {
            recovery_point: RecoveryPoint::HoldOperationCreated,
        }
    }
    fn ctes<'f>(&'f self, q: &mut Statement<'f>, claim: &ClaimParams) {
        let ClaimParams { merchant, key } = *claim;
        self.insert(q, merchant, &key.to_string(), "go");
        q.push(",\ndone AS (SELECT id AS resource_id FROM made_operation)");
    }
    fn fresh(&self, q: &mut Statement<'_>) {
        q.push(
            "jsonb_build_object('operation', (SELECT to_jsonb(m) FROM made_operation m),
    'payment', (SELECT to_jsonb(a) FROM payment_attempts a, made_operation m
        WHERE a.merchant_id = m.merchant_id AND a.id = m.payment_id))",
        );
    }
    fn replay(&self, q: &mut Statement<'_>, merchant: Param) {
        q.push(format_args!(
            "(SELECT jsonb_build_object('operation', to_jsonb(o), 'payment', to_jsonb(a))
    FROM hold_operations o JOIN payment_attempts a
        ON a.merchant_id = o.merchant_id AND a.id = o.payment_id
    WHERE o.merchant_id = {merchant} AND o.id = found.resource_id)"
        ));
    }
    fn is_refusal(&self, kind: &DatabaseErrorKind, constraint: Option<&str>) -> bool {
        self.refuses(kind, constraint)
    }
}

impl StartHoldOperation<'_> {
    /// Whether a failed insert is the database refusing the operation: the hold cannot take
    /// it, or already has a live one.
    pub(super) fn refuses(&self, kind: &DatabaseErrorKind, constraint: Option<&str>) -> bool {
        matches!(
            (kind, constraint),
            (
                DatabaseErrorKind::CheckViolation,
                Some("hold_operations_payment_held" | "hold_operations_capture_within_hold")
            ) | (
                DatabaseErrorKind::UniqueViolation,
                Some("hold_operations_one_per_hold")
            )
        )
    }
}

/// What an operation's claim statement made, or its replay read.
#[derive(Default, Deserialize)]
pub struct HoldMade {
    operation: Option<HoldOperationRow>,
    payment: Option<AttemptRow>,
}

impl HoldMade {
    pub fn parts(self) -> Option<(HoldOperation, PaymentAttempt)> {
        Some((self.operation?.into(), self.payment?.into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::snapshot::assert_sql_snapshot;
    use crate::idempotency::claim::snapshot::claim_text;
    use crate::idempotency::Operation;

    #[test]
    fn the_claim_statement_of_a_capture_reads_as_its_snapshot() {
        let work = StartHoldOperation::new(
            PaymentId::new(),
            HoldKind::Capture,
            Some(500),
            Source::Api,
            None,
            Utc::now(),
        );
        assert_sql_snapshot(
            "claim_capture_payment",
            &claim_text(Operation::CapturePayment, &work),
        );
    }
}
