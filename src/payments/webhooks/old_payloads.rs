//! Provider webhooks stored whole, before payorch kept them through the allowlist
//! (`providers::kept`; docs/PRODUCTION.md, section 6): their card and billing data would stay
//! until reaped, or for ever about a payment that never ends. Their reaper (`reaper`) rewrites them,
//! a batch at a time, into what a new row keeps. `payload_kept` marks the rows done; it is
//! false by default so that a row an older replica writes while an upgrade rolls is found too
//! (migration 2026-11-27-000018), through the partial index `provider_webhooks_unkept` (so named since migration 2026-11-27-000022).

use diesel::prelude::*;
use diesel::sql_types::{Array, Jsonb, Uuid as SqlUuid};
use diesel_async::RunQueryDsl;
use uuid::Uuid;

use crate::db::schema::provider_webhooks::dsl as w;
use crate::db::sql::Sql;
use crate::db::statement::Statement;
use crate::db::transaction::in_transaction;
use crate::db::PgConn;
use crate::providers::kept;

/// Rewrites up to `batch` stored payloads not yet kept, oldest first, through their
/// provider's allowlist; how many. `FOR UPDATE SKIP LOCKED` lets replicas share the work, and
/// each batch is one short transaction.
pub async fn strip_old_payloads(conn: &mut PgConn, batch: i64) -> diesel::QueryResult<usize> {
    in_transaction(conn, async |conn| {
        let stored: Vec<(Uuid, String, serde_json::Value)> = w::provider_webhooks
            // `NOT payload_kept`, the predicate of the partial index `provider_webhooks_unkept`
            // word for word: a bound `= false` would not prove it, and the round would scan.
            .filter(diesel::dsl::not(w::payload_kept))
            .order(w::received_at)
            .limit(batch)
            .select((w::id, w::provider, w::payload))
            .for_update()
            .skip_locked()
            .load(conn)
            .await?;
        if stored.is_empty() {
            return Ok(0);
        }
        let (ids, payloads): (Vec<Uuid>, Vec<serde_json::Value>) = stored
            .iter()
            .map(|(id, provider, payload)| (*id, kept::of_provider(provider, payload)))
            .unzip();
        keep(ids, payloads).execute(conn).await
    })
    .await
}

/// The statement that writes a batch's kept payloads, each in place of its row's stored one
/// (whole text: `tests/sql/keep_old_payloads.sql`).
fn keep(ids: Vec<Uuid>, payloads: Vec<serde_json::Value>) -> Sql<'static> {
    let mut q = Statement::new();
    let ids = q.bind::<Array<SqlUuid>, _>(ids);
    let payloads = q.bind::<Array<Jsonb>, _>(payloads);
    q.push(format_args!(
        "UPDATE provider_webhooks w SET payload = k.payload, payload_kept = true
FROM unnest({ids}::uuid[], {payloads}::jsonb[]) AS k(id, payload) WHERE w.id = k.id"
    ));
    q.finish()
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_statement_reads_as_its_snapshot() {
        let sql = super::keep(Vec::new(), Vec::new());
        crate::db::snapshot::assert_sql_snapshot("keep_old_payloads", &sql);
    }
}
