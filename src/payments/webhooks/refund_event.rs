//! A refund event, recorded and applied to its refund in one transaction.

use diesel::sql_types::{Jsonb, Nullable, Text, Timestamptz, Uuid as SqlUuid};
use diesel_async::RunQueryDsl;

use super::outcome::{EventOutcome, ReceiveError, Received};
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
        let inserted = diesel::sql_query(
            "INSERT INTO provider_webhooks (id, provider, provider_event_id, event_type, outcome, \
                 payload, provider_created_at, payload_kept) \
             VALUES ($1, $2, $3, $4, 'ignored', $5, $6, true) \
             ON CONFLICT (provider, provider_event_id) DO NOTHING",
        )
        .bind::<SqlUuid, _>(id.0)
        .bind::<Text, _>(provider)
        .bind::<Text, _>(&event.id)
        .bind::<Text, _>(&event.event_type)
        .bind::<Jsonb, _>(&event.raw)
        .bind::<Timestamptz, _>(event.created)
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
        diesel::sql_query(
            "UPDATE provider_webhooks SET outcome = $2, detail = $3, merchant_id = $4, \
                 attempt_id = $5 WHERE id = $1",
        )
        .bind::<SqlUuid, _>(id.0)
        .bind::<Text, _>(outcome.as_str())
        .bind::<Text, _>(format!("refund: {detail}"))
        .bind::<Nullable<SqlUuid>, _>(refund.as_ref().map(|r| r.merchant_id.0))
        .bind::<Nullable<SqlUuid>, _>(refund.as_ref().map(|r| r.payment_id.0))
        .execute(conn)
        .await?;
        Ok(Received::Recorded { id, outcome })
    })
    .await
}
