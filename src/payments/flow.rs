//! The payment flow (docs/DESIGN.md, "A payment: two transactions and one provider call"),
//! behind `POST /v1/orders/{id}/payments` and `POST /v1/checkout`:
//!
//! 1. Transaction 1, one statement (the claim of [`crate::idempotency::claim`] with the work
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
use diesel_async::AsyncPgConnection;

use super::attempts::{find_attempt, why_refused, CallKind, PaymentAttempt, Refusal};
use super::keyed::{Checkout, CreateOrder, NewAttempt, PayOrder, Resources, ATTEMPT_CREATED};
use super::orders::{order_with_reference, NewOrder, Order, OrderError};
use super::payment_method::PaymentMethodToken;
use super::service::{charge_request, settle_key, Payments};
use super::transition::{apply, record_answer};
use super::Source;
use crate::db::pool::PoolError;
use crate::db::transaction::in_transaction;
use crate::db::DbPool;
use crate::idempotency::{claim, Claimed, IdempotencyError, KeyedRequest, Keys};
use crate::ids::OrderId;

/// Everything one payment request needs.
pub struct PayContext<'a> {
    pub pool: &'a DbPool,
    pub keys: &'a Keys,
    pub payments: &'a Payments,
}

/// What to pay for.
pub enum Target {
    /// An existing order (`POST /v1/orders/{id}/payments`).
    Order(OrderId),
    /// A new order, made in the same statement as its attempt (`POST /v1/checkout`).
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

impl From<serde_json::Error> for PayError {
    fn from(err: serde_json::Error) -> Self {
        PayError::Inconsistent(format!("a row read back as JSON does not fit: {err}"))
    }
}

/// Pays `target` with `payment_method`, once per key.
pub async fn pay(
    ctx: &PayContext<'_>,
    keyed: &KeyedRequest,
    target: &Target,
    payment_method: &PaymentMethodToken,
) -> Result<Paid, PayError> {
    // A second round only when the attempt in the way failed between our insert and our
    // look at why: the order can take an attempt again.
    for _ in 0..3 {
        // The request holds its key for the lease; only past it is the attempt orphaned.
        let lease = chrono::Duration::from_std(ctx.keys.settings.lease)
            .unwrap_or(chrono::Duration::seconds(30));
        let attempt = NewAttempt::new(
            payment_method.as_str(),
            ctx.payments.provider.name(),
            Utc::now() + lease,
        );
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
            Claimed::Done { fresh } => {
                ctx.payments.metrics.created();
                let (attempt, order) = Resources::read(fresh)?.attempt_and_order();
                let attempt = attempt.ok_or_else(|| missing("made no attempt"))?;
                return finish(ctx, keyed, attempt, order).await;
            }
            Claimed::Replay { status, current } => {
                let (attempt, order) = Resources::read(current)?.attempt_and_order();
                return Ok(Paid {
                    attempt: attempt.ok_or_else(|| missing("names no attempt"))?,
                    order,
                    status,
                    replayed: true,
                });
            }
            Claimed::TakenOver { stored, current } if stored.recovery_point == ATTEMPT_CREATED => {
                // An earlier request made the attempt and died: resume it, never make another.
                tracing::info!("resuming a payment whose request did not finish");
                let (attempt, order) = Resources::read(current)?.attempt_and_order();
                let attempt = attempt.ok_or_else(|| missing("names no attempt"))?;
                return finish(ctx, keyed, attempt, order).await;
            }
            Claimed::TakenOver { stored, .. } => {
                return Err(PayError::Inconsistent(format!(
                    "a payment key in flight at recovery point {}",
                    stored.recovery_point
                )))
            }
            Claimed::Declined { refusal: None } => {
                return Err(missing("was declined without a refusal"));
            }
            // Refusals are not recorded: nothing happened, and a retry with this key is
            // judged afresh.
            Claimed::Declined { refusal: Some(_) } => {
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

fn missing(what: &str) -> PayError {
    PayError::Inconsistent(format!("a payment key {what}"))
}

/// A new order refused for its `merchant_reference`: name the order that has it.
async fn reference_taken(
    conn: &mut AsyncPgConnection,
    keyed: &KeyedRequest,
    new: &NewOrder,
) -> PayError {
    let Some(reference) = new.merchant_reference.as_deref() else {
        return PayError::Inconsistent("a checkout without a reference was refused".into());
    };
    match order_with_reference(conn, keyed.merchant_id, reference).await {
        Ok(Some(id)) => OrderError::MerchantReferenceExists(id).into(),
        Ok(None) => PayError::Inconsistent("a refused reference has no order".into()),
        Err(err) => err.into(),
    }
}

/// The provider call and transaction 2, one statement in the common case.
async fn finish(
    ctx: &PayContext<'_>,
    keyed: &KeyedRequest,
    attempt: PaymentAttempt,
    order: Option<Order>,
) -> Result<Paid, PayError> {
    let payments = ctx.payments;
    let attempt = if attempt.status.is_final() {
        // Finished while its request was away (a webhook); its key may not know yet.
        let mut conn = ctx.pool.get().await?;
        settle_key(&mut conn, &attempt).await?;
        attempt
    } else {
        let call = payments
            .provider
            .create_charge(&charge_request(&attempt))
            .await;
        payments.metrics.provider_call(CallKind::Create, &call);
        let next_check = Utc::now() + payments.reconciler.first_check();
        let mut conn = ctx.pool.get().await?;
        let recorded = record_answer(
            &mut conn,
            &payments.metrics,
            &attempt,
            &call,
            next_check,
            keyed.key.as_str(),
        )
        .await?;
        match recorded {
            Some(attempt) => attempt,
            // Someone moved the attempt first (a webhook): judge the answer against what it
            // is now. The call is logged already. A final attempt was settled, key and all,
            // by whoever finished it, so there is nothing left to write.
            None => {
                let current = find_attempt(&mut conn, Some(attempt.merchant_id), attempt.id)
                    .await?
                    .ok_or_else(|| missing("lost its attempt"))?;
                if current.status.is_final() {
                    current
                } else {
                    in_transaction(&mut conn, async |conn| {
                        let applied = apply(
                            conn,
                            &payments.metrics,
                            current,
                            &call.outcome,
                            Source::ProviderResponse,
                            next_check,
                        )
                        .await?;
                        settle_key(conn, &applied.attempt).await?;
                        Ok::<_, PayError>(applied.attempt)
                    })
                    .await?
                }
            }
        }
    };
    payments.finals.remember(&attempt);
    Ok(Paid {
        order: order.map(|order| order.following(&attempt)),
        attempt,
        status: 201,
        replayed: false,
    })
}
