//! Failover and retries inside one request, under the client's one Idempotency-Key
//! (docs/guides/routing.md, "Routing and failover"; docs/DESIGN.md, "Failover";
//! docs/guides/declines.md, "Retries"). An attempt is followed by another only when nothing
//! can be charged under it, ever: its first send provably never reached its provider, or its
//! provider answered with a definite decline (and [`super::retry::decide`] said retry). An
//! unknown outcome never is.

use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use super::call_log::log_create;
use super::keyed::fail_over::next_attempt;
use super::keyed::NewAttempt;
use super::transition::{apply, Decision};
use super::{PaymentAttempt, Source};
use crate::db::schema::payment_attempts::dsl as a;
use crate::db::transaction::in_transaction;
use crate::db::PgConn;
use crate::idempotency::in_flight::Unfinished;
use crate::idempotency::InFlightKey;
use crate::payments::metrics::PaymentMetrics;
use crate::payments::service::recorded;
use crate::payments::status::AttemptStatus;
use crate::providers::{ProviderCall, ProviderOutcome};

/// The failure code of an attempt whose provider could not be reached: nothing was sent.
pub const PROVIDER_UNAVAILABLE: &str = "provider_unavailable";

/// What an attempt whose first send never reached its provider fails with.
pub fn unavailable_outcome(call: &ProviderCall) -> ProviderOutcome {
    let reason = match &call.outcome {
        ProviderOutcome::Unavailable { reason } => reason.as_str(),
        _ => "not reached",
    };
    ProviderOutcome::Failed {
        code: PROVIDER_UNAVAILABLE.into(),
        message: format!("the provider was not reached ({reason}): nothing was sent or charged"),
        provider_id: None,
        decline: None,
    }
}

/// How the attempt before the next one ended.
#[derive(Debug, Clone, Copy)]
pub enum Ended<'o> {
    /// Its first send provably never reached its provider: it fails `provider_unavailable`,
    /// if it is still unsent under its row lock ([`still_unsent`]).
    Unreached,
    /// Its provider declined it with this outcome (a `Failed` with a decline), on any send: a
    /// decline under the attempt's provider key proves no charge exists under that key.
    Declined(&'o ProviderOutcome),
}

/// What a failover or a retry came to.
#[derive(Debug)]
pub enum FailedOver {
    /// `attempt` failed and the order's next attempt was made; the client's key is in flight
    /// on it now.
    To(Box<PaymentAttempt>, InFlightKey),
    /// The attempt or the key were no longer as read: nothing was written, and the key is
    /// handed back.
    NotAsRead(InFlightKey),
}

/// In one transaction: `attempt`, which `call` answered, fails as `ended` says with its
/// timeline row and its call logged; the order's next attempt, `next` (naming `attempt` as the
/// one it retries), is made with its own timeline row; and the Idempotency-Key `key` that made
/// the first now names the second, with a fresh lease ending at `lease_end`. If the process
/// dies after it, the key is in flight on the new attempt, and a retry of the request resumes
/// that one.
#[allow(clippy::too_many_arguments)]
pub async fn fail_over(
    conn: &mut PgConn,
    metrics: &PaymentMetrics,
    attempt: &PaymentAttempt,
    call: &ProviderCall,
    ended: Ended<'_>,
    next: &NewAttempt<'_>,
    key: InFlightKey,
    lease_end: DateTime<Utc>,
) -> diesel::QueryResult<FailedOver> {
    let done = in_transaction(conn, async |conn| {
        key.name_request(conn).await?;
        if fail_ended(conn, metrics, attempt, call, ended)
            .await?
            .is_none()
        {
            return Err(Unfinished::Back(key));
        }
        next_attempt(conn, attempt, next, key, lease_end)
            .await?
            .map_err(Unfinished::Back)
    })
    .await;
    match done {
        Ok((made, moved)) => Ok(FailedOver::To(Box::new(made), moved)),
        Err(Unfinished::Back(key)) => Ok(FailedOver::NotAsRead(key)),
        Err(Unfinished::Failed(err)) => Err(err),
    }
}

/// Inside the caller's transaction: `attempt` fails as `ended` says (an unreached one only
/// while still unsent, see [`still_unsent`]) with its call logged. `None` if it was no longer
/// unsent, or did not fail here (a webhook moved it first): then the caller rolls back.
async fn fail_ended(
    conn: &mut PgConn,
    metrics: &PaymentMetrics,
    attempt: &PaymentAttempt,
    call: &ProviderCall,
    ended: Ended<'_>,
) -> diesel::QueryResult<Option<PaymentAttempt>> {
    let outcome = match ended {
        Ended::Unreached if !still_unsent(conn, attempt).await? => return Ok(None),
        Ended::Unreached => unavailable_outcome(call),
        Ended::Declined(outcome) => outcome.clone(),
    };
    let applied = apply(
        conn,
        metrics,
        attempt.clone(),
        &outcome,
        Source::ProviderResponse,
        Utc::now(),
    )
    .await?;
    let failed = matches!(applied.decision, Decision::Move { .. })
        && applied.attempt.status == AttemptStatus::Failed;
    if !failed {
        return Ok(None);
    }
    log_create(conn, attempt, call).await?;
    Ok(Some(applied.attempt))
}

/// In one transaction: `attempt` (still `created`, its first send refused by `call`) fails
/// `provider_unavailable` with its call logged and its key completed, when no provider is
/// left to fail over to. `Err(key)`, handed back, if another sender may have sent it
/// meanwhile (see [`still_unsent`]): then nothing was written, and the caller must treat its
/// answer as unknown.
pub async fn fail_unreached(
    conn: &mut PgConn,
    metrics: &PaymentMetrics,
    attempt: &PaymentAttempt,
    call: &ProviderCall,
    key: InFlightKey,
) -> diesel::QueryResult<Result<PaymentAttempt, InFlightKey>> {
    let done = in_transaction(conn, async |conn| {
        key.name_request(conn).await?;
        let Some(failed) = fail_ended(conn, metrics, attempt, call, Ended::Unreached).await? else {
            return Err(Unfinished::Back(key));
        };
        key.complete(conn, &recorded(&failed)).await?;
        Ok(failed)
    })
    .await;
    match done {
        Ok(failed) => Ok(Ok(failed)),
        Err(Unfinished::Back(key)) => Ok(Err(key)),
        Err(Unfinished::Failed(err)) => Err(err),
    }
}

/// Takes `attempt`'s row lock and tells whether it is still `created` with the
/// `sending_until` its first send was made under. Every other sender of an attempt (a
/// resumed request, the reconciler) moves `sending_until` forward under this same lock
/// *before* it sends (`attempts::before_resend`). So an unchanged `sending_until`, read under
/// the lock, proves that the only send was ours, which never reached the provider; a moved
/// one means another send may have charged, and the attempt must not fail.
async fn still_unsent(conn: &mut PgConn, attempt: &PaymentAttempt) -> diesel::QueryResult<bool> {
    let unsent: Option<bool> = a::payment_attempts
        .find((attempt.merchant_id.0, attempt.id.0))
        .select(
            a::status
                .eq(AttemptStatus::Created.as_str())
                .and(a::sending_until.eq(attempt.sending_until)),
        )
        .for_update()
        .limit(1)
        .load(conn)
        .await
        .and_then(crate::db::one)
        .optional()?;
    Ok(unsent == Some(true))
}
