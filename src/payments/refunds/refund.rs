//! The refund flow, behind `POST /v1/payments/{id}/refunds`, entered by [`refund`] with one
//! [`RefundContext`] (as an order's commands and a payment enter): the fields are validated,
//! then the claim statement with [`CreateRefund`], the provider call, then its outcome
//! ([`super::record`]).

use chrono::Utc;
use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use super::keyed::{CreateRefund, RefundMade};
use super::record::{record, recorded};
use super::{refund_request, Refund, RefundError, Refunded};
use crate::db::schema::payment_attempts;
use crate::db::DbPool;
use crate::db::PgConn;
use crate::idempotency::{claim, InFlightKey, Keyed, RecoveryPoint};
use crate::ids::{MerchantId, PaymentId};
use crate::payments::attempts::{find_attempt, CallKind, Source};
use crate::payments::money::{Amount, MinorUnits};
use crate::payments::orders::{FieldProblems, MAX_DESCRIPTION_LEN};
use crate::payments::service::{Context, Payments};
use crate::payments::status::AttemptStatus;

/// Everything one refund request needs: what to give back is its input.
pub type RefundContext<'a> = Context<'a, RefundInput>;

/// A refund request as the client sent it, read but not yet validated.
#[derive(Debug, Clone)]
pub struct RefundInput {
    /// The succeeded attempt to give money back from.
    pub payment_id: PaymentId,
    /// In minor units, 1 to 10^12; `None`: all that is left to refund.
    pub amount: Option<MinorUnits>,
    /// Free text for the merchant's records, up to 1000 characters once trimmed.
    pub reason: Option<String>,
}

/// The amount (`None`: what is left) and the reason (trimmed; empty is none), or every field
/// problem at once.
fn validate(input: &RefundInput) -> Result<(Option<i64>, Option<&str>), RefundError> {
    let mut problems = FieldProblems::new();
    let amount = match input.amount.map(Amount::parse).transpose() {
        Ok(amount) => amount.map(Amount::get),
        Err(message) => {
            problems.push(("/amount".into(), message));
            None
        }
    };
    let reason = input.reason.as_deref().map(str::trim);
    if reason.is_some_and(|r| r.chars().count() > MAX_DESCRIPTION_LEN) {
        problems.push((
            "/reason".into(),
            format!("must be at most {MAX_DESCRIPTION_LEN} characters"),
        ));
    }
    if !problems.is_empty() {
        return Err(RefundError::Invalid(problems));
    }
    Ok((amount, reason.filter(|r| !r.is_empty())))
}

/// Refunds the context's amount (`None`: what is left) of its payment, once per key.
pub async fn refund(ctx: &RefundContext<'_>) -> Result<Refunded, RefundError> {
    let (amount, reason) = validate(&ctx.input)?;
    let (pool, keys, payments, keyed) = (ctx.pool, ctx.keys, ctx.payments, ctx.keyed);
    let payment_id = ctx.input.payment_id;
    let lease =
        chrono::Duration::from_std(keys.settings.lease).unwrap_or(chrono::Duration::seconds(30));
    let work = CreateRefund::new(payment_id, amount, reason, Utc::now() + lease);
    let refund = |made: RefundMade| {
        made.refund()
            .ok_or_else(|| RefundError::Inconsistent("a refund key names no refund".into()))
    };
    match claim(pool, keys, keyed, &work).await? {
        Keyed::Made {
            made,
            key: Some(key),
        } => finish(pool, payments, refund(made)?, key).await,
        Keyed::Replayed { status, current } => Ok(Refunded {
            refund: refund(current)?,
            status,
            replayed: true,
        }),
        Keyed::Resumed { current, key } if key.recovery_point() == RecoveryPoint::RefundCreated => {
            // An earlier request made the refund and died: resume it, never make another.
            finish(pool, payments, refund(current)?, key).await
        }
        Keyed::Resumed { key, .. } => Err(RefundError::Inconsistent(format!(
            "a refund key in flight at recovery point {}",
            key.recovery_point().as_str()
        ))),
        Keyed::Made { key: None, .. } => Err(RefundError::Inconsistent(
            "a refund key was not left in flight".into(),
        )),
        Keyed::Declined { .. } => {
            let mut conn = pool.get().await?;
            Err(why_refused(&mut conn, keyed.merchant_id, payment_id).await?)
        }
    }
}

/// Why the database refused a refund of `payment_id`, as the payment stands now.
async fn why_refused(
    conn: &mut PgConn,
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
    // What chargebacks took back is not refundable either (docs/guides/disputes.md, "Refunds
    // and disputes"): the database's cap counts it, and so does the figure the merchant is told.
    let disputed: i64 = payment_attempts::table
        .find((merchant_id.0, payment_id.0))
        .select(payment_attempts::dispute_held)
        .load(conn)
        .await
        .and_then(crate::db::one)?;
    Ok(RefundError::ExceedsPayment {
        refundable: (payment.amount_taken() - payment.refund_held - disputed).max(0),
    })
}

/// Steps 2 and 3: the provider call, then its outcome in one transaction.
async fn finish(
    pool: &DbPool,
    payments: &Payments,
    refund: Refund,
    key: InFlightKey,
) -> Result<Refunded, RefundError> {
    let refund = if refund.status.is_final() {
        let mut conn = pool.get().await?;
        key.complete(&mut conn, &recorded(&refund)).await?;
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
            Some(key),
        )
        .await?
    };
    Ok(Refunded {
        refund,
        status: 201,
        replayed: false,
    })
}
