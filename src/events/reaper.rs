//! The event reaper: a worker in every replica that deletes events older than the retention
//! (`--event-retention-days`, 30 by default; docs/guides/events.md, "Events and webhook endpoints"), in small
//! batches. An event's deliveries and their attempts go with it (`ON DELETE CASCADE`, the
//! `…_merchant_events` migration). `FOR UPDATE SKIP LOCKED` lets replicas share the work.
//!
//! The providers' webhooks have a reaper of their own (`payments::webhooks::reaper`), which
//! `app` runs beside this one: they are payments' rows.

use std::time::Duration;

use diesel::sql_types::BigInt;
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use tokio::sync::watch;

use crate::db::sql::Sql;
use crate::db::statement::Statement;
use crate::db::DbPool;

#[derive(Debug, Clone)]
pub struct EventReaperSettings {
    /// How often it looks (the key reaper's `--reaper-interval-secs`).
    pub interval: Duration,
    /// How long an event is kept after it was written.
    pub retention: Duration,
    /// Events deleted per statement: each batch is one short transaction.
    pub batch: i64,
}

impl Default for EventReaperSettings {
    fn default() -> Self {
        EventReaperSettings {
            interval: Duration::from_secs(60),
            retention: Duration::from_secs(30 * 24 * 3600),
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

/// Deletes up to `batch` of the oldest events written more than `retention_ms` ago, read
/// through `merchant_events_age (created_at)`.
async fn delete_old(
    conn: &mut AsyncPgConnection,
    batch: i64,
    retention_ms: i64,
) -> diesel::QueryResult<usize> {
    delete_old_statement(batch, retention_ms)
        .execute(conn)
        .await
}

/// [`delete_old`]'s statement (whole text: `tests/sql/reap_merchant_events.sql`).
fn delete_old_statement(batch: i64, retention_ms: i64) -> Sql<'static> {
    let mut q = Statement::new();
    let batch = q.bind::<BigInt, _>(batch);
    let retention_ms = q.bind::<BigInt, _>(retention_ms);
    q.push(format_args!(
        "DELETE FROM merchant_events e USING (
    SELECT id FROM merchant_events
    WHERE created_at < now() - {retention_ms} * interval '1 millisecond'
    ORDER BY created_at LIMIT {batch} FOR UPDATE SKIP LOCKED) old
WHERE e.id = old.id"
    ));
    q.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::snapshot::assert_sql_snapshot;

    #[test]
    fn the_reaper_statement_reads_as_its_snapshot() {
        assert_sql_snapshot("reap_merchant_events", &delete_old_statement(500, 1));
    }
}
