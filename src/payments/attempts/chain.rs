//! What a retry decision reads from the database, and only on the retry path (after a
//! definite decline, never on a payment's happy path): the attempts the request has made so
//! far, and the card's recent declines at the merchant (docs/guides/declines.md, "Retries").

use chrono::{DateTime, Duration, Utc};
use diesel::sql_types::{BigInt, Text, Timestamptz, Uuid as SqlUuid};
use diesel::QueryableByName;
use diesel_async::RunQueryDsl;
use tracing::Instrument;

use super::retry::{asked_for_three_d_secure, CardDeclines};
use super::{attempts_of_order, PaymentAttempt};
use crate::db::sql::Sql;
use crate::db::statement::{span, Statement};
use crate::db::PgConn;

/// What the request's attempts so far say: how many there are (the declined one included),
/// whether any asked the payer for 3-D Secure, and the providers they used (the next attempt
/// goes to none of them again).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SoFar {
    pub attempts: u8,
    pub three_d_secure_tried: bool,
    pub providers: Vec<String>,
}

/// The attempts of `declined`'s request: those of its order made under the same client
/// Idempotency-Key (failover and retries move the key onto each new attempt, and every
/// attempt records the key that made it). `declined` (or an attempt whose provider was not
/// reached) is counted as read before its call, the database's copy being older.
pub async fn so_far(conn: &mut PgConn, declined: &PaymentAttempt) -> diesel::QueryResult<SoFar> {
    let attempts = attempts_of_order(conn, declined.merchant_id, declined.order_id).await?;
    let chain = attempts
        .iter()
        .filter(|a| a.id != declined.id && a.idempotency_key == declined.idempotency_key)
        .chain(std::iter::once(declined));
    let (mut count, mut tried, mut providers) = (0u8, false, Vec::new());
    for attempt in chain {
        count = count.saturating_add(1);
        tried |= asked_for_three_d_secure(attempt.three_d_secure, attempt.next_action.is_some());
        if !providers.contains(&attempt.provider) {
            providers.push(attempt.provider.clone());
        }
    }
    Ok(SoFar {
        attempts: count,
        three_d_secure_tried: tried,
        providers,
    })
}

/// Whether another attempt of `attempt`'s order retries it: then whoever made that retry holds
/// the client's key, moved onto the retry in the transaction that made it.
pub async fn retried(conn: &mut PgConn, attempt: &PaymentAttempt) -> diesel::QueryResult<bool> {
    let attempts = attempts_of_order(conn, attempt.merchant_id, attempt.order_id).await?;
    Ok(attempts.iter().any(|a| a.retry_of == Some(attempt.id)))
}

/// The card's declines at the merchant, `declined` included when `counts` (its decline is one
/// a card network saw): payorch knows a card by its payment method token, per merchant, so a
/// payer who pays with the same card through a new token is a new card here. Only declines a
/// provider answered count (those with the provider's own code): `provider_unavailable` and
/// `provider_no_record` were nobody's decline, and `provider_rejected` (the provider refused
/// the request itself) never reached a network. One indexed count
/// (`payment_attempts_card_declines`).
pub async fn card_declines(
    conn: &mut PgConn,
    declined: &PaymentAttempt,
    counts: bool,
) -> diesel::QueryResult<CardDeclines> {
    #[derive(QueryableByName)]
    struct Counted {
        #[diesel(sql_type = BigInt)]
        last_day: i64,
        #[diesel(sql_type = BigInt)]
        last_30_days: i64,
    }
    let counted: Counted = statement(declined, Utc::now())
        .load(conn)
        .instrument(span("card_declines"))
        .await
        .and_then(crate::db::one)?;
    // The declined attempt is not recorded failed yet: it is one more, if it counts.
    let with_this = |n: i64| {
        u32::try_from(n)
            .unwrap_or(u32::MAX)
            .saturating_add(counts.into())
    };
    Ok(CardDeclines {
        last_day: with_this(counted.last_day),
        last_30_days: with_this(counted.last_30_days),
    })
}

/// The count (whole text: `tests/sql/card_declines.sql`). Its `WHERE` repeats the index's
/// predicate word for word, so the planner uses it.
fn statement(declined: &PaymentAttempt, now: DateTime<Utc>) -> Sql<'_> {
    let mut q = Statement::new();
    let merchant = q.bind::<SqlUuid, _>(declined.merchant_id.0);
    let card = q.bind::<Text, _>(declined.payment_method.as_str());
    let day = q.bind::<Timestamptz, _>(now - Duration::hours(24));
    let month = q.bind::<Timestamptz, _>(now - Duration::days(30));
    let id = q.bind::<SqlUuid, _>(declined.id.0);
    q.push(format_args!(
        "SELECT count(*) FILTER (WHERE finished_at > {day}) AS last_day,
    count(*) AS last_30_days
FROM payment_attempts
WHERE merchant_id = {merchant} AND payment_method = {card} AND finished_at > {month}
  AND status = 'failed' AND provider_failure_code IS NOT NULL
  AND failure_code <> 'provider_rejected' AND id <> {id}"
    ));
    q.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::snapshot::assert_sql_snapshot;
    use crate::payments::attempts::tests::an_attempt;

    #[test]
    fn the_statement_reads_as_its_snapshot() {
        assert_sql_snapshot("card_declines", &statement(&an_attempt(), Utc::now()));
    }
}
