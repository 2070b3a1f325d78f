//! Recording an attempt and what follows from it (docs/DESIGN.md, "Delivering events"): the
//! attempt's row; the delivery's next step (delivered, due again, given up), only while this
//! worker's lease still holds it; the endpoint's health (`failing_since` set at the first
//! failure after a success, cleared by a success); and, on `410 Gone` or three days of
//! failures, the endpoint disabled and its pending deliveries canceled. A 2xx, the common
//! case, is one statement ([`record_delivered`]); a failure, one transaction.

use std::time::Duration;

use chrono::{DateTime, Utc};
use diesel::sql_types::{BigInt, Integer, Nullable, SmallInt, Text, Timestamptz, Uuid as SqlUuid};
use diesel::QueryableByName;
use diesel_async::{AsyncPgConnection, RunQueryDsl};

use super::take::{micros, Taken};
use crate::db::transaction::in_transaction;
use crate::events::schedule::{failing_too_long, Verdict};

/// One attempt as it went.
#[derive(Debug, Clone)]
pub struct Attempt {
    /// The endpoint's answer, if one came.
    pub http_status: Option<u16>,
    pub latency: Duration,
    /// Why it failed, when it did: the status line, a timeout, a refused address.
    pub error: Option<String>,
}

/// What recording an attempt changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recorded {
    /// The delivery's new state, when it ended (`succeeded` or `failed`).
    pub finished: Option<&'static str>,
    /// Why the endpoint was disabled, when this attempt disabled it (`gone` or `failing`).
    pub disabled: Option<&'static str>,
    /// Pending deliveries of the endpoint canceled with it.
    pub canceled: u64,
    /// The lease had passed and another worker had taken the delivery: only the attempt
    /// was recorded.
    pub lease_lost: bool,
}

#[derive(QueryableByName)]
struct Failing {
    #[diesel(sql_type = Timestamptz)]
    failing_since: DateTime<Utc>,
    #[diesel(sql_type = Timestamptz)]
    now: DateTime<Utc>,
}

/// Records `attempt` of `taken`, judged `verdict`.
pub async fn record(
    conn: &mut AsyncPgConnection,
    taken: &Taken,
    attempt: &Attempt,
    verdict: Verdict,
) -> diesel::QueryResult<Recorded> {
    match verdict {
        Verdict::Delivered => record_delivered(conn, taken, attempt).await,
        failed => record_failed(conn, taken, attempt, failed).await,
    }
}

/// A failed attempt (`verdict` is not `Delivered`), in one transaction: see the module
/// comment.
async fn record_failed(
    conn: &mut AsyncPgConnection,
    taken: &Taken,
    attempt: &Attempt,
    verdict: Verdict,
) -> diesel::QueryResult<Recorded> {
    let event = taken.event_id().0;
    let endpoint = taken.endpoint_id().0;
    let merchant = taken.merchant_id().0;
    in_transaction(conn, async |conn| {
        diesel::sql_query(
            "INSERT INTO delivery_attempts \
                 (event_id, endpoint_id, http_status, latency_ms, error) \
             VALUES ($1, $2, $3, $4, $5)",
        )
        .bind::<SqlUuid, _>(event)
        .bind::<SqlUuid, _>(endpoint)
        .bind::<Nullable<SmallInt>, _>(attempt.http_status.map(|s| s as i16))
        .bind::<Integer, _>(i32::try_from(attempt.latency.as_millis()).unwrap_or(i32::MAX))
        .bind::<Nullable<Text>, _>(attempt.error.as_deref())
        .execute(conn)
        .await?;

        let disable = if verdict == Verdict::Gone {
            Some((
                "gone",
                "it answered 410 Gone: payorch sends it nothing more",
            ))
        } else {
            let failing: Failing = diesel::sql_query(
                "UPDATE webhook_endpoints SET failing_since = COALESCE(failing_since, now()) \
                 WHERE merchant_id = $1 AND id = $2 \
                 RETURNING failing_since, now() AS now",
            )
            .bind::<SqlUuid, _>(merchant)
            .bind::<SqlUuid, _>(endpoint)
            .load(conn)
            .await
            .and_then(crate::db::one)?;
            failing_too_long(failing.failing_since, failing.now).then_some((
                "failing",
                "every delivery to it failed for 3 days: payorch sends it nothing more",
            ))
        };

        // The attempt that disables the endpoint ends its own delivery as failed.
        let (state, wait) = match verdict {
            Verdict::RetryAfter(wait) if disable.is_none() => ("pending", wait),
            _ => ("failed", Duration::ZERO),
        };
        let moved = diesel::sql_query(
            "UPDATE event_deliveries SET attempts = attempts + 1, state = $3, \
                 next_attempt_at = CASE WHEN $3 = 'pending' \
                     THEN now() + $4 * interval '1 microsecond' ELSE next_attempt_at END, \
                 updated_at = now() \
             WHERE event_id = $1 AND endpoint_id = $2 AND state = 'pending' \
               AND next_attempt_at = $5",
        )
        .bind::<SqlUuid, _>(event)
        .bind::<SqlUuid, _>(endpoint)
        .bind::<Text, _>(state)
        .bind::<BigInt, _>(micros(wait))
        .bind::<Timestamptz, _>(taken.lease_until)
        .execute(conn)
        .await?;
        let mut recorded = Recorded {
            finished: (moved == 1 && state != "pending").then_some(state),
            lease_lost: moved == 0,
            ..Recorded::default()
        };
        if let Some((why, reason)) = disable {
            let disabled = diesel::sql_query(
                "UPDATE webhook_endpoints SET status = 'disabled', disabled_reason = $3, \
                     updated_at = now() \
                 WHERE merchant_id = $1 AND id = $2 AND status = 'enabled'",
            )
            .bind::<SqlUuid, _>(merchant)
            .bind::<SqlUuid, _>(endpoint)
            .bind::<Text, _>(reason)
            .execute(conn)
            .await?;
            if disabled == 1 {
                recorded.disabled = Some(why);
            }
            recorded.canceled = diesel::sql_query(
                "UPDATE event_deliveries SET state = 'canceled', updated_at = now() \
                 WHERE merchant_id = $1 AND endpoint_id = $2 AND state = 'pending'",
            )
            .bind::<SqlUuid, _>(merchant)
            .bind::<SqlUuid, _>(endpoint)
            .execute(conn)
            .await? as u64;
        }
        Ok(recorded)
    })
    .await
}

/// The common case, a 2xx, in one statement (one round trip, its own transaction): the
/// attempt's row, the delivery `succeeded` while the lease is still this worker's, and the
/// endpoint's failing spell over. What the general path does for a 2xx, without its four
/// round trips: a delivery's bookkeeping costs about as much as a checkout's statements
/// (BENCHMARKS.md, "Merchant events (#30)").
async fn record_delivered(
    conn: &mut AsyncPgConnection,
    taken: &Taken,
    attempt: &Attempt,
) -> diesel::QueryResult<Recorded> {
    #[derive(QueryableByName)]
    struct Moved {
        #[diesel(sql_type = BigInt)]
        moved: i64,
    }
    let moved: Moved = diesel::sql_query(
        "WITH moved AS ( \
             UPDATE event_deliveries SET attempts = attempts + 1, state = 'succeeded', \
                 updated_at = now() \
             WHERE event_id = $1 AND endpoint_id = $2 AND state = 'pending' \
               AND next_attempt_at = $6 \
             RETURNING 1), \
         logged AS ( \
             INSERT INTO delivery_attempts \
                 (event_id, endpoint_id, http_status, latency_ms, error) \
             VALUES ($1, $2, $4, $5, NULL)), \
         recovered AS ( \
             UPDATE webhook_endpoints SET failing_since = NULL \
             WHERE merchant_id = $3 AND id = $2 AND failing_since IS NOT NULL) \
         SELECT count(*) AS moved FROM moved",
    )
    .bind::<SqlUuid, _>(taken.event_id().0)
    .bind::<SqlUuid, _>(taken.endpoint_id().0)
    .bind::<SqlUuid, _>(taken.merchant_id().0)
    .bind::<Nullable<SmallInt>, _>(attempt.http_status.map(|s| s as i16))
    .bind::<Integer, _>(i32::try_from(attempt.latency.as_millis()).unwrap_or(i32::MAX))
    .bind::<Timestamptz, _>(taken.lease_until)
    .load(conn)
    .await
    .and_then(crate::db::one)?;
    Ok(Recorded {
        finished: (moved.moved == 1).then_some("succeeded"),
        lease_lost: moved.moved == 0,
        ..Recorded::default()
    })
}
