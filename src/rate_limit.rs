//! How often one key (a client address, an API key, a payment) may do something: a quota of
//! `limit` a `window`, all of which may be used at once, then one more each `window / limit`.
//!
//! The generic cell rate algorithm: each key keeps one instant, when its quota would be whole
//! again if nothing more came (its "theoretical arrival time"), so a check is one read and one
//! write of one map entry, under one lock, with no timer and no database. The counts are this
//! replica's own: N replicas let a key do N times as much (docs/PRODUCTION.md, "Limits and
//! the addresses payorch believes").

use std::hash::Hash;
use std::time::{Duration, Instant};

use crate::bounded_map::BoundedMap;

/// More keys than this at once and those whose quota is whole again are forgotten (which
/// changes nothing for them); past it, all.
const CAPACITY: usize = 100_000;

/// `limit` times a `window`; a `limit` of 0 is no limit at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quota {
    pub limit: u32,
    pub window: Duration,
}

impl Quota {
    pub const fn per_minute(limit: u32) -> Self {
        Quota {
            limit,
            window: Duration::from_secs(60),
        }
    }

    /// The wait between two uses once the quota is used up.
    fn interval(&self) -> Duration {
        self.window / self.limit.max(1)
    }
}

/// What a check found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Taken; `remaining` more may come at once, and the quota is whole again in `reset`.
    Allowed { remaining: u32, reset: Duration },
    /// Used up: one more may come in `retry_after`.
    Denied { retry_after: Duration },
}

impl Decision {
    pub fn is_allowed(&self) -> bool {
        matches!(self, Decision::Allowed { .. })
    }
}

pub struct RateLimiter<K> {
    quota: Quota,
    /// Per key, when its quota is whole again.
    whole_at: BoundedMap<K, Instant>,
}

impl<K: Eq + Hash> RateLimiter<K> {
    pub fn new(quota: Quota) -> Self {
        RateLimiter {
            quota,
            whole_at: BoundedMap::new(CAPACITY),
        }
    }

    pub fn quota(&self) -> Quota {
        self.quota
    }

    /// Takes one use of `key`'s quota, if there is one left.
    pub fn take(&self, key: K) -> Decision {
        self.take_at(key, Instant::now())
    }

    /// Whether `key` has a use left, without taking it.
    pub fn peek(&self, key: K) -> Decision {
        self.decide(key, Instant::now(), false)
    }

    fn take_at(&self, key: K, now: Instant) -> Decision {
        self.decide(key, now, true)
    }

    fn decide(&self, key: K, now: Instant, take: bool) -> Decision {
        if self.quota.limit == 0 {
            return Decision::Allowed {
                remaining: u32::MAX,
                reset: Duration::ZERO,
            };
        }
        let interval = self.quota.interval();
        let window = interval * self.quota.limit;
        let decide = |whole_at: Option<&Instant>| {
            let whole_at = whole_at.map_or(now, |at| (*at).max(now));
            let after = whole_at + interval;
            // One more fits while the quota, with it taken, is whole again within a window.
            let fits_from = after.checked_sub(window).unwrap_or(now);
            if now < fits_from {
                return (
                    None,
                    Decision::Denied {
                        retry_after: fits_from - now,
                    },
                );
            }
            let used = after - now;
            let remaining = (window.saturating_sub(used).as_nanos() / interval.as_nanos()) as u32;
            let decision = Decision::Allowed {
                remaining,
                reset: used,
            };
            (take.then_some(after), decision)
        };
        self.whole_at
            .update_keeping(key, decide, |whole_at| *whole_at > Instant::now())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limiter(limit: u32, window_secs: u64) -> RateLimiter<&'static str> {
        RateLimiter::new(Quota {
            limit,
            window: Duration::from_secs(window_secs),
        })
    }

    #[test]
    fn a_whole_quota_may_be_used_at_once_then_one_per_interval() {
        let limiter = limiter(3, 60);
        let now = Instant::now();
        let remaining: Vec<_> = (0..3)
            .map(|_| match limiter.take_at("a", now) {
                Decision::Allowed { remaining, .. } => remaining,
                denied => panic!("{denied:?}"),
            })
            .collect();
        assert_eq!(remaining, [2, 1, 0]);
        assert_eq!(
            limiter.take_at("a", now),
            Decision::Denied {
                retry_after: Duration::from_secs(20)
            }
        );
        assert!(limiter.take_at("b", now).is_allowed(), "each key its own");
        let later = now + Duration::from_secs(20);
        assert!(limiter.take_at("a", later).is_allowed());
        assert!(!limiter.take_at("a", later).is_allowed());
        let much_later = now + Duration::from_secs(600);
        assert_eq!(
            limiter.take_at("a", much_later),
            Decision::Allowed {
                remaining: 2,
                reset: Duration::from_secs(20)
            },
            "an idle key is whole again, not owed more than its quota"
        );
    }

    #[test]
    fn a_denied_request_takes_nothing_and_a_peek_never_takes() {
        let limiter = limiter(1, 10);
        let now = Instant::now();
        assert!(limiter.take_at("a", now).is_allowed());
        for _ in 0..5 {
            assert!(!limiter.take_at("a", now).is_allowed());
        }
        assert!(
            limiter
                .take_at("a", now + Duration::from_secs(10))
                .is_allowed(),
            "denials did not push the next use further away"
        );
        let fresh = limiter.peek("b");
        assert!(fresh.is_allowed());
        assert!(limiter.peek("b").is_allowed());
        assert!(limiter.take("b").is_allowed());
        assert!(!limiter.peek("b").is_allowed());
    }

    #[test]
    fn a_zero_limit_is_no_limit() {
        let limiter = limiter(0, 60);
        assert!((0..1000).all(|_| limiter.take("a").is_allowed()));
    }
}
