//! Routing by success (docs/guides/routing.md, "Routing by success"): a route whose strategy
//! is `success_rate` tries first the provider that approved most of its recent payments in the
//! payment's currency. This file is the pure part: what a provider's recent outcomes score,
//! when it is eliminated and let back in by a probe, and the order a payment tries its
//! providers in. The scores are read from the database by `payments::success_scores`, never on
//! the checkout's path; the checkout only orders its route with the snapshot in memory.
//!
//! The merchant's routing still decides which providers a payment may try (its list, or its
//! list for the currency): the scores only reorder them. So does the result stay a route,
//! which failover and retries walk in order from the chosen provider.

use std::collections::HashMap;

use chrono::{DateTime, Duration, Utc};
use rand::Rng;

use crate::words::words;

words! {
    /// How a merchant's route orders its providers. Stored in `merchant_routing.strategy`.
    #[derive(serde::Serialize, serde::Deserialize, utoipa::ToSchema, Default)]
    #[serde(rename_all = "snake_case")]
    pub enum Strategy {
        /// In the order written, as every route did before routing by success.
        #[default]
        Ordered => "ordered",
        /// By each provider's recent approval rate in the payment's currency.
        SuccessRate => "success_rate",
    }
}

/// The scored outcomes a score is made of: the last this many of a provider in a currency.
/// Each outcome moves the rate by 5 points, so a provider that falls from 90 % to 30 % is
/// behind an 80 % one within about 8 payments, and one that recovers is back after about 17
/// of its own (most of the window replaced), which exploration sends it within about 170 of
/// the route's (replayed by tests/api/success_routing.rs). The price of so short a window is noise (±8 points at 85 %): two
/// providers within about 10 points of each other share the traffic rather than one taking
/// all of it.
pub const WINDOW: usize = 20;
/// ... and none older than this: a provider that nobody sent anything to for an hour is
/// judged afresh (by [`PRIOR`]), not by what it did before.
pub const WINDOW_AGE: Duration = Duration::hours(1);
/// Fewer scored outcomes than this, and a provider counts as [`PRIOR`]: too few to judge.
pub const MIN_SCORED: usize = 10;
/// What a provider too little known scores: below a good provider (a 90 % one keeps its
/// traffic) and above a failing one, so a new provider gets payments to be judged by.
pub const PRIOR: f64 = 0.8;
/// A provider whose last this many scored outcomes in a currency all failed is eliminated
/// there: 5 failures in a row happen by chance to a 90 % provider once in 100 000 payments,
/// to a 30 % one once in 6.
pub const ELIMINATE_AFTER: usize = 5;
/// How long an eliminated provider waits after its last failure before one probe is sent.
pub const COOLDOWN: Duration = Duration::seconds(30);
/// How long a probe holds its slot when its outcome is never scored (an unknown outcome, a
/// hard decline): then another payment may probe.
pub const PROBE_TIMEOUT: Duration = Duration::seconds(60);
/// The share of payments sent first to a provider other than the best: how a provider that
/// fell behind is seen to recover.
pub const EXPLORATION: f64 = 0.10;

/// One scored outcome: approved or not, and when its attempt was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    pub approved: bool,
    pub at: DateTime<Utc>,
}

/// What a provider's recent outcomes in one currency come to.
#[derive(Debug, Clone, PartialEq)]
pub struct Score {
    /// Scored outcomes in the window (at most [`WINDOW`]).
    pub scored: usize,
    /// Of which approved.
    pub approved: usize,
    /// When the provider was eliminated (the failure that made it [`ELIMINATE_AFTER`] in a
    /// row), while it is.
    pub eliminated_since: Option<DateTime<Utc>>,
    /// The newest scored outcome: a probe given before it has been answered.
    pub newest: Option<DateTime<Utc>>,
}

impl Score {
    /// The score of `outcomes`, newest first, as of `now`: those past the window's size or
    /// age are left out.
    pub fn of(outcomes: &[Outcome], now: DateTime<Utc>) -> Score {
        let window: Vec<&Outcome> = outcomes
            .iter()
            .take(WINDOW)
            .take_while(|o| o.at > now - WINDOW_AGE)
            .collect();
        let streak = window.iter().take_while(|o| !o.approved).count();
        Score {
            scored: window.len(),
            approved: window.iter().filter(|o| o.approved).count(),
            // The streak's failure that made it ELIMINATE_AFTER long.
            eliminated_since: (streak >= ELIMINATE_AFTER)
                .then(|| window[streak - ELIMINATE_AFTER].at),
            newest: window.first().map(|o| o.at),
        }
    }

    /// The approval rate, if anything was scored.
    pub fn rate(&self) -> Option<f64> {
        (self.scored > 0).then(|| self.approved as f64 / self.scored as f64)
    }

    /// What the choice orders by: the rate, or [`PRIOR`] below [`MIN_SCORED`] outcomes.
    pub fn weight(&self) -> f64 {
        match self.rate() {
            Some(rate) if self.scored >= MIN_SCORED => rate,
            _ => PRIOR,
        }
    }

    /// When an eliminated provider may be probed: [`COOLDOWN`] after its last failure.
    fn probe_from(&self) -> Option<DateTime<Utc>> {
        self.eliminated_since?;
        Some(self.newest? + COOLDOWN)
    }
}

/// Every provider's score per currency (lowercase ISO 4217), as last read.
#[derive(Debug, Clone, Default)]
pub struct Scores {
    pub by: HashMap<(String, String), Score>,
}

impl Scores {
    pub fn get(&self, provider: &str, currency: &str) -> Option<&Score> {
        self.by.get(&(provider.to_owned(), currency.to_owned()))
    }
}

/// The probes this replica has under way, per provider and currency, with when each was
/// given. Per replica, not shared: with R replicas at most R probes of one provider are under
/// way at once, which is simpler than a slot in the database and as safe, since a probe is a
/// payment like any other (docs/guides/routing.md, "Routing by success").
#[derive(Debug, Default)]
pub struct Probes {
    given: HashMap<(String, String), DateTime<Utc>>,
}

impl Probes {
    /// Takes the probe slot of `provider` in `currency`, if it is free: never taken, or its
    /// probe answered (an outcome newer than the probe was scored) or timed out.
    fn take(&mut self, provider: &str, currency: &str, score: &Score, now: DateTime<Utc>) -> bool {
        let key = (provider.to_owned(), currency.to_owned());
        let free = match self.given.get(&key) {
            None => true,
            Some(&at) => score.newest.is_some_and(|n| n > at) || now >= at + PROBE_TIMEOUT,
        };
        if free {
            self.given.insert(key, now);
        }
        free
    }

    /// Frees the slot taken `at` for `provider` in `currency` by a payment that then sent
    /// nothing (a replay, a resumed request, a refusal): the next payment probes instead of
    /// waiting [`PROBE_TIMEOUT`]. A slot taken again since is left alone.
    pub fn give_back(&mut self, provider: &str, currency: &str, at: DateTime<Utc>) {
        let key = (provider.to_owned(), currency.to_owned());
        if self.given.get(&key) == Some(&at) {
            self.given.remove(&key);
        }
    }

    /// Forgets the probes of providers no longer eliminated.
    pub fn forget_readmitted(&mut self, scores: &Scores) {
        self.given.retain(|(provider, currency), _| {
            scores
                .get(provider, currency)
                .is_some_and(|s| s.eliminated_since.is_some())
        });
    }
}

/// The order to try `names` (a route, as the merchant's routing made it) for a payment in
/// `currency`, as indexes into `names`:
///
/// 1. an eliminated provider whose cooldown is over and whose probe slot is free, as the
///    probe;
/// 2. then the providers not eliminated, best [`Score::weight`] first (ties in the route's
///    order), except that a share [`EXPLORATION`] of payments puts one of the others, chosen
///    at random, first;
/// 3. then the eliminated ones, in the route's order: never chosen, but still there for a
///    failover when every other provider was not reached (which charged nothing), or a retry
///    the merchant allowed.
pub fn order(
    names: &[&str],
    currency: &str,
    scores: &Scores,
    probes: &mut Probes,
    now: DateTime<Utc>,
    rng: &mut impl Rng,
) -> Vec<usize> {
    choose(names, currency, scores, probes, now, rng).0
}

/// [`order`], and whether its first provider is a probe (its slot taken as of `now`).
pub fn choose(
    names: &[&str],
    currency: &str,
    scores: &Scores,
    probes: &mut Probes,
    now: DateTime<Utc>,
    rng: &mut impl Rng,
) -> (Vec<usize>, bool) {
    let score = |i: usize| scores.get(names[i], currency);
    let eliminated = |i: usize| score(i).is_some_and(|s| s.eliminated_since.is_some());
    let (mut out, mut admitted): (Vec<usize>, Vec<usize>) =
        (0..names.len()).partition(|&i| eliminated(i));
    admitted.sort_by(|&a, &b| {
        let weight = |i: usize| score(i).map_or(PRIOR, Score::weight);
        weight(b).total_cmp(&weight(a)).then(a.cmp(&b))
    });
    if admitted.len() > 1 && rng.random_bool(EXPLORATION) {
        let other = rng.random_range(1..admitted.len());
        let explored = admitted.remove(other);
        admitted.insert(0, explored);
    }
    let probe = out.iter().position(|&i| {
        let s = score(i).expect("an eliminated provider has a score");
        s.probe_from().is_some_and(|from| now >= from) && probes.take(names[i], currency, s, now)
    });
    let mut first = probe.map(|at| vec![out.remove(at)]).unwrap_or_default();
    first.extend(admitted);
    first.append(&mut out);
    (first, probe.is_some())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    fn now() -> DateTime<Utc> {
        "2026-11-27T12:00:00Z".parse().unwrap()
    }

    /// Outcomes newest first, one a second back from `now`, `true` approved.
    fn outcomes(approved: &[bool]) -> Vec<Outcome> {
        approved
            .iter()
            .enumerate()
            .map(|(i, &approved)| Outcome {
                approved,
                at: now() - Duration::seconds(i as i64 + 1),
            })
            .collect()
    }

    /// The order of the route a, b in eur.
    fn ab(s: &Scores, probes: &mut Probes, at: DateTime<Utc>, rng: &mut StdRng) -> Vec<usize> {
        order(&["a", "b"], "eur", s, probes, at, rng)
    }

    fn scores(of: &[(&str, &[bool])]) -> Scores {
        Scores {
            by: of
                .iter()
                .map(|(name, o)| {
                    (
                        (name.to_string(), "eur".into()),
                        Score::of(&outcomes(o), now()),
                    )
                })
                .collect(),
        }
    }

    /// `approved` of `of`, spread evenly, so any window of them has about the same rate.
    fn rate(approved: usize, of: usize) -> Vec<bool> {
        (0..of)
            .map(|i| (i + 1) * approved / of > i * approved / of)
            .collect()
    }

    #[test]
    fn the_window_slides_over_the_last_outcomes_within_its_age() {
        let mut o = outcomes(&rate(15, 15));
        o.extend(outcomes(&[false; 30]));
        let score = Score::of(&o, now());
        assert_eq!((score.scored, score.approved), (WINDOW, 15));
        // An hour old: out of the window, so too few to judge.
        let old: Vec<Outcome> = outcomes(&[false; 20])
            .into_iter()
            .map(|o| Outcome {
                at: o.at - WINDOW_AGE,
                ..o
            })
            .collect();
        let score = Score::of(&old, now());
        assert_eq!(
            (score.scored, score.rate(), score.weight()),
            (0, None, PRIOR)
        );
    }

    #[test]
    fn too_few_outcomes_count_as_the_prior() {
        let score = Score::of(&outcomes(&[true; 9]), now());
        assert_eq!((score.rate(), score.weight()), (Some(1.0), PRIOR));
        let score = Score::of(&outcomes(&[true; 10]), now());
        assert_eq!(score.weight(), 1.0);
    }

    #[test]
    fn five_failures_in_a_row_eliminate_and_one_approval_readmits() {
        let mut four = vec![false; 4];
        four.extend(rate(20, 20));
        assert_eq!(Score::of(&outcomes(&four), now()).eliminated_since, None);
        let mut seven = vec![false; 7];
        seven.extend(rate(20, 20));
        // The fifth failure of the streak, counting from its oldest: 3 s before the newest.
        let score = Score::of(&outcomes(&seven), now());
        assert_eq!(score.eliminated_since, Some(now() - Duration::seconds(3)));
        let mut readmitted = vec![true];
        readmitted.extend(seven);
        assert_eq!(
            Score::of(&outcomes(&readmitted), now()).eliminated_since,
            None
        );
    }

    #[test]
    fn ordered_by_score_ties_in_the_routes_order() {
        let s = scores(&[
            ("a", &rate(30, 50)),
            ("b", &rate(45, 50)),
            ("c", &rate(45, 50)),
        ]);
        let mut rng = StdRng::seed_from_u64(1);
        let mut seen = HashMap::new();
        for _ in 0..1000 {
            let o = order(
                &["a", "b", "c"],
                "eur",
                &s,
                &mut Probes::default(),
                now(),
                &mut rng,
            );
            *seen.entry(o).or_insert(0) += 1;
        }
        // Unexplored: b (tied with c, first in the route), c, a.
        assert!(seen[&vec![1, 2, 0]] > 850, "{seen:?}");
        // Explored: c or a first, about 5 % each.
        assert!((30..70).contains(&seen[&vec![2, 1, 0]]), "{seen:?}");
        assert!((30..70).contains(&seen[&vec![0, 1, 2]]), "{seen:?}");
    }

    #[test]
    fn exploration_takes_its_share_of_payments() {
        let s = scores(&[("a", &rate(45, 50)), ("b", &rate(15, 50))]);
        let mut rng = StdRng::seed_from_u64(43);
        let n = 20_000;
        let explored = (0..n)
            .filter(|_| {
                order(
                    &["a", "b"],
                    "eur",
                    &s,
                    &mut Probes::default(),
                    now(),
                    &mut rng,
                )[0] == 1
            })
            .count();
        // 10 % of 20 000 is 2000, sd 42: within 4 sd.
        assert!((1832..2168).contains(&explored), "{explored}");
    }

    #[test]
    fn an_unknown_provider_scores_the_prior() {
        let s = scores(&[("a", &rate(35, 50))]);
        let mut rng = StdRng::seed_from_u64(2);
        let mut firsts = |currency: &str| {
            (0..1000)
                .filter(|_| {
                    let o = order(
                        &["a", "new"],
                        currency,
                        &s,
                        &mut Probes::default(),
                        now(),
                        &mut rng,
                    );
                    o[0] == 1
                })
                .count()
        };
        // 0.7 < 0.8: the new provider is tried first but when exploring (about 100 in 1000).
        assert!((850..950).contains(&firsts("eur")));
        // In another currency a is unknown too: both at the prior, the route's order wins.
        assert!((50..150).contains(&firsts("usd")));
    }

    #[test]
    fn an_eliminated_provider_goes_last_until_its_probe() {
        let mut failing = vec![false; 5];
        failing.extend(rate(45, 45));
        let s = scores(&[("a", &failing), ("b", &rate(20, 50))]);
        let mut probes = Probes::default();
        let mut rng = StdRng::seed_from_u64(3);
        // Within the cooldown, never first, explored or not.
        for _ in 0..200 {
            assert_eq!(
                order(&["a", "b"], "eur", &s, &mut probes, now(), &mut rng),
                vec![1, 0]
            );
        }
        // After it, one payment probes; the next ones do not while that probe is out.
        let later = now() + COOLDOWN;
        assert_eq!(ab(&s, &mut probes, later, &mut rng), vec![0, 1]);
        // A payment that took the slot and sent nothing gives it back: the next one probes.
        probes.give_back("a", "eur", later);
        assert_eq!(ab(&s, &mut probes, later, &mut rng), vec![0, 1]);
        // A slot taken at another time is not this payment's to give back.
        probes.give_back("a", "eur", now());
        for _ in 0..50 {
            assert_eq!(ab(&s, &mut probes, later, &mut rng), vec![1, 0]);
        }
        // A probe never answered (an unknown outcome is never scored) frees its slot in time.
        let timed_out = later + PROBE_TIMEOUT;
        assert_eq!(ab(&s, &mut probes, timed_out, &mut rng), vec![0, 1]);
        assert_eq!(ab(&s, &mut probes, timed_out, &mut rng), vec![1, 0]);
    }

    #[test]
    fn a_failed_probe_restarts_the_cooldown_and_an_approved_one_readmits() {
        let mut failing = vec![false; 5];
        failing.extend(rate(45, 45));
        let s = scores(&[("a", &failing), ("b", &rate(40, 50))]);
        let mut probes = Probes::default();
        let mut rng = StdRng::seed_from_u64(4);
        let probe_at = now() + COOLDOWN;
        assert_eq!(ab(&s, &mut probes, probe_at, &mut rng)[0], 0);
        // The probe failed: a newer failure, so the cooldown counts from it.
        let failed = Outcome {
            approved: false,
            at: probe_at + Duration::seconds(1),
        };
        let mut o = vec![failed];
        o.extend(outcomes(&failing));
        let mut after = s.clone();
        after.by.insert(
            ("a".into(), "eur".into()),
            Score::of(&o, probe_at + Duration::seconds(2)),
        );
        let soon = probe_at + Duration::seconds(10);
        assert_eq!(ab(&after, &mut probes, soon, &mut rng), vec![1, 0]);
        let cooled = failed.at + COOLDOWN;
        assert_eq!(ab(&after, &mut probes, cooled, &mut rng)[0], 0);
        // An approved probe ends the streak: a is judged by its rate again (46/50 > 40/50).
        let approved = Outcome {
            approved: true,
            at: cooled + Duration::seconds(1),
        };
        let mut o = vec![approved];
        o.extend(outcomes(&rate(45, 49)));
        after.by.insert(
            ("a".into(), "eur".into()),
            Score::of(&o, cooled + Duration::seconds(2)),
        );
        probes.forget_readmitted(&after);
        assert!(probes.given.is_empty());
        let mut rng = StdRng::seed_from_u64(5);
        let firsts = (0..100)
            .filter(|_| ab(&after, &mut probes, cooled, &mut rng)[0] == 0)
            .count();
        assert!(firsts > 80, "{firsts}");
    }

    #[test]
    fn every_provider_eliminated_keeps_the_routes_order() {
        let s = scores(&[("a", &[false; 6]), ("b", &[false; 8])]);
        let mut rng = StdRng::seed_from_u64(6);
        let o = order(
            &["a", "b"],
            "eur",
            &s,
            &mut Probes::default(),
            now(),
            &mut rng,
        );
        assert_eq!(o, vec![0, 1]);
    }
}
