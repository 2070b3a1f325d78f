//! Step (c) of the `failover` run, looked at from the database side: while the old primary is
//! back writable without its keeper (fenced off by the formation's promotion of the other
//! node), the driver asks the fenced node itself, every 250 ms, how many sessions payorch's
//! pools hold there (`application_name = 'payorch'`: payorch's own watch, `payorch-primary-watch`,
//! may stay), and before the node rejoins, whether every order the prober was answered `2xx` for
//! since the fenced node came back is on the new primary and none on the fenced node. (Orders
//! made in the moment between the fence verb's start and its kill are on both: the node was
//! still the primary, and its standby had them.) It also counts what the
//! fenced node holds that the primary lacks: writes that were never acknowledged (their commits
//! waited on a standby that was gone until payorch ended them) and that the rejoin discards.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use tokio_postgres::Client;

use crate::formation::{Formation, Node};
use crate::prober::{Probe, Prober};

/// How long after the promotion payorch may still have sessions on the fenced node: its watch
/// asks every 500 ms, and a round may take up to a second.
pub(crate) const GRACE: Duration = Duration::from_secs(2);
/// How often the fenced node is asked for payorch's sessions.
const SAMPLE_EVERY: Duration = Duration::from_millis(250);

/// What the fenced node showed; times since the run's start.
#[derive(Debug, Clone, Default)]
pub(crate) struct Fence {
    pub(crate) fenced: Option<Node>,
    /// When `wait-primary` named the new primary (the watch began then).
    pub(crate) began: Duration,
    /// When the formation was first seen naming it (the 200 ms poll); set by the step.
    pub(crate) promoted: Option<Duration>,
    /// payorch's sessions on the fenced node, sampled: (when, how many; `None`: no answer).
    pub(crate) samples: Vec<(Duration, Option<i64>)>,
    /// Whether the fenced node still took read-write sessions at the last look.
    pub(crate) writable: bool,
    /// Timelines at the last look: the fenced node's, the primary's.
    pub(crate) timelines: (String, String),
    /// Orders the prober was answered `2xx` for, sent since the fenced node came back.
    pub(crate) orders_checked: usize,
    pub(crate) orders_missing_on_primary: usize,
    pub(crate) orders_on_fenced: usize,
    /// Rows the fenced node holds and the primary does not: orders and payment attempts.
    pub(crate) stranded_orders: usize,
    pub(crate) stranded_attempts: usize,
    /// What could not be looked at.
    pub(crate) errors: Vec<String>,
}

impl Fence {
    /// From when on payorch must have no session on the fenced node.
    pub(crate) fn deadline(&self) -> Duration {
        self.promoted.unwrap_or(self.began) + GRACE
    }

    /// Samples past the deadline that found a session of payorch's on the fenced node.
    pub(crate) fn sessions_after_grace(&self) -> usize {
        self.samples
            .iter()
            .filter(|(at, n)| *at >= self.deadline() && n.is_some_and(|n| n > 0))
            .count()
    }

    /// Samples past the deadline that got an answer.
    pub(crate) fn answered_after_grace(&self) -> usize {
        self.samples
            .iter()
            .filter(|(at, n)| *at >= self.deadline() && n.is_some())
            .count()
    }

    /// The most sessions any sample found, and when the last one with any was taken.
    pub(crate) fn most_sessions(&self) -> (i64, Option<Duration>) {
        let most = self.samples.iter().filter_map(|(_, n)| *n).max();
        let last = self
            .samples
            .iter()
            .filter(|(_, n)| n.is_some_and(|n| n > 0))
            .map(|(at, _)| *at)
            .max();
        (most.unwrap_or(0), last)
    }

    /// What fails the run: a session of payorch's on the fenced node past the grace, an order
    /// told created since the fence that is not on the primary or is on the fenced node, and
    /// any check that could not be made.
    pub(crate) fn findings(&self) -> usize {
        self.sessions_after_grace()
            + usize::from(self.answered_after_grace() == 0)
            + self.orders_missing_on_primary
            + self.orders_on_fenced
            + self.errors.len()
    }
}

/// Watches `fenced` for `fenced_for` after the promotion of `primary`, then looks at both
/// nodes; `since` is when the fenced node came back (the fence verb returned).
pub(crate) async fn watch(
    formation: &Formation,
    prober: &Prober,
    fenced: Node,
    primary: Node,
    since: Duration,
    fenced_for: Duration,
) -> Fence {
    let mut fence = Fence {
        fenced: Some(fenced),
        began: formation.elapsed(),
        ..Fence::default()
    };
    let until = Instant::now() + fenced_for;
    let mut db: Option<Client> = None;
    while Instant::now() < until {
        let asked = Instant::now();
        if db.as_ref().is_none_or(Client::is_closed) {
            db = formation.connect(fenced).await.ok();
        }
        let count = match &db {
            Some(db) => tokio::time::timeout(
                Duration::from_secs(1),
                db.query_one(
                    "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'payorch'",
                    &[],
                ),
            )
            .await
            .ok()
            .and_then(Result::ok)
            .map(|row| row.get::<_, i64>(0)),
            None => None,
        };
        if count.is_none() {
            db = None;
        }
        fence.samples.push((formation.elapsed(), count));
        tokio::time::sleep(SAMPLE_EVERY.saturating_sub(asked.elapsed())).await;
    }
    let looked = tokio::time::timeout(
        Duration::from_secs(30),
        look(
            &mut fence,
            formation,
            &prober.so_far(),
            fenced,
            primary,
            since,
        ),
    )
    .await;
    match looked {
        Ok(Ok(())) => {}
        Ok(Err(why)) => fence.errors.push(why),
        Err(_) => fence
            .errors
            .push("the look at both nodes took over 30 s".into()),
    }
    fence
}

/// The last look before the rejoin: both nodes' timelines, and where the prober's orders are.
async fn look(
    fence: &mut Fence,
    formation: &Formation,
    probes: &[Probe],
    fenced: Node,
    primary: Node,
    since: Duration,
) -> Result<(), String> {
    let old = formation.connect(fenced).await?;
    let new = formation.connect(primary).await?;
    let sql = |e: tokio_postgres::Error| format!("reading a node: {e}");
    fence.writable = old
        .query_one("SELECT NOT pg_is_in_recovery()", &[])
        .await
        .map_err(sql)?
        .get(0);
    let timeline = "SELECT CASE WHEN pg_is_in_recovery() THEN 'in recovery' \
                    ELSE substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) END";
    fence.timelines = (
        old.query_one(timeline, &[]).await.map_err(sql)?.get(0),
        new.query_one(timeline, &[]).await.map_err(sql)?.get(0),
    );
    let told: HashSet<&str> = probes
        .iter()
        .filter(|p| p.sent >= since)
        .filter_map(Probe::order)
        .collect();
    let on_primary = order_ids(&new).await?;
    let on_fenced = order_ids(&old).await?;
    fence.orders_checked = told.len();
    fence.orders_missing_on_primary = told.iter().filter(|id| !on_primary.contains(**id)).count();
    fence.orders_on_fenced = told.iter().filter(|id| on_fenced.contains(**id)).count();
    fence.stranded_orders = on_fenced.difference(&on_primary).count();
    fence.stranded_attempts = ids(&old, "pay_", "payment_attempts")
        .await?
        .difference(&ids(&new, "pay_", "payment_attempts").await?)
        .count();
    Ok(())
}

/// Every order id (`ord_…`) the database of `db` holds.
pub(crate) async fn order_ids(db: &Client) -> Result<HashSet<String>, String> {
    ids(db, "ord_", "orders").await
}

async fn ids(db: &Client, prefix: &str, table: &str) -> Result<HashSet<String>, String> {
    let query = format!("SELECT '{prefix}' || replace(id::text, '-', '') FROM {table}");
    Ok(db
        .query(&query, &[])
        .await
        .map_err(|e| format!("reading {table}: {e}"))?
        .iter()
        .map(|row| row.get(0))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: f64) -> Duration {
        Duration::from_secs_f64(s)
    }

    #[test]
    fn sessions_count_only_past_the_grace_and_a_fence_never_asked_is_a_finding() {
        let mut fence = Fence {
            began: secs(50.5),
            promoted: Some(secs(50.0)),
            samples: vec![
                (secs(50.6), Some(3)),
                (secs(51.9), Some(1)),
                (secs(52.1), Some(0)),
                (secs(52.4), None),
                (secs(52.6), Some(0)),
            ],
            ..Fence::default()
        };
        assert_eq!(fence.deadline(), secs(52.0));
        assert_eq!(fence.sessions_after_grace(), 0);
        assert_eq!(fence.answered_after_grace(), 2);
        assert_eq!(fence.most_sessions(), (3, Some(secs(51.9))));
        assert_eq!(fence.findings(), 0);
        fence.samples.push((secs(60.0), Some(1)));
        fence.orders_on_fenced = 2;
        assert_eq!(fence.findings(), 3);
        let never = Fence {
            samples: vec![(secs(1.0), None)],
            ..Fence::default()
        };
        assert_eq!(never.findings(), 1);
    }
}
