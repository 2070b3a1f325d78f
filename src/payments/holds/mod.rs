//! Captures and voids of a payment's hold (docs/guides/captures.md, "Authorize now, capture later";
//! docs/DESIGN.md, "Holds and challenges"). Each is a row of `hold_operations` and one
//! provider call under the operation's own key, made like a refund: (1) the key and the
//! operation `created`, in the claim statement ([`keyed`]); (2) the call; (3) its answer
//! ([`record`]). An answer that leaves doubt keeps the operation open, and the reconciler
//! asks again under the same key ([`reconcile`]); never a second capture under another key.
//!
//! The database holds the rules whatever writes the rows: one operation per hold that has not
//! definitively failed (`hold_operations_one_per_hold`), a capture only of a manual
//! `authorized` payment and within its amount (`hold_operations_check_hold`).

pub mod keyed;
pub mod operate;
pub mod reconcile;
pub mod record;

use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use serde::Deserialize;
use uuid::Uuid;

use crate::db::pool::PoolError;
use crate::db::schema::hold_operations;
use crate::db::PgConn;
use crate::idempotency::IdempotencyError;
use crate::ids::{HoldOperationId, MerchantId, OrderId, PaymentId};
use crate::payments::orders::FieldProblems;
use crate::payments::status::AttemptStatus;
use crate::payments::PaymentAttempt;
use crate::providers::{CancelRequest, CaptureRequest};
use crate::words::words;

words! {
    /// A hold's operation: take (part of) the money, or release all of it.
    pub enum HoldKind {
        Capture => "capture",
        Void => "void",
    }
}

/// Why a void was asked for; the payment's `cancellation_reason` once it is done.
pub mod reason {
    /// The merchant or support released the hold.
    pub const VOIDED: &str = "voided";
    /// The payer never finished a 3-D Secure challenge.
    pub const CHALLENGE_ABANDONED: &str = "challenge_abandoned";
    /// The hold reached the end of its lifetime uncaptured.
    pub const AUTHORIZATION_EXPIRED: &str = "authorization_expired";
    /// A provider without lookups never told the outcome: canceled by payorch's reference
    /// (Adyen's technical cancel).
    pub const OUTCOME_UNKNOWN: &str = "outcome_unknown";
}

/// One capture or void.
#[derive(Debug, Clone)]
pub struct HoldOperation {
    pub id: HoldOperationId,
    pub merchant_id: MerchantId,
    pub payment_id: PaymentId,
    pub order_id: OrderId,
    pub kind: HoldKind,
    /// `created → pending → succeeded | failed`, as a refund's.
    pub status: AttemptStatus,
    /// A capture's amount; `None` for a void.
    pub amount: Option<i64>,
    pub currency: String,
    pub provider: String,
    pub provider_idempotency_key: String,
    pub failure_code: Option<String>,
    pub failure_message: Option<String>,
    /// Who asked for it (`api`, `support`, `reconciler`).
    pub source: String,
    /// For a void: why (see [`reason`]).
    pub reason: Option<String>,
    pub idempotency_key: Option<String>,
    pub next_check_at: Option<DateTime<Utc>>,
    pub checks: i32,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
}

/// The row as the table holds it; also read from `to_jsonb` of a row.
#[derive(Queryable, Selectable, QueryableByName, Deserialize)]
#[diesel(table_name = hold_operations)]
pub struct HoldOperationRow {
    merchant_id: Uuid,
    id: Uuid,
    payment_id: Uuid,
    order_id: Uuid,
    kind: String,
    status: AttemptStatus,
    amount: Option<i64>,
    currency: String,
    provider: String,
    provider_idempotency_key: String,
    failure_code: Option<String>,
    failure_message: Option<String>,
    source: String,
    reason: Option<String>,
    idempotency_key: Option<String>,
    next_check_at: Option<DateTime<Utc>>,
    checks: i32,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
    finished_at: Option<DateTime<Utc>>,
}

impl From<HoldOperationRow> for HoldOperation {
    fn from(row: HoldOperationRow) -> Self {
        HoldOperation {
            id: HoldOperationId(row.id),
            merchant_id: MerchantId(row.merchant_id),
            payment_id: PaymentId(row.payment_id),
            order_id: OrderId(row.order_id),
            // The domain `hold_operation_kind` admits only the two words.
            kind: HoldKind::parse(&row.kind).unwrap_or(HoldKind::Void),
            status: row.status,
            amount: row.amount,
            currency: row.currency,
            provider: row.provider,
            provider_idempotency_key: row.provider_idempotency_key,
            failure_code: row.failure_code,
            failure_message: row.failure_message,
            source: row.source,
            reason: row.reason,
            idempotency_key: row.idempotency_key,
            next_check_at: row.next_check_at,
            checks: row.checks,
            created_at: row.created_at,
            updated_at: row.updated_at,
            finished_at: row.finished_at,
        }
    }
}

/// The provider key of an operation: derived from its id, the same on every resend.
pub fn provider_hold_key(id: HoldOperationId) -> String {
    format!("payorch_{id}")
}

/// What a capture or void request came to.
#[derive(Debug)]
pub struct Operated {
    pub operation: HoldOperation,
    /// The payment as it is after the operation's answer.
    pub payment: PaymentAttempt,
    pub status: u16,
    pub replayed: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum HoldError {
    #[error("the request's fields do not hold: {0:?}")]
    Invalid(FieldProblems),
    #[error(transparent)]
    Idempotency(#[from] IdempotencyError),
    #[error("no such payment")]
    PaymentNotFound,
    /// The payment holds nothing this operation could take or release.
    #[error("payment is {}", status.as_str())]
    NotHeld {
        kind: HoldKind,
        status: AttemptStatus,
    },
    /// Another capture or void of this hold is under way or done.
    #[error("another operation of this hold is under way")]
    InProgress { operation: HoldOperationId },
    #[error("a capture of more than the {capturable} authorized")]
    ExceedsHold { capturable: i64 },
    #[error(transparent)]
    Unavailable(#[from] PoolError),
    #[error(transparent)]
    Database(#[from] diesel::result::Error),
    #[error("{0}")]
    Inconsistent(String),
}

/// The operations of a payment, oldest first.
pub async fn operations_of_payment(
    conn: &mut PgConn,
    merchant_id: MerchantId,
    payment_id: PaymentId,
) -> QueryResult<Vec<HoldOperation>> {
    let rows: Vec<HoldOperationRow> = hold_operations::table
        .filter(hold_operations::merchant_id.eq(merchant_id.0))
        .filter(hold_operations::payment_id.eq(payment_id.0))
        .order(hold_operations::created_at)
        .select(HoldOperationRow::as_select())
        .load(conn)
        .await?;
    Ok(rows.into_iter().map(Into::into).collect())
}

/// The provider call of `operation` on `payment`: a capture of its amount, or a cancel.
pub(crate) enum HoldCall {
    Capture(CaptureRequest),
    Cancel(CancelRequest),
}

pub(crate) fn hold_call(operation: &HoldOperation, payment: &PaymentAttempt) -> HoldCall {
    match operation.kind {
        HoldKind::Capture => HoldCall::Capture(CaptureRequest {
            provider_payment_id: payment.provider_payment_id.clone().unwrap_or_default(),
            amount: operation.amount.unwrap_or(payment.amount),
            currency: operation.currency.clone(),
            idempotency_key: operation.provider_idempotency_key.clone(),
            attempt_id: payment.id.to_string(),
            merchant_id: payment.merchant_id.to_string(),
        }),
        HoldKind::Void => HoldCall::Cancel(CancelRequest {
            provider_payment_id: payment.provider_payment_id.clone(),
            idempotency_key: operation.provider_idempotency_key.clone(),
            attempt_id: payment.id.to_string(),
            merchant_id: payment.merchant_id.to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::HoldKind;

    #[test]
    fn every_hold_kind_reads_back_as_itself() {
        for k in HoldKind::ALL {
            assert_eq!(HoldKind::parse(k.as_str()), Some(k));
        }
    }
}
