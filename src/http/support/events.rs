//! `POST /v1/support/events/{id}/redeliver`: support sends an event to the merchant's
//! endpoints again (docs/guides/support.md, "Support"). No body and no Idempotency-Key, as "Reconcile now":
//! pressing it twice only makes the same deliveries due twice, and receivers deduplicate by
//! `webhook-id` (docs/guides/events.md, "Deduplicating"). The redelivery and its audit row are one
//! transaction.

use actix_web::{web, HttpResponse};
use diesel_async::AsyncConnection;

use crate::accounts::Caller;
use crate::db::PgConn;
use crate::events::deliveries::Delivery;
use crate::events::redeliver::redeliver;
use crate::events::{find_event, Event};
use crate::http::errors::ApiError;
use crate::http::support::operator;
use crate::http::AppState;
use crate::ids::EventId;
use crate::payments::support::audit::{self, Action, Actor, Done};
use crate::views::deliveries::Redelivered;

/// Send an event to the merchant's endpoints again (support)
///
/// Makes each delivery of the event to an enabled endpoint pending and due at once, for a merchant
/// whose endpoint missed it; the merchant deduplicates by `webhook-id`. A support key with the
/// `operate` role; audited (docs/guides/support.md, "Support").
#[utoipa::path(post, path = "/v1/support/events/{id}/redeliver", tag = "support",
    params(("id" = String, Path, description = "event id, `evt_…`", example = json!(crate::views::examples::EVENT))),
    security(("bearer" = [])),
    responses(
        (status = 200, body = Redelivered, description = "the event's deliveries, each to an enabled endpoint now pending and due at once", example = json!(crate::views::examples::redelivered())),
        (status = 403, body = crate::http::errors::Problem, description = "not a support key, or a support key without the `operate` role"),
        (status = 404, body = crate::http::errors::Problem, description = "no such event (or past its retention)"),
        (status = 503, body = crate::http::errors::Problem, description = "the database is unavailable: nothing is done unless it is on record in the audit first; safe to press again"),
    ))]
pub async fn redeliver_event(
    caller: Caller,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let actor = operator(&state, &caller).await?;
    let id: EventId = path.parse().map_err(|_| ApiError::NotFound("event"))?;
    let mut conn = state.pool.get().await?;
    let event = find_event(&mut conn, None, id)
        .await?
        .ok_or(ApiError::NotFound("event"))?;
    tracing::info!(support_key = %actor.key_name, event = %id, merchant = %event.merchant_id, "support redelivered an event");
    let deliveries = redeliver_audited(&mut conn, &event, &actor).await?;
    Ok(HttpResponse::Ok().json(Redelivered::new(id, deliveries)))
}

/// [`redeliver`] asked by support key `actor`, with its audit row in the same transaction:
/// the deliveries are made due and the audit says so, or neither is written. Here, where
/// both are at hand: `events` imports nothing of payments but the snapshot an event keeps.
async fn redeliver_audited(
    conn: &mut PgConn,
    event: &Event,
    actor: &Actor,
) -> diesel::QueryResult<Vec<Delivery>> {
    conn.transaction(async |conn| {
        let deliveries = redeliver(conn, event.id).await?;
        audit::record(
            conn,
            actor,
            Done {
                action: Action::RedeliverEvent,
                target_id: event.id.0,
                merchant_id: event.merchant_id,
                order_id: Some(event.order_id),
                before: Some(serde_json::json!({ "event_type": event.event_type.as_str() })),
                after: Some(serde_json::json!({ "deliveries_due": deliveries.len() })),
            },
        )
        .await?;
        Ok(deliveries)
    })
    .await
}
