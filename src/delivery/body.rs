//! A delivery's body: the event exactly as `GET /v1/events/{id}` shows it (docs/guides/events.md, "What a
//! delivery is"), through the same view, so the two never differ. The snapshot never changes,
//! so every attempt sends the same bytes. The event's row comes with the delivery when the
//! worker takes it (`take`), so a body costs no query.

use crate::events::{Event, EventRow, UnreadableEvent};
use crate::views;

#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    #[error(transparent)]
    Unreadable(#[from] UnreadableEvent),
    #[error("the event cannot be written as JSON: {0}")]
    Json(#[from] serde_json::Error),
}

/// The body of the deliveries of the event `row`.
pub fn event_body(row: EventRow) -> Result<Vec<u8>, BodyError> {
    let event = Event::from_row(row)?;
    Ok(serde_json::to_vec(&views::Event::from(event))?)
}
