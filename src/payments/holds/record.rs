//! What a provider's answer to a capture or void does, in one transaction: the operation's
//! move, the payment's move when the hold ended (captured, or released), the key and the call
//! log. The payment decides: once it is final, its operation follows it, whatever the late
//! answer says (a webhook may have told of the capture first).
//!
//! Why a transaction and not one statement, as a refund's answer is: the operation's verdict
//! is known only once the payment has moved, and the payment's move is judged against the
//! payment as it is and retried if another writer moved it first
//! ([`apply`](crate::payments::attempts::transition::apply)); and the payment's key and the
//! operation's each complete in the answer (two `settled` CTEs, where a statement has room
//! for one). So the operation is locked, the payment moved and its key completed first, and
//! the operation's own part is one statement (whole text: `tests/sql/record_hold_answer.sql`):
//! its move, its key and the call's log row ([`crate::payments::answer`]).

use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel::sql_types::{Nullable, Text, Timestamptz, Uuid as SqlUuid};
use diesel_async::RunQueryDsl;
use tracing::Instrument;

use super::{HoldError, HoldKind, HoldOperation, HoldOperationRow};
use crate::db::schema::hold_operations;
use crate::db::sql::Sql;
use crate::db::statement::{span, Statement};
use crate::db::transaction::in_transaction;
use crate::db::PgConn;
use crate::idempotency::in_flight::{Settle, Settling};
use crate::idempotency::{InFlightKey, Recorded, ResourceType};
use crate::payments::answer::{finish, unmoved, AnswerKey, Answered, CallAbout};
use crate::payments::attempts::call_log::CallRecord;
use crate::payments::attempts::transition::apply;
use crate::payments::attempts::{find_attempt, CallKind, PaymentAttempt, Source};
use crate::payments::metrics::PaymentMetrics;
use crate::payments::service::settle_key;
use crate::payments::status::AttemptStatus;
use crate::providers::{ProviderCall, ProviderOutcome};

/// An operation's open statuses as an SQL list: an attempt's without the hold, as a refund's,
/// and word for word the predicate of the `hold_operations_due` index.
pub(super) const OPEN_OPERATION_STATUSES: &str = "('created', 'pending')";

/// What an operation's key records: `200` and the operation with its payment, which a replay
/// shows as they are then. An open operation keeps its key from being reaped.
pub(super) fn recorded(operation: &HoldOperation) -> Recorded {
    Recorded {
        status: 200,
        resource_type: ResourceType::HoldOperation,
        resource_id: operation.id.0,
        unresolved: !operation.status.is_final(),
    }
}

/// What an answer means for the operation, before the payment has its say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Verdict {
    /// Done: captured, or released.
    Done,
    /// Definitively not done; the hold is as it was.
    Refused { code: String, message: String },
    /// Not known yet: ask again under the same key.
    Open,
}

pub(super) fn verdict(kind: HoldKind, outcome: &ProviderOutcome) -> Verdict {
    match (kind, outcome) {
        (HoldKind::Capture, ProviderOutcome::Succeeded { .. })
        | (HoldKind::Void, ProviderOutcome::Canceled { .. }) => Verdict::Done,
        (_, ProviderOutcome::Failed { code, message, .. }) => Verdict::Refused {
            code: code.clone(),
            message: message.clone(),
        },
        // Pending (Adyen's `received`), unknown, unreachable, or a word about the charge that
        // is not this operation's result: the provider is asked again.
        _ => Verdict::Open,
    }
}

/// The payment's own final status settles its operation: a captured hold completes a
/// capture and refuses a void, a released one the other way round.
fn settled_by_payment(kind: HoldKind, payment: AttemptStatus) -> Option<Verdict> {
    let refused = |what: &str| Verdict::Refused {
        code: format!("payment_{}", payment.as_str()),
        message: format!(
            "the payment was {what} before this {} took effect",
            kind.as_str()
        ),
    };
    match (kind, payment) {
        (HoldKind::Capture, AttemptStatus::Succeeded)
        | (HoldKind::Void, AttemptStatus::Canceled) => Some(Verdict::Done),
        (HoldKind::Capture, AttemptStatus::Canceled | AttemptStatus::Failed) => {
            Some(refused("released"))
        }
        (HoldKind::Void, AttemptStatus::Succeeded) => Some(refused("captured")),
        (HoldKind::Void, AttemptStatus::Failed) => Some(refused("declined")),
        _ => None,
    }
}

/// The provider call's answer about `operation`, recorded in one transaction, with the
/// request's own key (`key`, consumed) or, for the reconciler, the operation's key by its
/// resource. The operation is read again under its row lock and judged as it is now.
#[allow(clippy::too_many_arguments)]
pub(super) async fn record(
    conn: &mut PgConn,
    metrics: &PaymentMetrics,
    operation: &HoldOperation,
    call: Option<&ProviderCall>,
    (moved_by, called_by): (Source, Source),
    next_check_at: DateTime<Utc>,
    key: Option<InFlightKey>,
) -> Result<(HoldOperation, PaymentAttempt), HoldError> {
    let kind = match operation.kind {
        HoldKind::Capture => CallKind::Capture,
        HoldKind::Void => CallKind::Cancel,
    };
    in_transaction(conn, async |conn| {
        if let Some(key) = &key {
            key.name_request(conn).await?;
        }
        let current: HoldOperation = hold_operations::table
            .find((operation.merchant_id.0, operation.id.0))
            .select(HoldOperationRow::as_select())
            .for_update()
            .limit(1)
            .load(conn)
            .await
            .and_then(crate::db::one)?
            .into();
        let mut payment = find_attempt(conn, Some(current.merchant_id), current.payment_id)
            .await?
            .ok_or(diesel::result::Error::NotFound)?;
        let mut said = None;
        if !current.status.is_final() {
            let mut says = call.map_or(Verdict::Open, |c| verdict(current.kind, &c.outcome));
            if let (Verdict::Done, Some(call), false) = (&says, call, payment.status.is_final()) {
                // The operation is still live here, so a release takes its reason
                // (`payment_attempts_guard_transition`).
                let applied = apply(
                    conn,
                    metrics,
                    payment,
                    &call.outcome,
                    moved_by,
                    next_check_at,
                )
                .await?;
                payment = applied.attempt;
            }
            if let Some(settled) = settled_by_payment(current.kind, payment.status) {
                says = settled;
            }
            if payment.status.is_final() {
                settle_key(conn, &payment).await?;
            }
            said = Some(says);
        }
        let by = match key {
            Some(key) => AnswerKey::Request(key),
            None => AnswerKey::Resource(current.idempotency_key.as_deref()),
        };
        let logged = call.map(|call| CallRecord::of(kind, called_by, call));
        let (sql, settling) =
            statement(&current, said.as_ref(), next_check_at, by, logged.as_ref());
        // The operation is locked: as read, so the statement writes.
        let moved: HoldOperation = sql
            .load::<HoldOperationRow>(conn)
            .instrument(span("record_hold_answer"))
            .await
            .and_then(crate::db::one)?
            .into();
        if let Some(settling) = settling {
            settling.written();
        }
        Ok::<_, HoldError>((moved, payment))
    })
    .await
}

/// The operation's part of its answer, in one statement: its move for `said` (final, or still
/// open and asked about again at `next_check_at`; `None`, an operation final already: as it
/// is), its key and the call's log row. One row, the operation after it.
fn statement<'f>(
    current: &'f HoldOperation,
    said: Option<&'f Verdict>,
    next_check_at: DateTime<Utc>,
    key: AnswerKey<'f>,
    call: Option<&'f CallRecord>,
) -> (Sql<'f>, Option<Settling>) {
    let mut q = Statement::new();
    let ids = (current.merchant_id.0, current.id.0);
    match said {
        Some(said) => {
            let (status, code, message) = match said {
                Verdict::Done => (AttemptStatus::Succeeded, None, None),
                Verdict::Refused { code, message } => (
                    AttemptStatus::Failed,
                    Some(code.as_str()),
                    Some(message.as_str()),
                ),
                Verdict::Open => (AttemptStatus::Pending, None, None),
            };
            let merchant = q.bind::<SqlUuid, _>(ids.0);
            let id = q.bind::<SqlUuid, _>(ids.1);
            let next_check =
                q.bind::<Nullable<Timestamptz>, _>((!status.is_final()).then_some(next_check_at));
            let status = q.bind::<Text, _>(status.as_str());
            let code = q.bind::<Nullable<Text>, _>(code);
            let message = q.bind::<Nullable<Text>, _>(message);
            q.push(format_args!(
                "WITH moved AS (
    UPDATE hold_operations SET status = {status}, failure_code = {code},
        failure_message = {message}, next_check_at = {next_check}
    WHERE merchant_id = {merchant} AND id = {id} RETURNING *)"
            ));
        }
        None => unmoved(&mut q, "hold_operations", ids, current.status.as_str()),
    }
    let row = Answered {
        merchant_id: current.merchant_id,
        resource: (ResourceType::HoldOperation, current.id.0),
        about: CallAbout::HoldOperation,
        settle: Settle {
            from: "moved",
            status: 200,
            open: OPEN_OPERATION_STATUSES,
        },
    };
    finish(q, key, row, call)
}

/// A provider's word that the live capture or void of `payment`'s hold failed (Adyen's
/// CAPTURE or CANCELLATION notification with success false): the operation is refused, its
/// key completed, and the hold is as it was. `None` if no operation was under way.
pub async fn refuse_live_operation(
    conn: &mut PgConn,
    payment: &PaymentAttempt,
    code: &str,
    message: &str,
) -> QueryResult<Option<HoldOperation>> {
    in_transaction(conn, async |conn| {
        let live: Option<HoldOperation> = hold_operations::table
            .filter(hold_operations::merchant_id.eq(payment.merchant_id.0))
            .filter(hold_operations::payment_id.eq(payment.id.0))
            .filter(hold_operations::status.eq_any(["created", "pending"]))
            .select(HoldOperationRow::as_select())
            .for_update()
            .limit(1)
            .load(conn)
            .await
            .and_then(crate::db::one)
            .optional()?
            .map(Into::into);
        let Some(live) = live else {
            return Ok(None);
        };
        let said = Verdict::Refused {
            code: code.to_owned(),
            message: message.to_owned(),
        };
        let by = AnswerKey::Resource(live.idempotency_key.as_deref());
        let (sql, _) = statement(&live, Some(&said), Utc::now(), by, None);
        let refused: HoldOperation = sql
            .load::<HoldOperationRow>(conn)
            .instrument(span("refuse_live_operation"))
            .await
            .and_then(crate::db::one)?
            .into();
        Ok::<_, diesel::result::Error>(Some(refused))
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::snapshot::assert_sql_snapshot;
    use crate::idempotency::in_flight::tests::a_key_in_flight;
    use crate::ids::{HoldOperationId, MerchantId, OrderId, PaymentId};

    fn a_capture(status: AttemptStatus) -> HoldOperation {
        let now = Utc::now();
        HoldOperation {
            id: HoldOperationId::new(),
            merchant_id: MerchantId(uuid::Uuid::nil()),
            payment_id: PaymentId::new(),
            order_id: OrderId::new(),
            kind: HoldKind::Capture,
            status,
            amount: Some(500),
            currency: "EUR".into(),
            provider: "stripe".into(),
            provider_idempotency_key: "payorch_o".into(),
            failure_code: None,
            failure_message: None,
            source: "api".into(),
            reason: None,
            idempotency_key: Some("k".into()),
            next_check_at: Some(now),
            checks: 0,
            created_at: now,
            updated_at: now,
            finished_at: None,
        }
    }

    #[test]
    fn the_statements_read_as_their_snapshots() {
        let call = ProviderCall {
            outcome: ProviderOutcome::Succeeded {
                provider_id: "pi_1".into(),
            },
            http_status: Some(200),
            latency: std::time::Duration::from_millis(5),
        };
        let logged = CallRecord::of(CallKind::Capture, Source::Api, &call);
        let live = a_capture(AttemptStatus::Created);
        let by = AnswerKey::Request(a_key_in_flight());
        let (sql, settling) = statement(&live, Some(&Verdict::Done), Utc::now(), by, Some(&logged));
        assert_sql_snapshot("record_hold_answer", &sql);
        if let Some(settling) = settling {
            settling.written();
        }

        let done = a_capture(AttemptStatus::Succeeded);
        let by = AnswerKey::Resource(done.idempotency_key.as_deref());
        let (sql, _) = statement(&done, None, Utc::now(), by, Some(&logged));
        assert_sql_snapshot("record_hold_unmoved", &sql);

        let refused = Verdict::Refused {
            code: "capture_failed".into(),
            message: "refused".into(),
        };
        let by = AnswerKey::Resource(live.idempotency_key.as_deref());
        let (sql, _) = statement(&live, Some(&refused), Utc::now(), by, None);
        assert_sql_snapshot("refuse_live_operation", &sql);
    }

    #[test]
    fn only_its_own_result_completes_an_operation() {
        let captured = ProviderOutcome::Succeeded {
            provider_id: "pi_1".into(),
        };
        let released = ProviderOutcome::Canceled {
            provider_id: Some("pi_1".into()),
        };
        assert_eq!(verdict(HoldKind::Capture, &captured), Verdict::Done);
        assert_eq!(verdict(HoldKind::Void, &released), Verdict::Done);
        assert_eq!(verdict(HoldKind::Void, &captured), Verdict::Open);
        assert_eq!(verdict(HoldKind::Capture, &released), Verdict::Open);
        for doubt in [
            ProviderOutcome::Unknown {
                reason: "timeout".into(),
            },
            ProviderOutcome::Pending { provider_id: None },
        ] {
            assert_eq!(verdict(HoldKind::Capture, &doubt), Verdict::Open);
            assert_eq!(verdict(HoldKind::Void, &doubt), Verdict::Open);
        }
    }

    #[test]
    fn the_payment_settles_its_operation() {
        use AttemptStatus::*;
        assert_eq!(
            settled_by_payment(HoldKind::Capture, Succeeded),
            Some(Verdict::Done)
        );
        assert_eq!(
            settled_by_payment(HoldKind::Void, Canceled),
            Some(Verdict::Done)
        );
        assert!(matches!(
            settled_by_payment(HoldKind::Void, Succeeded),
            Some(Verdict::Refused { .. })
        ));
        assert!(matches!(
            settled_by_payment(HoldKind::Capture, Canceled),
            Some(Verdict::Refused { .. })
        ));
        assert_eq!(settled_by_payment(HoldKind::Capture, Authorized), None);
        assert_eq!(settled_by_payment(HoldKind::Void, Pending), None);
    }
}
