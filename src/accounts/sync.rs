//! What a replica learns from the database about keys: every `interval` (a quarter of a
//! second by default) it asks `api_keys` for the keys whose life changed — revoked, or given
//! an expiry by a rotation — since its last look, and evicts them from its [`CallerCache`].
//! So a revocation is honoured by every replica within a second without a database read per
//! request, and without LISTEN/NOTIFY, which a pooler in transaction mode does not carry
//! (README, "Authentication").
//!
//! "Since its last look" is in commit order, not in time: the `api_keys_life` trigger stamps
//! each change with its transaction's id (`life_changed_xid`), and a look asks for the changes
//! of transactions at or above an earlier look's snapshot xmin. Whatever that look could not
//! see — committed after it, however long after its `UPDATE` — has an id at or above it, so a
//! revocation inside a transaction held open by hand is found when it commits. Each look
//! reaches back to the xmin of a look at least [`MARGIN`] old, so that a key put in the cache
//! by a request whose lookup raced the revocation is evicted again by a later look; evicting
//! twice costs one more lookup.
//!
//! The keys' `last_used_at` is written by a task of its own ([`run_last_used`]): a row lock
//! held by hand on a used key must not hold up the evictions.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use diesel::sql_types::{Array, BigInt, Bytea, Nullable};
use diesel::QueryableByName;
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use tokio::sync::watch;

use super::{CallerCache, SecretHash};
use crate::db::DbPool;

/// How long a change is evicted again by later looks, after the look that first saw it.
pub const MARGIN: Duration = Duration::from_secs(2);

/// A look at `api_keys`: its snapshot's xmin (as a number: diesel has no `xid8`), and the
/// secret hashes of the keys changed by transactions at or above `from` (through the partial
/// index on `life_changed_xid`). With no `from`, the look's own xmin: the first look only
/// sets where the next ones start.
#[derive(QueryableByName)]
struct Look {
    #[diesel(sql_type = BigInt)]
    xmin: i64,
    #[diesel(sql_type = Array<Bytea>)]
    changed: Vec<Vec<u8>>,
}

/// The snapshot xmin of this look, and the secret hashes of keys whose life was changed by a
/// transaction at or above `from` (an earlier look's xmin). Both in one statement, so from one
/// snapshot: a change this look misses is one it could not see, above its xmin.
pub async fn life_changes_since(
    conn: &mut AsyncPgConnection,
    from: Option<i64>,
) -> diesel::QueryResult<(i64, Vec<SecretHash>)> {
    let look: Look = diesel::sql_query(
        "SELECT (now.xmin::text)::bigint AS xmin, \
                ARRAY(SELECT secret_sha256 FROM api_keys \
                      WHERE life_changed_xid >= COALESCE(($1::text)::xid8, now.xmin)) AS changed \
         FROM (SELECT pg_snapshot_xmin(pg_current_snapshot()) AS xmin) AS now",
    )
    .bind::<Nullable<BigInt>, _>(from)
    .load(conn)
    .await
    .and_then(crate::db::one)?;
    Ok((
        look.xmin,
        look.changed
            .into_iter()
            .filter_map(|h| SecretHash::try_from(h.as_slice()).ok())
            .collect(),
    ))
}

/// The xmins of the recent looks, oldest first: the oldest is where the next look starts.
#[derive(Default)]
struct Looks {
    recent: VecDeque<(Instant, i64)>,
}

impl Looks {
    /// Where the next look starts: the xmin of the newest look at least [`MARGIN`] old (or
    /// of the oldest there is).
    fn from(&self) -> Option<i64> {
        self.recent.front().map(|(_, xmin)| *xmin)
    }

    fn took(&mut self, xmin: i64) {
        self.recent.push_back((Instant::now(), xmin));
        while self
            .recent
            .get(1)
            .is_some_and(|(at, _)| at.elapsed() >= MARGIN)
        {
            self.recent.pop_front();
        }
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
                Ok((xmin, changed)) => {
                    for hash in &changed {
                        callers.evict(hash);
                    }
                    looks.took(xmin);
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

    #[test]
    fn a_look_starts_at_the_xmin_of_a_look_at_least_the_margin_old() {
        let mut looks = Looks::default();
        assert_eq!(looks.from(), None);
        looks.took(10);
        looks.took(12);
        assert_eq!(
            looks.from(),
            Some(10),
            "the first look is not yet the margin old"
        );
        looks.recent[0].0 -= MARGIN * 2;
        looks.recent[1].0 -= MARGIN;
        looks.took(15);
        assert_eq!(
            looks.from(),
            Some(12),
            "the newest look at least the margin old"
        );
        assert_eq!(looks.recent.len(), 2);
    }
}
