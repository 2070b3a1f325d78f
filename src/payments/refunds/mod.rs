//! Refunds (docs/guides/refunds.md, "Refunds"; docs/DESIGN.md, "Refunds"): money given back from a
//! succeeded attempt, under the same guarantees as a charge.
//!
//! The flow is the payment flow's:
//! 1. One statement (the claim of [`crate::idempotency::claim()`] with [`keyed::CreateRefund`]): the
//!    key, the refund `created` and its timeline row, committed before the provider hears of
//!    it. The refunds migration's trigger holds the refund's amount on its payment's row in
//!    that same statement, or refuses it: never more back than was taken, whatever races.
//! 2. The provider call with the refund's own provider idempotency key.
//! 3. One statement ([`record`]): the outcome, the timeline, the provider call log and the key.
//!
//! A refund moves by the same state machine as an attempt (`created → pending → succeeded |
//! failed`), so it uses the attempt's status type and the same decision
//! ([`crate::payments::attempts::transition::decide`]). An unknown outcome stays `pending`, holding its amount,
//! and [`reconcile::check`] settles it later: by the provider's refund id when known, else by resending
//! under the same key inside the provider's key window.

/// A refund's open statuses as an SQL list: the words of an attempt's, without the hold, and
/// word for word the predicate of the `refunds_due` index.
macro_rules! open_refund_statuses {
    () => {
        "('created', 'pending')"
    };
}
pub(crate) use open_refund_statuses;

pub mod keyed;
pub mod reconcile;
pub mod record;
pub mod refund;

use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use serde::Deserialize;
use uuid::Uuid;

use crate::db::schema::{refund_transitions, refunds};
use crate::db::scope::find_in_scope;
use crate::db::PgConn;
use crate::idempotency::IdempotencyError;
use crate::ids::{MerchantId, OrderId, PaymentId, RefundId};
use crate::payments::attempts::find_attempt;
use crate::payments::orders::FieldProblems;
use crate::payments::status::AttemptStatus;
use crate::providers::RefundRequest;

/// A refund.
#[derive(Debug, Clone)]
pub struct Refund {
    pub id: RefundId,
    pub merchant_id: MerchantId,
    /// The succeeded attempt it gives money back from.
    pub payment_id: PaymentId,
    pub order_id: OrderId,
    pub status: AttemptStatus,
    pub amount: i64,
    pub currency: String,
    pub reason: Option<String>,
    pub provider: String,
    pub provider_idempotency_key: String,
    pub provider_refund_id: Option<String>,
    pub failure_code: Option<String>,
    pub failure_message: Option<String>,
    pub idempotency_key: Option<String>,
    pub next_check_at: Option<DateTime<Utc>>,
    /// How many times it was checked after its request: its backoff.
    pub checks: i32,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
}

/// The row as the table holds it; also read from `to_jsonb` of a row.
#[derive(Queryable, Selectable, QueryableByName, Deserialize)]
#[diesel(table_name = refunds)]
pub struct RefundRow {
    merchant_id: Uuid,
    id: Uuid,
    payment_id: Uuid,
    order_id: Uuid,
    status: AttemptStatus,
    amount: i64,
    currency: String,
    reason: Option<String>,
    provider: String,
    provider_idempotency_key: String,
    provider_refund_id: Option<String>,
    failure_code: Option<String>,
    failure_message: Option<String>,
    idempotency_key: Option<String>,
    next_check_at: Option<DateTime<Utc>>,
    checks: i32,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
    finished_at: Option<DateTime<Utc>>,
}

impl From<RefundRow> for Refund {
    fn from(row: RefundRow) -> Self {
        Refund {
            id: RefundId(row.id),
            merchant_id: MerchantId(row.merchant_id),
            payment_id: PaymentId(row.payment_id),
            order_id: OrderId(row.order_id),
            status: row.status,
            amount: row.amount,
            currency: row.currency,
            reason: row.reason,
            provider: row.provider,
            provider_idempotency_key: row.provider_idempotency_key,
            provider_refund_id: row.provider_refund_id,
            failure_code: row.failure_code,
            failure_message: row.failure_message,
            idempotency_key: row.idempotency_key,
            next_check_at: row.next_check_at,
            checks: row.checks,
            created_at: row.created_at,
            updated_at: row.updated_at,
            finished_at: row.finished_at,
        }
    }
}

/// The provider key of a refund: derived from its id, the same on every resend.
pub fn provider_refund_key(id: RefundId) -> String {
    format!("payorch_{id}")
}

/// Why a refund was not made.
#[derive(Debug, thiserror::Error)]
pub enum RefundError {
    #[error("the request's fields do not hold: {0:?}")]
    Invalid(FieldProblems),
    #[error(transparent)]
    Idempotency(#[from] IdempotencyError),
    #[error("no such payment")]
    PaymentNotFound,
    #[error("the payment is {}; only a succeeded payment can be refunded", status.as_str())]
    NotRefundable { status: AttemptStatus },
    #[error("more than the {refundable} left to refund")]
    ExceedsPayment { refundable: i64 },
    #[error(transparent)]
    Unavailable(#[from] crate::db::pool::PoolError),
    #[error(transparent)]
    Database(#[from] diesel::result::Error),
    #[error("{0}")]
    Inconsistent(String),
}

/// The answer to a refund request.
#[derive(Debug)]
pub struct Refunded {
    /// The refund as it is now.
    pub refund: Refund,
    pub status: u16,
    pub replayed: bool,
}

/// The request the provider gets for `refund`, the same on every resend.
async fn refund_request(conn: &mut PgConn, refund: &Refund) -> Result<RefundRequest, RefundError> {
    let payment = find_attempt(conn, Some(refund.merchant_id), refund.payment_id)
        .await?
        .ok_or_else(|| RefundError::Inconsistent("a refund lost its payment".into()))?;
    let provider_payment_id = payment.provider_payment_id.ok_or_else(|| {
        RefundError::Inconsistent("a succeeded payment has no provider charge id".into())
    })?;
    Ok(RefundRequest {
        provider_payment_id,
        amount: refund.amount,
        currency: payment.currency.clone(),
        idempotency_key: refund.provider_idempotency_key.clone(),
        refund_id: refund.id.to_string(),
        payment_id: refund.payment_id.to_string(),
        merchant_id: refund.merchant_id.to_string(),
        reason: refund.reason.clone(),
    })
}

/// A refund by id; `scope` `None` is support's view across merchants.
pub async fn find_refund(
    conn: &mut PgConn,
    scope: Option<MerchantId>,
    id: RefundId,
) -> QueryResult<Option<Refund>> {
    let query = refunds::table.select(RefundRow::as_select()).into_boxed();
    let id = refunds::id.eq(id.0);
    let row = find_in_scope(conn, query, id, refunds::merchant_id, scope);
    Ok(row.await?.map(RefundRow::into))
}

/// One line of a refund's timeline.
#[derive(Debug, Clone, Queryable, Selectable)]
#[diesel(table_name = refund_transitions)]
pub struct RefundTimelineEntry {
    pub refund_id: Uuid,
    pub from_status: Option<String>,
    pub to_status: String,
    pub source: String,
    pub detail: Option<String>,
    pub created_at: DateTime<Utc>,
}

/// Every move of a payment's refunds, in order.
pub async fn refund_timeline(
    conn: &mut PgConn,
    merchant_id: MerchantId,
    payment_id: PaymentId,
) -> QueryResult<Vec<RefundTimelineEntry>> {
    refund_transitions::table
        .inner_join(
            refunds::table.on(refunds::merchant_id
                .eq(refund_transitions::merchant_id)
                .and(refunds::id.eq(refund_transitions::refund_id))),
        )
        .filter(refund_transitions::merchant_id.eq(merchant_id.0))
        .filter(refunds::payment_id.eq(payment_id.0))
        .order(refund_transitions::id)
        .select(RefundTimelineEntry::as_select())
        .load(conn)
        .await
}

/// A payment's refunds, oldest first.
pub async fn refunds_of_payment(
    conn: &mut PgConn,
    merchant_id: MerchantId,
    payment_id: PaymentId,
) -> QueryResult<Vec<Refund>> {
    Ok(refunds::table
        .filter(refunds::merchant_id.eq(merchant_id.0))
        .filter(refunds::payment_id.eq(payment_id.0))
        .order(refunds::created_at)
        .select(RefundRow::as_select())
        .load(conn)
        .await?
        .into_iter()
        .map(Into::into)
        .collect())
}
