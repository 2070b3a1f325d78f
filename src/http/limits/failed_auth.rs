//! Failed authentication costs no database lookup twice (issue #40): a secret that is no live
//! key is remembered for a moment, by its hash, and answered `401` from memory; and an address
//! that presented too many such secrets is answered `429` before any lookup, so a flood of
//! random keys from one address costs a few lookups, not one each.
//!
//! A remembered failure is kept only `memory` (2 s by default): keys are made by another
//! process (the CLI), which cannot tell this replica, so a key presented just before it was
//! made works at most that long after (docs/PRODUCTION.md, "Limits and the addresses payorch
//! believes"). Live keys never meet these limits: a key this replica found live and has not
//! seen revoked since is answered from the caller cache, or looked up without them
//! (`http::auth::caller_of`); only a key it never saw live, or saw fail since, comes here.

use std::net::IpAddr;
use std::time::{Duration, Instant};

use prometheus::{IntCounterVec, Opts};

use super::address_key;
use super::exceeded::{LimitExceeded, Policy};
use crate::accounts::SecretHash;
use crate::bounded_map::BoundedMap;
use crate::http::errors::ApiError;
use crate::rate_limit::{Decision, Quota, RateLimiter};
use crate::telemetry::metrics::Metrics;

/// More failed secrets than this remembered and the stale ones go; past it all of them.
const CAPACITY: usize = 10_000;

pub struct FailedAuth {
    by_address: RateLimiter<IpAddr>,
    memory: Duration,
    /// Secrets that were no live key, and when that was found.
    recent: BoundedMap<SecretHash, Instant>,
    /// Failures by what answered them: `database`, `recent_failure`, `address_limit`.
    answered_by: IntCounterVec,
}

impl FailedAuth {
    pub fn new(
        per_address: Quota,
        memory: Duration,
        metrics: &Metrics,
    ) -> prometheus::Result<Self> {
        let answered_by = IntCounterVec::new(
            Opts::new(
                "auth_failures_total",
                "Secrets refused as no live key, by what answered: the database, the memory \
                 of a recent failure, or the address's failed-authentication limit",
            ),
            &["answered_by"],
        )?;
        metrics.register(Box::new(answered_by.clone()))?;
        Ok(FailedAuth {
            by_address: RateLimiter::new(per_address),
            memory,
            recent: BoundedMap::new(CAPACITY),
            answered_by,
        })
    }

    /// Before the secret of `hash` is looked up for `client`: `429` if the address has failed
    /// too often, `401` if the secret failed a moment ago; neither asks the database.
    pub fn before_lookup(&self, hash: &SecretHash, client: Option<IpAddr>) -> Result<(), ApiError> {
        let client = client.map(address_key);
        if let Some(ip) = client {
            if let Decision::Denied { retry_after } = self.by_address.peek(ip) {
                return Err(self.over_limit(retry_after));
            }
        }
        let failed_lately = self
            .recent
            .get(hash)
            .is_some_and(|at| at.elapsed() < self.memory);
        if failed_lately {
            self.answered_by
                .with_label_values(&["recent_failure"])
                .inc();
            return Err(self.count_against(client));
        }
        Ok(())
    }

    /// The secret of `hash`, presented by `client`, was looked up and is no live key: it is
    /// remembered and counted; the answer.
    pub fn failed(&self, hash: SecretHash, client: Option<IpAddr>) -> ApiError {
        if !self.memory.is_zero() {
            let memory = self.memory;
            self.recent
                .insert_keeping(hash, Instant::now(), |at| at.elapsed() < memory);
        }
        self.answered_by.with_label_values(&["database"]).inc();
        self.count_against(client.map(address_key))
    }

    /// A failure counted against the address: `401`, or `429` when it was one too many.
    fn count_against(&self, client: Option<IpAddr>) -> ApiError {
        match client.map(|ip| self.by_address.take(ip)) {
            Some(Decision::Denied { retry_after }) => self.refusal(retry_after),
            _ => ApiError::Unauthenticated,
        }
    }

    fn over_limit(&self, retry_after: Duration) -> ApiError {
        self.answered_by.with_label_values(&["address_limit"]).inc();
        self.refusal(retry_after)
    }

    fn refusal(&self, retry_after: Duration) -> ApiError {
        ApiError::RateLimitExceeded(Box::new(LimitExceeded {
            policy: Policy::FailedAuthPerAddress,
            quota: self.by_address.quota(),
            retry_after,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failed_auth(per_minute: u32, memory: Duration) -> FailedAuth {
        let metrics = Metrics::new().unwrap();
        FailedAuth::new(Quota::per_minute(per_minute), memory, &metrics).unwrap()
    }

    fn ip(text: &str) -> Option<IpAddr> {
        Some(text.parse().unwrap())
    }

    #[test]
    fn a_failed_secret_is_answered_from_memory_for_a_moment_only() {
        let auth = failed_auth(100, Duration::from_millis(50));
        let client = ip("192.0.2.1");
        assert!(auth.before_lookup(&[1; 32], client).is_ok());
        assert!(matches!(
            auth.failed([1; 32], client),
            ApiError::Unauthenticated
        ));
        assert!(matches!(
            auth.before_lookup(&[1; 32], client),
            Err(ApiError::Unauthenticated)
        ));
        assert!(
            auth.before_lookup(&[2; 32], client).is_ok(),
            "another secret"
        );
        std::thread::sleep(Duration::from_millis(60));
        assert!(
            auth.before_lookup(&[1; 32], client).is_ok(),
            "looked up again once the memory has passed"
        );
    }

    #[test]
    fn an_address_that_failed_too_often_is_refused_before_any_lookup() {
        let auth = failed_auth(3, Duration::ZERO);
        let (flood, other) = (ip("192.0.2.1"), ip("192.0.2.2"));
        for n in 0..3u8 {
            assert!(auth.before_lookup(&[n; 32], flood).is_ok());
            assert!(matches!(
                auth.failed([n; 32], flood),
                ApiError::Unauthenticated
            ));
        }
        match auth.before_lookup(&[9; 32], flood) {
            Err(ApiError::RateLimitExceeded(exceeded)) => {
                assert_eq!(exceeded.policy, Policy::FailedAuthPerAddress);
                assert!(exceeded.retry_after <= Duration::from_secs(20));
            }
            other => panic!("{other:?}"),
        }
        assert!(auth.before_lookup(&[9; 32], other).is_ok(), "its own limit");
        assert!(
            auth.before_lookup(&[9; 32], None).is_ok(),
            "no address, no limit"
        );
    }
}
