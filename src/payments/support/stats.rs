//! How many attempts each provider took lately and how they stand now, in time buckets
//! (docs/guides/support.md, "Support"): what the console's chart draws, so a provider going bad is seen
//! rather than searched for.
//!
//! Counted in one statement over the window's attempts only: the window becomes an attempt id
//! range (ids are UUIDv7, see the parent module) that `payment_attempts_id` reads, and the
//! rows are hashed into their buckets unsorted. An hour of 20,000 attempts costs about 20 ms,
//! a day of 500,000 about 0.6 s (docs/guides/support.md, "Support"). An index carrying created_at, provider
//! and status would spare the table rows only on pages already all-visible, which the last
//! hour's seldom are, at twice the index's size; so there is none.

use chrono::{DateTime, Duration, DurationRound, Utc};
use diesel::sql_types::{BigInt, Double, Text, Timestamptz, Uuid as SqlUuid};
use diesel::{QueryResult, QueryableByName};
use diesel_async::RunQueryDsl;

use super::{id_floor, ID_VERSUS_ROW};
use crate::db::sql::Sql;
use crate::db::statement::Statement;
use crate::db::PgConn;

/// The buckets to count in: `count` of them, each `width` long, the first starting at
/// `from`. The last holds "now" and is still filling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Buckets {
    pub from: DateTime<Utc>,
    pub width: Duration,
    pub count: usize,
}

impl Buckets {
    /// The `window` up to `now` in buckets of `width`, aligned to whole multiples of `width`
    /// since the Unix epoch, so two reads a little apart draw the same bars. `width` must be
    /// positive and divide `window`.
    pub fn ending_at(now: DateTime<Utc>, window: Duration, width: Duration) -> Self {
        let count = (window.num_seconds() / width.num_seconds()).max(1) as usize;
        let current = now.duration_trunc(width).unwrap_or(now);
        Buckets {
            from: current - width * (count as i32 - 1),
            width,
            count,
        }
    }

    /// Which bucket `at` falls in. A time past the last bucket (the database's clock a little
    /// ahead of payorch's) counts in the last one.
    fn index(&self, at: DateTime<Utc>) -> Option<usize> {
        if at < self.from {
            return None;
        }
        let index = ((at - self.from).num_milliseconds() / self.width.num_milliseconds()) as usize;
        Some(index.min(self.count - 1))
    }

    pub fn start(&self, index: usize) -> DateTime<Utc> {
        self.from + self.width * index as i32
    }
}

/// How many attempts made through `provider` in a bucket are `status` now.
#[derive(Debug, Clone, PartialEq, Eq, QueryableByName)]
pub struct Count {
    #[diesel(sql_type = Text)]
    pub provider: String,
    #[diesel(sql_type = Text)]
    pub status: String,
    #[diesel(sql_type = BigInt)]
    pub count: i64,
}

/// One bucket's counts, by provider then status; only the non-zero ones.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bucket {
    pub start: DateTime<Utc>,
    pub counts: Vec<Count>,
}

#[derive(QueryableByName)]
struct Row {
    #[diesel(sql_type = Timestamptz)]
    start: DateTime<Utc>,
    #[diesel(embed)]
    count: Count,
}

/// Every bucket of `buckets`, empty ones too, with the attempts made in it (by the database's
/// `created_at`) counted by provider and current status, across every merchant.
pub async fn payment_counts(conn: &mut PgConn, buckets: Buckets) -> QueryResult<Vec<Bucket>> {
    let rows: Vec<Row> = count_by_bucket(buckets).load(conn).await?;
    Ok(fill(buckets, rows))
}

/// The statement of [`payment_counts`]: the window's attempts, counted by bucket, provider
/// and status (whole text: `tests/sql/payment_counts.sql`).
fn count_by_bucket(buckets: Buckets) -> Sql<'static> {
    let mut q = Statement::new();
    let width = q.bind::<Double, _>(buckets.width.num_milliseconds() as f64 / 1000.0);
    let from = q.bind::<Timestamptz, _>(buckets.from);
    let floor = q.bind::<SqlUuid, _>(id_floor(buckets.from - ID_VERSUS_ROW));
    q.push(format_args!(
        "SELECT date_bin(make_interval(secs => {width}), created_at, {from}) AS start,
    provider, status, count(*) AS count
FROM payment_attempts
WHERE id >= {floor} AND created_at >= {from}
GROUP BY 1, 2, 3"
    ));
    q.finish()
}

/// Lays the counted rows out over every bucket, in any order, folding a late row into the
/// last bucket.
fn fill(buckets: Buckets, rows: Vec<Row>) -> Vec<Bucket> {
    let mut filled: Vec<Bucket> = (0..buckets.count)
        .map(|index| Bucket {
            start: buckets.start(index),
            counts: Vec::new(),
        })
        .collect();
    for row in rows {
        let Some(index) = buckets.index(row.start) else {
            continue;
        };
        let counts = &mut filled[index].counts;
        match counts
            .iter_mut()
            .find(|c| c.provider == row.count.provider && c.status == row.count.status)
        {
            Some(existing) => existing.count += row.count.count,
            None => counts.push(row.count),
        }
    }
    filled
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn at(h: u32, m: u32, s: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 24, h, m, s).unwrap()
    }

    fn row(start: DateTime<Utc>, provider: &str, status: &str, count: i64) -> Row {
        Row {
            start,
            count: Count {
                provider: provider.into(),
                status: status.into(),
                count,
            },
        }
    }

    #[test]
    fn the_statement_reads_as_its_snapshot() {
        let buckets = Buckets::ending_at(at(10, 7, 42), Duration::hours(1), Duration::minutes(5));
        crate::db::snapshot::assert_sql_snapshot("payment_counts", &count_by_bucket(buckets));
    }

    #[test]
    fn buckets_are_aligned_to_their_width_and_the_last_holds_now() {
        let buckets = Buckets::ending_at(at(10, 7, 42), Duration::hours(1), Duration::minutes(5));
        assert_eq!(buckets.count, 12);
        assert_eq!(buckets.start(11), at(10, 5, 0));
        assert_eq!(buckets.from, at(9, 10, 0));
        assert_eq!(buckets.index(at(10, 7, 42)), Some(11));
        assert_eq!(buckets.index(at(9, 9, 59)), None);
        assert_eq!(buckets.index(at(9, 14, 59)), Some(0));
        assert_eq!(buckets.index(at(9, 15, 0)), Some(1));
    }

    #[test]
    fn every_bucket_is_listed_and_a_row_from_a_clock_ahead_joins_the_last() {
        let buckets = Buckets::ending_at(at(10, 2, 30), Duration::minutes(3), Duration::minutes(1));
        let filled = fill(
            buckets,
            vec![
                row(at(10, 0, 0), "stripe", "succeeded", 4),
                row(at(10, 2, 0), "adyen", "failed", 1),
                row(at(10, 3, 0), "adyen", "failed", 2),
                row(at(10, 3, 0), "adyen", "pending", 1),
            ],
        );
        let starts: Vec<_> = filled.iter().map(|b| b.start).collect();
        assert_eq!(starts, [at(10, 0, 0), at(10, 1, 0), at(10, 2, 0)]);
        assert_eq!(
            filled[0].counts,
            [row(at(10, 0, 0), "stripe", "succeeded", 4).count]
        );
        assert!(filled[1].counts.is_empty());
        assert_eq!(
            filled[2].counts,
            [
                row(at(10, 2, 0), "adyen", "failed", 3).count,
                row(at(10, 2, 0), "adyen", "pending", 1).count,
            ]
        );
    }
}
