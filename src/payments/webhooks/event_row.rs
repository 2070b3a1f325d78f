//! A provider event's row in `provider_webhooks`, for the events recorded and applied in one
//! transaction (refunds', disputes'): inserted first, then told what the event did.

use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use super::outcome::EventOutcome;
use crate::db::schema::provider_webhooks::dsl as w;
use crate::db::PgConn;
use crate::ids::ProviderWebhookId;
use crate::providers::WebhookEvent;

/// Inserts `event`'s row as `id`, `ignored` until [`record`] says otherwise; `false` when the
/// provider's event id is taken. Inserted before the effect is judged, so a second copy of the
/// event waits on the first and finds it taken, in any month, whatever time it carries (the
/// trigger `provider_webhooks_once`; docs/DESIGN.md, "History partitioned by time").
pub(super) async fn insert_once(
    conn: &mut PgConn,
    id: ProviderWebhookId,
    provider: &str,
    event: &WebhookEvent,
) -> QueryResult<bool> {
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
        .on_conflict((w::provider, w::provider_event_id, w::provider_created_at))
        .do_nothing()
        .execute(conn)
        .await?;
    Ok(inserted == 1)
}

/// What the event did, on its row, with the merchant and attempt it is about.
pub(super) async fn record(
    conn: &mut PgConn,
    id: ProviderWebhookId,
    outcome: EventOutcome,
    detail: &str,
    owner: Option<(uuid::Uuid, uuid::Uuid)>,
) -> QueryResult<usize> {
    diesel::update(w::provider_webhooks.find(id.0))
        .set((
            w::outcome.eq(outcome.as_str()),
            w::detail.eq(detail),
            w::merchant_id.eq(owner.map(|o| o.0)),
            w::attempt_id.eq(owner.map(|o| o.1)),
        ))
        .execute(conn)
        .await
}
