//! A request refused by a limit, and how the refusal and an allowed read say where the client
//! stands: `Retry-After` and the `RateLimit-Policy` and `RateLimit` fields of
//! draft-ietf-httpapi-ratelimit-headers-10 (a List of the policy's name with `q`, the quota,
//! and `w`, its window in seconds; and of the name with `r`, what is left, and `t`, the
//! seconds until it is back).

use std::time::Duration;

use actix_web::http::header::{self, HeaderName, HeaderValue};

use crate::rate_limit::Quota;

pub const RATELIMIT_POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
pub const RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");

/// The quotas one request may be counted in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    ReadsPerKey,
    ReadsPerAddress,
    FailedAuthPerAddress,
    PayerReturnsPerAddress,
}

impl Policy {
    /// Its name in the RateLimit fields and the problem's `policy`.
    pub fn name(self) -> &'static str {
        match self {
            Policy::ReadsPerKey => "reads-per-key",
            Policy::ReadsPerAddress => "reads-per-address",
            Policy::FailedAuthPerAddress => "failed-auth-per-address",
            Policy::PayerReturnsPerAddress => "payer-returns-per-address",
        }
    }

    fn what(self) -> &'static str {
        match self {
            Policy::ReadsPerKey => "reads with this API key",
            Policy::ReadsPerAddress => "reads from this address",
            Policy::FailedAuthPerAddress => {
                "secrets that are no live key from this address (nothing was looked up)"
            }
            Policy::PayerReturnsPerAddress => "payer returns from this address",
        }
    }
}

/// A request refused by `policy`, whose `quota` is used up until `retry_after`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitExceeded {
    pub policy: Policy,
    pub quota: Quota,
    pub retry_after: Duration,
}

impl LimitExceeded {
    /// Whole seconds, at least one: what `Retry-After` and `t` say.
    pub fn retry_after_secs(&self) -> u64 {
        self.retry_after.as_secs_f64().ceil().max(1.0) as u64
    }

    pub fn detail(&self) -> String {
        format!(
            "too many {}: at most {} every {} s; nothing was done, retry after {} s \
             (Retry-After)",
            self.policy.what(),
            self.quota.limit,
            self.quota.window.as_secs(),
            self.retry_after_secs()
        )
    }

    /// `Retry-After`, `RateLimit-Policy` and `RateLimit` of the `429`.
    pub fn headers(&self) -> [(HeaderName, HeaderValue); 3] {
        let secs = self.retry_after_secs();
        let state = Counted {
            policy: self.policy,
            quota: self.quota,
            remaining: 0,
            reset_secs: secs,
        };
        [
            (header::RETRY_AFTER, HeaderValue::from(secs)),
            (RATELIMIT_POLICY, field_value(state.policy_item())),
            (RATELIMIT, field_value(state.limit_item())),
        ]
    }
}

pub(super) fn field_value(text: String) -> HeaderValue {
    // Policy names and numbers only: always a valid header value.
    HeaderValue::from_str(&text).unwrap_or_else(|_| HeaderValue::from_static(""))
}

/// Where one request stands in one quota.
#[derive(Debug, Clone, Copy)]
pub(super) struct Counted {
    pub(super) policy: Policy,
    pub(super) quota: Quota,
    pub(super) remaining: u32,
    pub(super) reset_secs: u64,
}

impl Counted {
    /// An item of `RateLimit-Policy`: `"reads-per-key";q=6000;w=60`.
    pub(super) fn policy_item(&self) -> String {
        format!(
            "\"{}\";q={};w={}",
            self.policy.name(),
            self.quota.limit,
            self.quota.window.as_secs()
        )
    }

    /// An item of `RateLimit`: `"reads-per-key";r=5999;t=1`.
    pub(super) fn limit_item(&self) -> String {
        format!(
            "\"{}\";r={};t={}",
            self.policy.name(),
            self.remaining,
            self.reset_secs
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_says_when_to_retry_in_the_drafts_fields() {
        let exceeded = LimitExceeded {
            policy: Policy::ReadsPerKey,
            quota: Quota::per_minute(600),
            retry_after: Duration::from_millis(11_200),
        };
        let headers = exceeded.headers();
        let text: Vec<_> = headers
            .iter()
            .map(|(name, value)| format!("{name}: {}", value.to_str().unwrap()))
            .collect();
        assert_eq!(
            text,
            [
                "retry-after: 12",
                "ratelimit-policy: \"reads-per-key\";q=600;w=60",
                "ratelimit: \"reads-per-key\";r=0;t=12",
            ]
        );
    }
}
