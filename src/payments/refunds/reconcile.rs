//! The reconciler's part of refunds: the queue of open refunds whose check is due, and the
//! check itself (also support's "reconcile now").

use chrono::Utc;
use diesel::sql_types::{BigInt, Interval};
use diesel_async::RunQueryDsl;

use super::record::record;
use super::{refund_request, Refund, RefundError, RefundRow};
use crate::db::DbPool;
use crate::payments::attempts::{CallKind, Source};
use crate::payments::reconciler::settings::{pg_interval, NO_RECORD};
use crate::payments::service::Payments;
use crate::providers::ProviderOutcome;

/// Takes up to `limit` refunds whose check is due and hides them from other replicas for
/// `claim` (the attempts' queue, `reconciler/mod.rs`, works the same way).
pub async fn claim_due(
    pool: &DbPool,
    claim: std::time::Duration,
    limit: i64,
) -> Result<Vec<Refund>, RefundError> {
    let mut conn = pool.get().await?;
    // A refund's statuses are an attempt's (docs/DESIGN.md, "Refunds").
    let rows: Vec<RefundRow> = diesel::sql_query(concat!(
        "UPDATE refunds r SET next_check_at = now() + $1, checks = r.checks + 1 \
         FROM (SELECT merchant_id, id FROM refunds \
               WHERE status IN ",
        open_refund_statuses!(),
        " AND next_check_at <= now() \
               ORDER BY next_check_at LIMIT $2 FOR UPDATE SKIP LOCKED) due \
         WHERE r.merchant_id = due.merchant_id AND r.id = due.id \
         RETURNING r.*"
    ))
    .bind::<Interval, _>(pg_interval(claim))
    .bind::<BigInt, _>(limit)
    .load(&mut conn)
    .await?;
    Ok(rows.into_iter().map(Into::into).collect())
}

/// Asks the provider about an open refund and records the answer: by its refund id when
/// known; else by resending the create under the refund's own key, while the provider still
/// remembers keys (a replay, never a second refund); past that window, by looking for it
/// among the charge's refunds (a resend then could refund twice). Not there either: the
/// provider never made it, and it fails `provider_no_record`, freeing its amount.
pub async fn check(
    pool: &DbPool,
    payments: &Payments,
    refund: Refund,
    source: Source,
) -> Result<Refund, RefundError> {
    if refund.status.is_final() {
        return Ok(refund);
    }
    let settings = &payments.reconciler;
    let provider = payments.adapter(&refund.provider);
    let (call, kind) = match &refund.provider_refund_id {
        Some(id) => (provider.retrieve_refund(id).await, CallKind::RetrieveRefund),
        None if Utc::now() - refund.created_at < settings.key_window() => {
            let request = {
                let mut conn = pool.get().await?;
                refund_request(&mut conn, &refund).await?
            };
            (
                provider.create_refund(&request).await,
                CallKind::CreateRefund,
            )
        }
        None => {
            let request = {
                let mut conn = pool.get().await?;
                refund_request(&mut conn, &refund).await?
            };
            let mut call = provider
                .find_refund(&request.provider_payment_id, &request.refund_id)
                .await;
            if call.outcome == ProviderOutcome::NotFound {
                call.outcome = ProviderOutcome::Failed {
                    code: NO_RECORD.into(),
                    message: "the provider has no such refund past its key window: nothing \
                              was refunded"
                        .into(),
                    provider_id: None,
                };
            }
            (call, CallKind::Search)
        }
    };
    let next_check = Utc::now() + settings.next_check(refund.checks);
    let mut conn = pool.get().await?;
    record(
        &mut conn,
        refund,
        &call,
        kind,
        (source, source),
        next_check,
        None,
    )
    .await
}
