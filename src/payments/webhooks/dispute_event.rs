//! A dispute event, recorded and applied to its dispute in one transaction
//! ([`disputes::apply`](crate::payments::disputes::apply)). It never moves the payment: a
//! chargeback takes money back from a payment that stays succeeded; the refund cap counts it.

use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use super::outcome::{EventOutcome, ReceiveError, Received};
use crate::db::schema::provider_webhooks::dsl as w;
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
        let told = apply_notice(conn, provider, notice, &event.event_type, event.created).await?;
        let outcome = match told.effect {
            Effect::Applied => EventOutcome::Applied,
            Effect::Stale => EventOutcome::Stale,
            Effect::Conflict => EventOutcome::Conflict,
            Effect::UnknownPayment => EventOutcome::UnknownAttempt,
        };
        diesel::update(w::provider_webhooks.find(id.0))
            .set((
                w::outcome.eq(outcome.as_str()),
                w::detail.eq(format!("dispute: {}", told.detail)),
                w::merchant_id.eq(told.owner.map(|o| o.0)),
                w::attempt_id.eq(told.owner.map(|o| o.1)),
            ))
            .execute(conn)
            .await?;
        Ok(Received::Recorded { id, outcome })
    })
    .await?;
    Ok(received)
}
