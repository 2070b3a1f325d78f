//! How much one client may ask of payorch in a while (issue #40; docs/PRODUCTION.md, "Limits
//! and the addresses payorch believes"): reads per API key and per client address, the
//! payer-return route per address, and failed authentications per address
//! ([`failed_auth`]). Writes are limited by the new-key quota (docs/guides/idempotency.md, "Rate of new keys"),
//! which already costs them nothing on the hot path; they are not counted again here.
//!
//! A request over a limit is answered `429 rate_limited` before anything else is done, with
//! `Retry-After` and the RateLimit fields of draft-ietf-httpapi-ratelimit-headers-10 (a
//! `RateLimit-Policy` naming the quota, a `RateLimit` with what is left); an allowed read
//! carries both too, so a client can slow down before it is refused. The counts are this
//! replica's ([`crate::rate_limit`]): N replicas allow N times the rate.

pub mod exceeded;
pub mod failed_auth;

use std::net::{IpAddr, Ipv6Addr};
use std::time::Duration;

use actix_web::body::{EitherBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{self, HeaderMap};
use actix_web::http::Method;
use actix_web::middleware::Next;
use actix_web::{web, Error, ResponseError};
use prometheus::{IntCounterVec, Opts};

use crate::accounts::{secret_hash, SecretHash};
use crate::http::client_address::{client_of, TrustedProxies};
use crate::http::errors::ApiError;
use crate::http::AppState;
use crate::payments::attempts::payer_return::ProviderChecks;
use crate::rate_limit::{Decision, Quota, RateLimiter};
use crate::telemetry::metrics::Metrics;
use crate::telemetry::once_a_second::OnceASecond;
use exceeded::{field_value, Counted, RATELIMIT, RATELIMIT_POLICY};
pub use exceeded::{LimitExceeded, Policy};
use failed_auth::FailedAuth;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitSettings {
    /// `GET`s of the API with one key.
    pub reads_per_key: Quota,
    /// `GET`s of the API (and the checkout demo's) from one client address.
    pub reads_per_address: Quota,
    /// Secrets presented from one address that are no live key.
    pub failed_auth_per_address: Quota,
    /// How long a secret that is no live key is answered `401` without a lookup: a key
    /// created meanwhile (elsewhere) works at most this long after it was made.
    pub failed_auth_memory: Duration,
    /// `GET /v1/payments/{id}/return` from one address.
    pub payer_returns_per_address: Quota,
    /// After a payment's first two, how often its payer's return may make payorch ask the
    /// provider; zero: every time.
    pub payer_return_check_interval: Duration,
    /// Whose forwarding headers are believed; the server keeps them as its app data.
    pub trusted_proxies: TrustedProxies,
}

impl Default for LimitSettings {
    /// A key may read 100 times a second (Stripe's live-mode rate), an address twice that;
    /// twenty bad secrets a minute is more than any typo. Writes, which the benchmarks drive,
    /// are not counted here.
    fn default() -> Self {
        LimitSettings {
            reads_per_key: Quota::per_minute(6_000),
            reads_per_address: Quota::per_minute(12_000),
            failed_auth_per_address: Quota::per_minute(20),
            failed_auth_memory: Duration::from_secs(2),
            payer_returns_per_address: Quota::per_minute(60),
            payer_return_check_interval: Duration::from_secs(5),
            trusted_proxies: TrustedProxies::default(),
        }
    }
}

/// This application's limits and what they have counted.
pub struct Limits {
    reads_by_key: RateLimiter<SecretHash>,
    reads_by_address: RateLimiter<IpAddr>,
    payer_returns_by_address: RateLimiter<IpAddr>,
    pub failed_auth: FailedAuth,
    /// How often a payment's payer return may ask the provider.
    pub payer_checks: ProviderChecks,
    refused: IntCounterVec,
}

impl Limits {
    pub fn new(settings: &LimitSettings, metrics: &Metrics) -> prometheus::Result<Self> {
        let refused = IntCounterVec::new(
            Opts::new(
                "rate_limited_total",
                "Requests answered 429 rate_limited, by the policy that refused them",
            ),
            &["policy"],
        )?;
        metrics.register(Box::new(refused.clone()))?;
        Ok(Limits {
            reads_by_key: RateLimiter::new(settings.reads_per_key),
            reads_by_address: RateLimiter::new(settings.reads_per_address),
            payer_returns_by_address: RateLimiter::new(settings.payer_returns_per_address),
            failed_auth: FailedAuth::new(
                settings.failed_auth_per_address,
                settings.failed_auth_memory,
                metrics,
            )?,
            payer_checks: ProviderChecks::new(settings.payer_return_check_interval),
            refused,
        })
    }

    /// Counts a refusal (and says so in the log once a second at most).
    fn refuse(&self, exceeded: LimitExceeded, client: Option<IpAddr>) -> ApiError {
        static WARNINGS: OnceASecond = OnceASecond::new();
        let policy = exceeded.policy.name();
        self.refused.with_label_values(&[policy]).inc();
        if let Some(refused) = WARNINGS.count() {
            tracing::warn!(policy, client = ?client, refused, "requests refused: rate limited");
        }
        ApiError::RateLimitExceeded(Box::new(exceeded))
    }
}

/// What [`limit_requests`] counts a request in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Counts {
    Read,
    PayerReturn,
}

/// Reads of the API and the checkout demo, and the payer's return (which has its own quota:
/// a browser, not an integration, and it may make payorch ask a provider).
fn counted_in(method: &Method, path: &str) -> Option<Counts> {
    if method != Method::GET && method != Method::HEAD {
        return None;
    }
    if path.starts_with("/v1/payments/") && path.ends_with("/return") {
        return Some(Counts::PayerReturn);
    }
    (path.starts_with("/v1/") || path.starts_with("/checkout/demo/")).then_some(Counts::Read)
}

/// Counts a read or a payer return in its quotas, and refuses it `429` over any of them;
/// tells an allowed read where it stands.
pub async fn limit_requests(
    req: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<EitherBody<impl MessageBody>>, Error> {
    // Writes (the benchmarked checkout among them) pass with one comparison.
    let counts = counted_in(req.method(), req.path());
    let state = counts.and_then(|_| req.app_data::<web::Data<AppState>>().cloned());
    let (Some(counts), Some(state)) = (counts, state) else {
        return Ok(next.call(req).await?.map_into_left_body());
    };
    let limits = &state.limits;
    let client = client_of(req.request()).ip.map(address_key);
    let counted = match counts {
        Counts::PayerReturn => client
            .map(|ip| {
                let taken = limits.payer_returns_by_address.take(ip);
                count(
                    Policy::PayerReturnsPerAddress,
                    &limits.payer_returns_by_address,
                    taken,
                )
            })
            .transpose(),
        Counts::Read => reads(limits, client, req.headers()),
    };
    match counted {
        Err(exceeded) => {
            let error = limits.refuse(exceeded, client);
            Ok(req
                .into_response(error.error_response())
                .map_into_right_body())
        }
        Ok(standing) => {
            let mut response = next.call(req).await?;
            let headers = response.headers_mut();
            // A refusal by another quota (failed authentication) tells of that one.
            if counts == Counts::Read && !headers.contains_key(RATELIMIT_POLICY) {
                if let Some(standing) = standing {
                    headers.insert(RATELIMIT_POLICY, field_value(standing.policy_item()));
                    headers.insert(RATELIMIT, field_value(standing.limit_item()));
                }
            }
            Ok(response.map_into_left_body())
        }
    }
}

/// A read, in the quota of its address and then of its key; where it stands in the tighter.
fn reads(
    limits: &Limits,
    client: Option<IpAddr>,
    headers: &HeaderMap,
) -> Result<Option<Counted>, LimitExceeded> {
    let by_address = client
        .map(|ip| {
            let taken = limits.reads_by_address.take(ip);
            count(Policy::ReadsPerAddress, &limits.reads_by_address, taken)
        })
        .transpose()?;
    let by_key = presented_key(headers)
        .map(|hash| {
            let taken = limits.reads_by_key.take(hash);
            count(Policy::ReadsPerKey, &limits.reads_by_key, taken)
        })
        .transpose()?;
    Ok([by_key, by_address]
        .into_iter()
        .flatten()
        .filter(|counted| counted.quota.limit > 0)
        .min_by_key(|counted| counted.remaining))
}

fn count<K: Eq + std::hash::Hash>(
    policy: Policy,
    limiter: &RateLimiter<K>,
    decision: Decision,
) -> Result<Counted, LimitExceeded> {
    let quota = limiter.quota();
    match decision {
        Decision::Allowed { remaining, reset } => Ok(Counted {
            policy,
            quota,
            remaining,
            reset_secs: reset.as_secs_f64().ceil() as u64,
        }),
        Decision::Denied { retry_after } => Err(LimitExceeded {
            policy,
            quota,
            retry_after,
        }),
    }
}

/// The hash of the bearer secret, the key a read is counted under; `None` without one (the
/// request is then refused `401` by the handler, and counted by its address only).
fn presented_key(headers: &HeaderMap) -> Option<SecretHash> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, secret) = value.trim().split_once(' ')?;
    let secret = secret.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !secret.is_empty()).then(|| secret_hash(secret))
}

/// What a client address is counted under: an IPv6 client by its /64, the least a site is
/// given, so that one client cannot take a fresh quota with each of its addresses.
pub fn address_key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let bits = u128::from(v6) & !((1u128 << 64) - 1);
                IpAddr::V6(Ipv6Addr::from(bits))
            }
        },
        v4 => v4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_and_payer_returns_are_counted_writes_and_pages_are_not() {
        let get = Method::GET;
        assert_eq!(counted_in(&get, "/v1/payments/pay_1"), Some(Counts::Read));
        assert_eq!(
            counted_in(&get, "/checkout/demo/orders/ord_1"),
            Some(Counts::Read)
        );
        assert_eq!(
            counted_in(&get, "/v1/payments/pay_1/return"),
            Some(Counts::PayerReturn)
        );
        assert_eq!(counted_in(&Method::POST, "/v1/checkout"), None);
        assert_eq!(counted_in(&Method::POST, "/v1/orders"), None);
        for free in ["/health/live", "/metrics", "/checkout", "/openapi.json"] {
            assert_eq!(counted_in(&get, free), None, "{free}");
        }
    }

    #[test]
    fn an_ipv6_client_is_counted_by_its_64() {
        let a: IpAddr = "2001:db8:1:2:aaaa::1".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2:bbbb::2".parse().unwrap();
        let other: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        assert_eq!(address_key(a), address_key(b));
        assert_ne!(address_key(a), address_key(other));
        let mapped: IpAddr = "::ffff:192.0.2.1".parse().unwrap();
        assert_eq!(address_key(mapped), "192.0.2.1".parse::<IpAddr>().unwrap());
    }
}
