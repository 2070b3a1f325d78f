//! Failover inside one request, under the client's one Idempotency-Key (README, "Routing
//! and failover"; docs/DESIGN.md, "Failover"). Only an attempt whose first send provably
//! never reached its provider fails over: nothing was sent, so nothing can be charged under
//! it, ever. An unknown outcome or a decline never does.

use chrono::Utc;
use diesel::sql_types::{BigInt, Bool, Jsonb, Text, Timestamptz, Uuid as SqlUuid};
use diesel::{OptionalExtension, QueryableByName};
use diesel_async::{AsyncPgConnection, RunQueryDsl};

use super::keyed::{NewAttempt, ATTEMPT_TIMELINE_AND_DONE};
use super::transition::{apply, log_call, Decision};
use super::{AttemptRow, CallKind, PaymentAttempt, Source};
use crate::db::sql::Sql;
use crate::db::transaction::in_transaction;
use crate::payments::metrics::PaymentMetrics;
use crate::payments::service::settle_key;
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
    }
}

/// In one transaction: `attempt` (still `created`, its first send refused by `call`)
/// fails `provider_unavailable` with its timeline row and its call logged; the order's next
/// attempt, `next`, is made with its own timeline row; and the Idempotency-Key `key` that
/// made the first now names the second, with a fresh lease. `None` if the attempt or the
/// key were no longer as read: then nothing was written.
pub async fn fail_over(
    conn: &mut AsyncPgConnection,
    metrics: &PaymentMetrics,
    attempt: &PaymentAttempt,
    call: &ProviderCall,
    next: &NewAttempt<'_>,
    key: &str,
) -> diesel::QueryResult<Option<PaymentAttempt>> {
    let done = in_transaction(conn, async |conn| {
        if !still_unsent(conn, attempt).await? {
            return Err(diesel::result::Error::RollbackTransaction);
        }
        let applied = apply(
            conn,
            metrics,
            attempt.clone(),
            &unavailable_outcome(call),
            Source::ProviderResponse,
            Utc::now(),
        )
        .await?;
        let failed_here = matches!(applied.decision, Decision::Move { .. })
            && applied.attempt.status == AttemptStatus::Failed;
        if !failed_here {
            return Err(diesel::result::Error::RollbackTransaction);
        }
        log_call(
            conn,
            attempt.merchant_id,
            attempt.id,
            CallKind::Create,
            Source::Api,
            call,
            None,
        )
        .await?;
        let made = next_attempt(conn, attempt, next, key).await?;
        made.ok_or(diesel::result::Error::RollbackTransaction)
    })
    .await;
    match done {
        Ok(made) => Ok(Some(made)),
        Err(diesel::result::Error::RollbackTransaction) => Ok(None),
        Err(err) => Err(err),
    }
}

/// In one transaction: `attempt` (still `created`, its first send refused by `call`) fails
/// `provider_unavailable` with its call logged and its key completed, when no provider is
/// left to fail over to. `None` if another sender may have sent it meanwhile (see
/// [`still_unsent`]): then nothing was written, and the caller must treat its answer as
/// unknown.
pub async fn fail_unreached(
    conn: &mut AsyncPgConnection,
    metrics: &PaymentMetrics,
    attempt: &PaymentAttempt,
    call: &ProviderCall,
) -> diesel::QueryResult<Option<PaymentAttempt>> {
    let done = in_transaction(conn, async |conn| {
        if !still_unsent(conn, attempt).await? {
            return Err(diesel::result::Error::RollbackTransaction);
        }
        let applied = apply(
            conn,
            metrics,
            attempt.clone(),
            &unavailable_outcome(call),
            Source::ProviderResponse,
            Utc::now(),
        )
        .await?;
        log_call(
            conn,
            attempt.merchant_id,
            attempt.id,
            CallKind::Create,
            Source::Api,
            call,
            None,
        )
        .await?;
        settle_key(conn, &applied.attempt).await?;
        Ok(applied.attempt)
    })
    .await;
    match done {
        Ok(failed) => Ok(Some(failed)),
        Err(diesel::result::Error::RollbackTransaction) => Ok(None),
        Err(err) => Err(err),
    }
}

/// Takes `attempt`'s row lock and tells whether it is still `created` with the
/// `sending_until` its first send was made under. Every other sender of an attempt (a
/// resumed request, the reconciler) moves `sending_until` forward under this same lock
/// *before* it sends (`attempts::before_resend`). So an unchanged `sending_until`, read under
/// the lock, proves that the only send was ours, which never reached the provider; a moved
/// one means another send may have charged, and the attempt must not fail.
async fn still_unsent(
    conn: &mut AsyncPgConnection,
    attempt: &PaymentAttempt,
) -> diesel::QueryResult<bool> {
    #[derive(QueryableByName)]
    struct Unsent {
        #[diesel(sql_type = Bool)]
        unsent: bool,
    }
    let row: Option<Unsent> = Sql::new(
        "SELECT (status = 'created' AND sending_until = $3) AS unsent FROM payment_attempts \
         WHERE merchant_id = $1 AND id = $2 FOR UPDATE",
    )
    .bind::<SqlUuid, _>(attempt.merchant_id.0)
    .bind::<SqlUuid, _>(attempt.id.0)
    .bind::<Timestamptz, _>(attempt.sending_until)
    .get_result(conn)
    .await
    .optional()?;
    Ok(row.is_some_and(|r| r.unsent))
}

/// The new attempt with its timeline row, and the key moved onto it: one statement.
async fn next_attempt(
    conn: &mut AsyncPgConnection,
    failed: &PaymentAttempt,
    next: &NewAttempt<'_>,
    key: &str,
) -> diesel::QueryResult<Option<PaymentAttempt>> {
    #[derive(QueryableByName)]
    struct Made {
        #[diesel(sql_type = Jsonb)]
        attempt: serde_json::Value,
        #[diesel(sql_type = BigInt)]
        repointed: i64,
    }
    let sql = format!(
        "WITH go AS (SELECT 1), {insert}, {ATTEMPT_TIMELINE_AND_DONE}, \
         repointed AS ( \
             UPDATE idempotency_keys SET resource_id = (SELECT id FROM made_attempt), \
                 locked_until = $8, updated_at = now() \
             WHERE merchant_id = $2 AND key = $3 AND state = 'in_flight' \
               AND resource_type = 'payment_attempt' AND resource_id = $9 RETURNING 1) \
         SELECT to_jsonb(m) AS attempt, (SELECT count(*) FROM repointed) AS repointed \
         FROM made_attempt m",
        insert = NewAttempt::insert("go", "$1", 4),
    );
    let query = Sql::new(&sql)
        .bind::<SqlUuid, _>(failed.order_id.0)
        .bind::<SqlUuid, _>(failed.merchant_id.0)
        .bind::<Text, _>(key);
    let made: Made = next
        .bind(query)
        .bind::<SqlUuid, _>(failed.id.0)
        .get_result(conn)
        .await?;
    if made.repointed != 1 {
        return Ok(None);
    }
    let row: AttemptRow = serde_json::from_value(made.attempt)
        .map_err(|e| diesel::result::Error::DeserializationError(Box::new(e)))?;
    Ok(Some(row.into()))
}
