//! The reconciler (docs/DESIGN.md, "The reconciler"): a worker in every replica that finds
//! the truth about attempts still `created` or `pending` once their `next_check_at` has come.
//!
//! Replicas share the queue through `FOR UPDATE SKIP LOCKED`: claiming an attempt pushes its
//! `next_check_at` past the provider timeout in the same statement, so no other replica asks
//! about it meanwhile, and no row lock is held during the provider call.
//!
//! How it asks, only what the provider's contract answers truthfully (docs/DESIGN.md, "What
//! proves what"): in the key window, by resending the create with the attempt's own key (a
//! replay, never a second charge). Then, with read-after-write lookups (Stripe), by the
//! charge's id, else by listing the attempt's send window: a whole window listed without it,
//! once settled, fails it `provider_no_record` (docs/DESIGN.md, "No record, early"). Without
//! (Adyen), it waits for its notification; past `technical_cancel_after` it is canceled by
//! payorch's reference, once, and that cancel's notification ends it (refused: a human).

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use diesel::sql_types::{BigInt, Interval};
use diesel::QueryableByName;
use diesel_async::RunQueryDsl;
use tokio::sync::watch;

pub mod settings;

use self::settings::{pg_interval, to_chrono, ReconcilerSettings, NO_RECORD};
use crate::db::sql::Sql;
use crate::db::statement::Statement;
use crate::db::transaction::in_transaction;
use crate::db::DbPool;
use crate::payments::attempts::call_log::log_call;
use crate::payments::attempts::keyed::record_answer::{contradiction, is_contradiction};
use crate::payments::attempts::transition::apply;
use crate::payments::attempts::{
    before_resend, find_attempt, open_statuses, quiet_before, unsettled_statuses,
};
use crate::payments::attempts::{AttemptRow, CallKind, PaymentAttempt, Source};
use crate::payments::due::{claim_due, DueQueue};
use crate::payments::holds::operate::void_without_key;
use crate::payments::holds::reason::OUTCOME_UNKNOWN;
use crate::payments::holds::reconcile::{needs_void, was_voided_for};
use crate::payments::late_approvals::undo::undo_due;
use crate::payments::late_approvals::LateStatus;
use crate::payments::service::{settle_key, Payments};
use crate::payments::status::AttemptStatus;
use crate::payments::{holds, refunds};
use crate::providers::{Lookups, ProviderCall, ProviderOutcome, SendWindow};

/// Runs until `stop` turns true.
pub async fn run(pool: DbPool, payments: Arc<Payments>, mut stop: watch::Receiver<bool>) {
    let settings = payments.reconciler.clone();
    loop {
        let claimed = match reconcile_due(&pool, &payments).await {
            Ok(claimed) => claimed,
            Err(err) => {
                tracing::warn!(error = %err, "reconciler round failed");
                0
            }
        };
        let claimed = claimed
            + reconcile_due_refunds(&pool, &payments).await
            + reconcile_due_hold_operations(&pool, &payments).await
            + undo_due(&pool, &payments).await;
        payments.publish_circuits();
        if let Err(err) = refresh_gauges(&pool, &payments).await {
            tracing::debug!(error = %err, "could not count unresolved attempts");
        }
        // Stopping: the round in hand is done, so no attempt is left claimed mid-check.
        if *stop.borrow() {
            return;
        }
        // A full batch means more may be due: go on at once.
        if claimed as i64 >= settings.batch {
            continue;
        }
        tokio::select! {
            _ = stop.wait_for(|stopped| *stopped) => return,
            () = tokio::time::sleep(settings.interval) => {}
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    #[error(transparent)]
    Unavailable(#[from] crate::db::pool::PoolError),
    #[error(transparent)]
    Database(#[from] diesel::result::Error),
}

/// Claims the attempts that are due and checks each with the provider, concurrently.
/// Returns how many were claimed.
pub async fn reconcile_due(
    pool: &DbPool,
    payments: &Arc<Payments>,
) -> Result<usize, ReconcileError> {
    let due = claim_due_attempts(pool, &payments.reconciler).await?;
    let claimed = due.len();
    let mut checks = tokio::task::JoinSet::new();
    for attempt in due {
        let pool = pool.clone();
        let payments = payments.clone();
        checks.spawn(async move {
            let id = attempt.id;
            if let Err(err) = check(&pool, &payments, attempt, Source::Reconciler, None).await {
                tracing::warn!(attempt = %id, error = %err, "reconciler check failed");
            }
        });
    }
    while checks.join_next().await.is_some() {}
    Ok(claimed)
}

/// Claims the captures and voids that are due and asks about each again, concurrently.
/// Returns how many were claimed.
async fn reconcile_due_hold_operations(pool: &DbPool, payments: &Arc<Payments>) -> usize {
    let settings = &payments.reconciler;
    let due = match holds::reconcile::claim_due(pool, settings.claim, settings.batch).await {
        Ok(due) => due,
        Err(err) => {
            tracing::warn!(error = %err, "reconciler round of captures and voids failed");
            return 0;
        }
    };
    let claimed = due.len();
    let mut checks = tokio::task::JoinSet::new();
    for operation in due {
        let pool = pool.clone();
        let payments = payments.clone();
        checks.spawn(async move {
            let id = operation.id;
            if let Err(err) =
                holds::reconcile::check(&pool, &payments, operation, Source::Reconciler).await
            {
                tracing::warn!(operation = %id, error = %err, "reconciler check of a capture or void failed");
            }
        });
    }
    while checks.join_next().await.is_some() {}
    claimed
}

/// Claims the refunds that are due and checks each with the provider, concurrently.
/// Returns how many were claimed.
async fn reconcile_due_refunds(pool: &DbPool, payments: &Arc<Payments>) -> usize {
    let settings = &payments.reconciler;
    let due = match refunds::reconcile::claim_due(pool, settings.claim, settings.batch).await {
        Ok(due) => due,
        Err(err) => {
            tracing::warn!(error = %err, "reconciler round of refunds failed");
            return 0;
        }
    };
    let claimed = due.len();
    let mut checks = tokio::task::JoinSet::new();
    for refund in due {
        let pool = pool.clone();
        let payments = payments.clone();
        checks.spawn(async move {
            let id = refund.id;
            if let Err(err) =
                refunds::reconcile::check(&pool, &payments, refund, Source::Reconciler).await
            {
                tracing::warn!(refund = %id, error = %err, "reconciler check of a refund failed");
            }
        });
    }
    while checks.join_next().await.is_some() {}
    claimed
}

/// The attempts' due queue: every open attempt, a hold included (its check comes before it
/// expires).
const DUE_ATTEMPTS: DueQueue = DueQueue {
    table: "payment_attempts",
    open: open_statuses!(),
};

/// Takes up to a batch of due attempts and hides them from other replicas for the claim.
async fn claim_due_attempts(
    pool: &DbPool,
    settings: &ReconcilerSettings,
) -> Result<Vec<PaymentAttempt>, ReconcileError> {
    let mut conn = pool.get().await?;
    let rows: Vec<AttemptRow> = claim_due(DUE_ATTEMPTS, settings.batch, settings.claim)
        .load(&mut conn)
        .await?;
    Ok(rows.into_iter().map(Into::into).collect())
}

/// Asks the provider about one attempt and records what it said; finishes the attempt (and
/// the key that made it) on a definitive answer. Also the support action "reconcile now"
/// (`source` support, `asked_by` the support key's name, recorded on the provider call).
#[tracing::instrument(skip_all, fields(payment = %attempt.id, order = %attempt.order_id,
    merchant = %attempt.merchant_id, source = source.as_str()))]
pub async fn check(
    pool: &DbPool,
    payments: &Payments,
    attempt: PaymentAttempt,
    source: Source,
    asked_by: Option<&str>,
) -> Result<PaymentAttempt, ReconcileError> {
    if attempt.status.is_final() {
        return Ok(attempt);
    }
    let asked_at = Utc::now();
    let next_check = Utc::now() + to_chrono(payments.reconciler.wait_after(attempt.checks));
    let (kind, call) = match ask(pool, payments, &attempt).await? {
        Asked::Called(kind, call) => (kind, call),
        Asked::Final(attempt) => return Ok(*attempt),
        Asked::Waiting => {
            let mut conn = pool.get().await?;
            reschedule(&mut conn, &attempt, next_check).await?;
            drop(conn);
            cancel_if_overdue(pool, payments, &attempt).await;
            return Ok(attempt);
        }
    };
    payments
        .metrics
        .provider_call(&attempt.provider, kind, &call);
    let listed_in_vain = matches!(
        (kind, &call.outcome),
        (CallKind::List, ProviderOutcome::NotFound)
    );
    let mut conn = pool.get().await?;
    let mut call = call;
    let mut contradicted = false;
    let attempt = loop {
        let recorded = in_transaction(&mut conn, async |conn| {
            let attempt = attempt.clone();
            // A list that found nothing is a verdict only if no send can have been missed: all
            // ended a settle delay before it, and none starts while this row lock is held.
            let quiet_since = asked_at - payments.reconciler.settle_delay();
            let outcome = if listed_in_vain && quiet_before(conn, &attempt, quiet_since).await? {
                ProviderOutcome::Failed {
                    code: NO_RECORD.into(),
                    message: "the provider's read-after-write list of the charges made in this \
                          attempt's window has none of it, long after its last possible send: \
                          nothing was charged"
                        .into(),
                    provider_id: None,
                    decline: None,
                }
            } else {
                call.outcome.clone()
            };
            // The move first, the call's log row after: the log row's foreign key takes a share
            // lock on the attempt, and a move that sets the charge id needs the row exclusively,
            // so two checks of one attempt that logged first would each wait for the other.
            let (merchant_id, id) = (attempt.merchant_id, attempt.id);
            let applied = apply(
                conn,
                &payments.metrics,
                attempt,
                &outcome,
                source,
                next_check,
            )
            .await?;
            log_call(
                conn,
                merchant_id,
                id,
                kind,
                log_source(source),
                &call,
                asked_by,
            )
            .await?;
            if applied.attempt.status.is_answered() {
                settle_key(conn, &applied.attempt).await?;
            }
            Ok::<_, diesel::result::Error>(applied.attempt)
        })
        .await;
        match recorded {
            // The answer names a charge another attempt holds: recorded as the unknown it
            // is, with the evidence in the call log, for a human; never a failed round.
            Err(e) if is_contradiction(&e) && !contradicted => {
                contradicted = true;
                call.outcome = contradiction(&call.outcome);
            }
            recorded => break recorded?,
        }
    };
    // The provider was asked first, so a hold captured or a challenge passed meanwhile is
    // known before anything is voided.
    if let Some(why) = needs_void(payments, &attempt) {
        let void = void_without_key(pool, payments, attempt.clone(), (Source::Reconciler, why));
        if let Err(err) = void.await {
            tracing::warn!(error = %err, reason = why, "could not void a hold left open");
        }
    }
    Ok(attempt)
}

/// The next check of an attempt that waits for its notification, with no call made.
async fn reschedule(
    conn: &mut crate::db::PgConn,
    attempt: &PaymentAttempt,
    next_check: chrono::DateTime<Utc>,
) -> Result<(), diesel::result::Error> {
    use crate::db::schema::payment_attempts::dsl as a;
    use diesel::{ExpressionMethods, QueryDsl};
    diesel::update(a::payment_attempts.find((attempt.merchant_id.0, attempt.id.0)))
        .filter(a::status.eq(attempt.status.as_str()))
        .set(a::next_check_at.eq(next_check))
        .execute(conn)
        .await?;
    Ok(())
}

/// An attempt of a provider without lookups whose outcome is still unknown past the
/// deadline, and whose every send has settled: canceled (by payorch's reference: Adyen's
/// technical cancel), once. Its notification ends it: canceled, or, when the cancel found no
/// payment under the reference, failed `provider_no_record` (no send can still make one).
/// A cancel refused about a payment (captured, say) is not tried again: the attempt stays
/// open, in the needs-a-human list, with the refusal in its story.
async fn cancel_if_overdue(pool: &DbPool, payments: &Payments, attempt: &PaymentAttempt) {
    let settings = &payments.reconciler;
    let now = Utc::now();
    let overdue = attempt.status == AttemptStatus::Pending
        && attempt.next_action.is_none()
        && attempt.created_at + to_chrono(settings.technical_cancel_after) <= now
        && attempt.sending_until + settings.settle_delay() <= now;
    if !overdue {
        return;
    }
    let tried = async {
        let mut conn = pool.get().await?;
        was_voided_for(&mut conn, attempt, OUTCOME_UNKNOWN)
            .await
            .map_err(crate::payments::holds::HoldError::from)
    };
    match tried.await {
        Ok(false) => {}
        Ok(true) => return,
        Err(err) => {
            tracing::warn!(error = %err, "could not tell whether an attempt was canceled before");
            return;
        }
    }
    tracing::info!(payment = %attempt.id, "outcome unknown past the deadline: canceling by reference");
    let void = void_without_key(
        pool,
        payments,
        attempt.clone(),
        (Source::Reconciler, OUTCOME_UNKNOWN),
    );
    if let Err(err) = void.await {
        tracing::warn!(error = %err, "could not cancel an attempt whose outcome is unknown");
    }
}

/// What a check's one question came to.
enum Asked {
    Called(CallKind, ProviderCall),
    /// The attempt was final before a resend could go out: nothing was sent.
    Final(Box<PaymentAttempt>),
    /// The provider has no lookup to ask: the attempt waits for its notification.
    Waiting,
}

/// The one provider call a check makes.
async fn ask(
    pool: &DbPool,
    payments: &Payments,
    attempt: &PaymentAttempt,
) -> Result<Asked, ReconcileError> {
    let provider = payments.adapter(&attempt.provider);
    let lookups = provider.lookups();
    let settings = &payments.reconciler;
    if let (Lookups::ReadAfterWrite, Some(provider_id)) = (lookups, &attempt.provider_payment_id) {
        let call = provider.retrieve(provider_id).await;
        return Ok(Asked::Called(CallKind::Retrieve, call));
    }
    // One resend at the first check finishes a request that died before it sent and fetches
    // a lost answer; later ones are answered alike (a saved 500 too), so then it lists or
    // waits. Without a list (Adyen), `created` means no send was answered: resent at any check.
    let now = Utc::now();
    let quiet = attempt.sending_until < now - settings.settle_delay();
    let never_answered =
        lookups == Lookups::NotificationsOnly && attempt.status == AttemptStatus::Created;
    if (never_answered || (!quiet && attempt.checks <= 1))
        && now - attempt.created_at < settings.key_window()
    {
        // The claim outlasts the call: this send has surely ended by then.
        let until = now + to_chrono(settings.claim);
        let mut conn = pool.get().await?;
        let Some(attempt) = before_resend(&mut conn, attempt, until).await? else {
            let current = find_attempt(&mut conn, Some(attempt.merchant_id), attempt.id)
                .await?
                .ok_or(diesel::result::Error::NotFound)?;
            return Ok(Asked::Final(Box::new(current)));
        };
        drop(conn);
        let call = provider
            .create_charge(&payments.charge_request(&attempt))
            .await;
        return Ok(Asked::Called(CallKind::Create, call));
    }
    if lookups == Lookups::NotificationsOnly {
        return Ok(Asked::Waiting);
    }
    let window = SendWindow {
        from: attempt.created_at,
        until: attempt.sending_until,
    };
    let call = provider
        .find_by_attempt(&attempt.id.to_string(), window)
        .await;
    Ok(Asked::Called(CallKind::List, call))
}

/// Provider calls are logged as made by the API, the reconciler or support.
fn log_source(source: Source) -> Source {
    match source {
        Source::Support => Source::Support,
        _ => Source::Reconciler,
    }
}

/// Sets the unresolved-attempt gauges from one query.
pub async fn refresh_gauges(pool: &DbPool, payments: &Payments) -> Result<(), ReconcileError> {
    #[derive(QueryableByName)]
    struct Unresolved {
        #[diesel(sql_type = BigInt)]
        created: i64,
        #[diesel(sql_type = BigInt)]
        pending: i64,
        #[diesel(sql_type = BigInt)]
        oldest_seconds: i64,
        #[diesel(sql_type = BigInt)]
        overdue: i64,
        #[diesel(sql_type = BigInt)]
        refunds_overdue: i64,
        #[diesel(sql_type = BigInt)]
        late_approvals_overdue: i64,
    }
    let mut conn = pool.get().await?;
    let counts: Unresolved = count_unresolved(payments.reconciler.alert_after)
        .load(&mut conn)
        .await
        .and_then(crate::db::one)?;
    let metrics = &payments.metrics;
    metrics.set_unresolved(
        counts.created,
        counts.pending,
        Duration::from_secs(counts.oldest_seconds.max(0) as u64),
        counts.overdue,
    );
    metrics.set_refunds_overdue(counts.refunds_overdue);
    metrics.set_late_approvals_overdue(counts.late_approvals_overdue);
    Ok(())
}

/// [`refresh_gauges`]'s statement: open attempts by status, the oldest's age, those older than
/// `alert_after`, and as old refunds and undoing late approvals (`tests/sql/count_unresolved.sql`).
fn count_unresolved(alert_after: Duration) -> Sql<'static> {
    let mut q = Statement::new();
    let alert_after = q.bind::<Interval, _>(pg_interval(alert_after));
    q.push(format_args!(
        "SELECT count(*) FILTER (WHERE status = {created}) AS created,
    count(*) FILTER (WHERE status = {pending}) AS pending,
    coalesce(extract(epoch FROM now() - min(created_at)), 0)::bigint AS oldest_seconds,
    count(*) FILTER (WHERE created_at < now() - {alert_after}) AS overdue,
    (SELECT count(*) FROM refunds
        WHERE status IN {open_refunds} AND created_at < now() - {alert_after}) AS refunds_overdue,
    (SELECT count(*) FROM late_approvals
        WHERE status = {undoing} AND detected_at < now() - {alert_after}) AS late_approvals_overdue
FROM payment_attempts WHERE status IN {open}",
        created = AttemptStatus::Created.sql(),
        pending = AttemptStatus::Pending.sql(),
        open = unsettled_statuses!(),
        open_refunds = refunds::open_refund_statuses!(),
        undoing = format_args!("'{}'", LateStatus::Undoing.as_str()),
    ));
    q.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_statements_read_as_their_snapshots() {
        crate::payments::due::assert_claim_snapshot(DUE_ATTEMPTS);
        let sql = count_unresolved(Duration::from_secs(900));
        crate::db::snapshot::assert_sql_snapshot("count_unresolved", &sql);
    }

    #[test]
    fn backoff_follows_the_schedule_then_stays_hourly() {
        let settings = ReconcilerSettings::default();
        let waits: Vec<u64> = (0..8).map(|n| settings.nominal_wait(n).as_secs()).collect();
        assert_eq!(waits, [5, 15, 60, 300, 900, 3600, 3600, 3600]);
    }
}
