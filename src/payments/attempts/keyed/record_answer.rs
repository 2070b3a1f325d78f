//! Transaction 2 of a payment: the provider's answer to our own create, in **one statement**
//! (whole text: `tests/sql/record_answer.sql`; docs/DESIGN.md, "A payment: two transactions
//! and one provider call"): the attempt's move and its timeline row
//! ([`move_ctes`](crate::payments::attempts::transition::move_ctes)), the completion of the
//! key that made it (consuming the request's [`InFlightKey`]), and the call's log row.
//!
//! What it relies on: the move is conditional on the status the attempt was read with, so a
//! webhook that moved it first makes this statement write nothing of the attempt nor the key
//! (only the call's row); `payment_attempts_guard_transition` refuses a move the state
//! machine does not allow; the key completes only while it is in flight or unresolved.

use chrono::{DateTime, Utc};
use diesel::sql_types::Uuid as SqlUuid;
use diesel::OptionalExtension;
use diesel_async::RunQueryDsl;

use crate::db::statement::{span, Statement};
use crate::db::PgConn;
use crate::idempotency::in_flight::{Settle, Settling};
use crate::idempotency::InFlightKey;
use crate::payments::attempts::call_log::{log_create, CallRecord};
use crate::payments::attempts::transition::{decide, move_ctes, move_of};
use crate::payments::attempts::transition::{Change, Decision};
use crate::payments::attempts::{open_statuses, AttemptRow, CallKind, PaymentAttempt, Source};
use crate::payments::metrics::PaymentMetrics;
use crate::providers::{ProviderCall, ProviderOutcome};
use tracing::Instrument;

/// What recording the answer came to.
#[derive(Debug)]
pub enum Answered {
    /// The attempt moved (or, still open, learnt what the answer told), and its key completed.
    Moved(Box<PaymentAttempt>),
    /// The attempt was not as read (a webhook was faster, or it is final already): only the
    /// call was logged, and the key is still in flight, handed back for the caller to judge
    /// the answer against the attempt as it is now.
    NotAsRead(InFlightKey),
}

/// Records `outcome` (what the call's answer means: its own, or for a first send that never
/// reached the provider, `provider_unavailable`) on `attempt`, as read before the call.
pub async fn record_answer(
    conn: &mut PgConn,
    metrics: &PaymentMetrics,
    attempt: &PaymentAttempt,
    call: &ProviderCall,
    outcome: &ProviderOutcome,
    next_check_at: DateTime<Utc>,
    key: InFlightKey,
) -> diesel::QueryResult<Answered> {
    let mut call = call.clone();
    let mut outcome = outcome.clone();
    let mut key = key;
    let (decision, row, settling) = loop {
        let decision = decide(attempt.status, attempt.capture_method, &outcome);
        let Some(change) = move_of(attempt.status, &decision) else {
            log_create(conn, attempt, &call).await?;
            return Ok(Answered::NotAsRead(key));
        };
        let logged = CallRecord::of(CallKind::Create, Source::Api, &call);
        let (sql, settling) = statement(attempt, change, next_check_at, key, &logged);
        let written = sql
            .load::<AttemptRow>(conn)
            .instrument(span("record_answer"))
            .await
            .and_then(crate::db::one)
            .optional();
        match written {
            // The answer names a charge another attempt holds: it contradicts payorch's
            // records, so it moves nothing. The attempt stays open with the evidence in its
            // call log, for a human (docs/DESIGN.md, "What proves what").
            Err(e)
                if is_contradiction(&e) && !matches!(outcome, ProviderOutcome::Unknown { .. }) =>
            {
                outcome = contradiction(&outcome);
                call.outcome = outcome.clone();
                key = settling.unwritten();
            }
            written => break (decision, written?, settling),
        }
    };
    let Some(row) = row else {
        return Ok(Answered::NotAsRead(settling.unwritten()));
    };
    settling.written();
    if let Decision::Move { to, .. } = &decision {
        metrics.transition(attempt.status, *to, Source::ProviderResponse);
    }
    if let Decision::Move {
        failure: Some(f), ..
    } = &decision
    {
        metrics.declined(&attempt.provider, &f.code, f.decline.as_ref());
    }
    Ok(Answered::Moved(Box::new(row.into())))
}

/// Whether a write failed because the provider's charge id is another attempt's already.
pub(crate) fn is_contradiction(e: &diesel::result::Error) -> bool {
    matches!(
        e,
        diesel::result::Error::DatabaseError(
            diesel::result::DatabaseErrorKind::UniqueViolation,
            info,
        ) if info.constraint_name() == Some("payment_attempts_provider_payment")
    )
}

/// What an answer naming another attempt's charge counts as: an unknown whose reason, kept
/// in the call log, starts with [`CONTRADICTION`] and gives the evidence.
pub(crate) fn contradiction(outcome: &ProviderOutcome) -> ProviderOutcome {
    ProviderOutcome::Unknown {
        reason: format!(
            "{CONTRADICTION} the provider's answer ({}) names charge {}, which another attempt \
             holds: not applied",
            outcome.label(),
            outcome.provider_id().unwrap_or("?")
        ),
    }
}

/// How a contradiction's call-log detail starts: what the needs-a-human list looks for.
pub const CONTRADICTION: &str = "contradiction:";

/// The statement (see the module comment), and the key it may complete.
fn statement<'f>(
    attempt: &'f PaymentAttempt,
    change: Change<'f>,
    next_check_at: DateTime<Utc>,
    key: InFlightKey,
    call: &'f CallRecord,
) -> (crate::db::sql::Sql<'f>, Settling) {
    let mut q = Statement::new();
    move_ctes(
        &mut q,
        attempt,
        change,
        Source::ProviderResponse,
        next_check_at,
    );
    q.push(",\n");
    let settling = key.settle(
        &mut q,
        Settle {
            from: "moved",
            status: 201,
            open: open_statuses!(),
        },
    );
    let merchant = q.bind::<SqlUuid, _>(attempt.merchant_id.0);
    let id = q.bind::<SqlUuid, _>(attempt.id.0);
    let values = call.values(&mut q);
    q.push(format_args!(
        ",
called AS (
    INSERT INTO provider_calls (merchant_id, attempt_id, operation, source, outcome,
        http_status, latency_ms, detail)
    VALUES ({merchant}, {id}, {values}))
SELECT * FROM moved"
    ));
    (q.finish(), settling)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::snapshot::assert_sql_snapshot;
    use crate::idempotency::in_flight::tests::a_key_in_flight;
    use crate::payments::attempts::tests::an_attempt;

    #[test]
    fn the_statement_reads_as_its_snapshot() {
        let attempt = an_attempt();
        let call = ProviderCall {
            outcome: ProviderOutcome::Succeeded {
                provider_id: "pi_1".into(),
            },
            http_status: Some(200),
            latency: std::time::Duration::from_millis(5),
        };
        let decision = decide(attempt.status, attempt.capture_method, &call.outcome);
        let change = move_of(attempt.status, &decision).expect("a move");
        let logged = CallRecord::of(CallKind::Create, Source::Api, &call);
        let (sql, _) = statement(&attempt, change, Utc::now(), a_key_in_flight(), &logged);
        assert_sql_snapshot("record_answer", &sql);
    }
}
