//! What a replica learns from the database about keys: every `interval` (a quarter of a
//! second by default) it asks `api_keys` for the keys whose life changed — revoked, or given
//! an expiry by a rotation — since its last look, and evicts them from its [`CallerCache`].
//! So a revocation is honoured by every replica within a second without a database read per
//! request, and without LISTEN/NOTIFY, which a pooler in transaction mode does not carry
//! (docs/guides/idempotency.md, "Authentication").
//!
//! "Since its last look" is in commit order, not in time: the `api_keys_life` trigger stamps
//! each change with its transaction's id (`life_changed_xid`), and a look asks for the changes
//! of transactions at or above an earlier look's snapshot xmin. Whatever that look could not
//! see — committed after it, however long after its `UPDATE` — has an id at or above it, so a
//! revocation inside a transaction held open by hand is found when it commits. Each look
//! reaches back to the xmin of a look at least [`MARGIN`] old, and a change is evicted by every
//! look for [`MARGIN`] after this replica first saw it, so that a key put in the cache by a
//! request whose lookup raced the revocation is evicted again; evicting twice costs one more
//! lookup. After that a change is not evicted again, even while a long transaction elsewhere
//! holds the xmin back and the looks keep finding it: a rotated key in its overlap stays
//! cached.
//!
//! The keys' `last_used_at` is written by a task of its own ([`run_last_used`]): a row lock
//! held by hand on a used key must not hold up the evictions.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use diesel::sql_types::{BigInt, Bytea, Nullable};
use diesel::QueryableByName;
use diesel_async::RunQueryDsl;
use tokio::sync::watch;

use super::{CallerCache, SecretHash};
use crate::db::sql::Sql;
use crate::db::statement::Statement;
use crate::db::DbPool;
use crate::db::PgConn;

/// How long a change is evicted again by later looks, after the look that first saw it.
pub const MARGIN: Duration = Duration::from_secs(2);

/// A row of a look at `api_keys`: its snapshot's xmin (as a number: diesel has no `xid8`),
/// and a key changed by a transaction at or above `from`, with that transaction (none when
/// nothing changed).
#[derive(QueryableByName)]
struct LookRow {
    #[diesel(sql_type = BigInt)]
    xmin: i64,
    #[diesel(sql_type = Nullable<Bytea>)]
    hash: Option<Vec<u8>>,
    #[diesel(sql_type = Nullable<BigInt>)]
    xid: Option<i64>,
}

/// A change of a key's life: its secret's hash, and the transaction that made it.
pub type Change = (SecretHash, i64);

/// The snapshot xmin of this look, and the keys whose life was changed by a transaction at or
/// above `from` (an earlier look's xmin; with none, this look's own, so the first look only
/// sets where the next ones start), through the partial index on `life_changed_xid`. Both in
/// one statement, so from one snapshot: a change this look misses is one it could not see,
/// above its xmin.
pub async fn life_changes_since(
    conn: &mut PgConn,
    from: Option<i64>,
) -> diesel::QueryResult<(i64, Vec<Change>)> {
    let rows: Vec<LookRow> = look_statement(from).load(conn).await?;
    let xmin = <[LookRow]>::first(&rows)
        .map(|row| row.xmin)
        .ok_or(diesel::NotFound)?;
    let changes = rows
        .into_iter()
        .filter_map(|row| {
            let hash = SecretHash::try_from(row.hash?.as_slice()).ok()?;
            Some((hash, row.xid?))
        })
        .collect();
    Ok((xmin, changes))
}

/// [`life_changes_since`]'s statement (whole text: `tests/sql/key_life_changes.sql`).
fn look_statement(from: Option<i64>) -> Sql<'static> {
    let mut q = Statement::new();
    let from = q.bind::<Nullable<BigInt>, _>(from);
    q.push(format_args!(
        "SELECT (now.xmin::text)::bigint AS xmin, k.secret_sha256 AS hash,
       (k.life_changed_xid::text)::bigint AS xid
FROM (SELECT pg_snapshot_xmin(pg_current_snapshot()) AS xmin) AS now
LEFT JOIN api_keys AS k
  ON k.life_changed_xid >= COALESCE(({from}::text)::xid8, now.xmin)"
    ));
    q.finish()
}

/// What the poll remembers between looks: the xmins of the recent looks, oldest first (the
/// oldest is where the next look starts), and when it first saw each change still found.
#[derive(Default)]
struct Looks {
    recent: VecDeque<(Instant, i64)>,
    seen: HashMap<SecretHash, (i64, Instant)>,
}

impl Looks {
    /// Where the next look starts: the xmin of the newest look at least [`MARGIN`] old (or
    /// of the oldest there is).
    fn from(&self) -> Option<i64> {
        self.recent.front().map(|(_, xmin)| *xmin)
    }

    /// A look was taken with `xmin` and found `changes`: the keys to evict, those of the
    /// changes first seen less than [`MARGIN`] ago.
    fn took(&mut self, xmin: i64, changes: Vec<Change>) -> Vec<SecretHash> {
        let now = Instant::now();
        self.recent.push_back((now, xmin));
        while self
            .recent
            .get(1)
            .is_some_and(|(at, _)| at.elapsed() >= MARGIN)
        {
            self.recent.pop_front();
        }
        let mut seen = HashMap::with_capacity(changes.len());
        let mut evict = Vec::new();
        for (hash, xid) in changes {
            let first = match self.seen.get(&hash) {
                Some(&(was, at)) if was == xid => at,
                _ => now,
            };
            if first.elapsed() < MARGIN {
                evict.push(hash);
            }
            seen.insert(hash, (xid, first));
        }
        // Changes no longer found are behind every look to come: forgotten.
        self.seen = seen;
        evict
    }
}

/// Until `stop`: evict changed keys from `callers` every `interval`.
pub async fn run(
    pool: DbPool,
    callers: CallerCache,
    interval: Duration,
    mut stop: watch::Receiver<bool>,
) {
    let mut looks = Looks::default();
    loop {
        match pool.get().await {
            Ok(mut conn) => match life_changes_since(&mut conn, looks.from()).await {
                Ok((xmin, changes)) => {
                    for hash in looks.took(xmin, changes) {
                        callers.evict(&hash);
                    }
                }
                Err(err) => tracing::warn!(
                    error = %err,
                    "could not ask for revoked keys; the auth cache's time bounds them meanwhile"
                ),
            },
            Err(err) => tracing::warn!(error = %err, "no connection for the key poll; retrying"),
        }
        tokio::select! {
            _ = tokio::time::sleep(interval) => {}
            _ = stop.changed() => return,
        }
    }
}

/// Until `stop`: write the `last_used_at` of the keys `callers` noted, every `interval`. Its
/// own task, apart from [`run`]; and its `UPDATE` skips a row locked by someone else rather
/// than wait (the key is tried again next time), so it holds no connection for as long as a
/// hand transaction keeps a key's row.
pub async fn run_last_used(
    pool: DbPool,
    callers: CallerCache,
    interval: Duration,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        match pool.get().await {
            Ok(mut conn) => {
                if let Err(err) = callers.uses().write(&mut conn).await {
                    tracing::warn!(error = %err, "could not write keys' last use; retrying");
                }
            }
            Err(err) => {
                tracing::warn!(error = %err, "no connection to write keys' last use; retrying")
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(interval) => {}
            _ = stop.changed() => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::snapshot::assert_sql_snapshot;

    #[test]
    fn the_look_reads_as_its_snapshot() {
        assert_sql_snapshot("key_life_changes", &look_statement(Some(1)));
    }

    fn ago(looks: &mut Looks, by: Duration) {
        for (at, _) in looks.recent.iter_mut() {
            *at -= by;
        }
        for (_, at) in looks.seen.values_mut() {
            *at -= by;
        }
    }

    #[test]
    fn a_look_starts_at_the_xmin_of_a_look_at_least_the_margin_old() {
        let mut looks = Looks::default();
        assert_eq!(looks.from(), None);
        looks.took(10, vec![]);
        ago(&mut looks, MARGIN);
        looks.took(12, vec![]);
        assert_eq!(looks.from(), Some(10), "the only look the margin old");
        ago(&mut looks, MARGIN);
        looks.took(15, vec![]);
        assert_eq!(
            looks.from(),
            Some(12),
            "the newest look at least the margin old"
        );
        assert_eq!(looks.recent.len(), 2);
    }

    #[test]
    fn a_change_is_evicted_for_the_margin_after_it_was_first_seen_then_no_more() {
        let mut looks = Looks::default();
        let (key, other) = ([1; 32], [2; 32]);
        assert_eq!(looks.took(10, vec![(key, 11)]), vec![key]);
        assert_eq!(
            looks.took(10, vec![(key, 11)]),
            vec![key],
            "again, within the margin"
        );
        ago(&mut looks, MARGIN);
        // The xmin held back by a long transaction elsewhere: the change is found again.
        assert_eq!(looks.took(10, vec![(key, 11), (other, 12)]), vec![other]);
        // Changed again by another transaction: evicted again.
        assert_eq!(
            looks.took(10, vec![(key, 13), (other, 12)]),
            vec![key, other]
        );
        looks.took(14, vec![]);
        assert!(looks.seen.is_empty(), "behind every look to come");
    }
}
