//! Support's "send it again" (`POST /v1/support/events/{id}/redeliver`; docs/guides/support.md, "Support"):
//! every delivery of an event to a live endpoint is made due now, and a live endpoint
//! subscribed to the event's type that never had it gets a delivery of its own.

use chrono::{DateTime, Utc};
use diesel::sql_types::{Integer, Text, Timestamptz, Uuid as SqlUuid};
use diesel::QueryableByName;
use diesel_async::RunQueryDsl;
use uuid::Uuid;

use super::deliveries::Delivery;
use crate::db::sql::Sql;
use crate::db::statement::Statement;
use crate::db::PgConn;
use crate::ids::{EndpointId, EventId};

/// Makes the deliveries of `event` due now, in one statement; answers them as they stand.
///
/// To an endpoint enabled and not deleted: a `failed`, `canceled` or `succeeded` delivery
/// becomes `pending` again and a `pending` one is due at once, its `attempts` still counting
/// the sends made (the worker's schedule goes on from there); an endpoint subscribed to the
/// type (or to `*`) with no delivery of the event gets one, also an endpoint registered after
/// the event. A delivery to a disabled or deleted endpoint stays as it is: support enables
/// the endpoint first. Pressed twice, it makes the same deliveries due twice: the receiver
/// deduplicates by `webhook-id` (docs/guides/events.md, "Deduplicating").
pub async fn redeliver(conn: &mut PgConn, event: EventId) -> diesel::QueryResult<Vec<Delivery>> {
    // One statement, so the answer is what it did, whatever a delivery worker does next. Its
    // parts see the rows as they were before it (one snapshot): the inserted rows are only
    // in `made`, the updated ones only in `due`, and `kept` is the rest.
    let rows: Vec<Row> = redeliver_statement(event).load(conn).await?;
    Ok(rows.into_iter().map(Row::into_delivery).collect())
}

/// [`redeliver`]'s statement (whole text: `tests/sql/redeliver_event.sql`).
fn redeliver_statement(event: EventId) -> Sql<'static> {
    let mut q = Statement::new();
    let event = q.bind::<SqlUuid, _>(event.0);
    q.push(format_args!(
        "WITH event AS (SELECT id, merchant_id, type FROM merchant_events WHERE id = {event}),
made AS (
    INSERT INTO event_deliveries (event_id, endpoint_id, merchant_id)
    SELECT event.id, e.id, e.merchant_id FROM event
    JOIN webhook_endpoints e ON e.merchant_id = event.merchant_id
    WHERE e.status = 'enabled' AND e.deleted_at IS NULL
      AND (event.type = ANY (e.enabled_events) OR '*' = ANY (e.enabled_events))
    ON CONFLICT (event_id, endpoint_id) DO NOTHING
    RETURNING event_deliveries.*),
due AS (
    UPDATE event_deliveries d
    SET state = 'pending', next_attempt_at = now(), updated_at = now()
    FROM webhook_endpoints e
    WHERE d.event_id = {event} AND e.merchant_id = d.merchant_id AND e.id = d.endpoint_id
      AND e.status = 'enabled' AND e.deleted_at IS NULL
    RETURNING d.*),
kept AS (
    SELECT d.* FROM event_deliveries d WHERE d.event_id = {event}
      AND NOT EXISTS (SELECT 1 FROM due WHERE due.endpoint_id = d.endpoint_id))
SELECT x.event_id, x.endpoint_id, e.url, x.state, x.attempts, x.next_attempt_at,
       x.created_at, x.updated_at
FROM (SELECT * FROM made UNION ALL SELECT * FROM due UNION ALL SELECT * FROM kept) x
JOIN webhook_endpoints e ON e.merchant_id = x.merchant_id AND e.id = x.endpoint_id
ORDER BY x.created_at, x.endpoint_id"
    ));
    q.finish()
}

#[derive(QueryableByName)]
struct Row {
    #[diesel(sql_type = SqlUuid)]
    event_id: Uuid,
    #[diesel(sql_type = SqlUuid)]
    endpoint_id: Uuid,
    #[diesel(sql_type = Text)]
    url: String,
    #[diesel(sql_type = Text)]
    state: String,
    #[diesel(sql_type = Integer)]
    attempts: i32,
    #[diesel(sql_type = Timestamptz)]
    next_attempt_at: DateTime<Utc>,
    #[diesel(sql_type = Timestamptz)]
    created_at: DateTime<Utc>,
    #[diesel(sql_type = Timestamptz)]
    updated_at: DateTime<Utc>,
}

impl Row {
    fn into_delivery(self) -> Delivery {
        Delivery {
            event_id: EventId(self.event_id),
            endpoint_id: EndpointId(self.endpoint_id),
            url: self.url,
            state: self.state,
            attempts: self.attempts,
            next_attempt_at: self.next_attempt_at,
            created_at: self.created_at,
            updated_at: self.updated_at,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::snapshot::assert_sql_snapshot;

    #[test]
    fn the_redeliver_statement_reads_as_its_snapshot() {
        assert_sql_snapshot("redeliver_event", &redeliver_statement(EventId::new()));
    }
}
