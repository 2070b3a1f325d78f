//! Refunds (README, "Refunds"; docs/DESIGN.md, "Refunds"): money given back from a
//! succeeded attempt, under the same guarantees as a charge.
//!
//! The flow is the payment flow's:
//! 1. One statement (the claim of [`crate::idempotency::claim`] with [`CreateRefund`]): the
//!    key, the refund `created` and its timeline row, committed before the provider hears of
//!    it. The refunds migration's trigger holds the refund's amount on its payment's row in
//!    that same statement, or refuses it: never more back than was taken, whatever races.
//! 2. The provider call with the refund's own provider idempotency key.
//! 3. One transaction: the outcome, the timeline, the provider call log and the key.
//!
//! A refund moves by the same state machine as an attempt (`created → pending → succeeded |
//! failed`), so it uses the attempt's status type and the same decision
//! ([`super::transition::decide`]). An unknown outcome stays `pending`, holding its amount,
//! and [`check`] settles it later: by the provider's refund id when known, else by resending
//! under the same key inside the provider's key window.

use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel::result::DatabaseErrorKind;
use diesel::sql_types::{BigInt, Interval, Nullable, Text, Timestamptz, Uuid as SqlUuid};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use serde::Deserialize;
use serde_json::Value;
use uuid::Uuid;

use super::attempts::{find_attempt, CallKind, Source};
use super::reconciler_settings::{pg_interval, NO_RECORD};
use super::service::Payments;
use super::status::AttemptStatus;
use super::transition::{decide, log_refund_call, Decision};
use crate::db::schema::{refund_events, refunds};
use crate::db::sql::Sql;
use crate::db::transaction::in_transaction;
use crate::db::DbPool;
use crate::idempotency::{
    claim, completion::complete_for_resource, Claimed, IdempotencyError, KeyedRequest, KeyedWork,
    Keys, RecordAs, Recorded,
};
use crate::ids::{MerchantId, OrderId, PaymentId, RefundId};
use crate::providers::{ProviderCall, ProviderOutcome, RefundNotice, RefundRequest};

/// The key's resource type and recovery point once the refund exists.
pub const REFUND: &str = "refund";
pub const REFUND_CREATED: &str = "refund_created";

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

/// Why a refund was not made.
#[derive(Debug, thiserror::Error)]
pub enum RefundError {
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

fn read_refund(value: Value) -> Result<Refund, RefundError> {
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

/// Refunds `amount` (`None`: what is left) of payment `payment_id`, once per key.
pub async fn refund(
    pool: &DbPool,
    keys: &Keys,
    payments: &Payments,
    keyed: &KeyedRequest,
    payment_id: PaymentId,
    amount: Option<i64>,
    reason: Option<&str>,
) -> Result<Refunded, RefundError> {
    let lease =
        chrono::Duration::from_std(keys.settings.lease).unwrap_or(chrono::Duration::seconds(30));
    let work = CreateRefund::new(payment_id, amount, reason, Utc::now() + lease);
    match claim(pool, keys, keyed, &work).await? {
        Claimed::Done { fresh } => {
            let refund = read_refund(fresh)?;
            finish(pool, payments, refund).await
        }
        Claimed::Replay { status, current } => Ok(Refunded {
            refund: read_refund(current)?,
            status,
            replayed: true,
        }),
        Claimed::TakenOver { stored, current } if stored.recovery_point == REFUND_CREATED => {
            // An earlier request made the refund and died: resume it, never make another.
            finish(pool, payments, read_refund(current)?).await
        }
        Claimed::TakenOver { stored, .. } => Err(RefundError::Inconsistent(format!(
            "a refund key in flight at recovery point {}",
            stored.recovery_point
        ))),
        Claimed::Declined { .. } => {
            let mut conn = pool.get().await?;
            Err(why_refused(&mut conn, keyed.merchant_id, payment_id).await?)
        }
    }
}

/// Why the database refused a refund of `payment_id`, as the payment stands now.
async fn why_refused(
    conn: &mut AsyncPgConnection,
    merchant_id: MerchantId,
    payment_id: PaymentId,
) -> Result<RefundError, RefundError> {
    let Some(payment) = find_attempt(conn, Some(merchant_id), payment_id).await? else {
        return Ok(RefundError::PaymentNotFound);
    };
    if payment.status != AttemptStatus::Succeeded {
        return Ok(RefundError::NotRefundable {
            status: payment.status,
        });
    }
    Ok(RefundError::ExceedsPayment {
        refundable: payment.amount - payment.refund_held,
    })
}

/// The request the provider gets for `refund`, the same on every resend.
async fn refund_request(
    conn: &mut AsyncPgConnection,
    refund: &Refund,
) -> Result<RefundRequest, RefundError> {
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

/// Steps 2 and 3: the provider call, then its outcome in one transaction.
async fn finish(
    pool: &DbPool,
    payments: &Payments,
    refund: Refund,
) -> Result<Refunded, RefundError> {
    let refund = if refund.status.is_final() {
        let mut conn = pool.get().await?;
        settle_key(&mut conn, &refund).await?;
        refund
    } else {
        let request = {
            let mut conn = pool.get().await?;
            refund_request(&mut conn, &refund).await?
        };
        let call = payments
            .adapter(&refund.provider)
            .create_refund(&request)
            .await;
        let next_check = Utc::now() + payments.reconciler.first_check();
        let mut conn = pool.get().await?;
        record(
            &mut conn,
            refund,
            &call,
            CallKind::CreateRefund,
            (Source::ProviderResponse, Source::Api),
            next_check,
        )
        .await?
    };
    Ok(Refunded {
        refund,
        status: 201,
        replayed: false,
    })
}

/// Completes the key that made `refund`, once its outcome is known (or records that it is
/// still open, so the key outlives its TTL).
async fn settle_key(conn: &mut AsyncPgConnection, refund: &Refund) -> QueryResult<()> {
    match &refund.idempotency_key {
        Some(key) => {
            let recorded = Recorded {
                status: 201,
                resource_type: REFUND,
                resource_id: refund.id.0,
                unresolved: !refund.status.is_final(),
            };
            complete_for_resource(conn, refund.merchant_id, key, &recorded).await
        }
        None => Ok(()),
    }
}

/// What a provider call said about `refund`, in one transaction: the move (decided as an
/// attempt's would be) with its timeline row, the key, and the call log. The refund is read
/// again under its row lock and judged as it is now; the call is logged after, because its
/// row's foreign key share-locks the refund, and two checks that each took that first would
/// deadlock on the update.
async fn record(
    conn: &mut AsyncPgConnection,
    refund: Refund,
    call: &ProviderCall,
    kind: CallKind,
    (moved_by, called_by): (Source, Source),
    next_check_at: DateTime<Utc>,
) -> Result<Refund, RefundError> {
    in_transaction(conn, async |conn| {
        let current: Refund = refunds::table
            .find((refund.merchant_id.0, refund.id.0))
            .select(RefundRow::as_select())
            .for_update()
            .first(conn)
            .await?
            .into();
        let decision = decide(current.status, &call.outcome);
        let moved = apply(conn, current, decision, moved_by, next_check_at).await?;
        settle_key(conn, &moved).await?;
        log_refund_call(
            conn,
            moved.merchant_id,
            moved.payment_id,
            moved.id,
            kind,
            called_by,
            call,
        )
        .await?;
        Ok::<_, RefundError>(moved)
    })
    .await
}

/// Makes `decision` about `current` (read under its row lock): the move and its timeline
/// row, or the provider id an open refund learnt; nothing for an answer that is already so,
/// stale, or contradicts a final refund.
async fn apply(
    conn: &mut AsyncPgConnection,
    current: Refund,
    decision: Decision,
    moved_by: Source,
    next_check_at: DateTime<Utc>,
) -> QueryResult<Refund> {
    Ok(match decision {
        Decision::Move {
            to,
            provider_payment_id,
            failure,
            detail,
        } => {
            let (code, message) = failure.unzip();
            let row: RefundRow = diesel::sql_query(
                "UPDATE refunds SET status = $3, \
                     provider_refund_id = COALESCE(provider_refund_id, $4), \
                     failure_code = $5, failure_message = $6, \
                     next_check_at = CASE WHEN $3 IN ('created', 'pending') THEN $7 END \
                 WHERE merchant_id = $1 AND id = $2 RETURNING *",
            )
            .bind::<SqlUuid, _>(current.merchant_id.0)
            .bind::<SqlUuid, _>(current.id.0)
            .bind::<Text, _>(to.as_str())
            .bind::<Nullable<Text>, _>(provider_payment_id)
            .bind::<Nullable<Text>, _>(code)
            .bind::<Nullable<Text>, _>(message)
            .bind::<Timestamptz, _>(next_check_at)
            .get_result(conn)
            .await?;
            diesel::sql_query(
                "INSERT INTO refund_events (merchant_id, refund_id, from_status, to_status, \
                     source, detail) VALUES ($1, $2, $3, $4, $5, $6)",
            )
            .bind::<SqlUuid, _>(current.merchant_id.0)
            .bind::<SqlUuid, _>(current.id.0)
            .bind::<Text, _>(current.status.as_str())
            .bind::<Text, _>(to.as_str())
            .bind::<Text, _>(moved_by.as_str())
            .bind::<Text, _>(detail)
            .execute(conn)
            .await?;
            Refund::from(row)
        }
        Decision::StayOpen {
            provider_payment_id,
            ..
        } => {
            let row: RefundRow = diesel::sql_query(
                "UPDATE refunds SET provider_refund_id = COALESCE(provider_refund_id, $3), \
                     next_check_at = $4 \
                 WHERE merchant_id = $1 AND id = $2 RETURNING *",
            )
            .bind::<SqlUuid, _>(current.merchant_id.0)
            .bind::<SqlUuid, _>(current.id.0)
            .bind::<Nullable<Text>, _>(provider_payment_id)
            .bind::<Timestamptz, _>(next_check_at)
            .get_result(conn)
            .await?;
            Refund::from(row)
        }
        Decision::AlreadySo | Decision::Stale | Decision::Conflict => current,
    })
}

/// What a refund event did to its refund.
#[derive(Debug)]
pub enum NoticeEffect {
    /// Names no refund payorch knows.
    NoRefund,
    /// Moved the refund, or told an open one its provider id.
    Applied { refund: Refund, detail: String },
    /// Arrived after the refund had moved to, or past, what it says.
    Stale { refund: Refund, detail: String },
    /// Contradicts the refund (another amount or refund id, or its final status).
    Conflict { refund: Refund, detail: String },
}

/// Applies a verified refund event from `provider` to its refund (found by payorch's refund
/// id, else by the provider's), locked for the caller's open transaction, through the same
/// decision as every other answer; completes the refund's key when it ends.
pub async fn apply_notice(
    conn: &mut AsyncPgConnection,
    provider: &str,
    notice: &RefundNotice,
) -> QueryResult<NoticeEffect> {
    let by_id = notice
        .refund_id
        .as_deref()
        .and_then(|id| id.parse::<RefundId>().ok());
    let found = match by_id {
        Some(id) => {
            refunds::table
                .filter(refunds::id.eq(id.0))
                .select(RefundRow::as_select())
                .for_update()
                .first(conn)
                .await
        }
        None => {
            refunds::table
                .filter(refunds::provider.eq(provider))
                .filter(refunds::provider_refund_id.eq(&notice.provider_refund_id))
                .select(RefundRow::as_select())
                .for_update()
                .first(conn)
                .await
        }
    };
    let Some(current) = found.optional()?.map(Refund::from) else {
        return Ok(NoticeEffect::NoRefund);
    };
    let other_refund = current
        .provider_refund_id
        .as_deref()
        .is_some_and(|known| known != notice.provider_refund_id);
    if notice.amount != current.amount || other_refund {
        let detail = format!(
            "says {} of {}, the refund is {} of {}",
            notice.amount,
            notice.provider_refund_id,
            current.amount,
            current
                .provider_refund_id
                .as_deref()
                .unwrap_or("an unknown refund id")
        );
        return Ok(NoticeEffect::Conflict {
            refund: current,
            detail,
        });
    }
    let was = current.status;
    let decision = decide(was, &notice.outcome);
    let detail = match &decision {
        Decision::Move { to, .. } => format!("{} → {}", was.as_str(), to.as_str()),
        Decision::StayOpen { .. } => format!("still {}", was.as_str()),
        Decision::Conflict => format!(
            "says {} but the refund is {}",
            notice.outcome.label(),
            was.as_str()
        ),
        Decision::AlreadySo | Decision::Stale => format!("refund is already {}", was.as_str()),
    };
    let effect = match decision {
        Decision::Conflict => NoticeEffect::Conflict {
            refund: current,
            detail,
        },
        Decision::AlreadySo | Decision::Stale => NoticeEffect::Stale {
            refund: current,
            detail,
        },
        decision => {
            let next_check = current.next_check_at.unwrap_or_else(Utc::now);
            let refund = apply(conn, current, decision, Source::Webhook, next_check).await?;
            settle_key(conn, &refund).await?;
            NoticeEffect::Applied { refund, detail }
        }
    };
    Ok(effect)
}

/// A refund by id; `scope` `None` is support's view across merchants.
pub async fn find_refund(
    conn: &mut AsyncPgConnection,
    scope: Option<MerchantId>,
    id: RefundId,
) -> QueryResult<Option<Refund>> {
    let mut query = refunds::table
        .filter(refunds::id.eq(id.0))
        .select(RefundRow::as_select())
        .into_boxed();
    if let Some(merchant) = scope {
        query = query.filter(refunds::merchant_id.eq(merchant.0));
    }
    Ok(query.first(conn).await.optional()?.map(Into::into))
}

/// One line of a refund's timeline.
#[derive(Debug, Clone, Queryable, Selectable)]
#[diesel(table_name = refund_events)]
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
    conn: &mut AsyncPgConnection,
    merchant_id: MerchantId,
    payment_id: PaymentId,
) -> QueryResult<Vec<RefundTimelineEntry>> {
    refund_events::table
        .inner_join(
            refunds::table.on(refunds::merchant_id
                .eq(refund_events::merchant_id)
                .and(refunds::id.eq(refund_events::refund_id))),
        )
        .filter(refund_events::merchant_id.eq(merchant_id.0))
        .filter(refunds::payment_id.eq(payment_id.0))
        .order(refund_events::id)
        .select(RefundTimelineEntry::as_select())
        .load(conn)
        .await
}

/// A payment's refunds, oldest first.
pub async fn refunds_of_payment(
    conn: &mut AsyncPgConnection,
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

/// Takes up to `limit` refunds whose check is due and hides them from other replicas for
/// `claim` (the attempts' queue, `reconciler.rs`, works the same way).
pub async fn claim_due(
    pool: &DbPool,
    claim: std::time::Duration,
    limit: i64,
) -> Result<Vec<Refund>, RefundError> {
    let mut conn = pool.get().await?;
    let rows: Vec<RefundRow> = diesel::sql_query(
        "UPDATE refunds r SET next_check_at = now() + $1, checks = r.checks + 1 \
         FROM (SELECT merchant_id, id FROM refunds \
               WHERE status IN ('created', 'pending') AND next_check_at <= now() \
               ORDER BY next_check_at LIMIT $2 FOR UPDATE SKIP LOCKED) due \
         WHERE r.merchant_id = due.merchant_id AND r.id = due.id \
         RETURNING r.*",
    )
    .bind::<Interval, _>(pg_interval(claim))
    .bind::<BigInt, _>(limit)
    .load(&mut conn)
    .await?;
    Ok(rows.into_iter().map(Into::into).collect())
}

/// Asks the provider about an open refund and records the answer: by its refund id when
/// known; else by resending the create under the refund's own key, while the provider still
/// remembers keys (a replay, never a second refund); past that window, by looking for it
/// among the charge's refunds (a resend then could refund twice). Not there either: the
/// provider never made it, and it fails `provider_no_record`, freeing its amount.
pub async fn check(
    pool: &DbPool,
    payments: &Payments,
    refund: Refund,
    source: Source,
) -> Result<Refund, RefundError> {
    if refund.status.is_final() {
        return Ok(refund);
    }
    let settings = &payments.reconciler;
    let provider = payments.adapter(&refund.provider);
    let (call, kind) = match &refund.provider_refund_id {
        Some(id) => (provider.retrieve_refund(id).await, CallKind::RetrieveRefund),
        None if Utc::now() - refund.created_at < settings.key_window() => {
            let request = {
                let mut conn = pool.get().await?;
                refund_request(&mut conn, &refund).await?
            };
            (
                provider.create_refund(&request).await,
                CallKind::CreateRefund,
            )
        }
        None => {
            let request = {
                let mut conn = pool.get().await?;
                refund_request(&mut conn, &refund).await?
            };
            let mut call = provider
                .find_refund(&request.provider_payment_id, &request.refund_id)
                .await;
            if call.outcome == ProviderOutcome::NotFound {
                call.outcome = ProviderOutcome::Failed {
                    code: NO_RECORD.into(),
                    message: "the provider has no such refund past its key window: nothing \
                              was refunded"
                        .into(),
                    provider_id: None,
                };
            }
            (call, CallKind::Search)
        }
    };
    let next_check = Utc::now() + settings.next_check(refund.checks);
    let mut conn = pool.get().await?;
    record(&mut conn, refund, &call, kind, (source, source), next_check).await
}
