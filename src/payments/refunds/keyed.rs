//! A refund's keyed operation (`POST /v1/payments/{id}/refunds`, step 1) as the SQL that runs
//! inside the claim statement of [`crate::idempotency::claim()`]: the refund, its timeline row
//! and the key in one statement.

use chrono::{DateTime, Utc};
use diesel::result::DatabaseErrorKind;
use diesel::sql_types::{BigInt, Nullable, Text, Timestamptz, Uuid as SqlUuid};
use serde::Deserialize;
use serde_json::Value;

use super::{provider_refund_key, Refund, RefundError, RefundRow, REFUND, REFUND_CREATED};
use crate::db::sql::Sql;
use crate::idempotency::{KeyedWork, RecordAs};
use crate::ids::{PaymentId, RefundId};

/// `POST /v1/payments/{id}/refunds`, step 1: the refund row, its timeline and the key, in
/// the claim statement. `amount` `None` is "what is left", decided by the trigger under the
/// payment's lock.
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

const REFUND_NOW: &str = "(SELECT to_jsonb(r) FROM refunds r \
     WHERE r.merchant_id = $2 AND r.id = found.resource_id)";

impl KeyedWork for CreateRefund<'_> {
    fn resource_type(&self) -> &'static str {
        REFUND
    }
    fn record_as(&self) -> RecordAs {
        RecordAs::InFlight {
            recovery_point: REFUND_CREATED,
        }
    }
    fn ctes(&self) -> String {
        // `order_id` and `currency` are the payment's, set by the trigger; a refund goes to
        // the provider that took the payment.
        "made_refund AS ( \
             INSERT INTO refunds (merchant_id, id, payment_id, order_id, status, amount, \
                 currency, reason, provider, provider_idempotency_key, idempotency_key, \
                 next_check_at) \
             SELECT $2, $14, $15, NULL, 'created', $16, NULL, $17, \
                 (SELECT provider FROM payment_attempts WHERE merchant_id = $2 AND id = $15), \
                 $18, $3, $19 \
             FROM go RETURNING *), \
         refund_timeline AS ( \
             INSERT INTO refund_events (merchant_id, refund_id, from_status, to_status, source) \
             SELECT merchant_id, id, NULL, 'created', 'api' FROM made_refund), \
         done AS (SELECT id AS resource_id FROM made_refund)"
            .into()
    }
    fn fresh(&self) -> String {
        "jsonb_build_object('refund', (SELECT to_jsonb(m) FROM made_refund m))".into()
    }
    fn replay(&self) -> String {
        format!("jsonb_build_object('refund', {REFUND_NOW})")
    }
    fn bind<'f>(&'f self, query: Sql<'f>) -> Sql<'f> {
        query
            .bind::<SqlUuid, _>(self.id.0)
            .bind::<SqlUuid, _>(self.payment_id.0)
            .bind::<Nullable<BigInt>, _>(self.amount)
            .bind::<Nullable<Text>, _>(self.reason)
            .bind::<Text, _>(&self.provider_key)
            .bind::<Timestamptz, _>(self.first_check_at)
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

pub(super) fn read_refund(value: Value) -> Result<Refund, RefundError> {
    #[derive(Deserialize)]
    struct Made {
        refund: Option<RefundRow>,
    }
    let made: Made = serde_json::from_value(value)
        .map_err(|err| RefundError::Inconsistent(format!("a refund read back: {err}")))?;
    made.refund
        .map(Refund::from)
        .ok_or_else(|| RefundError::Inconsistent("a refund key names no refund".into()))
}
