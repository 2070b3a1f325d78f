//! The capture and void flow, behind `POST /v1/payments/{id}/capture` and `…/cancel`, entered
//! by [`operate`] with one [`HoldContext`] (as a refund enters): the amount is validated, then
//! the claim statement with [`StartHoldOperation`], the provider call under the operation's
//! key, then its answer ([`super::record`]). The reconciler voids expiring holds and abandoned
//! challenges through [`void_without_key`], the same call and record without a client key.

use chrono::Utc;
use diesel::sql_types::Uuid as SqlUuid;
use diesel::OptionalExtension;
use diesel_async::RunQueryDsl;

use super::keyed::{HoldMade, StartHoldOperation};
use super::record::{record, recorded};
use super::{
    hold_call, operations_of_payment, reason, HoldCall, HoldError, HoldKind, HoldOperation,
    HoldOperationRow, Operated,
};
use crate::db::statement::Statement;
use crate::db::DbPool;
use crate::db::PgConn;
use crate::idempotency::{claim, InFlightKey, Keyed, RecoveryPoint};
use crate::ids::{MerchantId, PaymentId};
use crate::payments::attempts::{find_attempt, CallKind, PaymentAttempt, Source};
use crate::payments::money::{Amount, MinorUnits};
use crate::payments::service::{Context, Payments};
use crate::payments::status::AttemptStatus;
use crate::providers::ProviderCall;

/// Everything one capture or void request needs.
pub type HoldContext<'a> = Context<'a, HoldInput>;

/// A capture or void request as the client sent it, read but not yet validated.
#[derive(Debug, Clone)]
pub struct HoldInput {
    pub payment_id: PaymentId,
    pub kind: HoldKind,
    /// A capture's amount in minor units; `None`: the whole hold.
    pub amount: Option<MinorUnits>,
    /// Who asked: the merchant's API, or support's console.
    pub source: Source,
}

fn validate(input: &HoldInput) -> Result<Option<i64>, HoldError> {
    match input.amount.map(Amount::parse).transpose() {
        Ok(amount) => Ok(amount.map(Amount::get)),
        Err(message) => Err(HoldError::Invalid(vec![("/amount".into(), message)])),
    }
}

/// Captures or voids the context's payment, once per key.
pub async fn operate(ctx: &HoldContext<'_>) -> Result<Operated, HoldError> {
    let amount = validate(&ctx.input)?;
    let (pool, keys, payments, keyed) = (ctx.pool, ctx.keys, ctx.payments, ctx.keyed);
    let HoldInput {
        payment_id,
        kind,
        source,
        ..
    } = ctx.input;
    let lease =
        chrono::Duration::from_std(keys.settings.lease).unwrap_or(chrono::Duration::seconds(30));
    let why = (kind == HoldKind::Void).then_some(reason::VOIDED);
    let work = StartHoldOperation::new(payment_id, kind, amount, source, why, Utc::now() + lease);
    let parts = |made: HoldMade| {
        made.parts().ok_or_else(|| {
            HoldError::Inconsistent("a capture or void key names no operation".into())
        })
    };
    match claim(pool, keys, keyed, &work).await? {
        Keyed::Made {
            made,
            key: Some(key),
        } => {
            let (operation, payment) = parts(made)?;
            finish(pool, payments, operation, payment, Some(key)).await
        }
        Keyed::Replayed { status, current } => {
            let (operation, payment) = parts(current)?;
            Ok(Operated {
                operation,
                payment,
                status,
                replayed: true,
            })
        }
        // An earlier request made the operation and died: resume it, never make another.
        Keyed::Resumed { current, key }
            if key.recovery_point() == RecoveryPoint::HoldOperationCreated =>
        {
            let (operation, payment) = parts(current)?;
            finish(pool, payments, operation, payment, Some(key)).await
        }
        Keyed::Resumed { key, .. } => Err(HoldError::Inconsistent(format!(
            "a capture or void key in flight at recovery point {}",
            key.recovery_point().as_str()
        ))),
        Keyed::Made { key: None, .. } => Err(HoldError::Inconsistent(
            "a capture or void key was not left in flight".into(),
        )),
        Keyed::Declined { .. } => {
            let mut conn = pool.get().await?;
            Err(why_refused(&mut conn, keyed.merchant_id, payment_id, kind, amount).await?)
        }
    }
}

/// Why the database refused an operation on `payment_id`, as the payment stands now.
pub(crate) async fn why_refused(
    conn: &mut PgConn,
    merchant_id: MerchantId,
    payment_id: PaymentId,
    kind: HoldKind,
    amount: Option<i64>,
) -> Result<HoldError, HoldError> {
    let Some(payment) = find_attempt(conn, Some(merchant_id), payment_id).await? else {
        return Ok(HoldError::PaymentNotFound);
    };
    let live = operations_of_payment(conn, merchant_id, payment_id)
        .await?
        .into_iter()
        .find(|o| o.status != AttemptStatus::Failed);
    if let Some(live) = live.filter(|_| !payment.status.is_final()) {
        return Ok(HoldError::InProgress { operation: live.id });
    }
    let held = payment.status == AttemptStatus::Authorized
        && payment.capture_method == crate::providers::CaptureMethod::Manual;
    if kind == HoldKind::Capture && held && amount.is_some_and(|a| a > payment.amount) {
        return Ok(HoldError::ExceedsHold {
            capturable: payment.amount,
        });
    }
    Ok(HoldError::NotHeld {
        kind,
        status: payment.status,
    })
}

/// Steps 2 and 3: the provider call under the operation's key, then its answer.
async fn finish(
    pool: &DbPool,
    payments: &Payments,
    operation: HoldOperation,
    payment: PaymentAttempt,
    key: Option<InFlightKey>,
) -> Result<Operated, HoldError> {
    if operation.status.is_final() {
        if let Some(key) = key {
            let mut conn = pool.get().await?;
            key.complete(&mut conn, &recorded(&operation)).await?;
        }
        return Ok(Operated {
            operation,
            payment,
            status: 200,
            replayed: false,
        });
    }
    let call = send(payments, &operation, &payment).await;
    let next_check = Utc::now() + payments.reconciler.first_check();
    let mut conn = pool.get().await?;
    let (operation, payment) = record(
        &mut conn,
        &payments.metrics,
        &operation,
        Some(&call),
        (Source::ProviderResponse, Source::Api),
        next_check,
        key,
    )
    .await?;
    Ok(Operated {
        operation,
        payment,
        status: 200,
        replayed: false,
    })
}

/// The provider call of `operation`, under its own key: the same on every resend.
pub(super) async fn send(
    payments: &Payments,
    operation: &HoldOperation,
    payment: &PaymentAttempt,
) -> ProviderCall {
    send_under(
        payments,
        operation,
        payment,
        &operation.provider_idempotency_key,
    )
    .await
}

/// The provider call of `operation` under `key` (the reconciler's fresh key for a capture or
/// void the provider's own state shows not in effect; `reconcile::ask` says why that is safe).
pub(super) async fn send_under(
    payments: &Payments,
    operation: &HoldOperation,
    payment: &PaymentAttempt,
    key: &str,
) -> ProviderCall {
    let provider = payments.adapter(&operation.provider);
    let (kind, call) = match hold_call(operation, payment) {
        HoldCall::Capture(mut request) => {
            request.idempotency_key = key.to_owned();
            (CallKind::Capture, provider.capture(&request).await)
        }
        HoldCall::Cancel(mut request) => {
            request.idempotency_key = key.to_owned();
            (CallKind::Cancel, provider.cancel(&request).await)
        }
    };
    payments
        .metrics
        .provider_call(&operation.provider, kind, &call);
    call
}

/// A void of `payment` without a client key, asked for by `source` for `why`: the
/// reconciler's (an expiring hold, an abandoned challenge) and support's, both safe to ask
/// twice. Sent at once; `None` if the database refused it (the payment holds nothing, or its
/// hold already has a live operation, which is then followed instead).
pub async fn void_without_key(
    pool: &DbPool,
    payments: &Payments,
    payment: PaymentAttempt,
    (source, why): (Source, &'static str),
) -> Result<Option<Operated>, HoldError> {
    let work = StartHoldOperation::new(
        payment.id,
        HoldKind::Void,
        None,
        source,
        Some(why),
        Utc::now() + payments.reconciler.first_check(),
    );
    let mut q = Statement::new();
    let merchant = q.bind::<SqlUuid, _>(payment.merchant_id.0);
    q.push("WITH ");
    work.insert(&mut q, merchant, "NULL", "(SELECT 1) AS go");
    q.push("\nSELECT * FROM made_operation");
    let made: Option<HoldOperationRow> = {
        let mut conn = pool.get().await?;
        match q
            .finish()
            .load(&mut conn)
            .await
            .and_then(crate::db::one)
            .optional()
        {
            Ok(row) => row,
            Err(diesel::result::Error::DatabaseError(kind, info))
                if work.refuses(&kind, info.constraint_name()) =>
            {
                return Ok(None);
            }
            Err(err) => return Err(err.into()),
        }
    };
    let Some(operation) = made.map(HoldOperation::from) else {
        return Ok(None);
    };
    tracing::info!(payment = %payment.id, operation = %operation.id, reason = why,
        source = source.as_str(), "voiding a hold");
    finish(pool, payments, operation, payment, None)
        .await
        .map(Some)
}
