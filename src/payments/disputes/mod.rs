//! Disputes (docs/guides/disputes.md): a payer's bank asks about a payment (an inquiry) or
//! takes its money back (a chargeback). The providers' dispute events are folded into one
//! state machine, Stripe's seven statuses, that the `…_disputes` migration enforces: its
//! triggers refuse any other move, keep what a dispute holds on its payment's row
//! (`payment_attempts.dispute_held`) under the lock a refund takes, so the refund cap counts
//! it, flag a dispute that comes on refunded money, and tell the merchant (`dispute.*`).
//!
//! [`apply`] folds a provider's notice into a dispute; [`moves`] is the judgement it makes
//! first (the same rules as the database's guard); [`advice`] says what to do now. The reads
//! here ([`find`], [`list`], [`of_payment`], [`transitions_of`]) are what the API shows.

pub mod advice;
pub mod apply;
pub mod keyed;
pub mod moves;

use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::db::schema::{dispute_transitions, disputes};
use crate::db::PgConn;
use crate::ids::{DisputeId, MerchantId, OrderId, PaymentId};
pub use crate::providers::dispute::{DisputeReason, DisputeStage, DisputeStatus};

/// The row as the table holds it; also read from `to_jsonb` of a row (an event's snapshot).
#[derive(Debug, Clone, Queryable, Selectable, Deserialize)]
#[diesel(table_name = disputes)]
pub struct DisputeRow {
    pub merchant_id: Uuid,
    pub id: Uuid,
    pub attempt_id: Uuid,
    pub order_id: Uuid,
    pub provider: String,
    pub provider_dispute_id: String,
    pub provider_payment_id: String,
    pub status: String,
    pub stage: String,
    pub amount: i64,
    pub currency: String,
    pub reason: String,
    pub provider_reason: String,
    pub evidence_due_by: Option<DateTime<Utc>>,
    pub refunded_before: i64,
    pub overlap: i64,
    pub provider_updated_at: DateTime<Utc>,
    pub evidence_submitted_at: Option<DateTime<Utc>>,
    pub opened_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub closed_at: Option<DateTime<Utc>>,
}

/// A dispute as the API shows it (`GET /v1/disputes/{id}`, a `dispute.*` event's object).
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct DisputeView {
    pub id: DisputeId,
    /// Always `dispute`.
    pub object: &'static str,
    /// The payment disputed.
    pub payment_id: PaymentId,
    pub order_id: OrderId,
    pub provider: String,
    /// The provider's id of the dispute (Stripe `du_…`, Adyen's dispute pspReference).
    pub provider_dispute_id: String,
    pub status: DisputeStatus,
    pub stage: DisputeStage,
    /// What the bank disputes, in minor units: taken back while the status is
    /// `needs_response`, `under_review` or `lost`.
    pub amount: i64,
    pub currency: String,
    pub reason: DisputeReason,
    /// The provider's own reason (Stripe's word; Adyen's scheme code and text).
    pub provider_reason: String,
    /// Answer before this, or the dispute is lost; `null` when no answer is allowed.
    pub evidence_due_by: Option<DateTime<Utc>>,
    /// What refunds of the payment held when the dispute started taking money back.
    pub refunded_before: i64,
    /// The part of the dispute that returns money a refund already returned: lost twice
    /// unless the dispute is won (answer with the refund as evidence).
    pub overlap: i64,
    /// What to do now, in a sentence.
    pub advice: String,
    pub evidence_submitted_at: Option<DateTime<Utc>>,
    pub opened_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub closed_at: Option<DateTime<Utc>>,
}

impl From<DisputeRow> for DisputeView {
    fn from(row: DisputeRow) -> Self {
        // The database's domains hold these to the words; a word this version lacks (a newer
        // replica's) shows as the nearest that says least.
        let status = DisputeStatus::parse(&row.status).unwrap_or(DisputeStatus::UnderReview);
        let stage = DisputeStage::parse(&row.stage).unwrap_or(DisputeStage::Chargeback);
        let reason = DisputeReason::parse(&row.reason).unwrap_or(DisputeReason::General);
        let advice = advice::advice(status, row.overlap, row.evidence_submitted_at.is_some());
        DisputeView {
            id: DisputeId(row.id),
            object: "dispute",
            payment_id: PaymentId(row.attempt_id),
            order_id: OrderId(row.order_id),
            provider: row.provider,
            provider_dispute_id: row.provider_dispute_id,
            status,
            stage,
            amount: row.amount,
            currency: row.currency,
            reason,
            provider_reason: row.provider_reason,
            evidence_due_by: row.evidence_due_by,
            refunded_before: row.refunded_before,
            overlap: row.overlap,
            advice: advice.to_owned(),
            evidence_submitted_at: row.evidence_submitted_at,
            opened_at: row.opened_at,
            updated_at: row.updated_at,
            closed_at: row.closed_at,
        }
    }
}

/// One move of a dispute, as its timeline shows it.
#[derive(Debug, Clone, Queryable, Selectable)]
#[diesel(table_name = dispute_transitions)]
pub struct DisputeTransition {
    pub from_status: Option<String>,
    pub to_status: String,
    pub stage: String,
    pub source: String,
    pub detail: Option<String>,
    pub created_at: DateTime<Utc>,
}

/// What `GET /v1/disputes` filters by; every filter given must hold.
#[derive(Debug, Clone, Default)]
pub struct DisputeFilter {
    pub status: Option<DisputeStatus>,
    pub payment_id: Option<PaymentId>,
    pub provider: Option<String>,
    /// Opened at or after.
    pub created_gte: Option<DateTime<Utc>>,
    /// Opened at or before.
    pub created_lte: Option<DateTime<Utc>>,
}

/// A page of the list: newest first, after the cursor dispute (the previous page's last).
#[derive(Debug, Clone, Copy)]
pub struct Page {
    pub starting_after: Option<DisputeId>,
    pub limit: i64,
}

/// The dispute `id` of `scope`'s merchant; `None`: of any merchant (a support key's read, by
/// `disputes_id`).
pub async fn find(
    conn: &mut PgConn,
    scope: Option<MerchantId>,
    id: DisputeId,
) -> QueryResult<Option<DisputeView>> {
    let mut query = disputes::table
        .filter(disputes::id.eq(id.0))
        .select(DisputeRow::as_select())
        .into_boxed();
    if let Some(merchant) = scope {
        query = query.filter(disputes::merchant_id.eq(merchant.0));
    }
    query
        .load(conn)
        .await
        .map(|rows| rows.into_iter().next().map(Into::into))
}

/// Up to `page.limit` disputes of `scope`'s merchant (`None`: every merchant's, for support)
/// matching `filter`, newest first. Ids are time-ordered (UUIDv7), so the cursor is the id
/// itself: a dispute opened while someone pages sorts before every cursor, and a page never
/// repeats or skips one.
pub async fn list(
    conn: &mut PgConn,
    scope: Option<MerchantId>,
    filter: &DisputeFilter,
    page: Page,
) -> QueryResult<Vec<DisputeView>> {
    let mut query = disputes::table
        .select(DisputeRow::as_select())
        .order(disputes::id.desc())
        .limit(page.limit)
        .into_boxed();
    if let Some(merchant) = scope {
        query = query.filter(disputes::merchant_id.eq(merchant.0));
    }
    if let Some(after) = page.starting_after {
        query = query.filter(disputes::id.lt(after.0));
    }
    if let Some(status) = filter.status {
        query = query.filter(disputes::status.eq(status.as_str()));
    }
    if let Some(payment) = filter.payment_id {
        query = query.filter(disputes::attempt_id.eq(payment.0));
    }
    if let Some(provider) = &filter.provider {
        query = query.filter(disputes::provider.eq(provider.clone()));
    }
    if let Some(from) = filter.created_gte {
        query = query.filter(disputes::opened_at.ge(from));
    }
    if let Some(to) = filter.created_lte {
        query = query.filter(disputes::opened_at.le(to));
    }
    let rows = query.load(conn).await?;
    Ok(rows.into_iter().map(Into::into).collect())
}

/// The disputes of one payment, oldest first (a payment may be disputed again after an
/// inquiry closed, or in part twice).
pub async fn of_payment(
    conn: &mut PgConn,
    merchant: MerchantId,
    payment: PaymentId,
) -> QueryResult<Vec<DisputeView>> {
    let rows = disputes::table
        .filter(disputes::merchant_id.eq(merchant.0))
        .filter(disputes::attempt_id.eq(payment.0))
        .order(disputes::id)
        .select(DisputeRow::as_select())
        .load(conn)
        .await?;
    Ok(rows.into_iter().map(Into::into).collect())
}

/// A dispute's timeline, oldest first (the support story).
pub async fn transitions_of(
    conn: &mut PgConn,
    merchant: MerchantId,
    id: DisputeId,
) -> QueryResult<Vec<DisputeTransition>> {
    dispute_transitions::table
        .filter(dispute_transitions::merchant_id.eq(merchant.0))
        .filter(dispute_transitions::dispute_id.eq(id.0))
        .order(dispute_transitions::id)
        .select(DisputeTransition::as_select())
        .load(conn)
        .await
}
