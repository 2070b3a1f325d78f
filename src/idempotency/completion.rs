//! Completing a key for whoever finished its work when that was not its own request (the
//! reconciler, a webhook, the flow's slow path).

use diesel::sql_types::{Bool, Int2, Text, Uuid as SqlUuid};
use diesel::QueryResult;
use diesel_async::{AsyncPgConnection, RunQueryDsl};

use super::Recorded;
use crate::ids::MerchantId;

/// Completes the key that made `recorded`'s resource when someone other than its request
/// finished the work (the reconciler, a webhook): in flight or completed-but-unresolved, it
/// now replays `recorded`. Inside the caller's transaction.
pub async fn complete_for_resource(
    conn: &mut AsyncPgConnection,
    merchant_id: MerchantId,
    key: &str,
    recorded: &Recorded,
) -> QueryResult<()> {
    diesel::sql_query(
        "UPDATE idempotency_keys SET state = 'completed', locked_until = NULL, \
             recovery_point = 'finished', response_status = $5, unresolved = $6, \
             updated_at = now() \
         WHERE merchant_id = $1 AND key = $2 AND resource_type = $3 AND resource_id = $4 \
           AND (state = 'in_flight' OR unresolved)",
    )
    .bind::<SqlUuid, _>(merchant_id.0)
    .bind::<Text, _>(key)
    .bind::<Text, _>(recorded.resource_type)
    .bind::<SqlUuid, _>(recorded.resource_id)
    .bind::<Int2, _>(recorded.status as i16)
    .bind::<Bool, _>(recorded.unresolved)
    .execute(conn)
    .await
    .map(|_| ())
}
