//! The next attempt of a paying request, when its attempt can be followed by another: its
//! provider was provably not reached (failover, docs/DESIGN.md, "Failover"), or declined it
//! and [`retry::decide`] says try again, from what [`chain`] reads (docs/guides/declines.md,
//! "Retries"). Either way failover's one transaction ([`fail_over`]) fails the attempt, makes
//! the next one naming it (`retry_of`, `retry_reason`), and moves the client's
//! Idempotency-Key onto it. Nothing is read from the database unless the provider was not
//! reached by an attempt that was itself a retry, or declined and the rules the declined
//! attempt alone can judge allow a retry: the happy path, and a merchant without retries, pay
//! nothing for this.
//!
//! The next provider is the first of the route that no attempt of the request's chain has
//! used ([`first_untried`]), not the one after the attempt's own: a resumed request builds
//! its route afresh, and routing by success may have re-ordered it since, so "the one after"
//! could be a provider that already declined this card, or none though one is left.

use chrono::{DateTime, Utc};

use super::chain;
use super::failover::{fail_over, Ended, FailedOver};
use super::keyed::NewAttempt;
use super::retry::{self, RetryReason, RetrySettings};
use super::retry::{asked_for_three_d_secure, CardDeclines, Facts, NoRetry, Retry};
use super::PaymentAttempt;
use crate::db::PgConn;
use crate::idempotency::InFlightKey;
use crate::payments::service::Payments;
use crate::providers::decline::DeclineCode;
use crate::providers::registry::NamedProvider;
use crate::providers::{ProviderCall, ThreeDSecure};

/// What came of a call that may be followed by another attempt.
#[derive(Debug)]
pub enum Next {
    /// The next attempt was made: it, and the key now in flight on it.
    Made(Box<PaymentAttempt>, InFlightKey),
    /// None (no provider left, a rule refused, or the attempt was no longer as read): nothing
    /// was written, and the key is handed back for the answer to be recorded as usual.
    Stay(InFlightKey),
}

/// After the first send of `attempt` provably never reached its provider: the payment fails
/// over to the first provider of `route` its request has not tried, if there is one (and the
/// attempt is still unsent). A first attempt (no `retry_of`) is the whole chain; a retry's
/// chain is read.
pub async fn after_unreached(
    conn: &mut PgConn,
    payments: &Payments,
    attempt: &PaymentAttempt,
    call: &ProviderCall,
    route: &[&NamedProvider],
    key: InFlightKey,
    lease_end: DateTime<Utc>,
) -> diesel::QueryResult<Next> {
    let chain = match attempt.retry_of {
        None => vec![attempt.provider.clone()],
        Some(_) => chain::so_far(conn, attempt).await?.providers,
    };
    let Some(next) = first_untried(route, &chain) else {
        return Ok(Next::Stay(key));
    };
    let reason = RetryReason::ProviderUnreached;
    let told = format!(
        "failed over to {}: {} not reached",
        next.name, attempt.provider
    );
    let new = NewAttempt::new(&attempt.payment_method, &next.name, lease_end)
        .taken(attempt.capture_method, attempt.return_url.as_deref())
        .retrying(attempt.id, (reason, told), attempt.three_d_secure);
    let metrics = &payments.metrics;
    let ended = Ended::Unreached;
    match fail_over(conn, metrics, attempt, call, ended, &new, key, lease_end).await? {
        FailedOver::To(made, key) => {
            tracing::info!(from = %attempt.provider, to = %next.name,
                "provider not reached: failing over");
            metrics.failover(&attempt.provider, &next.name);
            metrics.created();
            Ok(Next::Made(made, key))
        }
        FailedOver::NotAsRead(key) => Ok(Next::Stay(key)),
    }
}

/// After `call` answered `attempt`: the retry if the answer is a definite decline and the
/// merchant's `settings` and the rules allow one. `route` is the payment's providers in
/// order; `lease_end` the new attempt's lease (and the key's).
pub async fn after_decline(
    conn: &mut PgConn,
    payments: &Payments,
    attempt: &PaymentAttempt,
    call: &ProviderCall,
    (route, settings): (&[&NamedProvider], RetrySettings),
    key: InFlightKey,
    lease_end: DateTime<Utc>,
) -> diesel::QueryResult<Next> {
    let Some(decline) = Facts::decline_of(&call.outcome) else {
        return Ok(Next::Stay(key));
    };
    // First what the declined attempt alone tells: most declines are refused on it (the
    // merchant's switch off, a hard decline), and then nothing is read. The chain can only
    // take providers away, so a refusal for want of one stands.
    let mut facts = Facts {
        decline: decline.clone(),
        settings,
        attempts: 1,
        three_d_secure_tried: asked_for_three_d_secure(
            attempt.three_d_secure,
            attempt.next_action.is_some(),
        ),
        stepped_up: attempt.three_d_secure == ThreeDSecure::Required,
        payer_present: attempt.return_url.is_some(),
        next_provider: first_untried(route, std::slice::from_ref(&attempt.provider))
            .map(|p| p.name.as_str()),
    };
    let verdict = match retry::decide(&facts, CardDeclines::default()) {
        Ok(_) => {
            let so_far = chain::so_far(conn, attempt).await?;
            facts.attempts = so_far.attempts;
            facts.three_d_secure_tried = so_far.three_d_secure_tried;
            facts.next_provider = first_untried(route, &so_far.providers).map(|p| p.name.as_str());
            let counts = decline.code != DeclineCode::ProviderRejected;
            retry::decide(&facts, chain::card_declines(conn, attempt, counts).await?)
        }
        refused => refused,
    };
    let retry = match verdict {
        Ok(retry) => retry,
        Err(why) => return Ok(refused(payments, attempt, &facts, why, key)),
    };
    let (code, from) = (decline.code.as_str(), &attempt.provider);
    let (provider, three_d_secure, told) = match retry {
        Retry::Elsewhere { provider } => (
            provider,
            attempt.three_d_secure,
            format!("retried at {provider} after a soft decline ({code}) at {from}"),
        ),
        Retry::StepUp => (
            from.as_str(),
            ThreeDSecure::Required,
            format!("retried at {from} with 3-D Secure after a decline asking for it ({code})"),
        ),
    };
    let next = NewAttempt::new(&attempt.payment_method, provider, lease_end)
        .taken(attempt.capture_method, attempt.return_url.as_deref())
        .retrying(attempt.id, (retry.reason(), told), three_d_secure);
    let ended = Ended::Declined(&call.outcome);
    let metrics = &payments.metrics;
    match fail_over(conn, metrics, attempt, call, ended, &next, key, lease_end).await? {
        FailedOver::To(made, key) => {
            tracing::info!(from = %attempt.provider, to = %provider,
                reason = retry.reason().as_str(), code = decline.code.as_str(),
                retry_of = %attempt.id, "declined: trying again");
            metrics.retried(&attempt.provider, provider, retry.reason().as_str());
            metrics.created();
            Ok(Next::Made(made, key))
        }
        FailedOver::NotAsRead(key) => Ok(Next::Stay(key)),
    }
}

/// No retry, for `why`: logged and counted, the key handed back.
fn refused(
    payments: &Payments,
    attempt: &PaymentAttempt,
    facts: &Facts<'_>,
    why: NoRetry,
    key: InFlightKey,
) -> Next {
    tracing::info!(provider = %attempt.provider, code = facts.decline.code.as_str(),
        class = facts.decline.class.as_str(), attempts = facts.attempts,
        reason = why.as_str(), "declined: no retry");
    payments
        .metrics
        .retry_refused(&attempt.provider, why.as_str());
    Next::Stay(key)
}

/// The first provider of `route` that no attempt of the request's chain used (`tried`, the
/// current attempt's among them), if any: a chain never goes back to a provider it tried,
/// whatever order the route has now. A step-up stays at its provider by its own rule
/// ([`Retry::StepUp`]), not through this.
fn first_untried<'p>(route: &[&'p NamedProvider], tried: &[String]) -> Option<&'p NamedProvider> {
    route.iter().copied().find(|p| !tried.contains(&p.name))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::providers::circuit::CircuitSettings;
    use crate::providers::registry::Providers;
    use crate::providers::stripe::{StripeConfig, StripeProvider};
    use crate::providers::PaymentProvider;

    /// Providers `a`, `b` and `c`; nothing is sent to them.
    fn three() -> Providers {
        let config = StripeConfig::new(
            "http://127.0.0.1:9",
            "sk_test_cascade",
            vec!["whsec_cascade".into()],
        );
        let adapter: Arc<dyn PaymentProvider> =
            Arc::new(StripeProvider::new(config).expect("a valid config"));
        let list = ["a", "b", "c"].map(|name| (name.to_owned(), adapter.clone()));
        Providers::new(list.into(), &CircuitSettings::default()).expect("valid names")
    }

    fn route<'p>(providers: &'p Providers, order: &[&str]) -> Vec<&'p NamedProvider> {
        let named = |name: &&str| providers.get(name).expect("configured");
        order.iter().map(named).collect()
    }

    fn next(route: &[&NamedProvider], tried: &[&str]) -> Option<String> {
        let tried: Vec<String> = tried.iter().map(|t| t.to_string()).collect();
        first_untried(route, &tried).map(|p| p.name.clone())
    }

    #[test]
    fn a_chain_follows_its_route_while_the_order_stands() {
        let providers = three();
        let route = route(&providers, &["a", "b", "c"]);
        assert_eq!(next(&route, &["a"]).as_deref(), Some("b"));
        assert_eq!(next(&route, &["a", "b"]).as_deref(), Some("c"));
        assert_eq!(next(&route, &["a", "b", "c"]), None);
    }

    /// A resumed request's route re-ordered by success: `a` declined, `b` is declining now,
    /// and the route reads `b, a, c`. The provider after `b` would be `a` again, the issuer
    /// that just declined this card; the chain goes to `c`.
    #[test]
    fn a_chain_never_returns_to_a_provider_it_tried_when_the_route_is_re_ordered() {
        let providers = three();
        let route = route(&providers, &["b", "a", "c"]);
        assert_eq!(next(&route, &["a", "b"]).as_deref(), Some("c"));
        // The current provider last in the new order: the one not tried is still found.
        let route_c_last = self::route(&providers, &["a", "c", "b"]);
        assert_eq!(next(&route_c_last, &["b"]).as_deref(), Some("a"));
        // Every provider tried: none, whichever is last.
        for order in [["b", "a", "c"], ["c", "b", "a"]] {
            let route = self::route(&providers, &order);
            assert_eq!(next(&route, &["a", "b", "c"]), None, "{order:?}");
        }
    }

    /// Two providers, `b, a` now, after `a` then `b` declined: the card goes to neither again.
    #[test]
    fn with_every_provider_of_the_route_tried_there_is_none() {
        let providers = three();
        let route = route(&providers, &["b", "a"]);
        assert_eq!(next(&route, &["a", "b"]), None);
        assert_eq!(next(&route, &["a"]).as_deref(), Some("b"));
    }
}
