//! A dispute event, recorded and applied to its dispute in one transaction
//! ([`disputes::apply`](crate::payments::disputes::apply)). It never moves the payment: a
//! chargeback takes money back from a payment that stays succeeded; the refund cap counts it.

use super::event_row::{insert_once, record};
use super::outcome::{EventOutcome, ReceiveError, Received};
use crate::db::transaction::in_transaction;
use crate::db::DbPool;
use crate::ids::ProviderWebhookId;
use crate::payments::disputes::apply::{apply_notice, Effect};
use crate::providers::{DisputeNotice, WebhookEvent};

/// A dispute event: its row and its effect in one transaction. The row is inserted first, so
/// a second copy waits on the unique `(provider, provider_event_id)` and finds it taken.
pub(super) async fn record_dispute_event(
    pool: &DbPool,
    provider: &str,
    event: &WebhookEvent,
    notice: &DisputeNotice,
) -> Result<Received, ReceiveError> {
    let id = ProviderWebhookId::new();
    let mut conn = pool.get().await?;
    let received = in_transaction::<_, ReceiveError>(&mut conn, async |conn| {
        if !insert_once(conn, id, provider, event).await? {
            return Ok(Received::Duplicate);
        }
        let told = apply_notice(conn, provider, notice, &event.event_type, event.created).await?;
        let outcome = match told.effect {
            Effect::Applied => EventOutcome::Applied,
            Effect::Stale => EventOutcome::Stale,
            Effect::Conflict => EventOutcome::Conflict,
            Effect::UnknownPayment => EventOutcome::UnknownAttempt,
        };
        let detail = format!("dispute: {}", told.detail);
        record(conn, id, outcome, &detail, told.owner).await?;
        Ok(Received::Recorded { id, outcome })
    })
    .await?;
    Ok(received)
}
