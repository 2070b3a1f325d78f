//! The key reaper: a worker in every replica that deletes expired keys in small batches.
//! `FOR UPDATE SKIP LOCKED` lets replicas share the work; a key whose work is unresolved
//! (a payment still pending) is never deleted, whatever its age.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::{store, IdempotencyMetrics};
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
        let deleted = store::reap_expired(&mut conn, settings.batch)
            .await
            .map_err(|e| e.to_string())?;
        total += deleted;
        metrics.reaped.inc_by(deleted as u64);
        if (deleted as i64) < settings.batch {
            break;
        }
    }
    if let Ok(keys) = store::estimated_key_count(&mut conn).await {
        metrics.keys.set(keys);
    }
    Ok(total)
}
