//! The key reaper: a worker in every replica that deletes expired keys in small batches.
//! `FOR UPDATE SKIP LOCKED` lets replicas share the work; a key whose work is unresolved
//! (a payment still pending) is never deleted, whatever its age.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use diesel::prelude::*;
use diesel::sql_types::BigInt;
use diesel_async::{AsyncPgConnection, RunQueryDsl};

use super::IdempotencyMetrics;
use crate::db::DbPool;

#[derive(Debug, Clone)]
pub struct ReaperSettings {
    pub interval: Duration,
    pub batch: i64,
}

impl Default for ReaperSettings {
    fn default() -> Self {
        ReaperSettings {
            interval: Duration::from_secs(60),
            batch: 500,
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
            Ok(0) => {}
            Ok(deleted) => tracing::info!(deleted, "reaped expired idempotency keys"),
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

/// Deletes every expired key, one small batch (one short transaction) at a time.
pub async fn reap_once(
    pool: &DbPool,
    settings: &ReaperSettings,
    metrics: &IdempotencyMetrics,
) -> Result<usize, String> {
    let mut conn = pool.get().await.map_err(|e| e.to_string())?;
    let mut total = 0;
    loop {
        let deleted = reap_expired(&mut conn, settings.batch)
            .await
            .map_err(|e| e.to_string())?;
        total += deleted;
        metrics.reaped.inc_by(deleted as u64);
        if (deleted as i64) < settings.batch {
            break;
        }
    }
    if let Ok(keys) = estimated_key_count(&mut conn).await {
        metrics.keys.set(keys);
    }
    Ok(total)
}

/// Deletes up to `batch` expired, resolved keys; replicas share the work without waiting on
/// each other. Returns how many went.
pub async fn reap_expired(conn: &mut AsyncPgConnection, batch: i64) -> QueryResult<usize> {
    diesel::sql_query(
        "DELETE FROM idempotency_keys k USING ( \
             SELECT merchant_id, key FROM idempotency_keys \
             WHERE state = 'completed' AND NOT unresolved AND expires_at < now() \
             ORDER BY expires_at LIMIT $1 FOR UPDATE SKIP LOCKED) expired \
         WHERE k.merchant_id = expired.merchant_id AND k.key = expired.key",
    )
    .bind::<BigInt, _>(batch)
    .execute(conn)
    .await
}

/// The planner's estimate of the key table's size: cheap enough to read on every scrape.
pub async fn estimated_key_count(conn: &mut AsyncPgConnection) -> QueryResult<i64> {
    #[derive(QueryableByName)]
    struct Estimate {
        #[diesel(sql_type = BigInt)]
        rows: i64,
    }
    diesel::sql_query(
        "SELECT coalesce(n_live_tup, 0)::bigint AS rows FROM pg_stat_user_tables \
         WHERE relname = 'idempotency_keys'",
    )
    .get_result::<Estimate>(conn)
    .await
    .optional()
    .map(|e| e.map_or(0, |e| e.rows))
}
