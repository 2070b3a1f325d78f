//! The reconciler's part of refunds: the queue of open refunds whose check is due, and the
//! check itself (also support's "reconcile now").

use chrono::Utc;
use diesel_async::RunQueryDsl;

use super::record::record;
use super::{refund_request, Refund, RefundError, RefundRow};
use crate::db::DbPool;
use crate::payments::attempts::{CallKind, Source};
use crate::payments::due::{self, DueQueue};
use crate::payments::reconciler::settings::NO_RECORD;
use crate::payments::service::Payments;
use crate::providers::{Lookups, ProviderOutcome};

/// The refunds' due queue: a refund's statuses are an attempt's (docs/DESIGN.md, "Refunds"),
/// without the hold.
const DUE_REFUNDS: DueQueue = DueQueue {
    table: "refunds",
    open: open_refund_statuses!(),
};

/// Takes up to `limit` refunds whose check is due and hides them from other replicas for
/// `claim` (the attempts' queue, `reconciler/mod.rs`, works the same way).
pub async fn claim_due(
    pool: &DbPool,
    claim: std::time::Duration,
    limit: i64,
) -> Result<Vec<Refund>, RefundError> {
    let mut conn = pool.get().await?;
    let rows: Vec<RefundRow> = due::claim_due(DUE_REFUNDS, limit, claim)
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
    let within_key_window = Utc::now() - refund.created_at < settings.key_window();
    // A provider without lookups (Adyen) tells a refund's outcome by notification: once the
    // refund is named, or its key is no longer kept, there is nothing to ask (before that, a
    // resend under its key fetches a lost answer), and a refund never told stays open for a
    // human, never guessed.
    if provider.lookups() == Lookups::NotificationsOnly
        && (refund.provider_refund_id.is_some() || !within_key_window)
    {
        let mut conn = pool.get().await?;
        let next_check = Utc::now() + settings.next_check(refund.checks);
        reschedule(&mut conn, &refund, next_check).await?;
        return Ok(refund);
    }
    let (call, kind) = match &refund.provider_refund_id {
        Some(id) => (provider.retrieve_refund(id).await, CallKind::RetrieveRefund),
        None if within_key_window => {
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
                    decline: None,
                };
            }
            (call, CallKind::List)
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

/// The next check of a refund that waits for its notification, with no call made.
async fn reschedule(
    conn: &mut crate::db::PgConn,
    refund: &Refund,
    next_check: chrono::DateTime<Utc>,
) -> diesel::QueryResult<()> {
    use crate::db::schema::refunds::dsl as r;
    use diesel::{ExpressionMethods, QueryDsl};
    diesel::update(r::refunds.find((refund.merchant_id.0, refund.id.0)))
        .filter(r::status.eq_any(["created", "pending"]))
        .set(r::next_check_at.eq(next_check))
        .execute(conn)
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_claim_reads_as_its_snapshot() {
        crate::payments::due::assert_claim_snapshot(super::DUE_REFUNDS);
    }
}
