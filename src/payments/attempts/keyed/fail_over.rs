//! Failover's statement: the order's next attempt with its timeline row, and the client's
//! key moved onto it with a fresh lease, in one statement (whole text:
//! `tests/sql/fail_over.sql`), inside the transaction that fails the unreached attempt
//! (`payments::attempts::failover`; docs/DESIGN.md, "Failover").
//!
//! What it relies on: the failed attempt is final before this runs, so the order's trigger
//! lets the order take a new attempt (invariant 2: one open attempt per order); the key moves
//! only if it is still in flight on the failed attempt, and the caller rolls back if it
//! did not.

use chrono::{DateTime, Utc};
use diesel::sql_types::{BigInt, Jsonb, Text, Uuid as SqlUuid};
use diesel::QueryableByName;
use diesel_async::RunQueryDsl;

use super::NewAttempt;
use crate::db::sql::Sql;
use crate::db::statement::{span, Statement};
use crate::db::PgConn;
use crate::idempotency::in_flight::Repointing;
use crate::idempotency::InFlightKey;
use crate::payments::attempts::{AttemptRow, PaymentAttempt};
use tracing::Instrument;

/// The new attempt `next` for `failed`'s order, and `key` (in flight on `failed`) moved onto
/// it: the attempt and the key now in flight on it, or `Err` with the key handed back as it
/// was if it was not as claimed (then the caller must roll back what it wrote).
pub async fn next_attempt(
    conn: &mut PgConn,
    failed: &PaymentAttempt,
    next: &NewAttempt<'_>,
    key: InFlightKey,
    lease_end: DateTime<Utc>,
) -> diesel::QueryResult<Result<(PaymentAttempt, InFlightKey), InFlightKey>> {
    #[derive(QueryableByName)]
    struct Made {
        #[diesel(sql_type = Jsonb)]
        attempt: serde_json::Value,
        #[diesel(sql_type = BigInt)]
        repointed: i64,
    }
    let (sql, repointing) = statement(failed, next, key, lease_end);
    let made: Made = sql
        .load(conn)
        .instrument(span("fail_over"))
        .await
        .and_then(crate::db::one)?;
    if made.repointed != 1 {
        return Ok(Err(repointing.unmoved()));
    }
    let row: AttemptRow = serde_json::from_value(made.attempt)
        .map_err(|e| diesel::result::Error::DeserializationError(Box::new(e)))?;
    Ok(Ok((row.into(), repointing.moved())))
}

/// The statement, and the key it moves.
fn statement<'f>(
    failed: &'f PaymentAttempt,
    next: &'f NewAttempt<'_>,
    key: InFlightKey,
    lease_end: DateTime<Utc>,
) -> (Sql<'f>, Repointing) {
    let mut q = Statement::new();
    let merchant = q.bind::<SqlUuid, _>(failed.merchant_id.0);
    let client_key = q.bind::<Text, _>(key.as_str().to_owned());
    let order_id = q.bind::<SqlUuid, _>(failed.order_id.0).to_string();
    q.push("WITH go AS (SELECT 1),\n");
    next.insert(&mut q, merchant, client_key, "go", &order_id);
    q.push(",\n");
    let repointing = key.repoint(&mut q, "made_attempt", next.id.0, lease_end);
    q.push(
        "
SELECT to_jsonb(m) AS attempt, (SELECT count(*) FROM repointed) AS repointed
FROM made_attempt m",
    );
    (q.finish(), repointing)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::snapshot::assert_sql_snapshot;
    use crate::idempotency::in_flight::tests::a_key_in_flight;
    use crate::payments::attempts::tests::an_attempt;

    #[test]
    fn the_statement_reads_as_its_snapshot() {
        let failed = an_attempt();
        let next = NewAttempt::new("pm_card_visa", "second", Utc::now());
        let (sql, _) = statement(&failed, &next, a_key_in_flight(), Utc::now());
        assert_sql_snapshot("fail_over", &sql);
    }
}
