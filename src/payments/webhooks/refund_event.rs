//! A refund event, recorded and applied to its refund in one transaction.

use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use super::outcome::{EventOutcome, ReceiveError, Received};
use crate::db::schema::provider_webhooks::dsl as w;
use crate::db::transaction::in_transaction;
use crate::db::DbPool;
use crate::ids::ProviderWebhookId;
use crate::payments::refunds::record::{apply_notice, NoticeEffect};
use crate::providers::{RefundNotice, WebhookEvent};

/// A refund event: its row and its effect in one transaction. The row is inserted first,
/// so a second copy waits on the unique `(provider, provider_event_id)` and finds it taken;
/// the refund is locked while it is judged (docs/DESIGN.md, "Refunds").
pub(super) async fn record_refund_event(
    pool: &DbPool,
    provider: &str,
    event: &WebhookEvent,
    notice: &RefundNotice,
) -> Result<Received, ReceiveError> {
    let id = ProviderWebhookId::new();
    let mut conn = pool.get().await?;
    in_transaction(&mut conn, async |conn| {
        let inserted = diesel::insert_into(w::provider_webhooks)
            .values((
                w::id.eq(id.0),
                w::provider.eq(provider),
                w::provider_event_id.eq(&event.id),
                w::event_type.eq(&event.event_type),
                w::outcome.eq(EventOutcome::Ignored.as_str()),
                w::payload.eq(&event.raw),
                w::provider_created_at.eq(event.created),
                w::payload_kept.eq(true),
            ))
            .on_conflict((w::provider, w::provider_event_id))
            .do_nothing()
            .execute(conn)
            .await?;
        if inserted == 0 {
            return Ok(Received::Duplicate);
        }
        let (outcome, detail, refund) = match apply_notice(conn, provider, notice).await? {
            NoticeEffect::NoRefund => (
                EventOutcome::UnknownAttempt,
                format!("no refund for {}", notice.provider_refund_id),
                None,
            ),
            NoticeEffect::Applied { refund, detail } => {
                (EventOutcome::Applied, detail, Some(refund))
            }
            NoticeEffect::Stale { refund, detail } => (EventOutcome::Stale, detail, Some(refund)),
            NoticeEffect::Conflict { refund, detail } => {
                (EventOutcome::Conflict, detail, Some(refund))
            }
        };
        diesel::update(w::provider_webhooks.find(id.0))
            .set((
                w::outcome.eq(outcome.as_str()),
                w::detail.eq(format!("refund: {detail}")),
                w::merchant_id.eq(refund.as_ref().map(|r| r.merchant_id.0)),
                w::attempt_id.eq(refund.as_ref().map(|r| r.payment_id.0)),
            ))
            .execute(conn)
            .await?;
        Ok(Received::Recorded { id, outcome })
    })
    .await
}
