//! The scores of routing by success (docs/guides/routing.md, "Routing by success"), shared by
//! every replica through the database: each replica reads every provider's last scored
//! outcomes per currency from `payment_attempts` in one statement every second
//! ([`REFRESH`]) and keeps them as a snapshot in memory, which the checkout orders its route
//! with ([`SuccessScores::order`]): no payment waits for the scores, and every replica sees
//! the same attempts, so the same scores within a second. What the scores mean and how the
//! order is chosen is `payments::success_routing`.
//!
//! Card brand is not part of a score: an attempt records no brand today, only the payment
//! method's token.

use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use chrono::{DateTime, Utc};
use diesel::sql_types::{Nullable, Text, Timestamptz};
use diesel::QueryableByName;
use diesel_async::RunQueryDsl;
use tokio::sync::watch;

use super::success_gauges::ScoreGauges;
use super::success_routing::{choose, Outcome, Probes, Score, Scores, WINDOW};
use crate::db::sql::Sql;
use crate::db::statement::Statement;
use crate::db::DbPool;
use crate::db::PgConn;
use crate::providers::decline::{DeclineCode, FailureClass};
use crate::providers::registry::NamedProvider;

/// How often a replica reads the scores again, unless told otherwise.
pub const REFRESH: Duration = Duration::from_secs(1);
/// Scores older than this (ten reads missed: the database unreachable, or the statement
/// failing) order nothing: the routes are tried in the order written, as `ordered` ones are,
/// rather than by scores that no longer change. Above all an eliminated provider would stay
/// eliminated, since the approvals of its probes would never be read back.
pub const STALE_AFTER: Duration = Duration::from_secs(10);

/// The scores as last read and when, the probes this replica has under way, and their gauges.
pub struct SuccessScores {
    current: RwLock<(Arc<Scores>, Option<DateTime<Utc>>)>,
    probes: Mutex<Probes>,
    gauges: ScoreGauges,
    /// Before the first read, the scores' age counts from here.
    started: DateTime<Utc>,
}

/// A route ordered by success ([`SuccessScores::order`]). When its first provider is an
/// eliminated one's probe, it holds the probe slot until [`Ordered::sent`] says the payment
/// made its attempt there; dropped before (a replay, a resumed request, a refusal, an error:
/// nothing sent), it gives the slot back, so that the next payment probes at once rather than
/// after `PROBE_TIMEOUT`.
pub struct Ordered<'p, 's> {
    pub route: Vec<&'p NamedProvider>,
    probe: Option<(&'s SuccessScores, String, String, DateTime<Utc>)>,
}

impl<'p> Ordered<'p, '_> {
    /// `route` as it is: no probe.
    pub fn as_written(route: Vec<&'p NamedProvider>) -> Self {
        Ordered { route, probe: None }
    }

    /// The payment made its attempt at the route's first provider: a probe keeps its slot
    /// until its outcome is read (or `PROBE_TIMEOUT`).
    pub fn sent(&mut self) {
        self.probe = None;
    }
}

impl Drop for Ordered<'_, '_> {
    fn drop(&mut self) {
        if let Some((scores, provider, currency, at)) = self.probe.take() {
            if let Ok(mut probes) = scores.probes.lock() {
                probes.give_back(&provider, &currency, at);
            }
        }
    }
}

impl SuccessScores {
    pub fn new() -> prometheus::Result<Self> {
        Ok(SuccessScores {
            current: RwLock::new((Arc::default(), None)),
            probes: Mutex::default(),
            gauges: ScoreGauges::new()?,
            started: Utc::now(),
        })
    }

    pub fn register(
        &self,
        registry: &crate::telemetry::metrics::Metrics,
    ) -> prometheus::Result<()> {
        self.gauges.register(registry)
    }

    /// The scores as last read.
    pub fn snapshot(&self) -> Arc<Scores> {
        self.current.read().map(|s| s.0.clone()).unwrap_or_default()
    }

    /// How old the scores are at `now`: since their last read, or since this replica started
    /// if they were never read.
    pub fn age(&self, now: DateTime<Utc>) -> chrono::Duration {
        let read_at = self.current.read().ok().and_then(|s| s.1);
        now - read_at.unwrap_or(self.started)
    }

    /// `route` (the merchant's providers for the payment, in the routing's order) ordered by
    /// success for a payment in `currency`: in memory, no database read. Scores older than
    /// [`STALE_AFTER`], or never read, leave the route as written.
    pub fn order<'p>(&self, route: Vec<&'p NamedProvider>, currency: &str) -> Ordered<'p, '_> {
        let now = Utc::now();
        let names: Vec<&str> = route.iter().map(|p| p.name.as_str()).collect();
        let Some((chosen, probing)) = self.choose(&names, currency, now) else {
            return Ordered::as_written(route);
        };
        let probe = probing.then(|| (self, names[chosen[0]].to_owned(), currency.to_owned(), now));
        Ordered {
            route: chosen.into_iter().map(|i| route[i]).collect(),
            probe,
        }
    }

    /// The order of `names` at `now` and whether its first is a probe (its slot taken), or
    /// `None` when the scores are older than [`STALE_AFTER`] or were never read.
    fn choose(
        &self,
        names: &[&str],
        currency: &str,
        now: DateTime<Utc>,
    ) -> Option<(Vec<usize>, bool)> {
        let (scores, read_at) = self.current.read().ok()?.clone();
        let fresh = chrono::Duration::from_std(STALE_AFTER).unwrap_or_default();
        if read_at.is_none_or(|at| now - at > fresh) {
            return None;
        }
        let mut probes = self.probes.lock().ok()?;
        Some(choose(
            names,
            currency,
            &scores,
            &mut probes,
            now,
            &mut rand::rng(),
        ))
    }

    /// Reads the scores again, and sets the gauges to them.
    pub async fn refresh(&self, conn: &mut PgConn) -> diesel::QueryResult<()> {
        let rows: Vec<ScoredRow> = scored_statement().load(conn).await?;
        let scores = scores_of(rows, Utc::now());
        self.gauges.publish(&scores);
        if let Ok(mut probes) = self.probes.lock() {
            probes.forget_readmitted(&scores);
        }
        if let Ok(mut current) = self.current.write() {
            *current = (Arc::new(scores), Some(Utc::now()));
        }
        Ok(())
    }
}

/// Whether an attempt's outcome is scored, and as an approval or not: approved
/// (`succeeded`, `authorized`), or failed by the provider's doing (a `soft` decline, or
/// `provider_unavailable`: not reached). Nothing else: an open attempt's outcome is not known
/// (a timeout, a 5xx, a lost answer: it may yet be an approval), and a `hard` or
/// `authentication_required` decline is the card's doing, which another provider would have
/// answered the same. [`scored_statement`] reads only these rows (its
/// predicate is the index's, migration `2026-11-27-000027-1_success_scores_index`), and this
/// judges each row it reads again, so the two cannot disagree unseen.
pub fn outcome_of(
    status: &str,
    failure_class: Option<&str>,
    failure_code: Option<&str>,
) -> Option<bool> {
    match status {
        "succeeded" | "authorized" => Some(true),
        "failed"
            if failure_class == Some(FailureClass::Soft.as_str())
                || failure_code == Some(DeclineCode::ProviderUnavailable.as_str()) =>
        {
            Some(false)
        }
        _ => None,
    }
}

/// A row of [`scored_statement`]: one of a provider's last outcomes in a currency.
#[derive(QueryableByName)]
struct ScoredRow {
    #[diesel(sql_type = Text)]
    provider: String,
    #[diesel(sql_type = Text)]
    currency: String,
    #[diesel(sql_type = Text)]
    status: String,
    #[diesel(sql_type = Nullable<Text>)]
    failure_class: Option<String>,
    #[diesel(sql_type = Nullable<Text>)]
    failure_code: Option<String>,
    #[diesel(sql_type = Timestamptz)]
    created_at: DateTime<Utc>,
}

/// The scores of `rows`, each provider's and currency's newest first (as the statement gives
/// them), as of `now`. Each row is judged again by [`outcome_of`]: a row the statement's
/// predicate let through by mistake is left out, never scored.
fn scores_of(rows: Vec<ScoredRow>, now: DateTime<Utc>) -> Scores {
    let mut outcomes: std::collections::HashMap<(String, String), Vec<Outcome>> =
        Default::default();
    for row in rows {
        let Some(approved) = outcome_of(
            &row.status,
            row.failure_class.as_deref(),
            row.failure_code.as_deref(),
        ) else {
            continue;
        };
        outcomes
            .entry((row.provider, row.currency))
            .or_default()
            .push(Outcome {
                approved,
                at: row.created_at,
            });
    }
    Scores {
        by: outcomes
            .into_iter()
            .map(|(key, o)| (key, Score::of(&o, now)))
            .collect(),
    }
}

/// The predicate of a scored outcome, in the words of the index `payment_attempts_scored`
/// (migration `2026-11-27-000027-1_success_scores_index`), so that the planner uses it.
const SCORED: &str = "(status IN ('succeeded', 'authorized') OR (status = 'failed' AND \
                      (failure_class = 'soft' OR failure_code = 'provider_unavailable')))";

/// Every provider's and currency's last [`WINDOW`] scored outcomes of the last hour, newest
/// first (whole text: `tests/sql/success_scores.sql`). The pairs are found by skipping
/// through the index (one probe per pair, not a read of every attempt), then each pair's
/// newest outcomes are read from it: a few hundred index rows per provider and currency,
/// however many attempts the table holds.
fn scored_statement() -> Sql<'static> {
    let mut q = Statement::new();
    let window = q.bind::<diesel::sql_types::BigInt, _>(WINDOW as i64);
    q.push(format_args!(
        "WITH RECURSIVE pairs AS (
    (SELECT provider, currency FROM payment_attempts
     WHERE {SCORED}
     ORDER BY provider, currency LIMIT 1)
    UNION ALL
    SELECT next.provider, next.currency FROM pairs
    CROSS JOIN LATERAL (
        SELECT provider, currency FROM payment_attempts
        WHERE {SCORED} AND (provider, currency) > (pairs.provider, pairs.currency)
        ORDER BY provider, currency LIMIT 1) AS next
)
SELECT pairs.provider::text AS provider, pairs.currency::text AS currency,
    last.status::text AS status, last.failure_class, last.failure_code::text AS failure_code,
    last.created_at
FROM pairs
CROSS JOIN LATERAL (
    SELECT status, failure_class, failure_code, created_at FROM payment_attempts
    WHERE {SCORED} AND provider = pairs.provider AND currency = pairs.currency
      AND created_at > now() - interval '1 hour'
    ORDER BY created_at DESC LIMIT {window}) AS last
ORDER BY 1, 2, last.created_at DESC"
    ));
    q.finish()
}

/// Until `stop`: read the scores into `scores` every `interval`. A read that fails leaves the
/// last scores in place (the checkout keeps ordering by them until they are [`STALE_AFTER`]
/// old) and is tried again; after each try, `payorch_provider_scores_age_seconds` says how
/// old they are.
pub async fn run(
    pool: DbPool,
    scores: Arc<SuccessScores>,
    interval: Duration,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        match pool.get().await {
            Ok(mut conn) => {
                if let Err(err) = scores.refresh(&mut conn).await {
                    tracing::warn!(error = %err, "could not read the providers' success scores; keeping the last");
                }
            }
            Err(err) => {
                tracing::warn!(error = %err, "no connection to read the success scores; retrying")
            }
        }
        scores.gauges.age(scores.age(Utc::now()));
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
    fn the_statement_reads_as_its_snapshot() {
        assert_sql_snapshot("success_scores", &scored_statement());
    }

    fn row(
        provider: &str,
        status: &str,
        class: Option<&str>,
        code: Option<&str>,
        secs: i64,
    ) -> ScoredRow {
        ScoredRow {
            provider: provider.into(),
            currency: "eur".into(),
            status: status.into(),
            failure_class: class.map(Into::into),
            failure_code: code.map(Into::into),
            created_at: now() - chrono::Duration::seconds(secs),
        }
    }

    fn now() -> DateTime<Utc> {
        "2026-11-27T12:00:00Z".parse().unwrap()
    }

    #[test]
    fn rows_are_judged_again_and_grouped_newest_first() {
        let rows = vec![
            row("a", "failed", Some("soft"), Some("generic_decline"), 1),
            row("a", "pending", None, None, 2),
            row("a", "failed", Some("hard"), Some("lost_or_stolen_card"), 3),
            row("a", "succeeded", None, None, 4),
            row("b", "authorized", None, None, 1),
        ];
        let scores = scores_of(rows, now());
        let a = scores.get("a", "eur").unwrap();
        assert_eq!((a.scored, a.approved), (2, 1));
        assert_eq!(a.newest, Some(now() - chrono::Duration::seconds(1)));
        assert_eq!(scores.get("b", "eur").unwrap().approved, 1);
    }

    /// `a` eliminated in eur (5 failures, the newest a minute ago: its cooldown over), `b`
    /// approving, as read `read` seconds ago.
    fn read_ago(read: i64) -> SuccessScores {
        let scores = SuccessScores::new().unwrap();
        let at = |approved, secs| super::Outcome {
            approved,
            at: now() - chrono::Duration::seconds(secs),
        };
        let failing: Vec<_> = (60..65).map(|s| at(false, s)).collect();
        let approving: Vec<_> = (60..80).map(|s| at(true, s)).collect();
        let by = [("a", &failing), ("b", &approving)]
            .into_iter()
            .map(|(p, o)| ((p.into(), "eur".into()), Score::of(o, now())))
            .collect();
        let read_at = now() - chrono::Duration::seconds(read);
        *scores.current.write().unwrap() = (Arc::new(Scores { by }), Some(read_at));
        scores
    }

    #[test]
    fn stale_or_unread_scores_leave_the_route_as_written() {
        let unread = SuccessScores::new().unwrap();
        assert_eq!(unread.choose(&["a", "b"], "eur", now()), None);
        assert_eq!(read_ago(11).choose(&["a", "b"], "eur", now()), None);
        // Fresh: a's probe first.
        assert_eq!(
            read_ago(10).choose(&["a", "b"], "eur", now()),
            Some((vec![0, 1], true))
        );
        assert_eq!(read_ago(11).age(now()), chrono::Duration::seconds(11));
    }

    #[test]
    fn a_probe_that_sent_nothing_gives_its_slot_back() {
        let scores = read_ago(1);
        let probe = |s: &SuccessScores| s.choose(&["a", "b"], "eur", now()).unwrap();
        let ticket = |s| Ordered {
            route: vec![],
            probe: Some((s, "a".into(), "eur".into(), now())),
        };
        assert_eq!(probe(&scores), (vec![0, 1], true));
        // Dropped unsent (a replay, a refusal): the next payment probes.
        drop(ticket(&scores));
        assert_eq!(probe(&scores), (vec![0, 1], true));
        // Sent: the slot stays taken until the probe's outcome is read.
        ticket(&scores).sent();
        assert_eq!(probe(&scores), (vec![1, 0], false));
    }

    #[test]
    fn only_the_providers_doing_is_scored() {
        assert_eq!(outcome_of("succeeded", None, None), Some(true));
        assert_eq!(outcome_of("authorized", None, None), Some(true));
        assert_eq!(
            outcome_of("failed", Some("soft"), Some("generic_decline")),
            Some(false)
        );
        assert_eq!(
            outcome_of("failed", Some("soft"), Some("provider_unavailable")),
            Some(false)
        );
        // Before the decline vocabulary, a failure had no class.
        assert_eq!(
            outcome_of("failed", None, Some("provider_unavailable")),
            Some(false)
        );
        // Unknown outcomes: never.
        for open in ["created", "pending"] {
            assert_eq!(outcome_of(open, None, None), None);
        }
        // The card's doing, and what nobody charged.
        assert_eq!(
            outcome_of("failed", Some("hard"), Some("lost_or_stolen_card")),
            None
        );
        assert_eq!(
            outcome_of("failed", Some("authentication_required"), None),
            None
        );
        assert_eq!(outcome_of("failed", None, Some("card_declined")), None);
        assert_eq!(outcome_of("canceled", None, None), None);
    }
}
