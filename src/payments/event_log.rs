//! The record of webhook events that change no attempt (stale, conflict, unknown attempt,
//! ignored), written in batches: one statement and one commit for every event that arrived
//! while the previous batch was being written (docs/DESIGN.md, "Webhooks").
//!
//! Such an event is only a row to keep, so many of them can share a commit. Each delivery
//! still waits for its own row to be committed before it is answered, so a provider is told
//! "received" only for what is durable; under light load a batch is one event and costs what a
//! lone insert did. An event that moves an attempt is not batched: it is written with its
//! effect, in its own statement.

use std::collections::HashSet;

use chrono::{DateTime, Utc};
use diesel::sql_types::{Array, Jsonb, Nullable, Text, Timestamptz, Uuid as SqlUuid};
use diesel::QueryableByName;
use diesel_async::RunQueryDsl;
use tokio::sync::{mpsc, oneshot};
use uuid::Uuid;

use crate::db::sql::Sql;
use crate::db::statement::Statement;
use crate::db::DbPool;

/// Most events in one statement: a bound on the statement's size, far above a second's worth
/// of webhooks on one replica at today's rates.
const MAX_BATCH: usize = 256;

/// One event row to record.
#[derive(Debug, Clone)]
pub struct EventRow {
    pub id: Uuid,
    pub provider: String,
    pub provider_event_id: String,
    pub event_type: String,
    pub outcome: &'static str,
    pub detail: String,
    pub merchant_id: Option<Uuid>,
    pub attempt_id: Option<Uuid>,
    pub payload: serde_json::Value,
    pub provider_created_at: DateTime<Utc>,
}

#[derive(Debug, thiserror::Error)]
pub enum LogError {
    #[error("the event log is not running")]
    Stopped,
    /// No connection for the batch: the pool timed out, or the database is down.
    #[error("no database connection for the event log: {0}")]
    Unavailable(String),
    #[error(transparent)]
    Database(#[from] diesel::result::Error),
}

impl From<crate::db::pool::PoolError> for LogError {
    fn from(err: crate::db::pool::PoolError) -> Self {
        LogError::Unavailable(err.to_string())
    }
}

struct Pending {
    row: EventRow,
    /// `true` when this row was recorded, `false` when a copy of the event was first.
    done: oneshot::Sender<Result<bool, LogError>>,
}

/// The writing side; the writer task ends when this is dropped.
pub struct EventLog {
    tx: mpsc::UnboundedSender<Pending>,
}

impl EventLog {
    /// Starts the writer on the current runtime.
    pub fn start(pool: DbPool) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(write_batches(pool, rx));
        EventLog { tx }
    }

    /// Records `row` unless an event with its provider event id is recorded already (or is
    /// recorded earlier in the same batch); `Ok(true)` once it is committed.
    pub async fn record(&self, row: EventRow) -> Result<bool, LogError> {
        let (done, answer) = oneshot::channel();
        self.tx
            .send(Pending { row, done })
            .map_err(|_| LogError::Stopped)?;
        answer.await.map_err(|_| LogError::Stopped)?
    }
}

/// Takes every event waiting, writes them in one statement, answers each; again.
async fn write_batches(pool: DbPool, mut rx: mpsc::UnboundedReceiver<Pending>) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    while rx.recv_many(&mut batch, MAX_BATCH).await > 0 {
        let rows: Vec<&EventRow> = batch.iter().map(|p| &p.row).collect();
        match insert(&pool, &rows).await {
            Ok(inserted) => {
                for pending in batch.drain(..) {
                    let recorded = inserted.contains(&pending.row.id);
                    let _ = pending.done.send(Ok(recorded));
                }
            }
            // One row the database refuses must not refuse the others: each is tried alone,
            // and gets its own answer.
            Err(LogError::Database(err)) => {
                tracing::warn!(error = %err, events = batch.len(), "event batch refused; writing each alone");
                for pending in batch.drain(..) {
                    let alone = insert(&pool, &[&pending.row])
                        .await
                        .map(|inserted| inserted.contains(&pending.row.id));
                    let _ = pending.done.send(alone);
                }
            }
            // No connection: none of them can be written now, and each delivery is answered
            // so (the provider redelivers).
            Err(err) => {
                tracing::warn!(error = %err, events = batch.len(), "event batch not written");
                let why = err.to_string();
                for pending in batch.drain(..) {
                    let _ = pending.done.send(Err(LogError::Unavailable(why.clone())));
                }
            }
        }
    }
}

/// Inserts `rows` in one statement; the ids of those that were new. Of several rows with one
/// provider event id, the first is recorded.
async fn insert(pool: &DbPool, rows: &[&EventRow]) -> Result<HashSet<Uuid>, LogError> {
    #[derive(QueryableByName)]
    struct Inserted {
        #[diesel(sql_type = SqlUuid)]
        id: Uuid,
    }
    let mut conn = pool.get().await?;
    let inserted: Vec<Inserted> = insert_statement(rows).load(&mut conn).await?;
    Ok(inserted.into_iter().map(|row| row.id).collect())
}

/// The statement of [`insert`]: the rows as one array per column, unnested (whole text:
/// `tests/sql/log_webhook_events.sql`).
fn insert_statement(rows: &[&EventRow]) -> Sql<'static> {
    let column = |f: fn(&EventRow) -> String| rows.iter().map(|r| f(r)).collect::<Vec<_>>();
    let mut q = Statement::new();
    let ids = q.bind::<Array<SqlUuid>, _>(rows.iter().map(|r| r.id).collect::<Vec<_>>());
    let providers = q.bind::<Array<Text>, _>(column(|r| r.provider.clone()));
    let event_ids = q.bind::<Array<Text>, _>(column(|r| r.provider_event_id.clone()));
    let types = q.bind::<Array<Text>, _>(column(|r| r.event_type.clone()));
    let outcomes = q.bind::<Array<Text>, _>(column(|r| r.outcome.to_owned()));
    let details = q.bind::<Array<Text>, _>(column(|r| r.detail.clone()));
    let merchants = q.bind::<Array<Nullable<SqlUuid>>, _>(
        rows.iter().map(|r| r.merchant_id).collect::<Vec<_>>(),
    );
    let attempts = q
        .bind::<Array<Nullable<SqlUuid>>, _>(rows.iter().map(|r| r.attempt_id).collect::<Vec<_>>());
    let payloads =
        q.bind::<Array<Jsonb>, _>(rows.iter().map(|r| r.payload.clone()).collect::<Vec<_>>());
    let created = q.bind::<Array<Timestamptz>, _>(
        rows.iter()
            .map(|r| r.provider_created_at)
            .collect::<Vec<_>>(),
    );
    q.push(format_args!(
        "INSERT INTO provider_webhooks (id, provider, provider_event_id, event_type, outcome,
    detail, merchant_id, attempt_id, payload, provider_created_at, payload_kept)
SELECT *, true FROM unnest({ids}::uuid[], {providers}::text[], {event_ids}::text[],
    {types}::text[], {outcomes}::text[], {details}::text[], {merchants}::uuid[],
    {attempts}::uuid[], {payloads}::jsonb[], {created}::timestamptz[])
ON CONFLICT (provider, provider_event_id, provider_created_at) DO NOTHING
RETURNING id"
    ));
    q.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::snapshot::assert_sql_snapshot;

    #[test]
    fn the_statement_reads_as_its_snapshot() {
        assert_sql_snapshot("log_webhook_events", &insert_statement(&[]));
    }
}
