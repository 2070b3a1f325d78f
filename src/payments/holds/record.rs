//! What a provider's answer to a capture or void does, in one transaction: the operation's
//! move, the payment's move when the hold ended (captured, or released), the key and the call
//! log. The payment decides: once it is final, its operation follows it, whatever the late
//! answer says (a webhook may have told of the capture first).

use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel::sql_types::{Nullable, Text, Timestamptz, Uuid as SqlUuid};
use diesel_async::{AsyncPgConnection, RunQueryDsl};

use super::{HoldError, HoldKind, HoldOperation, HoldOperationRow};
use crate::db::schema::hold_operations;
use crate::db::transaction::in_transaction;
use crate::idempotency::in_flight::complete_for_resource;
use crate::idempotency::{InFlightKey, Recorded, ResourceType};
use crate::payments::attempts::call_log::log_hold_call;
use crate::payments::attempts::transition::apply;
use crate::payments::attempts::{find_attempt, CallKind, PaymentAttempt, Source};
use crate::payments::metrics::PaymentMetrics;
use crate::payments::service::settle_key;
use crate::payments::status::AttemptStatus;
use crate::providers::{ProviderCall, ProviderOutcome};

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

/// Completes the client's key that asked for `operation`, for whoever finished it other than
/// its request (the reconciler, a provider's webhook), as a refund's `settle_key` does; a
/// void the reconciler asked for has no key.
async fn settle_operation_key(
    conn: &mut AsyncPgConnection,
    operation: &HoldOperation,
) -> QueryResult<()> {
    match &operation.idempotency_key {
        Some(key) => {
            complete_for_resource(conn, operation.merchant_id, key, &recorded(operation)).await
        }
        None => Ok(()),
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
    conn: &mut AsyncPgConnection,
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
        let mut moved = current.clone();
        if !current.status.is_final() {
            let mut said = call.map_or(Verdict::Open, |c| verdict(current.kind, &c.outcome));
            if let (Verdict::Done, Some(call), false) = (&said, call, payment.status.is_final()) {
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
                said = settled;
            }
            moved = move_operation(conn, &current, &said, next_check_at).await?;
            if payment.status.is_final() {
                settle_key(conn, &payment).await?;
            }
        }
        match key {
            Some(key) => key.complete(conn, &recorded(&moved)).await?,
            None => settle_operation_key(conn, &moved).await?,
        }
        if let Some(call) = call {
            log_hold_call(
                conn,
                (moved.merchant_id, moved.payment_id, moved.id),
                kind,
                called_by,
                call,
            )
            .await?;
        }
        Ok::<_, HoldError>((moved, payment))
    })
    .await
}

/// The operation's move for `said`: final, or still open and asked about again at
/// `next_check_at`.
async fn move_operation(
    conn: &mut AsyncPgConnection,
    current: &HoldOperation,
    said: &Verdict,
    next_check_at: DateTime<Utc>,
) -> QueryResult<HoldOperation> {
    let (status, code, message) = match said {
        Verdict::Done => (AttemptStatus::Succeeded, None, None),
        Verdict::Refused { code, message } => (
            AttemptStatus::Failed,
            Some(code.as_str()),
            Some(message.as_str()),
        ),
        Verdict::Open => (AttemptStatus::Pending, None, None),
    };
    let row: HoldOperationRow = diesel::sql_query(
        "UPDATE hold_operations SET status = $3, failure_code = $4, failure_message = $5, \
             next_check_at = CASE WHEN $3 IN ('created', 'pending') THEN $6 END \
         WHERE merchant_id = $1 AND id = $2 RETURNING *",
    )
    .bind::<SqlUuid, _>(current.merchant_id.0)
    .bind::<SqlUuid, _>(current.id.0)
    .bind::<Text, _>(status.as_str())
    .bind::<Nullable<Text>, _>(code)
    .bind::<Nullable<Text>, _>(message)
    .bind::<Timestamptz, _>(next_check_at)
    .load(conn)
    .await
    .and_then(crate::db::one)?;
    Ok(row.into())
}

/// A provider's word that the live capture or void of `payment`'s hold failed (Adyen's
/// CAPTURE or CANCELLATION notification with success false): the operation is refused, its
/// key completed, and the hold is as it was. `None` if no operation was under way.
pub async fn refuse_live_operation(
    conn: &mut AsyncPgConnection,
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
        let refused = move_operation(conn, &live, &said, Utc::now()).await?;
        settle_operation_key(conn, &refused).await?;
        Ok::<_, diesel::result::Error>(Some(refused))
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

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
