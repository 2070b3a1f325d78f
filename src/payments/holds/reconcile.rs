//! The reconciler's side of captures and voids: operations whose answer is not known are
//! asked about again under their own key, never sent under another; an operation whose payment
//! became final meanwhile (a webhook told of the capture) follows the payment without a call.
//! And the holds nobody finishes: an `authorized` payment near the end of its hold, and a
//! challenge the payer left, are found by [`needs_void`] and voided by the reconciler
//! ([`super::operate::void_without_key`]).

use chrono::Utc;
use diesel_async::RunQueryDsl;

use super::operate::{send, send_under};
use super::record::{record, verdict, Verdict, OPEN_OPERATION_STATUSES};
use super::{reason, HoldError, HoldOperation, HoldOperationRow};
use crate::db::DbPool;
use crate::payments::attempts::transition::HOLD_EXPIRY_MARGIN;
use crate::payments::attempts::{find_attempt, PaymentAttempt, Source};
use crate::payments::due::{self, DueQueue};
use crate::payments::reconciler::settings::to_chrono;
use crate::payments::service::Payments;
use crate::payments::status::AttemptStatus;
use crate::providers::{Lookups, ProviderCall};

/// The operation's one question this round. At its first check: a resend under its own key,
/// which fetches a lost answer. After that, where the provider has read-after-write lookups
/// (Stripe), its key may replay a saved `500` for ever ("whatever it was"), so the charge is
/// retrieved instead: a capture or void in effect is done; one not in effect is sent again
/// under a fresh key. That cannot capture or release twice: the provider captures or
/// releases an intent only once, and a second try answers `payment_intent_unexpected_state`
/// with the intent, read as the state it names. Adyen has no lookup: the resend under the
/// operation's own key, and the notification, tell.
async fn ask(
    payments: &Payments,
    operation: &HoldOperation,
    payment: &PaymentAttempt,
) -> ProviderCall {
    let provider = payments.adapter(&operation.provider);
    let charge = payment.provider_payment_id.as_deref();
    let (Lookups::ReadAfterWrite, Some(charge), 2..) =
        (provider.lookups(), charge, operation.checks)
    else {
        return send(payments, operation, payment).await;
    };
    let asked = provider.retrieve(charge).await;
    if verdict(operation.kind, &asked.outcome) == Verdict::Done {
        return asked;
    }
    let fresh = format!(
        "{}.{}",
        operation.provider_idempotency_key, operation.checks
    );
    send_under(payments, operation, payment, &fresh).await
}

/// The captures' and voids' due queue: an operation's statuses are an attempt's, without the
/// hold, as a refund's.
const DUE_OPERATIONS: DueQueue = DueQueue {
    table: "hold_operations",
    open: OPEN_OPERATION_STATUSES,
};

/// Takes up to `limit` due operations and hides them from other replicas for `claim`.
pub async fn claim_due(
    pool: &DbPool,
    claim: std::time::Duration,
    limit: i64,
) -> Result<Vec<HoldOperation>, HoldError> {
    let mut conn = pool.get().await?;
    let rows: Vec<HoldOperationRow> = due::claim_due(DUE_OPERATIONS, limit, claim)
        .load(&mut conn)
        .await?;
    Ok(rows.into_iter().map(Into::into).collect())
}

/// Resends an open operation under its own key (the provider answers a replay, never a
/// second capture), or lets its final payment settle it, and records the outcome.
pub async fn check(
    pool: &DbPool,
    payments: &Payments,
    operation: HoldOperation,
    source: Source,
) -> Result<HoldOperation, HoldError> {
    if operation.status.is_final() {
        return Ok(operation);
    }
    let payment = {
        let mut conn = pool.get().await?;
        find_attempt(&mut conn, Some(operation.merchant_id), operation.payment_id)
            .await?
            .ok_or(HoldError::PaymentNotFound)?
    };
    // A final payment settles the operation without a call (`record` reads it).
    let call = if payment.status.is_final() {
        None
    } else {
        Some(ask(payments, &operation, &payment).await)
    };
    let next_check = Utc::now() + payments.reconciler.next_check(operation.checks);
    let mut conn = pool.get().await?;
    let (operation, _) = record(
        &mut conn,
        &payments.metrics,
        &operation,
        call.as_ref(),
        (source, source),
        next_check,
        None,
    )
    .await?;
    Ok(operation)
}

/// What a check of `payment` leaves for a void: a hold within the margin of its end, or a
/// challenge older than the challenge timeout. Only asked after the provider was asked about
/// the payment, so a hold captured or a challenge passed meanwhile is known first.
pub fn needs_void(payments: &Payments, payment: &PaymentAttempt) -> Option<&'static str> {
    let now = Utc::now();
    match payment.status {
        AttemptStatus::Authorized => payment
            .authorized_until
            .filter(|until| *until - HOLD_EXPIRY_MARGIN <= now)
            .map(|_| reason::AUTHORIZATION_EXPIRED),
        AttemptStatus::Pending => payment
            .next_action
            .as_ref()
            .filter(|_| {
                payment.created_at + to_chrono(payments.reconciler.challenge_timeout) <= now
            })
            .map(|_| reason::CHALLENGE_ABANDONED),
        _ => None,
    }
}

/// Whether `payment` was ever asked to be voided for `why` (whatever came of it).
pub async fn was_voided_for(
    conn: &mut crate::db::PgConn,
    payment: &PaymentAttempt,
    why: &str,
) -> diesel::QueryResult<bool> {
    use crate::db::schema::hold_operations::dsl as o;
    use diesel::{ExpressionMethods, QueryDsl};
    let found: Vec<uuid::Uuid> = o::hold_operations
        .filter(o::merchant_id.eq(payment.merchant_id.0))
        .filter(o::payment_id.eq(payment.id.0))
        .filter(o::kind.eq("void"))
        .filter(o::reason.eq(why))
        .select(o::id)
        .limit(1)
        .load(conn)
        .await?;
    Ok(!found.is_empty())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_claim_reads_as_its_snapshot() {
        crate::payments::due::assert_claim_snapshot(super::DUE_OPERATIONS);
    }
}
