//! Recording an attempt and what follows from it (docs/DESIGN.md, "Delivering events"): the
//! attempt's row; the delivery's next step (delivered, due again, given up), only while this
//! worker's lease still holds it; the endpoint's health (`failing_since` set at the first
//! failure after a success, cleared by a success); and, on `410 Gone` or three days of
//! failures, the endpoint disabled and its pending deliveries canceled. A 2xx, the common
//! case, is one statement ([`record_delivered`]); a failure, one transaction.

use std::time::Duration;

use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel::sql_types::{BigInt, Integer, Nullable, SmallInt, Text, Timestamptz, Uuid as SqlUuid};
use diesel_async::RunQueryDsl;
use uuid::Uuid;

use super::take::{micros, Taken};
use crate::db::schema::{delivery_attempts, webhook_endpoints};
use crate::db::sql::Sql;
use crate::db::statement::Statement;
use crate::db::transaction::in_transaction;
use crate::db::PgConn;
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
    conn: &mut PgConn,
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
    conn: &mut PgConn,
    taken: &Taken,
    attempt: &Attempt,
    verdict: Verdict,
) -> diesel::QueryResult<Recorded> {
    let event = taken.event_id().0;
    let endpoint = taken.endpoint_id().0;
    let merchant = taken.merchant_id().0;
    in_transaction(conn, async |conn| {
        diesel::insert_into(delivery_attempts::table)
            .values((
                delivery_attempts::event_id.eq(event),
                delivery_attempts::endpoint_id.eq(endpoint),
                delivery_attempts::http_status.eq(http_status(attempt)),
                delivery_attempts::latency_ms.eq(latency_ms(attempt)),
                delivery_attempts::error.eq(attempt.error.as_deref()),
            ))
            .execute(conn)
            .await?;

        let disable = if verdict == Verdict::Gone {
            Some((
                "gone",
                "it answered 410 Gone: payorch sends it nothing more",
            ))
        } else {
            let failing: Failing = mark_failing(merchant, endpoint)
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
        let moved = move_delivery(event, endpoint, taken.lease_until, state, wait)
            .execute(conn)
            .await?;
        let mut recorded = Recorded {
            finished: (moved == 1 && state != "pending").then_some(state),
            lease_lost: moved == 0,
            ..Recorded::default()
        };
        if let Some((why, reason)) = disable {
            let disabled = diesel::update(
                webhook_endpoints::table
                    .filter(webhook_endpoints::merchant_id.eq(merchant))
                    .filter(webhook_endpoints::id.eq(endpoint))
                    .filter(webhook_endpoints::status.eq("enabled")),
            )
            .set((
                webhook_endpoints::status.eq("disabled"),
                webhook_endpoints::disabled_reason.eq(reason),
                webhook_endpoints::updated_at.eq(diesel::dsl::now),
            ))
            .execute(conn)
            .await?;
            if disabled == 1 {
                recorded.disabled = Some(why);
            }
            recorded.canceled = cancel_pending(merchant, endpoint).execute(conn).await? as u64;
        }
        Ok(recorded)
    })
    .await
}

/// The attempt's answer as the table stores it.
fn http_status(attempt: &Attempt) -> Option<i16> {
    attempt.http_status.map(|s| s as i16)
}

fn latency_ms(attempt: &Attempt) -> i32 {
    i32::try_from(attempt.latency.as_millis()).unwrap_or(i32::MAX)
}

/// A disabled endpoint's deliveries still to send, canceled (whole text:
/// `tests/sql/cancel_pending_deliveries.sql`). `'pending'` is written in the text, not bound:
/// every connection plans generically (`db::pool`), and only a literal lets the plan use the
/// partial index `event_deliveries_of_endpoint (merchant_id, endpoint_id) WHERE state =
/// 'pending'`; a bound state would scan every delivery, inside the transaction that holds the
/// endpoint's row.
fn cancel_pending(merchant: Uuid, endpoint: Uuid) -> Sql<'static> {
    let mut q = Statement::new();
    let merchant = q.bind::<SqlUuid, _>(merchant);
    let endpoint = q.bind::<SqlUuid, _>(endpoint);
    q.push(format_args!(
        "UPDATE event_deliveries SET state = 'canceled', updated_at = now()
WHERE merchant_id = {merchant} AND endpoint_id = {endpoint} AND state = 'pending'"
    ));
    q.finish()
}

/// The endpoint failing since its first failure after a success, and the transaction's
/// `now()` to judge how long against (whole text: `tests/sql/mark_endpoint_failing.sql`).
fn mark_failing(merchant: Uuid, endpoint: Uuid) -> Sql<'static> {
    let mut q = Statement::new();
    let merchant = q.bind::<SqlUuid, _>(merchant);
    let endpoint = q.bind::<SqlUuid, _>(endpoint);
    q.push(format_args!(
        "UPDATE webhook_endpoints SET failing_since = COALESCE(failing_since, now())
WHERE merchant_id = {merchant} AND id = {endpoint}
RETURNING failing_since, now() AS now"
    ));
    q.finish()
}

/// The delivery's next step after a failed attempt, `state` (`pending`: due again after
/// `wait`; or `failed`), only while the lease still holds it: `next_attempt_at` is still the
/// lease's end (whole text: `tests/sql/move_failed_delivery.sql`).
fn move_delivery(
    event: Uuid,
    endpoint: Uuid,
    lease_until: DateTime<Utc>,
    state: &'static str,
    wait: Duration,
) -> Sql<'static> {
    let mut q = Statement::new();
    let event = q.bind::<SqlUuid, _>(event);
    let endpoint = q.bind::<SqlUuid, _>(endpoint);
    let state = q.bind::<Text, _>(state);
    let wait = q.bind::<BigInt, _>(micros(wait));
    let lease_until = q.bind::<Timestamptz, _>(lease_until);
    q.push(format_args!(
        "UPDATE event_deliveries SET attempts = attempts + 1, state = {state},
    next_attempt_at = CASE WHEN {state} = 'pending'
        THEN now() + {wait} * interval '1 microsecond' ELSE next_attempt_at END,
    updated_at = now()
WHERE event_id = {event} AND endpoint_id = {endpoint} AND state = 'pending'
  AND next_attempt_at = {lease_until}"
    ));
    q.finish()
}

/// The common case, a 2xx, in one statement (one round trip, its own transaction): the
/// attempt's row, the delivery `succeeded` while the lease is still this worker's, and the
/// endpoint's failing spell over. What the general path does for a 2xx, without its four
/// round trips: a delivery's bookkeeping costs about as much as a checkout's statements
/// (docs/BENCHMARKS.md, "Merchant events (#30)").
async fn record_delivered(
    conn: &mut PgConn,
    taken: &Taken,
    attempt: &Attempt,
) -> diesel::QueryResult<Recorded> {
    #[derive(QueryableByName)]
    struct Moved {
        #[diesel(sql_type = BigInt)]
        moved: i64,
    }
    let moved: Moved = delivered_statement(
        [
            taken.event_id().0,
            taken.endpoint_id().0,
            taken.merchant_id().0,
        ],
        taken.lease_until,
        attempt,
    )
    .load(conn)
    .await
    .and_then(crate::db::one)?;
    Ok(Recorded {
        finished: (moved.moved == 1).then_some("succeeded"),
        lease_lost: moved.moved == 0,
        ..Recorded::default()
    })
}

/// [`record_delivered`]'s statement (whole text: `tests/sql/record_delivered.sql`).
/// `[event, endpoint, merchant]` are the delivery's event, endpoint and merchant.
fn delivered_statement(
    [event, endpoint, merchant]: [Uuid; 3],
    lease_until: DateTime<Utc>,
    attempt: &Attempt,
) -> Sql<'static> {
    let mut q = Statement::new();
    let event = q.bind::<SqlUuid, _>(event);
    let endpoint = q.bind::<SqlUuid, _>(endpoint);
    let merchant = q.bind::<SqlUuid, _>(merchant);
    let status = q.bind::<Nullable<SmallInt>, _>(http_status(attempt));
    let latency = q.bind::<Integer, _>(latency_ms(attempt));
    let lease_until = q.bind::<Timestamptz, _>(lease_until);
    q.push(format_args!(
        "WITH moved AS (
    UPDATE event_deliveries SET attempts = attempts + 1, state = 'succeeded',
        updated_at = now()
    WHERE event_id = {event} AND endpoint_id = {endpoint} AND state = 'pending'
      AND next_attempt_at = {lease_until}
    RETURNING 1),
logged AS (
    INSERT INTO delivery_attempts (event_id, endpoint_id, http_status, latency_ms, error)
    VALUES ({event}, {endpoint}, {status}, {latency}, NULL)),
recovered AS (
    UPDATE webhook_endpoints SET failing_since = NULL
    WHERE merchant_id = {merchant} AND id = {endpoint} AND failing_since IS NOT NULL)
SELECT count(*) AS moved FROM moved"
    ));
    q.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::snapshot::assert_sql_snapshot;

    #[test]
    fn the_recording_statements_read_as_their_snapshots() {
        let id = Uuid::nil();
        let attempt = Attempt {
            http_status: Some(200),
            latency: Duration::from_millis(5),
            error: None,
        };
        assert_sql_snapshot(
            "record_delivered",
            &delivered_statement([id; 3], Utc::now(), &attempt),
        );
        assert_sql_snapshot("mark_endpoint_failing", &mark_failing(id, id));
        assert_sql_snapshot("cancel_pending_deliveries", &cancel_pending(id, id));
        assert_sql_snapshot(
            "move_failed_delivery",
            &move_delivery(id, id, Utc::now(), "pending", Duration::ZERO),
        );
    }
}
