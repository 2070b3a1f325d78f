//! The payer is back from a 3-D Secure challenge (docs/guides/three-d-secure.md, "3-D Secure"): payorch asks the
//! provider what it decided and records it before the payer's browser goes on to the
//! merchant. What the browser brings (`redirect_status`, `payment_intent`, `redirectResult`)
//! is handed to the provider, never believed: only the provider's answer moves the attempt,
//! and only an answer that is provably about this attempt.

use std::time::Duration;

use chrono::Utc;

use super::call_log::log_call;
use super::transition::apply;
use super::{find_attempt, CallKind, PaymentAttempt, Source};
use crate::db::transaction::in_transaction;
use crate::db::DbPool;
use crate::ids::PaymentId;
use crate::payments::reconciler::settings::to_chrono;
use crate::payments::reconciler::ReconcileError;
use crate::payments::service::{settle_key, Payments};
use crate::payments::status::AttemptStatus;
use crate::providers::{ProviderCall, ProviderOutcome};
use crate::rate_limit::{Quota, RateLimiter};

/// How often a payer's return may make payorch ask the provider about one payment: two
/// checks at once (the payer may come back just after someone else opened the link, or
/// reload), then one each `interval`. The route needs no key, so without this anyone holding
/// a payment's return link could make payorch call its provider as fast as they can ask.
/// A return past it is answered from what payorch knows; the payment is still finished by
/// its webhook, the reconciler, or the payer's next return. Counted per replica.
pub struct ProviderChecks {
    per_payment: RateLimiter<PaymentId>,
}

impl ProviderChecks {
    /// `interval` zero: every return asks.
    pub fn new(interval: Duration) -> Self {
        let quota = if interval.is_zero() {
            Quota {
                limit: 0,
                window: Duration::ZERO,
            }
        } else {
            Quota {
                limit: 2,
                window: interval * 2,
            }
        };
        ProviderChecks {
            per_payment: RateLimiter::new(quota),
        }
    }

    /// Takes a check of payment `id`, if one is due.
    fn may_ask(&self, id: PaymentId) -> bool {
        self.per_payment.take(id).is_allowed()
    }
}

/// Attempt `id`, whichever merchant's, once the provider was asked about the challenge its
/// payer came back from with the query `params`; `None` for no such attempt. Only an attempt
/// waiting for its payer's challenge is asked about; any other is answered as it is, so the
/// route cannot be used to make payorch call the provider about anything else; and only as
/// often as `checks` allows, else it is answered as it is too.
pub async fn payer_returned(
    pool: &DbPool,
    payments: &Payments,
    checks: &ProviderChecks,
    id: PaymentId,
    params: &[(String, String)],
) -> Result<Option<PaymentAttempt>, ReconcileError> {
    let mut conn = pool.get().await?;
    let Some(attempt) = find_attempt(&mut conn, None, id).await? else {
        return Ok(None);
    };
    // No connection is held during the provider's calls.
    drop(conn);
    if !awaits_challenge(&attempt) || !checks.may_ask(attempt.id) {
        return Ok(Some(attempt));
    }
    let provider = payments.adapter(&attempt.provider);
    let known = attempt.provider_payment_id.as_deref().unwrap_or_default();
    let asked = provider
        .complete_action(known, &attempt.id.to_string(), params)
        .await;
    let metrics = &payments.metrics;
    metrics.provider_call(&attempt.provider, CallKind::CompleteAction, &asked);
    let outcome = vouched(&attempt, &asked);
    // Still open, it is checked when it was due to be: the reconciler keeps its pace, and
    // never races a request that is still sending the attempt.
    let next_check = attempt
        .next_check_at
        .unwrap_or_else(|| Utc::now() + to_chrono(payments.reconciler.wait_after(attempt.checks)));
    let mut conn = pool.get().await?;
    let attempt = in_transaction(&mut conn, async |conn| {
        // The move before the log rows, as the reconciler does and for the same reason: a log
        // row's foreign key share-locks the attempt that the move must lock exclusively.
        let (merchant_id, id) = (attempt.merchant_id, attempt.id);
        let source = Source::ProviderResponse;
        let applied = apply(conn, metrics, attempt, &outcome, source, next_check).await?;
        let kind = CallKind::CompleteAction;
        log_call(conn, merchant_id, id, kind, Source::Api, &asked, None).await?;
        if applied.attempt.status.is_answered() {
            settle_key(conn, &applied.attempt).await?;
        }
        Ok::<_, diesel::result::Error>(applied.attempt)
    })
    .await?;
    payments.finals.remember(&attempt);
    Ok(Some(attempt))
}

/// Whether the provider asked for this attempt's payer and has not been heard from since.
fn awaits_challenge(attempt: &PaymentAttempt) -> bool {
    attempt.status == AttemptStatus::Pending && attempt.next_action.is_some()
}

/// What `asked` says of `attempt`, if it is provably about it; else unknown. The browser
/// chose what was asked about (Adyen's `redirectResult` names a payment), so an answer about
/// another payment must not move this one: one passed challenge would pay any number of
/// orders. Stripe is asked about the attempt's own intent; Adyen's adapter answers only when
/// the answer's `merchantReference` is the attempt's, and here its payment must also be the
/// one the attempt already names, if any.
fn vouched(attempt: &PaymentAttempt, asked: &ProviderCall) -> ProviderOutcome {
    let doubt = |why: &str| ProviderOutcome::Unknown {
        reason: format!("{why}: not applied"),
    };
    match (asked.outcome.provider_id(), &asked.outcome) {
        (
            None,
            ProviderOutcome::Failed { .. }
            | ProviderOutcome::Canceled { .. }
            | ProviderOutcome::RequiresAction { .. },
        ) => doubt("the provider's answer names no payment"),
        (Some(named), _)
            if attempt
                .provider_payment_id
                .as_deref()
                .is_some_and(|known| known != named) =>
        {
            doubt("the provider's answer is about another payment")
        }
        _ => asked.outcome.clone(),
    }
}
