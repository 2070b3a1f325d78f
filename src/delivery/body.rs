//! A delivery's body: the event exactly as `GET /v1/events/{id}` shows it (README, "What a
//! delivery is"), through the same view, so the two never differ. The snapshot never changes,
//! so every attempt sends the same bytes.

use diesel_async::AsyncPgConnection;

use crate::events::{find_event, EventsError};
use crate::http::views;
use crate::ids::EventId;

#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    #[error(transparent)]
    Event(#[from] EventsError),
    #[error("the event cannot be written as JSON: {0}")]
    Json(#[from] serde_json::Error),
}

/// The body of event `id`'s deliveries; `None` if the event is gone (deleted past its
/// retention, its deliveries with it).
pub async fn event_body(
    conn: &mut AsyncPgConnection,
    id: EventId,
) -> Result<Option<Vec<u8>>, BodyError> {
    let Some(event) = find_event(conn, None, id).await? else {
        return Ok(None);
    };
    Ok(Some(serde_json::to_vec(&views::Event::from(event))?))
}
