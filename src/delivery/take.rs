//! Taking due deliveries (docs/DESIGN.md, "Delivering events"): one statement takes up to a
//! batch of pending deliveries whose time has come, skipping those another worker is taking
//! (`FOR UPDATE SKIP LOCKED`), and moves each one's `next_attempt_at` to the end of a lease.
//! No lock is held during the send; the lease hides the delivery from other workers until
//! its send has surely ended, and if this worker dies first, the delivery is simply due again
//! when the lease ends: at least once, never lost. The same statement cancels a due delivery
//! whose endpoint is disabled or deleted.

use std::time::Duration;

use chrono::{DateTime, Utc};
use diesel::sql_types::{BigInt, Integer, Nullable, Text, Timestamptz, Uuid as SqlUuid};
use diesel::QueryableByName;
use diesel_async::RunQueryDsl;
use uuid::Uuid;

use crate::db::sql::Sql;
use crate::db::statement::Statement;
use crate::db::PgConn;
use crate::events::endpoints::sealed::SealedSecret;
use crate::events::EventRow;
use crate::ids::{EndpointId, EventId, MerchantId};

/// A delivery this worker took, with what it needs of its endpoint to send it.
#[derive(Debug, Clone, QueryableByName)]
pub struct Taken {
    #[diesel(sql_type = SqlUuid)]
    event_id: Uuid,
    #[diesel(sql_type = SqlUuid)]
    endpoint_id: Uuid,
    #[diesel(sql_type = SqlUuid)]
    merchant_id: Uuid,
    /// `pending` when taken to be sent, `canceled` when its endpoint is no longer live.
    #[diesel(sql_type = Text)]
    state: String,
    /// Attempts made before this one.
    #[diesel(sql_type = Integer)]
    pub attempts: i32,
    /// When the lease ends: also what shows the lease is still this worker's when the
    /// attempt is recorded.
    #[diesel(sql_type = Timestamptz)]
    pub lease_until: DateTime<Utc>,
    #[diesel(sql_type = Text)]
    pub url: String,
    /// The endpoint's secrets as stored: sealed, opened only to sign.
    #[diesel(sql_type = Text, deserialize_as = String)]
    pub secret: SealedSecret,
    /// Sealed too (read through [`Taken::previous_secret`]; a `Debug` of it shows only the
    /// sealed text).
    #[diesel(sql_type = Nullable<Text>)]
    previous_secret: Option<String>,
    #[diesel(sql_type = Nullable<Timestamptz>)]
    pub previous_secret_until: Option<DateTime<Utc>>,
    /// The event, read in the same statement: its body needs no query of its own.
    #[diesel(embed)]
    pub event: EventRow,
}

impl Taken {
    pub fn event_id(&self) -> EventId {
        EventId(self.event_id)
    }

    pub fn endpoint_id(&self) -> EndpointId {
        EndpointId(self.endpoint_id)
    }

    pub fn merchant_id(&self) -> MerchantId {
        MerchantId(self.merchant_id)
    }

    /// The secret a rotation replaced, sealed, while it is kept.
    pub fn previous_secret(&self) -> Option<SealedSecret> {
        self.previous_secret.clone().map(SealedSecret::from)
    }

    /// Whether the statement canceled it instead (its endpoint is disabled or deleted).
    pub fn canceled(&self) -> bool {
        self.state == "canceled"
    }
}

/// A duration as whole microseconds, the unit the statements multiply an interval by.
pub(super) fn micros(d: Duration) -> i64 {
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX)
}

/// Takes up to `batch` due deliveries for `lease`; cancels those whose endpoint is not live.
pub async fn take_due(
    conn: &mut PgConn,
    lease: Duration,
    batch: i64,
) -> diesel::QueryResult<Vec<Taken>> {
    take_due_statement(lease, batch).load(conn).await
}

/// [`take_due`]'s statement (whole text: `tests/sql/take_due_deliveries.sql`).
fn take_due_statement(lease: Duration, batch: i64) -> Sql<'static> {
    let mut q = Statement::new();
    let lease = q.bind::<BigInt, _>(micros(lease));
    let batch = q.bind::<BigInt, _>(batch);
    q.push(format_args!(
        "WITH due AS (
    SELECT event_id, endpoint_id FROM event_deliveries
    WHERE state = 'pending' AND next_attempt_at <= now()
    ORDER BY next_attempt_at LIMIT {batch}
    FOR UPDATE SKIP LOCKED),
judged AS (
    SELECT due.event_id, due.endpoint_id,
           e.status = 'enabled' AND e.deleted_at IS NULL AS live
    FROM due JOIN event_deliveries d USING (event_id, endpoint_id)
    JOIN webhook_endpoints e ON e.merchant_id = d.merchant_id AND e.id = d.endpoint_id)
UPDATE event_deliveries d SET
    state = CASE WHEN judged.live THEN 'pending' ELSE 'canceled' END,
    next_attempt_at = CASE WHEN judged.live
        THEN now() + {lease} * interval '1 microsecond' ELSE d.next_attempt_at END,
    updated_at = now()
FROM judged, webhook_endpoints e, merchant_events ev
WHERE d.event_id = judged.event_id AND d.endpoint_id = judged.endpoint_id
  AND e.merchant_id = d.merchant_id AND e.id = d.endpoint_id AND ev.id = d.event_id
RETURNING d.event_id, d.endpoint_id, d.merchant_id, d.state::text AS state,
          d.attempts, d.next_attempt_at AS lease_until, e.url, e.secret,
          e.previous_secret, e.previous_secret_until,
          ev.id, ev.seq, ev.type::text AS event_type, ev.resource_id, ev.order_id,
          ev.snapshot, ev.request, ev.created_at"
    ));
    q.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::snapshot::assert_sql_snapshot;

    #[test]
    fn the_take_statement_reads_as_its_snapshot() {
        assert_sql_snapshot(
            "take_due_deliveries",
            &take_due_statement(Duration::from_secs(30), 10),
        );
    }
}
