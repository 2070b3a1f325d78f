//! The event reaper: a worker in every replica that deletes events older than the retention
//! (`--event-retention-days`, 30 by default; README, "Events and webhook endpoints"), in small
//! batches. An event's deliveries and their attempts go with it (`ON DELETE CASCADE`, the
//! `…_merchant_events` migration). `FOR UPDATE SKIP LOCKED` lets replicas share the work.
//!
//! The same worker deletes the providers' webhooks past their own retention
//! (`--provider-webhook-retention-days`; [`crate::payments::webhooks::retention`]), and
//! rewrites the ones an older version stored whole through the allowlist of what is kept
//! ([`crate::payments::webhooks::old_payloads`]). Here rather than at `serve`'s start: a big
//! table does not hold the start back, and rows an older replica writes while an upgrade
//! rolls are found on a later round.

use std::time::Duration;

use diesel::sql_types::BigInt;
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use tokio::sync::watch;

use crate::db::DbPool;
use crate::payments::webhooks::old_payloads::strip_old_payloads;
use crate::payments::webhooks::retention::delete_old_webhooks;

#[derive(Debug, Clone)]
pub struct EventReaperSettings {
    /// How often it looks (the key reaper's `--reaper-interval-secs`).
    pub interval: Duration,
    /// How long an event is kept after it was written.
    pub retention: Duration,
    /// How long a provider's webhook is kept after its payment is final (or, about no
    /// payment, after it arrived).
    pub provider_webhook_retention: Duration,
    /// Events deleted per statement: each batch is one short transaction.
    pub batch: i64,
}

impl Default for EventReaperSettings {
    fn default() -> Self {
        EventReaperSettings {
            interval: Duration::from_secs(60),
            retention: Duration::from_secs(30 * 24 * 3600),
            provider_webhook_retention: Duration::from_secs(35 * 24 * 3600),
            batch: 500,
        }
    }
}

/// Runs until `stop` turns true.
pub async fn run(pool: DbPool, settings: EventReaperSettings, mut stop: watch::Receiver<bool>) {
    loop {
        let reaped = match pool.get().await {
            Ok(mut conn) => reap_once(&mut conn, &settings)
                .await
                .map_err(|e| e.to_string()),
            Err(err) => Err(err.to_string()),
        };
        match reaped {
            Ok(0) => {}
            Ok(deleted) => tracing::info!(deleted, "reaped events past their retention"),
            Err(err) => tracing::warn!(error = %err, "event reaper failed; retrying later"),
        }
        let reaped = match pool.get().await {
            Ok(mut conn) => reap_provider_webhooks(&mut conn, &settings)
                .await
                .map_err(|e| e.to_string()),
            Err(err) => Err(err.to_string()),
        };
        match reaped {
            Ok(0) => {}
            Ok(deleted) => {
                tracing::info!(deleted, "reaped provider webhooks past their retention")
            }
            Err(err) => {
                tracing::warn!(error = %err, "provider webhook reaper failed; retrying later")
            }
        }
        let stripped = match pool.get().await {
            Ok(mut conn) => strip_stored_webhooks(&mut conn, &settings)
                .await
                .map_err(|e| e.to_string()),
            Err(err) => Err(err.to_string()),
        };
        match stripped {
            Ok(0) => {}
            Ok(rewritten) => tracing::info!(
                rewritten,
                "provider webhooks stored whole by an older version rewritten without card data"
            ),
            Err(err) => {
                tracing::warn!(error = %err, "rewriting old provider webhooks failed; retrying later")
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(settings.interval) => {}
            _ = stop.changed() => return,
        }
    }
}

/// Deletes every event past the retention, a batch at a time; how many went.
pub async fn reap_once(
    conn: &mut AsyncPgConnection,
    settings: &EventReaperSettings,
) -> diesel::QueryResult<usize> {
    let retention_ms = settings.retention.as_millis().min(i64::MAX as u128) as i64;
    let mut deleted = 0;
    loop {
        let batch = delete_old(conn, settings.batch, retention_ms).await?;
        deleted += batch;
        if (batch as i64) < settings.batch {
            return Ok(deleted);
        }
    }
}

/// Deletes every provider webhook past its retention, a batch at a time; how many went.
pub async fn reap_provider_webhooks(
    conn: &mut AsyncPgConnection,
    settings: &EventReaperSettings,
) -> diesel::QueryResult<usize> {
    let mut deleted = 0;
    loop {
        let batch =
            delete_old_webhooks(conn, settings.batch, settings.provider_webhook_retention).await?;
        deleted += batch;
        if (batch as i64) < settings.batch {
            return Ok(deleted);
        }
    }
}

/// Rewrites every provider webhook stored whole into what is kept of it, a batch at a time;
/// how many.
pub async fn strip_stored_webhooks(
    conn: &mut AsyncPgConnection,
    settings: &EventReaperSettings,
) -> diesel::QueryResult<usize> {
    let mut rewritten = 0;
    loop {
        let batch = strip_old_payloads(conn, settings.batch).await?;
        rewritten += batch;
        if (batch as i64) < settings.batch {
            return Ok(rewritten);
        }
    }
}

/// Deletes up to `batch` of the oldest events written more than `retention_ms` ago, read
/// through `merchant_events_age (created_at)`.
async fn delete_old(
    conn: &mut AsyncPgConnection,
    batch: i64,
    retention_ms: i64,
) -> diesel::QueryResult<usize> {
    diesel::sql_query(
        "DELETE FROM merchant_events e USING ( \
             SELECT id FROM merchant_events \
             WHERE created_at < now() - $2 * interval '1 millisecond' \
             ORDER BY created_at LIMIT $1 FOR UPDATE SKIP LOCKED) old \
         WHERE e.id = old.id",
    )
    .bind::<BigInt, _>(batch)
    .bind::<BigInt, _>(retention_ms)
    .execute(conn)
    .await
}
