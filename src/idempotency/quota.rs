//! The per-merchant quota of new Idempotency-Keys a minute, in O(1) and with no query on the
//! request path.
//!
//! Each replica counts the keys its requests open in memory, per merchant, in fixed
//! wall-clock minutes, and judges a new key by a sliding window: the previous minute's count,
//! weighted by how much of it still lies within the last 60 s, plus this minute's. Taking a
//! slot is a short critical section on an in-process map; no database row is shared by the
//! requests of a merchant.
//!
//! Replicas learn each other's counts through PostgreSQL: every `sync` interval a worker
//! writes this replica's counts (its own rows only, so no replica waits on another) and reads
//! the sum of everyone else's. The quota is therefore exact within a replica and
//! approximate across replicas: a burst spread over N replicas can overshoot by what the
//! others opened since their last sync, at most one interval's worth (docs/guides/idempotency.md, "Rate of new
//! keys").

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use diesel::sql_types::{Array, BigInt, Uuid as SqlUuid};
use diesel::QueryableByName;
use diesel_async::RunQueryDsl;
use tokio::sync::watch;
use uuid::Uuid;

use crate::db::sql::Sql;
use crate::db::statement::Statement;
use crate::db::DbPool;
use crate::db::PgConn;
use crate::ids::MerchantId;

const MINUTE_MS: u64 = 60_000;
/// Past this many merchants in the map, windows idle for two minutes are dropped.
const PRUNE_ABOVE: usize = 10_000;

/// One merchant's counts: this replica's and, as last synced, everyone else's.
#[derive(Debug, Default, Clone, Copy)]
struct Window {
    minute: u64,
    current: u64,
    previous: u64,
    peers_current: u64,
    peers_previous: u64,
    /// Counted here since the last sync.
    dirty: bool,
}

impl Window {
    fn roll_to(&mut self, minute: u64) {
        if minute == self.minute {
            return;
        }
        let adjacent = minute == self.minute + 1;
        self.previous = if adjacent { self.current } else { 0 };
        self.peers_previous = if adjacent { self.peers_current } else { 0 };
        self.current = 0;
        self.peers_current = 0;
        self.minute = minute;
    }

    /// Keys opened in the 60 s up to `into_minute` ms into the current minute (estimated).
    fn recent(&self, into_minute: u64) -> f64 {
        let older_part = (MINUTE_MS - into_minute) as f64 / MINUTE_MS as f64;
        (self.previous + self.peers_previous) as f64 * older_part
            + (self.current + self.peers_current) as f64
    }
}

pub struct NewKeyQuota {
    limit: u64,
    replica: Uuid,
    windows: Mutex<HashMap<MerchantId, Window>>,
}

impl NewKeyQuota {
    pub fn new(max_new_keys_per_minute: i64) -> Self {
        NewKeyQuota {
            limit: max_new_keys_per_minute.max(0) as u64,
            replica: Uuid::now_v7(),
            windows: Mutex::new(HashMap::new()),
        }
    }

    /// Takes a slot for a new key of `merchant`, or says how long until one frees up.
    pub fn take(&self, merchant: MerchantId) -> Result<(), Duration> {
        let (minute, into) = now_minute();
        let mut windows = self.windows.lock().unwrap_or_else(|e| e.into_inner());
        if windows.len() > PRUNE_ABOVE {
            windows.retain(|_, w| w.minute + 1 >= minute);
        }
        let window = windows.entry(merchant).or_default();
        window.roll_to(minute);
        if window.recent(into) + 1.0 > self.limit as f64 {
            let to_next_minute = Duration::from_millis(MINUTE_MS - into);
            return Err(to_next_minute.max(Duration::from_secs(1)));
        }
        window.current += 1;
        window.dirty = true;
        Ok(())
    }

    /// Returns a slot taken for a key that turned out not to be new.
    pub fn give_back(&self, merchant: MerchantId) {
        let (minute, _) = now_minute();
        let mut windows = self.windows.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(window) = windows.get_mut(&merchant) {
            if window.minute == minute {
                window.current = window.current.saturating_sub(1);
                window.dirty = true;
            }
        }
    }

    /// Writes this replica's counts and reads the other replicas'.
    pub async fn sync(&self, conn: &mut PgConn) -> diesel::QueryResult<()> {
        let (minute, _) = now_minute();
        let mut merchants = Vec::new();
        let mut minutes = Vec::new();
        let mut counts = Vec::new();
        {
            let mut windows = self.windows.lock().unwrap_or_else(|e| e.into_inner());
            for (merchant, window) in windows.iter_mut() {
                window.roll_to(minute);
                if window.dirty {
                    for (m, count) in [(minute, window.current), (minute - 1, window.previous)] {
                        merchants.push(merchant.0);
                        minutes.push(m as i64);
                        counts.push(count as i64);
                    }
                    window.dirty = false;
                }
            }
        }
        if !merchants.is_empty() {
            write_counts_statement(self.replica, &merchants, &minutes, &counts)
                .execute(conn)
                .await?;
        }
        #[derive(QueryableByName)]
        struct PeerCount {
            #[diesel(sql_type = SqlUuid)]
            merchant_id: Uuid,
            #[diesel(sql_type = BigInt)]
            minute: i64,
            #[diesel(sql_type = BigInt)]
            opened: i64,
        }
        let peers: Vec<PeerCount> = peer_counts_statement(self.replica, minute as i64)
            .load(conn)
            .await?;
        let mut windows = self.windows.lock().unwrap_or_else(|e| e.into_inner());
        for window in windows.values_mut() {
            window.peers_current = 0;
            window.peers_previous = 0;
        }
        for peer in peers {
            let window = windows.entry(MerchantId(peer.merchant_id)).or_default();
            window.roll_to(minute);
            let opened = peer.opened.max(0) as u64;
            if peer.minute as u64 == minute {
                window.peers_current = opened;
            } else {
                window.peers_previous = opened;
            }
        }
        Ok(())
    }
}

/// This replica's counts, one row per merchant and minute, written over its earlier ones
/// (whole text: `tests/sql/write_key_quota_counts.sql`). The rows go as three arrays, so
/// the text is the same however many there are.
fn write_counts_statement<'f>(
    replica: Uuid,
    merchants: &'f [Uuid],
    minutes: &'f [i64],
    counts: &'f [i64],
) -> Sql<'f> {
    let mut q = Statement::new();
    let replica = q.bind::<SqlUuid, _>(replica);
    let merchants = q.bind::<Array<SqlUuid>, _>(merchants);
    let minutes = q.bind::<Array<BigInt>, _>(minutes);
    let counts = q.bind::<Array<BigInt>, _>(counts);
    q.push(format_args!(
        "INSERT INTO key_quota_counts (merchant_id, replica_id, minute, opened)
SELECT m, {replica}, n, c
FROM unnest({merchants}::uuid[], {minutes}::bigint[], {counts}::bigint[]) AS u(m, n, c)
ON CONFLICT (merchant_id, replica_id, minute) DO UPDATE SET opened = EXCLUDED.opened"
    ));
    q.finish()
}

/// The other replicas' counts of this `minute` and the one before, after deleting the rows
/// no replica reads any more (whole text: `tests/sql/peer_key_quota_counts.sql`).
fn peer_counts_statement(replica: Uuid, minute: i64) -> Sql<'static> {
    let mut q = Statement::new();
    let replica = q.bind::<SqlUuid, _>(replica);
    let minute = q.bind::<BigInt, _>(minute);
    q.push(format_args!(
        "WITH gone AS (DELETE FROM key_quota_counts WHERE minute < {minute} - 2)
SELECT merchant_id, minute, sum(opened)::bigint AS opened FROM key_quota_counts
WHERE minute >= {minute} - 1 AND replica_id <> {replica} GROUP BY merchant_id, minute"
    ));
    q.finish()
}

/// The current wall-clock minute (shared by every replica) and how far into it we are, in ms.
fn now_minute() -> (u64, u64) {
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    (ms / MINUTE_MS, ms % MINUTE_MS)
}

/// The worker that keeps replicas' counts in step, until `stop` turns true.
pub async fn run_sync(
    pool: DbPool,
    quota: std::sync::Arc<NewKeyQuota>,
    interval: Duration,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        let synced = match pool.get().await {
            Ok(mut conn) => quota.sync(&mut conn).await.map_err(|e| e.to_string()),
            Err(err) => Err(err.to_string()),
        };
        if let Err(err) = synced {
            tracing::warn!(error = %err, "syncing the new-key quota with other replicas failed; retrying");
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
    fn the_sync_statements_read_as_their_snapshots() {
        let replica = Uuid::nil();
        assert_sql_snapshot(
            "write_key_quota_counts",
            &write_counts_statement(replica, &[replica], &[1], &[1]),
        );
        assert_sql_snapshot("peer_key_quota_counts", &peer_counts_statement(replica, 1));
    }

    #[test]
    fn refuses_past_the_limit_and_counts_only_kept_keys() {
        let quota = NewKeyQuota::new(3);
        let merchant = MerchantId(Uuid::now_v7());
        for _ in 0..3 {
            quota.take(merchant).unwrap();
        }
        assert!(quota.take(merchant).is_err());
        quota.give_back(merchant);
        quota.take(merchant).unwrap();
        assert!(quota.take(merchant).is_err());
        // Another merchant has its own allowance.
        quota.take(MerchantId(Uuid::now_v7())).unwrap();
    }

    #[test]
    fn the_previous_minute_fades_out_of_the_window() {
        let mut window = Window {
            minute: 10,
            current: 60,
            ..Window::default()
        };
        window.roll_to(11);
        assert_eq!(window.recent(0), 60.0);
        assert_eq!(window.recent(30_000), 30.0);
        window.roll_to(13);
        assert_eq!(window.recent(0), 0.0);
    }

    #[test]
    fn other_replicas_count_too() {
        let quota = NewKeyQuota::new(3);
        let merchant = MerchantId(Uuid::now_v7());
        {
            let mut windows = quota.windows.lock().unwrap();
            let window = windows.entry(merchant).or_default();
            window.roll_to(now_minute().0);
            window.peers_current = 3;
        }
        assert!(quota.take(merchant).is_err());
    }
}
