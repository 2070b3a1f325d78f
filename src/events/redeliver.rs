//! Support's "send it again" (`POST /v1/support/events/{id}/redeliver`; README, "Support"):
//! every delivery of an event to a live endpoint is made due now, and a live endpoint
//! subscribed to the event's type that never had it gets a delivery of its own.

use diesel::sql_types::Uuid as SqlUuid;
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use uuid::Uuid;

use super::deliveries::{deliveries_of, Delivery};
use crate::ids::EventId;

/// Makes the deliveries of `event` due now, in one statement; answers them as they stand.
///
/// To an endpoint enabled and not deleted: a `failed`, `canceled` or `succeeded` delivery
/// becomes `pending` again and a `pending` one is due at once, its `attempts` still counting
/// the sends made (the worker's schedule goes on from there); an endpoint subscribed to the
/// type (or to `*`) with no delivery of the event gets one, also an endpoint registered after
/// the event. A delivery to a disabled or deleted endpoint stays as it is: support enables
/// the endpoint first. Pressed twice, it makes the same deliveries due twice: the receiver
/// deduplicates by `webhook-id` (README, "Deduplicating").
pub async fn redeliver(
    conn: &mut AsyncPgConnection,
    event: EventId,
) -> diesel::QueryResult<Vec<Delivery>> {
    // The insert's rows are not visible to the update of the same statement (one snapshot),
    // and need no update: a new delivery is pending and due now by its defaults.
    diesel::sql_query(
        "WITH event AS (SELECT id, merchant_id, type FROM events WHERE id = $1), \
         made AS ( \
             INSERT INTO event_deliveries (event_id, endpoint_id, merchant_id) \
             SELECT event.id, e.id, e.merchant_id FROM event \
             JOIN webhook_endpoints e ON e.merchant_id = event.merchant_id \
             WHERE e.status = 'enabled' AND e.deleted_at IS NULL \
               AND (event.type = ANY (e.enabled_events) OR '*' = ANY (e.enabled_events)) \
             ON CONFLICT (event_id, endpoint_id) DO NOTHING) \
         UPDATE event_deliveries d \
         SET state = 'pending', next_attempt_at = now(), updated_at = now() \
         FROM webhook_endpoints e \
         WHERE d.event_id = $1 AND e.merchant_id = d.merchant_id AND e.id = d.endpoint_id \
           AND e.status = 'enabled' AND e.deleted_at IS NULL",
    )
    .bind::<SqlUuid, _>(event.0)
    .execute(conn)
    .await?;
    deliveries_of(conn, &[event.0] as &[Uuid]).await
}
