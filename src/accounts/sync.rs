//! What a replica learns from the database about keys, and tells it: every `interval` (a
//! quarter of a second by default) it asks `api_keys` for the keys whose life changed —
//! revoked, or given an expiry by a rotation — since its last look, and evicts them from its
//! [`CallerCache`]; and it writes the `last_used_at` its requests noted. So a revocation is
//! honoured by every replica within a second without a database read per request, and
//! without LISTEN/NOTIFY, which a pooler in transaction mode does not carry (README,
//! "Authentication").
//!
//! Each look goes back [`MARGIN`] before the previous one's database time, so a revocation
//! committed just after a look began, or a key put in the cache by a request whose lookup
//! raced the revocation, is evicted by the next look; evicting twice costs one more lookup.

use std::time::Duration;

use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use tokio::sync::watch;

use super::{CallerCache, SecretHash};
use crate::db::schema::api_keys;
use crate::db::DbPool;

/// How far each look reaches back before the previous one.
pub const MARGIN: Duration = Duration::from_secs(2);

/// The database's time now, and the secret hashes of keys whose life changed after `since`
/// (found through the partial index on `life_changed_at`).
pub async fn life_changes_since(
    conn: &mut AsyncPgConnection,
    since: Option<DateTime<Utc>>,
) -> QueryResult<(DateTime<Utc>, Vec<SecretHash>)> {
    let now: DateTime<Utc> =
        diesel::select(diesel::dsl::sql::<diesel::sql_types::Timestamptz>("now()"))
            .load(conn)
            .await
            .and_then(crate::db::one)?;
    let since = since.unwrap_or(now) - chrono::Duration::from_std(MARGIN).unwrap_or_default();
    let hashes: Vec<Vec<u8>> = api_keys::table
        .filter(api_keys::life_changed_at.gt(since))
        .select(api_keys::secret_sha256)
        .load(conn)
        .await?;
    Ok((
        now,
        hashes
            .into_iter()
            .filter_map(|h| SecretHash::try_from(h.as_slice()).ok())
            .collect(),
    ))
}

/// Until `stop`: evict changed keys from `callers`, and write noted uses, every `interval`.
pub async fn run(
    pool: DbPool,
    callers: CallerCache,
    interval: Duration,
    mut stop: watch::Receiver<bool>,
) {
    let mut since = None;
    loop {
        match pool.get().await {
            Ok(mut conn) => {
                match life_changes_since(&mut conn, since).await {
                    Ok((now, changed)) => {
                        for hash in &changed {
                            callers.evict(hash);
                        }
                        since = Some(now);
                    }
                    Err(err) => tracing::warn!(
                        error = %err,
                        "could not ask for revoked keys; the auth cache's time bounds them meanwhile"
                    ),
                }
                if let Err(err) = callers.uses().write(&mut conn).await {
                    tracing::warn!(error = %err, "could not write keys' last use; retrying");
                }
            }
            Err(err) => tracing::warn!(error = %err, "no connection for the key poll; retrying"),
        }
        tokio::select! {
            _ = tokio::time::sleep(interval) => {}
            _ = stop.changed() => return,
        }
    }
}
