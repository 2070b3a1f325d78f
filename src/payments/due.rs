//! The due queues: rows whose next look at the provider has come (`next_check_at`), shared by
//! every replica's reconciler (docs/DESIGN.md, "The reconciler"). Attempts, refunds and
//! captures and voids are each such a queue, and each is claimed by the one statement here,
//! named by its [`DueQueue`].
//!
//! A claim takes a batch of due rows `FOR UPDATE SKIP LOCKED`, so replicas never take the same
//! row, and pushes each row's `next_check_at` past the lease in the same statement, so the
//! row stays hidden from the others while it is checked, with no row lock held over the
//! provider call. The statuses are the queue's own SQL list, written into the text: word for
//! word the predicate of the queue's partial index `<table>_due`, which the planner must see
//! as a constant to use that index (a bound list would not prove it).

use std::time::Duration;

use diesel::sql_types::{BigInt, Interval};

use crate::db::sql::Sql;
use crate::db::statement::Statement;
use crate::payments::reconciler::settings::pg_interval;

/// A queue of rows with a `next_check_at`, a `checks` count and the key `(merchant_id, id)`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DueQueue {
    /// The table that holds the queue.
    pub table: &'static str,
    /// The statuses in which a row is still asked about, as an SQL list: the predicate of
    /// the table's partial index `<table>_due`, word for word.
    pub open: &'static str,
}

/// The statement that claims up to `limit` rows of `queue` whose check is due, the earliest
/// first, for `lease`: each comes back whole (`RETURNING *`, for the queue's `…Row`) with its
/// `checks` counted and its next check at the end of the lease.
pub(crate) fn claim_due(queue: DueQueue, limit: i64, lease: Duration) -> Sql<'static> {
    let DueQueue { table, open } = queue;
    let mut q = Statement::new();
    let lease = q.bind::<Interval, _>(pg_interval(lease));
    let limit = q.bind::<BigInt, _>(limit);
    q.push(format_args!(
        "UPDATE {table} t SET next_check_at = now() + {lease}, checks = t.checks + 1
FROM (SELECT merchant_id, id FROM {table}
      WHERE status IN {open} AND next_check_at <= now()
      ORDER BY next_check_at LIMIT {limit} FOR UPDATE SKIP LOCKED) due
WHERE t.merchant_id = due.merchant_id AND t.id = due.id
RETURNING t.*"
    ));
    q.finish()
}

/// Asserts that `queue`'s claim reads as its snapshot `claim_due_<table>`.
#[cfg(test)]
pub(crate) fn assert_claim_snapshot(queue: DueQueue) {
    let sql = claim_due(queue, 100, Duration::from_secs(30));
    crate::db::snapshot::assert_sql_snapshot(&format!("claim_due_{}", queue.table), &sql);
}
