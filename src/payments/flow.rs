//! The payment flow of SPEC §5, behind `POST /v1/orders/{id}/payments` and `POST /v1/checkout`:
//!
//! 1. Transaction 1: the key, the attempt `created` (and the order `processing`, by the
//!    database), committed before the provider hears of it.
//! 2. The provider call, carrying the attempt's own provider idempotency key.
//! 3. Transaction 2: the outcome, the timeline, the provider call log and the recorded
//!    response.
//!
//! No database connection is held during the provider call. If the process dies between 1
//! and 3, the key stays in flight for its lease; a retry after that resumes the same attempt
//! (a resend with the same provider key), and the reconciler finishes it if nobody retries.

use std::sync::Arc;

use chrono::Utc;
use diesel_async::AsyncPgConnection;
use serde_json::json;

use super::attempts::{
    find_attempt, insert_attempt, why_refused, InsertError, NewAttempt, PaymentAttempt, Refusal,
};
use super::metrics::PaymentMetrics;
use super::orders::{insert_order, NewOrder, OrderError};
use super::payment_method::PaymentMethodToken;
use super::reconciler::ReconcilerSettings;
use super::transition::{apply, log_call, CallKind};
use super::Source;
use crate::db::pool::PoolError;
use crate::db::transaction::{finish_transaction, in_transaction};
use crate::db::DbPool;
use crate::idempotency::store::{self, Begun};
use crate::idempotency::{
    IdempotencyError, IdempotencyMetrics, IdempotencySettings, KeyedRequest, Recorded,
};
use crate::ids::{OrderId, PaymentId};
use crate::providers::{ChargeRequest, PaymentProvider};

/// The key's recovery point once transaction 1 has committed: the attempt exists.
const ATTEMPT_CREATED: &str = "attempt_created";
const RESOURCE_TYPE: &str = "payment_attempt";

/// What the payment flow and the reconciler share.
pub struct Payments {
    pub provider: Arc<dyn PaymentProvider>,
    pub metrics: Arc<PaymentMetrics>,
    pub reconciler: ReconcilerSettings,
}

/// Everything one payment request needs.
pub struct PayContext<'a> {
    pub pool: &'a DbPool,
    pub idempotency: &'a IdempotencySettings,
    pub idempotency_metrics: &'a IdempotencyMetrics,
    pub payments: &'a Payments,
}

/// What to pay for.
pub enum Target {
    /// An existing order (`POST /v1/orders/{id}/payments`).
    Order(OrderId),
    /// A new order, made in the same transaction as its attempt (`POST /v1/checkout`).
    NewOrder(NewOrder),
}

/// The answer to a payment request.
#[derive(Debug)]
pub struct Paid {
    /// The attempt as it is now.
    pub attempt: PaymentAttempt,
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

/// Pays `target` with `payment_method`, once per key.
pub async fn pay(
    ctx: &PayContext<'_>,
    keyed: &KeyedRequest,
    target: &Target,
    payment_method: &PaymentMethodToken,
) -> Result<Paid, PayError> {
    // A second round only when the attempt in the way failed between our insert and our
    // look at why: the order can take an attempt again.
    let mut rounds = 0;
    loop {
        rounds += 1;
        match start(ctx, keyed, target, payment_method).await? {
            Started::Replayed(paid) => return Ok(paid),
            Started::Attempt(attempt) => return finish(ctx, keyed, attempt).await,
            Started::Refused(Some(refusal)) => return Err(PayError::Refused(refusal)),
            Started::Refused(None) if rounds < 3 => continue,
            Started::Refused(None) => {
                return Err(PayError::Inconsistent(
                    "the order kept changing while a payment was being made".into(),
                ))
            }
        }
    }
}

enum Started {
    Replayed(Paid),
    Attempt(PaymentAttempt),
    Refused(Option<Refusal>),
}

/// Claims the key and runs transaction 1, or finds what an earlier request with the key did.
async fn start(
    ctx: &PayContext<'_>,
    keyed: &KeyedRequest,
    target: &Target,
    payment_method: &PaymentMethodToken,
) -> Result<Started, PayError> {
    let (begun, mut conn) =
        store::begin(ctx.pool, ctx.idempotency, ctx.idempotency_metrics, keyed).await?;
    match begun {
        Begun::Replay(replay) => {
            let attempt = attempt_of_key(&mut conn, keyed, replay.resource_id).await?;
            Ok(Started::Replayed(Paid {
                attempt,
                status: replay.status,
                replayed: true,
            }))
        }
        Begun::TakenOver(stored) if stored.recovery_point == ATTEMPT_CREATED => {
            // An earlier request made the attempt and died: resume it, never make another.
            let attempt = finish_transaction(&mut conn, async |conn| {
                attempt_of_key(conn, keyed, stored.resource_id).await
            })
            .await?;
            tracing::info!("resuming a payment whose request did not finish");
            Ok(Started::Attempt(attempt))
        }
        Begun::Fresh | Begun::TakenOver(_) => {
            let made = finish_transaction(&mut conn, async |conn| {
                create_attempt(conn, ctx, keyed, target, payment_method).await
            })
            .await;
            // Refusals are rolled back, so not recorded: nothing happened, and a retry with
            // this key is judged afresh.
            match (made, target) {
                (Ok(attempt), _) => {
                    ctx.payments.metrics.created();
                    Ok(Started::Attempt(attempt))
                }
                (Err(Tx1Error::Refused), Target::Order(order_id)) => Ok(Started::Refused(
                    why_refused(&mut conn, keyed.merchant_id, *order_id).await?,
                )),
                (Err(Tx1Error::Refused), Target::NewOrder(_)) => Err(PayError::Inconsistent(
                    "a new order refused its first attempt".into(),
                )),
                (Err(Tx1Error::Failed(err)), _) => Err(err),
            }
        }
    }
}

/// The attempt an earlier request with this key made.
async fn attempt_of_key(
    conn: &mut AsyncPgConnection,
    keyed: &KeyedRequest,
    resource_id: Option<uuid::Uuid>,
) -> Result<PaymentAttempt, PayError> {
    let id = resource_id
        .ok_or_else(|| PayError::Inconsistent("a payment key names no attempt".into()))?;
    find_attempt(conn, Some(keyed.merchant_id), PaymentId(id))
        .await?
        .ok_or_else(|| PayError::Inconsistent("a payment key's attempt is gone".into()))
}

/// Why transaction 1 did not make an attempt.
enum Tx1Error {
    /// The database refused the attempt by an invariant; look at the order to say why.
    Refused,
    Failed(PayError),
}

impl From<OrderError> for Tx1Error {
    fn from(err: OrderError) -> Self {
        Tx1Error::Failed(err.into())
    }
}

impl From<diesel::result::Error> for Tx1Error {
    fn from(err: diesel::result::Error) -> Self {
        Tx1Error::Failed(err.into())
    }
}

/// Transaction 1's work, inside the claim's transaction.
async fn create_attempt(
    conn: &mut AsyncPgConnection,
    ctx: &PayContext<'_>,
    keyed: &KeyedRequest,
    target: &Target,
    payment_method: &PaymentMethodToken,
) -> Result<PaymentAttempt, Tx1Error> {
    let order_id = match target {
        Target::Order(id) => *id,
        Target::NewOrder(new) => insert_order(conn, keyed.merchant_id, new).await?.id,
    };
    let lease =
        chrono::Duration::from_std(ctx.idempotency.lease).unwrap_or(chrono::Duration::seconds(30));
    let attempt = insert_attempt(
        conn,
        &NewAttempt {
            merchant_id: keyed.merchant_id,
            order_id,
            payment_method: payment_method.as_str(),
            provider: ctx.payments.provider.name(),
            idempotency_key: Some(keyed.key.as_str()),
            // The request holds its key for the lease; only past it is the attempt orphaned.
            first_check_at: Utc::now() + lease,
        },
    )
    .await
    .map_err(|err| match err {
        InsertError::Refused => Tx1Error::Refused,
        InsertError::Database(err) => err.into(),
    })?;
    store::set_recovery_point(
        conn,
        keyed,
        ATTEMPT_CREATED,
        Some((RESOURCE_TYPE, attempt.id.0)),
    )
    .await?;
    Ok(attempt)
}

/// The provider call and transaction 2.
async fn finish(
    ctx: &PayContext<'_>,
    keyed: &KeyedRequest,
    attempt: PaymentAttempt,
) -> Result<Paid, PayError> {
    let payments = ctx.payments;
    let call = if attempt.status.is_final() {
        None
    } else {
        let call = payments
            .provider
            .create_charge(&charge_request(&attempt))
            .await;
        payments.metrics.provider_call(CallKind::Create, &call);
        Some(call)
    };
    let mut conn = ctx.pool.get().await?;
    let attempt = in_transaction(&mut conn, async |conn| {
        let attempt = match &call {
            Some(call) => {
                log_call(conn, &attempt, CallKind::Create, Source::Api, call).await?;
                let next_check = Utc::now() + payments.reconciler.first_check();
                apply(
                    conn,
                    &payments.metrics,
                    attempt,
                    &call.outcome,
                    Source::ProviderResponse,
                    next_check,
                )
                .await?
                .attempt
            }
            None => attempt,
        };
        store::complete(conn, keyed, &recorded(&attempt)).await?;
        Ok::<_, PayError>(attempt)
    })
    .await?;
    Ok(Paid {
        attempt,
        status: 201,
        replayed: false,
    })
}

/// The charge as the provider sees it: the same on every resend.
pub fn charge_request(attempt: &PaymentAttempt) -> ChargeRequest {
    ChargeRequest {
        amount: attempt.amount,
        currency: attempt.currency.clone(),
        payment_method: attempt.payment_method.clone(),
        idempotency_key: attempt.provider_idempotency_key.clone(),
        attempt_id: attempt.id.to_string(),
        order_id: attempt.order_id.to_string(),
        merchant_id: attempt.merchant_id.to_string(),
    }
}

/// Completes the Idempotency-Key that made a now-final attempt, for whoever finished it
/// (the reconciler, a webhook), so a late retry replays the final result and the key may
/// expire.
pub async fn settle_key(
    conn: &mut AsyncPgConnection,
    attempt: &PaymentAttempt,
) -> diesel::QueryResult<()> {
    match &attempt.idempotency_key {
        Some(key) => {
            store::complete_for_resource(conn, attempt.merchant_id, key, &recorded(attempt)).await
        }
        None => Ok(()),
    }
}

/// The response a payment key records. A replay shows the attempt as it is then; this body
/// is the attempt as it was answered. An open attempt keeps its key from being reaped.
pub fn recorded(attempt: &PaymentAttempt) -> Recorded {
    Recorded {
        status: 201,
        resource_type: RESOURCE_TYPE,
        resource_id: attempt.id.0,
        body: json!(attempt),
        unresolved: !attempt.status.is_final(),
    }
}
