//! The partition keeper: the history tables are monthly partitions (docs/DESIGN.md, "History
//! partitioned by time"; migrations `2026-11-28-000031` to `000033`), and this keeps them — it
//! creates the months ahead and drops the months past their retention whose payments are all
//! final. The reapers call it each round (`events::reaper` for the merchant events and their
//! deliveries, `payments::webhooks::reaper` for the providers' webhooks), so every replica
//! does, and the database functions it calls make that safe: they take turns on a
//! transaction-scoped advisory lock, look before they create, and run as the tables' owner,
//! which the runtime role is not (docs/PRODUCTION.md, section 2).

use std::time::Duration;

use chrono::{DateTime, Utc};
use diesel::sql_types::{Bool, Integer, Interval, Nullable, Text, Timestamptz};
use diesel::QueryableByName;
use diesel_async::RunQueryDsl;
use prometheus::{GaugeVec, IntGaugeVec, Opts};

use super::sql::Sql;
use super::statement::Statement;
use super::PgConn;

/// How many months after this one exist ahead of their first write. An event or a webhook
/// dated in a month without its partition cannot be written (and a payment's change writes
/// its event in its own statement), so the keeper stays well ahead, and an alert fires when
/// next month is missing (ops/prometheus/alerts.yml, `HistoryPartitionMissing`).
pub const MONTHS_AHEAD: i32 = 3;

/// The partitions a retention drops together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// A month of merchant events, with their deliveries and the deliveries' attempts.
    Events,
    /// A month of the providers' webhooks, by the provider's own time of the event.
    ProviderWebhooks,
}

impl Family {
    fn as_str(self) -> &'static str {
        match self {
            Family::Events => "events",
            Family::ProviderWebhooks => "provider_webhooks",
        }
    }

    /// The history tables this family's keeper makes the months of and reports on: the
    /// events' reaper also keeps the timelines, which have no retention. Between the two
    /// reapers, each table once a round.
    pub fn tables(self) -> &'static [&'static str] {
        match self {
            Family::Events => &[
                "merchant_events",
                "event_deliveries",
                "delivery_attempts",
                "attempt_transitions",
                "refund_transitions",
            ],
            Family::ProviderWebhooks => &["provider_webhooks"],
        }
    }
}

/// A partition past its retention, as the keeper found it.
#[derive(Debug, Clone, PartialEq, Eq, QueryableByName)]
pub struct Expired {
    #[diesel(sql_type = Text)]
    pub partition_name: String,
    /// Dropped; or kept, for `reason`.
    #[diesel(sql_type = Bool)]
    pub dropped: bool,
    /// Why it was kept: `open payment` (a payment of its rows is not final, or not for as
    /// long as the retention) or `busy` (its tables were held past the lock timeout, or the
    /// lock would have deadlocked).
    #[diesel(sql_type = Nullable<Text>)]
    pub reason: Option<String>,
}

/// One partition of a history table and the months it holds.
#[derive(Debug, Clone, PartialEq, Eq, QueryableByName)]
pub struct Partition {
    #[diesel(sql_type = Text)]
    pub table_name: String,
    #[diesel(sql_type = Text)]
    pub partition_name: String,
    /// None for the legacy partition: everything before the first month.
    #[diesel(sql_type = Nullable<Timestamptz>)]
    pub from_at: Option<DateTime<Utc>>,
    #[diesel(sql_type = Timestamptz)]
    pub until_at: DateTime<Utc>,
}

#[derive(QueryableByName)]
struct Made {
    #[diesel(sql_type = Integer)]
    made: i32,
}

/// The history tables, in the order their months are made: the events before their
/// deliveries before the deliveries' attempts, whose months reference them.
pub const TABLES: [&str; 6] = [
    "merchant_events",
    "event_deliveries",
    "delivery_attempts",
    "provider_webhooks",
    "attempt_transitions",
    "refund_transitions",
];

/// Creates the partitions of last month, this month and the [`MONTHS_AHEAD`] after it that
/// are missing, on each of `tables` (in [`TABLES`]' order: events before their deliveries);
/// how many it made (0 once they exist, or while another replica's keeper is at work: the
/// next round looks again). One statement, so one transaction, per table: none holds two
/// tables' locks at once.
pub async fn create_ahead(conn: &mut PgConn, tables: &[&'static str]) -> diesel::QueryResult<i32> {
    let mut made = 0;
    for &table in tables {
        let rows: Vec<Made> = create_ahead_statement(table, MONTHS_AHEAD)
            .load(conn)
            .await?;
        made += super::one(rows)?.made;
    }
    Ok(made)
}

fn create_ahead_statement(table: &'static str, months: i32) -> Sql<'static> {
    let mut q = Statement::new();
    let table = q.bind::<Text, _>(table);
    let months = q.bind::<Integer, _>(months);
    q.push(format_args!(
        "SELECT history_create_ahead({table}, {months}) AS made"
    ));
    q.finish()
}

/// How many months one round drops at most: the legacy partition and a year of months, more
/// than a keeper that stopped for a while leaves behind; the next round drops the rest.
const DROPS_A_ROUND: usize = 13;

/// Drops the partitions of `family` past `keep` whose payments have all been final for as
/// long; one row per partition past `keep`, dropped or kept. The database function drops one
/// month a call, each call its own transaction, so no drop's locks are held while the next
/// month is looked at (docs/DESIGN.md, "History partitioned by time"): this calls it again
/// while it drops one. No rows when another replica's keeper is at work.
pub async fn drop_expired(
    conn: &mut PgConn,
    family: Family,
    keep: Duration,
) -> diesel::QueryResult<Vec<Expired>> {
    let mut expired = Vec::new();
    for _ in 0..DROPS_A_ROUND {
        let rows: Vec<Expired> = drop_expired_statement(family, keep).load(conn).await?;
        if !rows.iter().any(|p| p.dropped) {
            // The months kept, as the last call found them: each call looks at them again.
            expired.extend(rows);
            return Ok(expired);
        }
        expired.extend(rows.into_iter().filter(|p| p.dropped));
    }
    Ok(expired)
}

fn drop_expired_statement(family: Family, keep: Duration) -> Sql<'static> {
    let keep_ms = i64::try_from(keep.as_millis()).unwrap_or(i64::MAX);
    let mut q = Statement::new();
    let family = q.bind::<Text, _>(family.as_str());
    let keep = q.bind::<Interval, _>(diesel::pg::data_types::PgInterval::from_microseconds(
        keep_ms.saturating_mul(1000),
    ));
    q.push(format_args!(
        "SELECT partition_name, dropped, reason FROM history_drop_expired({family}, {keep})"
    ));
    q.finish()
}

/// Every partition of the history tables, by table and month.
pub async fn list(conn: &mut PgConn) -> diesel::QueryResult<Vec<Partition>> {
    Sql::new("SELECT table_name, partition_name, from_at, until_at FROM history_partitions()")
        .load(conn)
        .await
}

/// Runs a keeper round for `family`: the months ahead, then the drops, each logged.
pub async fn keep(
    conn: &mut PgConn,
    family: Family,
    retention: Duration,
) -> diesel::QueryResult<Vec<Expired>> {
    let made = create_ahead(conn, family.tables()).await?;
    if made > 0 {
        tracing::info!(made, "history partitions created ahead");
    }
    let expired = drop_expired(conn, family, retention).await?;
    for p in &expired {
        if p.dropped {
            tracing::info!(
                partition = %p.partition_name,
                "history partition past its retention dropped"
            );
        } else {
            tracing::warn!(
                partition = %p.partition_name,
                reason = p.reason.as_deref().unwrap_or(""),
                "history partition past its retention kept"
            );
        }
    }
    Ok(expired)
}

/// The history's partitions as the last keeper round saw them, by table
/// (docs/operations/monitoring.md): how many, how long ago the oldest one's months ended
/// (above the retention by more than a month: a drop is waiting, on an open payment or a busy
/// table), and up to when the partitions reach (`HistoryPartitionMissing` fires when
/// that is less than a month ahead: the keeper has stopped making them).
#[derive(Clone)]
pub struct PartitionGauges {
    count: IntGaugeVec,
    oldest_ended: GaugeVec,
    until: GaugeVec,
}

impl PartitionGauges {
    pub fn new() -> prometheus::Result<Self> {
        Ok(PartitionGauges {
            count: IntGaugeVec::new(
                Opts::new(
                    "history_partitions",
                    "Monthly partitions of a history table, its legacy one included, by table",
                ),
                &["table"],
            )?,
            oldest_ended: GaugeVec::new(
                Opts::new(
                    "history_oldest_partition_ended_seconds",
                    "Seconds since the end of a history table's oldest partition, by table",
                ),
                &["table"],
            )?,
            until: GaugeVec::new(
                Opts::new(
                    "history_partitions_until_seconds",
                    "Unix time up to which a history table's partitions reach, by table",
                ),
                &["table"],
            )?,
        })
    }

    pub fn register(
        &self,
        registry: &crate::telemetry::metrics::Metrics,
    ) -> prometheus::Result<()> {
        registry.register(Box::new(self.count.clone()))?;
        registry.register(Box::new(self.oldest_ended.clone()))?;
        registry.register(Box::new(self.until.clone()))
    }

    /// Reads the partitions and sets the gauges of `family`'s tables.
    pub async fn observe(&self, conn: &mut PgConn, family: Family) -> diesel::QueryResult<()> {
        let partitions = list(conn).await?;
        let now = Utc::now();
        for &table in family.tables() {
            let mine: Vec<&Partition> = partitions
                .iter()
                .filter(|p| p.table_name == table)
                .collect();
            self.count
                .with_label_values(&[table])
                .set(mine.len() as i64);
            if let Some(oldest) = mine.iter().map(|p| p.until_at).min() {
                let ended = (now - oldest).num_milliseconds() as f64 / 1000.0;
                self.oldest_ended.with_label_values(&[table]).set(ended);
            }
            if let Some(until) = mine.iter().map(|p| p.until_at).max() {
                self.until
                    .with_label_values(&[table])
                    .set(until.timestamp() as f64);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::snapshot::assert_sql_snapshot;

    /// Each history table is kept by exactly one reaper: made ahead, and in the gauges.
    #[test]
    fn every_history_table_belongs_to_one_family() {
        let mut kept: Vec<&str> = [Family::Events, Family::ProviderWebhooks]
            .iter()
            .flat_map(|f| f.tables().iter().copied())
            .collect();
        kept.sort_unstable();
        let mut all = TABLES.to_vec();
        all.sort_unstable();
        assert_eq!(kept, all);
    }

    #[test]
    fn the_keeper_statements_read_as_their_snapshots() {
        assert_sql_snapshot(
            "history_create_ahead",
            &create_ahead_statement("merchant_events", MONTHS_AHEAD),
        );
        assert_sql_snapshot(
            "history_drop_expired",
            &drop_expired_statement(Family::Events, Duration::from_secs(30 * 24 * 3600)),
        );
    }
}
