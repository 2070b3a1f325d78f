//! Provider webhooks stored whole, before payorch kept them through the allowlist
//! (`providers::kept`; docs/PRODUCTION.md, section 6): their card and billing data would stay
//! until reaped, or for ever about a payment that never ends. Their reaper (`reaper`) rewrites them,
//! a batch at a time, into what a new row keeps. `payload_kept` marks the rows done; it is
//! false by default so that a row an older replica writes while an upgrade rolls is found too
//! (migration 2026-11-27-000018), through the partial index `provider_webhooks_unkept` (so named since migration 2026-11-27-000022).

use diesel::sql_types::{Array, BigInt, Jsonb, Text, Uuid as SqlUuid};
use diesel::QueryableByName;
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use uuid::Uuid;

use crate::db::transaction::in_transaction;
use crate::providers::kept;

/// Rewrites up to `batch` stored payloads not yet kept, oldest first, through their
/// provider's allowlist; how many. `FOR UPDATE SKIP LOCKED` lets replicas share the work, and
/// each batch is one short transaction.
pub async fn strip_old_payloads(
    conn: &mut AsyncPgConnection,
    batch: i64,
) -> diesel::QueryResult<usize> {
    #[derive(QueryableByName)]
    struct Stored {
        #[diesel(sql_type = SqlUuid)]
        id: Uuid,
        #[diesel(sql_type = Text)]
        provider: String,
        #[diesel(sql_type = Jsonb)]
        payload: serde_json::Value,
    }
    in_transaction(conn, async |conn| {
        let stored: Vec<Stored> = diesel::sql_query(
            "SELECT id, provider, payload FROM provider_webhooks WHERE NOT payload_kept \
             ORDER BY received_at LIMIT $1 FOR UPDATE SKIP LOCKED",
        )
        .bind::<BigInt, _>(batch)
        .load(conn)
        .await?;
        if stored.is_empty() {
            return Ok(0);
        }
        let ids: Vec<Uuid> = stored.iter().map(|row| row.id).collect();
        let payloads: Vec<serde_json::Value> = stored
            .iter()
            .map(|row| kept::of_provider(&row.provider, &row.payload))
            .collect();
        diesel::sql_query(
            "UPDATE provider_webhooks w SET payload = k.payload, payload_kept = true \
             FROM unnest($1::uuid[], $2::jsonb[]) AS k(id, payload) WHERE w.id = k.id",
        )
        .bind::<Array<SqlUuid>, _>(ids)
        .bind::<Array<Jsonb>, _>(payloads)
        .execute(conn)
        .await
    })
    .await
}
