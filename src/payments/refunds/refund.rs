//! The refund flow, behind `POST /v1/payments/{id}/refunds`: the claim statement with
//! [`CreateRefund`], the provider call, then its outcome ([`super::record`]).

use chrono::Utc;
use diesel_async::AsyncPgConnection;

use super::keyed::{read_refund, CreateRefund};
use super::record::{record, settle_key};
use super::{refund_request, Refund, RefundError, Refunded, REFUND_CREATED};
use crate::db::DbPool;
use crate::idempotency::{claim, Claimed, KeyedRequest, Keys};
use crate::ids::{MerchantId, PaymentId};
use crate::payments::attempts::{find_attempt, CallKind, Source};
use crate::payments::service::Payments;
use crate::payments::status::AttemptStatus;

/// Refunds `amount` (`None`: what is left) of payment `payment_id`, once per key.
pub async fn refund(
    pool: &DbPool,
    keys: &Keys,
    payments: &Payments,
    keyed: &KeyedRequest,
    payment_id: PaymentId,
    amount: Option<i64>,
    reason: Option<&str>,
) -> Result<Refunded, RefundError> {
    let lease =
        chrono::Duration::from_std(keys.settings.lease).unwrap_or(chrono::Duration::seconds(30));
    let work = CreateRefund::new(payment_id, amount, reason, Utc::now() + lease);
    match claim(pool, keys, keyed, &work).await? {
        Claimed::Done { fresh } => {
            let refund = read_refund(fresh)?;
            finish(pool, payments, refund).await
        }
        Claimed::Replay { status, current } => Ok(Refunded {
            refund: read_refund(current)?,
            status,
            replayed: true,
        }),
        Claimed::TakenOver { stored, current } if stored.recovery_point == REFUND_CREATED => {
            // An earlier request made the refund and died: resume it, never make another.
            finish(pool, payments, read_refund(current)?).await
        }
        Claimed::TakenOver { stored, .. } => Err(RefundError::Inconsistent(format!(
            "a refund key in flight at recovery point {}",
            stored.recovery_point
        ))),
        Claimed::Declined { .. } => {
            let mut conn = pool.get().await?;
            Err(why_refused(&mut conn, keyed.merchant_id, payment_id).await?)
        }
    }
}

/// Why the database refused a refund of `payment_id`, as the payment stands now.
async fn why_refused(
    conn: &mut AsyncPgConnection,
    merchant_id: MerchantId,
    payment_id: PaymentId,
) -> Result<RefundError, RefundError> {
    let Some(payment) = find_attempt(conn, Some(merchant_id), payment_id).await? else {
        return Ok(RefundError::PaymentNotFound);
    };
    if payment.status != AttemptStatus::Succeeded {
        return Ok(RefundError::NotRefundable {
            status: payment.status,
        });
    }
    Ok(RefundError::ExceedsPayment {
        refundable: payment.amount - payment.refund_held,
    })
}

/// Steps 2 and 3: the provider call, then its outcome in one transaction.
async fn finish(
    pool: &DbPool,
    payments: &Payments,
    refund: Refund,
) -> Result<Refunded, RefundError> {
    let refund = if refund.status.is_final() {
        let mut conn = pool.get().await?;
        settle_key(&mut conn, &refund).await?;
        refund
    } else {
        let request = {
            let mut conn = pool.get().await?;
            refund_request(&mut conn, &refund).await?
        };
        let call = payments
            .adapter(&refund.provider)
            .create_refund(&request)
            .await;
        let next_check = Utc::now() + payments.reconciler.first_check();
        let mut conn = pool.get().await?;
        record(
            &mut conn,
            refund,
            &call,
            CallKind::CreateRefund,
            (Source::ProviderResponse, Source::Api),
            next_check,
        )
        .await?
    };
    Ok(Refunded {
        refund,
        status: 201,
        replayed: false,
    })
}
