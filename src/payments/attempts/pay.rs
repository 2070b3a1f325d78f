//! The payment flow (docs/DESIGN.md, "A payment: two transactions and one provider call"),
//! behind `POST /v1/orders/{id}/payments` and `POST /v1/checkout`, entered by [`pay`] with one
//! [`PayContext`] (as an order's commands and a refund enter): the fields are validated, then
//!
//! 1. Transaction 1, one statement (the claim of [`crate::idempotency::claim()`] with the work
//!    of [`super::keyed`]): the key, the attempt `created`, its timeline row (and the order
//!    made or moved to `processing` by the database), committed before the provider hears
//!    of it.
//! 2. The provider call, carrying the attempt's own provider idempotency key.
//! 3. Transaction 2, one statement ([`record_answer`]): the outcome, the timeline, the
//!    provider call log and the completed key.
//!
//! No database connection is held during the provider call. If the process dies between 1
//! and 3, the key stays in flight for its lease; a retry after that resumes the same attempt
//! (a resend with the same provider key), and the reconciler finishes it if nobody retries.

use chrono::Utc;

use super::cascade::{after_decline, after_unreached, Next};
use super::chain;
use super::failover::fail_unreached;
use super::keyed::record_answer::{record_answer, Answered};
use super::keyed::{Checkout, NewAttempt, PayOrder};
use super::retry::RetrySettings;
use super::transition::apply;
use super::{before_resend, find_attempt, why_refused, CallKind, PaymentAttempt, Refusal, Source};
use crate::db::pool::PoolError;
use crate::db::transaction::in_transaction;
use crate::db::PgConn;
use crate::idempotency::{
    claim, IdempotencyError, InFlightKey, Keyed, KeyedRequest, RecoveryPoint,
};
use crate::ids::OrderId;
use crate::payments::orders::keyed::CreateOrder;
use crate::payments::orders::{find_order, order_with_reference, FieldProblems};
use crate::payments::orders::{NewOrder, Order, OrderError, OrderFields};
use crate::payments::payment_method::PaymentMethodToken;
use crate::payments::payment_options::PaymentOptions;
use crate::payments::routing::{route, RoutingError};
use crate::payments::service::{recorded, Context, Payments};
use crate::payments::success_routing::Strategy;
use crate::payments::success_scores::Ordered;
use crate::providers::registry::NamedProvider;
use crate::providers::{ProviderCall, ProviderOutcome};

/// Everything one payment request needs: what to pay, and with what, is its input.
pub type PayContext<'a> = Context<'a, PayInput>;

/// A payment request as the client sent it, read but not yet validated.
#[derive(Debug, Clone)]
pub struct PayInput {
    pub target: PayTarget,
    /// The provider's payment method token; required.
    pub payment_method: Option<String>,
    /// `automatic` (the default) or `manual`: hold the money for a later capture.
    pub capture_method: Option<String>,
    /// Where the payer comes back to after a 3-D Secure challenge.
    pub return_url: Option<String>,
}

/// What to pay for, as the client named it.
#[derive(Debug, Clone)]
pub enum PayTarget {
    /// An existing order (`POST /v1/orders/{id}/payments`).
    Order(OrderId),
    /// A new order of these fields, made in the same statement as its attempt
    /// (`POST /v1/checkout`).
    NewOrder(OrderFields),
}

/// What to pay for, validated.
enum Target {
    Order(OrderId),
    NewOrder(NewOrder),
}

/// The answer to a payment request.
#[derive(Debug)]
pub struct Paid {
    /// The attempt as it is now.
    pub attempt: PaymentAttempt,
    /// For a checkout: its order as it is now.
    pub order: Option<Order>,
    pub status: u16,
    pub replayed: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum PayError {
    #[error("the request's fields do not hold: {0:?}")]
    Invalid(FieldProblems),
    #[error(transparent)]
    Idempotency(#[from] IdempotencyError),
    #[error("the order cannot take a new attempt: {0:?}")]
    Refused(Refusal),
    #[error(transparent)]
    Order(#[from] OrderError),
    #[error(transparent)]
    Unavailable(#[from] PoolError),
    #[error(transparent)]
    Database(#[from] diesel::result::Error),
    #[error("{0}")]
    Inconsistent(String),
}

impl From<RoutingError> for PayError {
    fn from(err: RoutingError) -> Self {
        match err {
            RoutingError::Unavailable(err) => PayError::Unavailable(err),
            RoutingError::Database(err) => PayError::Database(err),
        }
    }
}

/// The target, the payment method and the options, or every field problem at once: a new
/// order's, then the payment's.
fn validate(input: &PayInput) -> Result<(Target, PaymentMethodToken, PaymentOptions), PayError> {
    let mut problems = FieldProblems::new();
    let target = match &input.target {
        PayTarget::Order(id) => Some(Target::Order(*id)),
        PayTarget::NewOrder(fields) => match fields.validate() {
            Ok(order) => Some(Target::NewOrder(order)),
            Err(order_problems) => {
                problems.extend(order_problems);
                None
            }
        },
    };
    let field = "/payment_method";
    let payment_method = match input.payment_method.as_deref() {
        None => Err((field.to_owned(), "is required".to_owned())),
        Some(raw) => PaymentMethodToken::parse(raw).map_err(|message| (field.to_owned(), message)),
    };
    let options =
        PaymentOptions::parse(input.capture_method.as_deref(), input.return_url.as_deref());
    match (target, payment_method, options) {
        (Some(target), Ok(method), Ok(options)) => Ok((target, method, options)),
        (_, method, options) => {
            problems.extend(method.err());
            problems.extend(options.err().into_iter().flatten());
            Err(PayError::Invalid(problems))
        }
    }
}

/// Pays the context's target with its payment method, once per key.
pub async fn pay(ctx: &PayContext<'_>) -> Result<Paid, PayError> {
    let (target, payment_method, options) = validate(&ctx.input)?;
    let (keyed, target, payment_method) = (ctx.keyed, &target, &payment_method);
    let mut ordered = route_for(ctx, keyed, target).await?;
    let retries = retry_settings(ctx, keyed).await?;
    let route = ordered.route.clone();
    let first = route
        .first()
        .copied()
        .unwrap_or_else(|| ctx.payments.providers.first());
    // A second round only when the attempt in the way failed between our insert and our
    // look at why: the order can take an attempt again.
    for _ in 0..3 {
        let attempt = NewAttempt::new(
            payment_method.as_str(),
            &first.name,
            Utc::now() + lease(ctx),
        )
        .taken(options.capture_method, options.return_url.as_deref());
        let claimed = match target {
            Target::Order(order_id) => {
                let work = PayOrder {
                    order_id: *order_id,
                    attempt,
                };
                claim(ctx.pool, ctx.keys, keyed, &work).await?
            }
            Target::NewOrder(new) => {
                let work = Checkout {
                    order: CreateOrder::new(new),
                    attempt,
                };
                claim(ctx.pool, ctx.keys, keyed, &work).await?
            }
        };
        match claimed {
            Keyed::Made { made, key } => {
                ctx.payments.metrics.created();
                // Only a payment that made its attempt keeps a probe's slot: on any other
                // outcome `ordered` gives it back when dropped.
                ordered.sent();
                let key = key.ok_or_else(|| missing("was not left in flight"))?;
                let (attempt, order) = made.attempt_and_order();
                let attempt = attempt.ok_or_else(|| missing("made no attempt"))?;
                return finish(ctx, key, attempt, order, (&route, retries), true).await;
            }
            Keyed::Replayed { status, current } => {
                let (attempt, order) = current.attempt_and_order();
                return Ok(Paid {
                    attempt: attempt.ok_or_else(|| missing("names no attempt"))?,
                    order,
                    status,
                    replayed: true,
                });
            }
            Keyed::Resumed { current, key } => {
                if key.recovery_point() != RecoveryPoint::AttemptCreated {
                    return Err(PayError::Inconsistent(format!(
                        "a payment key in flight at recovery point {}",
                        key.recovery_point().as_str()
                    )));
                }
                // An earlier request made the attempt and died: resume it, never make another.
                tracing::info!("resuming a payment whose request did not finish");
                let (attempt, order) = current.attempt_and_order();
                let attempt = attempt.ok_or_else(|| missing("names no attempt"))?;
                let attempt = before_resuming(ctx, attempt).await?;
                return finish(ctx, key, attempt, order, (&route, retries), false).await;
            }
            Keyed::Declined { refusal: None } => {
                return Err(missing("was declined without a refusal"));
            }
            // Refusals are not recorded: nothing happened, and a retry with this key is
            // judged afresh.
            Keyed::Declined { refusal: Some(_) } => {
                let mut conn = ctx.pool.get().await?;
                match target {
                    Target::Order(order_id) => {
                        match why_refused(&mut conn, keyed.merchant_id, *order_id).await? {
                            Some(refusal) => return Err(PayError::Refused(refusal)),
                            None => continue,
                        }
                    }
                    Target::NewOrder(new) => {
                        return Err(reference_taken(&mut conn, keyed, new).await);
                    }
                }
            }
        }
    }
    Err(PayError::Inconsistent(
        "the order kept changing while a payment was being made".into(),
    ))
}

/// The providers this payment may try, in order: the merchant's routing for the payment's
/// currency, ordered by the providers' recent success when the routing says so. The currency
/// of an existing order is read only when the merchant routes by currency or by success.
async fn route_for<'p>(
    ctx: &PayContext<'p>,
    keyed: &KeyedRequest,
    target: &Target,
) -> Result<Ordered<'p, 'p>, PayError> {
    let routing = ctx
        .payments
        .routing
        .get(ctx.pool, keyed.merchant_id)
        .await?;
    let currency = match (target, &routing) {
        (Target::NewOrder(new), _) => Some(new.currency.as_str().to_owned()),
        (Target::Order(id), Some(r))
            if !r.currencies.is_empty() || r.strategy == Strategy::SuccessRate =>
        {
            find_order(&mut *ctx.pool.get().await?, Some(keyed.merchant_id), *id)
                .await?
                .map(|order| order.currency.as_str().to_owned())
        }
        _ => None,
    };
    let currency = currency.as_deref().unwrap_or_default();
    let route = route(&ctx.payments.providers, routing.as_deref(), currency);
    Ok(match routing.as_deref().map(|r| r.strategy) {
        Some(Strategy::SuccessRate) => ctx.payments.success.order(route, currency),
        _ => Ordered::as_written(route),
    })
}

/// The merchant's retry settings, part of its routing (from the same cache as the route), or
/// the defaults (docs/guides/declines.md, "Retries").
async fn retry_settings(
    ctx: &PayContext<'_>,
    keyed: &KeyedRequest,
) -> Result<RetrySettings, PayError> {
    let routing = ctx.payments.routing.get(ctx.pool, keyed.merchant_id);
    Ok(routing.await?.map(|r| r.retries).unwrap_or_default())
}

/// Before a resumed request sends the create again: its send is announced on the attempt
/// (`sending_until`, to the end of the new lease), or, if the attempt is final by now (the
/// reconciler or a webhook finished it), that attempt is what the request answers.
async fn before_resuming(
    ctx: &PayContext<'_>,
    attempt: PaymentAttempt,
) -> Result<PaymentAttempt, PayError> {
    if attempt.status.is_answered() {
        return Ok(attempt);
    }
    let mut conn = ctx.pool.get().await?;
    match before_resend(&mut conn, &attempt, Utc::now() + lease(ctx)).await? {
        Some(attempt) => Ok(attempt),
        None => find_attempt(&mut conn, Some(attempt.merchant_id), attempt.id)
            .await?
            .ok_or_else(|| missing("lost its attempt")),
    }
}

/// How long a request holds its key: only past it is its attempt orphaned, and its send over.
fn lease(ctx: &PayContext<'_>) -> chrono::Duration {
    chrono::Duration::from_std(ctx.keys.settings.lease).unwrap_or(chrono::Duration::seconds(30))
}

fn missing(what: &str) -> PayError {
    PayError::Inconsistent(format!("a payment key {what}"))
}

/// A new order refused for its `merchant_reference`: name the order that has it.
async fn reference_taken(conn: &mut PgConn, keyed: &KeyedRequest, new: &NewOrder) -> PayError {
    let Some(reference) = new.merchant_reference.as_deref() else {
        return PayError::Inconsistent("a checkout without a reference was refused".into());
    };
    match order_with_reference(conn, keyed.merchant_id, reference).await {
        Ok(Some(id)) => OrderError::MerchantReferenceExists(id).into(),
        Ok(None) => PayError::Inconsistent("a refused reference has no order".into()),
        Err(err) => err.into(),
    }
}

/// The provider call and transaction 2, one statement in the common case. `fresh`: this
/// request made the attempt, so its send is the first; only then does a provider that was
/// not reached prove nothing was charged, and the payment fails over to the next provider of
/// `route` (docs/DESIGN.md, "Failover"). A definite decline, on any send, is tried again as
/// the merchant's `retries` allow (docs/guides/declines.md, "Retries").
async fn finish(
    ctx: &PayContext<'_>,
    mut key: InFlightKey,
    mut attempt: PaymentAttempt,
    order: Option<Order>,
    (route, retries): (&[&NamedProvider], RetrySettings),
    mut fresh: bool,
) -> Result<Paid, PayError> {
    let payments = ctx.payments;
    let attempt = loop {
        if attempt.status.is_answered() {
            // Finished (or held) while its request was away (a webhook); its key may not
            // know yet.
            let mut conn = ctx.pool.get().await?;
            key.complete(&mut conn, &recorded(&attempt)).await?;
            break attempt;
        }
        let call = send(payments, &attempt).await;
        payments
            .metrics
            .provider_call(&attempt.provider, CallKind::Create, &call);
        let unreached = fresh && matches!(call.outcome, ProviderOutcome::Unavailable { .. });
        let declined = matches!(call.outcome, ProviderOutcome::Failed { .. });
        if unreached || declined {
            let lease_end = Utc::now() + lease(ctx);
            let mut conn = ctx.pool.get().await?;
            let (conn, at) = (&mut conn, &attempt);
            let next = if unreached {
                after_unreached(conn, payments, at, &call, route, key, lease_end).await?
            } else {
                let retries = (route, retries);
                after_decline(conn, payments, at, &call, retries, key, lease_end).await?
            };
            match next {
                // The new attempt's send is its first: a provider not reached fails over.
                Next::Made(next_attempt, moved_key) => {
                    (attempt, key, fresh) = (*next_attempt, moved_key, true);
                    continue;
                }
                Next::Stay(handed_back) => key = handed_back,
            }
        }
        let outcome = if unreached {
            let mut conn = ctx.pool.get().await?;
            match fail_unreached(&mut conn, &payments.metrics, &attempt, &call, key).await? {
                Ok(failed) => break failed,
                // Another sender announced a send of this attempt while ours was refused:
                // that one may have charged, so ours proves nothing.
                Err(handed_back) => {
                    key = handed_back;
                    ProviderOutcome::Unknown {
                        reason: "not reached, but another send of this attempt was under way"
                            .into(),
                    }
                }
            }
        } else {
            call.outcome.clone()
        };
        break record(ctx, key, attempt, &call, &outcome).await?;
    };
    payments.finals.remember(&attempt);
    Ok(Paid {
        order: order.map(|order| order.following(attempt.status, attempt.updated_at)),
        attempt,
        status: 201,
        replayed: false,
    })
}

/// The create of `attempt`, through its provider's circuit: an open circuit sends nothing
/// and answers `unavailable`.
async fn send(payments: &Payments, attempt: &PaymentAttempt) -> ProviderCall {
    let Some(provider) = payments.providers.get(&attempt.provider) else {
        return payments
            .adapter(&attempt.provider)
            .create_charge(&payments.charge_request(attempt))
            .await;
    };
    let Some(permit) = provider.circuit.allow() else {
        return ProviderCall::unsent(ProviderOutcome::Unavailable {
            reason: "circuit open: not sent".into(),
        });
    };
    let call = provider
        .adapter
        .create_charge(&payments.charge_request(attempt))
        .await;
    permit.record(&call.outcome);
    call
}

/// Transaction 2: `outcome` recorded on the attempt with the call and the key, in one
/// statement; or, if a webhook moved the attempt first, judged against what it is now.
async fn record(
    ctx: &PayContext<'_>,
    key: InFlightKey,
    attempt: PaymentAttempt,
    call: &ProviderCall,
    outcome: &ProviderOutcome,
) -> Result<PaymentAttempt, PayError> {
    let payments = ctx.payments;
    let next_check = Utc::now() + payments.reconciler.first_check();
    let mut conn = ctx.pool.get().await?;
    let answered = record_answer(
        &mut conn,
        &payments.metrics,
        &attempt,
        call,
        outcome,
        next_check,
        key,
    )
    .await?;
    let key = match answered {
        Answered::Moved(attempt) => return Ok(*attempt),
        Answered::NotAsRead(key) => key,
    };
    // Someone moved the attempt first (a webhook): judge the answer against what it is now.
    // The call is logged already. A final attempt was settled, key and all, by whoever
    // finished it, so there is nothing left to write; unless a request that took the key
    // over (this one's lease had passed) retried it: then the key is in flight on the retry,
    // and this request's answer would contradict the payment's.
    let current = find_attempt(&mut conn, Some(attempt.merchant_id), attempt.id)
        .await?
        .ok_or_else(|| missing("lost its attempt"))?;
    if current.status.is_answered() {
        if chain::retried(&mut conn, &current).await? {
            let retry_after = std::time::Duration::from_secs(1);
            return Err(IdempotencyError::InUse { retry_after }.into());
        }
        return Ok(current);
    }
    in_transaction(&mut conn, async |conn| {
        key.name_request(conn).await?;
        let applied = apply(
            conn,
            &payments.metrics,
            current,
            outcome,
            Source::ProviderResponse,
            next_check,
        )
        .await?;
        key.complete(conn, &recorded(&applied.attempt)).await?;
        Ok::<_, PayError>(applied.attempt)
    })
    .await
}
