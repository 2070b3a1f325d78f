//! When the reconciler looks, and how often (docs/DESIGN.md, "The reconciler"): shared by
//! the payment flow, which sets an open attempt's first check, and the reconciler.

use std::time::Duration;

/// The failure code of an attempt or refund the provider never had (docs/DESIGN.md, "The
/// reconciler" and "No record, early").
pub const NO_RECORD: &str = crate::providers::NO_RECORD;

#[derive(Debug, Clone)]
pub struct ReconcilerSettings {
    /// How often each replica looks for due attempts.
    pub interval: Duration,
    /// Nominal wait before the first, second, … check; the last one repeats. Each actual wait
    /// is drawn from 0.8–1.2 × its nominal one (`wait_after`).
    pub backoff: Vec<Duration>,
    /// How long the provider keeps idempotency keys, minus a margin: inside it, a resend with
    /// the same key is safe and tells the truth.
    pub key_window: Duration,
    /// How long after an attempt's last possible send the provider has surely finished with
    /// it: a read-after-write list that long after it that finds nothing proves nothing was
    /// charged (docs/DESIGN.md, "No record, early").
    pub settle_delay: Duration,
    /// For a provider without lookups: how long after an attempt was made its unknown outcome
    /// waits for a notification before it is canceled by reference (docs/DESIGN.md, "What
    /// proves what").
    pub technical_cancel_after: Duration,
    /// How long a claimed attempt is hidden from other replicas; longer than a provider call.
    pub claim: Duration,
    /// Attempts claimed per round.
    pub batch: i64,
    /// Attempts unresolved for longer than this are counted for a human.
    pub alert_after: Duration,
    /// How long a payer may take over a 3-D Secure challenge before the payment is canceled
    /// at the provider and its order is payable again (docs/guides/three-d-secure.md, "3-D Secure").
    pub challenge_timeout: Duration,
}

impl Default for ReconcilerSettings {
    fn default() -> Self {
        ReconcilerSettings {
            interval: Duration::from_secs(1),
            backoff: [5, 15, 60, 300, 900, 3600]
                .map(Duration::from_secs)
                .to_vec(),
            key_window: Duration::from_secs(23 * 3600),
            settle_delay: Duration::from_secs(300),
            technical_cancel_after: Duration::from_secs(3600),
            claim: Duration::from_secs(60),
            batch: 16,
            alert_after: Duration::from_secs(15 * 60),
            challenge_timeout: Duration::from_secs(30 * 60),
        }
    }
}

impl ReconcilerSettings {
    /// The wait before check number `checks + 1`: its nominal wait, jittered (see
    /// `crate::jitter`), so that attempts checked together — all those a provider outage left
    /// open — are not all checked together again.
    pub fn wait_after(&self, checks: i32) -> Duration {
        crate::jitter::jittered(self.nominal_wait(checks))
    }

    /// The schedule's wait before check number `checks + 1`, without jitter.
    pub fn nominal_wait(&self, checks: i32) -> Duration {
        let index = (checks.max(0) as usize).min(self.backoff.len().saturating_sub(1));
        self.backoff
            .get(index)
            .copied()
            .unwrap_or(Duration::from_secs(3600))
    }

    /// The wait before check number `checks + 1`, as a chrono duration.
    pub fn next_check(&self, checks: i32) -> chrono::Duration {
        to_chrono(self.wait_after(checks))
    }

    /// How long the provider still answers a resend with the first result.
    pub fn key_window(&self) -> chrono::Duration {
        to_chrono(self.key_window)
    }

    /// How long after an attempt's last possible send a list that finds nothing is final.
    pub fn settle_delay(&self) -> chrono::Duration {
        to_chrono(self.settle_delay)
    }

    /// When the payment flow leaves an attempt open, the first check is this far away.
    pub fn first_check(&self) -> chrono::Duration {
        to_chrono(self.wait_after(0))
    }
}

/// A duration as a PostgreSQL `interval` parameter (the queues' claim windows, alert ages).
pub(in crate::payments) fn pg_interval(d: Duration) -> diesel::pg::data_types::PgInterval {
    diesel::pg::data_types::PgInterval::from_microseconds(d.as_micros().min(i64::MAX as u128) as i64)
}

pub(in crate::payments) fn to_chrono(d: Duration) -> chrono::Duration {
    chrono::Duration::from_std(d).unwrap_or(chrono::Duration::hours(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_wait_is_jittered_around_its_nominal_one() {
        let settings = ReconcilerSettings::default();
        for checks in 0..8 {
            let nominal = settings.nominal_wait(checks);
            let waits: Vec<Duration> = (0..100).map(|_| settings.wait_after(checks)).collect();
            for wait in &waits {
                assert!(
                    nominal.mul_f64(0.8) <= *wait && *wait <= nominal.mul_f64(1.2),
                    "check {checks}: {wait:?} is not within 0.8–1.2 × {nominal:?}"
                );
            }
            assert!(
                waits.iter().any(|wait| *wait != waits[0]),
                "check {checks}: 100 waits of {:?}, all the same",
                waits[0]
            );
        }
    }

    #[test]
    fn the_chrono_waits_are_jittered_too() {
        let settings = ReconcilerSettings::default();
        let firsts: Vec<chrono::Duration> = (0..100).map(|_| settings.first_check()).collect();
        let nexts: Vec<chrono::Duration> = (0..100).map(|_| settings.next_check(2)).collect();
        for first in &firsts {
            assert!(
                (chrono::Duration::seconds(4)..=chrono::Duration::seconds(6)).contains(first),
                "{first:?}"
            );
        }
        for next in &nexts {
            assert!(
                (chrono::Duration::seconds(48)..=chrono::Duration::seconds(72)).contains(next),
                "{next:?}"
            );
        }
        assert!(firsts.iter().any(|first| *first != firsts[0]));
        assert!(nexts.iter().any(|next| *next != nexts[0]));
    }
}
