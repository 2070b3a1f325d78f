//! `api_keys.last_used_at`, kept cheaply: a request only notes its key in memory, at most once
//! a minute per key on this replica, and a task of its own ([`super::sync::run_last_used`])
//! writes what was noted in one statement. Good to a minute or so, which is what an operator
//! asks of it ("is this key still in use?"); never a write on the request path.

use std::collections::HashSet;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use diesel::result::QueryResult;
use diesel::sql_types::{Array, Uuid as SqlUuid};
use diesel::QueryableByName;
use diesel_async::RunQueryDsl;

use crate::bounded_map::BoundedMap;
use crate::db::sql::Sql;
use crate::db::statement::Statement;
use crate::db::PgConn;
use crate::ids::ApiKeyId;

/// A key's use is written at most once in this long by one replica.
pub(super) const WRITE_EVERY: Duration = Duration::from_secs(60);

/// Keys whose last note this replica remembers; past it, it starts again (one extra write
/// per key).
const REMEMBERED_KEYS: usize = 10_000;

/// A noted key whose row was locked when its use was written.
#[derive(QueryableByName)]
struct Skipped {
    #[diesel(sql_type = SqlUuid)]
    id: uuid::Uuid,
}

pub(super) struct KeyUses {
    noted: BoundedMap<ApiKeyId, Instant>,
    pending: Mutex<HashSet<ApiKeyId>>,
}

impl Default for KeyUses {
    fn default() -> Self {
        KeyUses {
            noted: BoundedMap::new(REMEMBERED_KEYS),
            pending: Mutex::new(HashSet::new()),
        }
    }
}

impl KeyUses {
    /// `key` was used now: to be written, unless it was noted less than a minute ago.
    pub(super) fn note(&self, key: ApiKeyId) {
        if self
            .noted
            .get(&key)
            .is_some_and(|at| at.elapsed() < WRITE_EVERY)
        {
            return;
        }
        self.noted
            .insert_keeping(key, Instant::now(), |at| at.elapsed() < WRITE_EVERY);
        self.lock().insert(key);
    }

    /// Writes `last_used_at` of every key noted since the last write. A key whose row someone
    /// else holds locked is skipped, never waited for, and kept for the next try with the
    /// keys of a failed write.
    pub(super) async fn write(&self, conn: &mut PgConn) -> QueryResult<usize> {
        let keys: Vec<uuid::Uuid> = self.lock().drain().map(|k| k.0).collect();
        if keys.is_empty() {
            return Ok(0);
        }
        // The last SELECT reads the snapshot before the UPDATE: the keys that exist and were
        // not written (locked), to try again; a key that no longer exists is not kept.
        let skipped: QueryResult<Vec<Skipped>> = write_statement(&keys).load(conn).await;
        match skipped {
            Ok(skipped) => {
                let written = keys.len() - skipped.len();
                self.lock()
                    .extend(skipped.into_iter().map(|row| ApiKeyId(row.id)));
                Ok(written)
            }
            Err(err) => {
                self.lock().extend(keys.into_iter().map(ApiKeyId));
                Err(err)
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashSet<ApiKeyId>> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// [`KeyUses::write`]'s statement (whole text: `tests/sql/write_keys_last_used.sql`).
fn write_statement(keys: &[uuid::Uuid]) -> Sql<'_> {
    let mut q = Statement::new();
    let keys = q.bind::<Array<SqlUuid>, _>(keys);
    q.push(format_args!(
        "WITH written AS (
    UPDATE api_keys SET last_used_at = now()
    WHERE id IN (SELECT id FROM api_keys WHERE id = ANY({keys}) FOR UPDATE SKIP LOCKED)
    RETURNING id)
SELECT id FROM api_keys
WHERE id = ANY({keys}) AND id NOT IN (SELECT id FROM written)"
    ));
    q.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::snapshot::assert_sql_snapshot;

    #[test]
    fn the_write_statement_reads_as_its_snapshot() {
        assert_sql_snapshot(
            "write_keys_last_used",
            &write_statement(&[uuid::Uuid::nil()]),
        );
    }

    #[test]
    fn a_key_is_noted_once_a_minute() {
        let uses = KeyUses::default();
        let key = ApiKeyId::new();
        let other = ApiKeyId::new();
        for _ in 0..100 {
            uses.note(key);
        }
        uses.note(other);
        let pending = uses.lock().clone();
        assert_eq!(pending, HashSet::from([key, other]));
        uses.lock().clear();
        uses.note(key);
        assert!(uses.lock().is_empty(), "noted again within the minute");
    }
}
