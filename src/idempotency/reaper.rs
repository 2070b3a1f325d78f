//! The key reaper: a worker in every replica that ends keys past their TTL in small batches.
//! `FOR UPDATE SKIP LOCKED` lets replicas share the work; a key whose work is unresolved
//! (a payment still pending) is never touched, whatever its age.
//!
//! A key that made an order or a cancel is deleted at its TTL. A key that made a payment or
//! refund is first retired (`expired`: the stored response goes, the resource it names stays,
//! and a retry answers `409 idempotency_key_expired`) until the end of its horizon, and only
//! then deleted (docs/guides/idempotency.md, "A key's life"). The database refuses any other order
//! (migrations `…_key_retirement`).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use diesel::prelude::*;
use diesel::sql_types::BigInt;
use diesel_async::RunQueryDsl;

use super::{IdempotencyMetrics, KeyState};
use crate::db::sql::Sql;
use crate::db::statement::Statement;
use crate::db::DbPool;
use crate::db::PgConn;

#[derive(Debug, Clone)]
pub struct ReaperSettings {
    pub interval: Duration,
    pub batch: i64,
    /// How long after its first use a key that made a payment or refund is remembered.
    pub horizon: Duration,
}

impl Default for ReaperSettings {
    fn default() -> Self {
        ReaperSettings {
            interval: Duration::from_secs(60),
            batch: 500,
            horizon: Duration::from_secs(30 * 24 * 3600),
        }
    }
}

/// Runs until `stop` turns true.
pub async fn run(
    pool: DbPool,
    settings: ReaperSettings,
    metrics: Arc<IdempotencyMetrics>,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        match reap_once(&pool, &settings, &metrics).await {
            Ok(Reaped {
                retired: 0,
                deleted: 0,
            }) => {}
            Ok(Reaped { retired, deleted }) => {
                tracing::info!(retired, deleted, "reaped expired idempotency keys")
            }
            Err(err) => {
                tracing::warn!(error = %err, "idempotency key reaper failed; retrying later")
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(settings.interval) => {}
            _ = stop.changed() => return,
        }
    }
}

/// What one round of the reaper did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Reaped {
    /// Keys of payments and refunds past their TTL, now `expired`.
    pub retired: usize,
    /// Keys deleted: of orders and cancels past their TTL, and expired ones past their horizon.
    pub deleted: usize,
}

/// Retires, then deletes, every key whose time is up, one small batch (one short
/// transaction) at a time.
pub async fn reap_once(
    pool: &DbPool,
    settings: &ReaperSettings,
    metrics: &IdempotencyMetrics,
) -> Result<Reaped, String> {
    let mut conn = pool.get().await.map_err(|e| e.to_string())?;
    let mut reaped = Reaped::default();
    let horizon_ms = settings.horizon.as_millis().min(i64::MAX as u128) as i64;
    loop {
        let retired = retire_expired(&mut conn, settings.batch, horizon_ms)
            .await
            .map_err(|e| e.to_string())?;
        reaped.retired += retired;
        metrics.retired.inc_by(retired as u64);
        if (retired as i64) < settings.batch {
            break;
        }
    }
    loop {
        let deleted = delete_expired(&mut conn, settings.batch)
            .await
            .map_err(|e| e.to_string())?;
        reaped.deleted += deleted;
        metrics.reaped.inc_by(deleted as u64);
        if (deleted as i64) < settings.batch {
            break;
        }
    }
    if let Ok(keys) = estimated_key_count(&mut conn).await {
        metrics.keys.set(keys);
    }
    Ok(reaped)
}

/// Retires up to `batch` keys of payments and refunds past their TTL whose work is final:
/// the response goes, the resource stays, and the key is kept until `horizon_ms` after its
/// first use. The work is read from the resource itself, as the database's guard does, so a
/// batch never fails on a key whose flag says otherwise. Returns how many were retired.
pub async fn retire_expired(conn: &mut PgConn, batch: i64, horizon_ms: i64) -> QueryResult<usize> {
    retire_statement(batch, horizon_ms).execute(conn).await
}

/// [`retire_expired`]'s statement (whole text: `tests/sql/retire_expired_keys.sql`). The
/// states are written as words, not bound: `state <> 'in_flight'` is the predicate of the
/// partial index the reaper scans, which a plan made for any parameter could not use.
fn retire_statement(batch: i64, horizon_ms: i64) -> Sql<'static> {
    let mut q = Statement::new();
    let batch = q.bind::<BigInt, _>(batch);
    let horizon_ms = q.bind::<BigInt, _>(horizon_ms);
    q.push(format_args!(
        "UPDATE idempotency_keys k SET state = {expired}, response_status = NULL,
    response_body = NULL, locked_until = NULL,
    expires_at = greatest(k.created_at + {horizon_ms} * interval '1 millisecond', k.expires_at),
    updated_at = now()
FROM (
    SELECT merchant_id, key FROM idempotency_keys i
    WHERE state <> {in_flight} AND state = {completed} AND NOT unresolved
      AND expires_at < now() AND idempotency_key_made_money_move(i)
      AND NOT idempotency_key_work_is_open(i)
    ORDER BY expires_at LIMIT {batch} FOR UPDATE SKIP LOCKED) due
WHERE k.merchant_id = due.merchant_id AND k.key = due.key",
        expired = KeyState::Expired.sql(),
        in_flight = KeyState::InFlight.sql(),
        completed = KeyState::Completed.sql(),
    ));
    q.finish()
}

/// Deletes up to `batch` keys whose time is up: keys of orders and cancels past their TTL,
/// and retired keys past their horizon. Returns how many went; their keys are free again.
pub async fn delete_expired(conn: &mut PgConn, batch: i64) -> QueryResult<usize> {
    delete_statement(batch).execute(conn).await
}

/// [`delete_expired`]'s statement (whole text: `tests/sql/delete_expired_keys.sql`); the
/// states as words, as in [`retire_statement`].
fn delete_statement(batch: i64) -> Sql<'static> {
    let mut q = Statement::new();
    let batch = q.bind::<BigInt, _>(batch);
    q.push(format_args!(
        "DELETE FROM idempotency_keys k USING (
    SELECT merchant_id, key FROM idempotency_keys i
    WHERE state <> {in_flight} AND NOT unresolved AND expires_at < now()
      AND (state = {expired} OR NOT idempotency_key_made_money_move(i))
    ORDER BY expires_at LIMIT {batch} FOR UPDATE SKIP LOCKED) gone
WHERE k.merchant_id = gone.merchant_id AND k.key = gone.key",
        in_flight = KeyState::InFlight.sql(),
        expired = KeyState::Expired.sql(),
    ));
    q.finish()
}

/// The planner's estimate of the key table's size: cheap enough to read on every scrape.
pub async fn estimated_key_count(conn: &mut PgConn) -> QueryResult<i64> {
    #[derive(QueryableByName)]
    struct Estimate {
        #[diesel(sql_type = BigInt)]
        rows: i64,
    }
    estimate_statement()
        .load::<Estimate>(conn)
        .await
        .and_then(crate::db::one)
        .optional()
        .map(|e| e.map_or(0, |e| e.rows))
}

/// [`estimated_key_count`]'s statement (whole text: `tests/sql/estimated_key_count.sql`).
fn estimate_statement() -> Sql<'static> {
    let mut q = Statement::new();
    q.push(
        "SELECT coalesce(n_live_tup, 0)::bigint AS rows FROM pg_stat_user_tables
WHERE relname = 'idempotency_keys'",
    );
    q.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::snapshot::assert_sql_snapshot;

    #[test]
    fn the_reaper_statements_read_as_their_snapshots() {
        assert_sql_snapshot("retire_expired_keys", &retire_statement(500, 1));
        assert_sql_snapshot("delete_expired_keys", &delete_statement(500));
        assert_sql_snapshot("estimated_key_count", &estimate_statement());
    }
}
