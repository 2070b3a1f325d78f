//! The events a caller asks for (`GET /v1/events`; docs/guides/events.md, "The events API"): newest first by
//! `seq`, the order the outbox wrote them in, a page at a time after a cursor event.
//!
//! `seq` is the cursor, not the id: two events of one statement share a millisecond, and
//! only `seq` says which came first. Events written while someone pages have a higher `seq`
//! than every cursor, so a page never repeats or skips one. A merchant's pages are read
//! through `merchant_events_of_merchant (merchant_id, seq)`, support's through `merchant_events_seq`.

use chrono::{DateTime, Utc};
use diesel::dsl::{exists, not};
use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use super::{Event, EventRow, EventType, EventsError};
use crate::db::schema::{event_deliveries, merchant_events};
use crate::db::scope::{find_in_scope, InScope};
use crate::db::PgConn;
use crate::ids::{EventId, MerchantId};

/// What `GET /v1/events` filters by; every filter given must hold.
#[derive(Debug, Clone, Default)]
pub struct EventFilter {
    /// One merchant's events; `None` (support only) for every merchant's.
    pub merchant: Option<MerchantId>,
    /// Events of any of these types; empty for every type.
    pub types: Vec<EventType>,
    /// Written at or after.
    pub created_gte: Option<DateTime<Utc>>,
    /// Written at or before.
    pub created_lte: Option<DateTime<Utc>>,
    /// `Some(false)`: some delivery is not `succeeded` (pending, failed or canceled).
    /// `Some(true)`: the event has deliveries and every one `succeeded`. An event with no
    /// delivery (no endpoint was subscribed) is neither.
    pub delivery_success: Option<bool>,
}

/// The `seq` of event `id`, if `scope` (a merchant, or `None` for support) may see it: where
/// a page after it starts.
pub async fn seq_of(
    conn: &mut PgConn,
    scope: Option<MerchantId>,
    id: EventId,
) -> QueryResult<Option<i64>> {
    let query = merchant_events::table
        .select(merchant_events::seq)
        .into_boxed();
    let id = merchant_events::id.eq(id.0);
    find_in_scope(conn, query, id, merchant_events::merchant_id, scope).await
}

/// Up to `limit` events matching `filter`, newest first, written before the event of
/// `before_seq` (the previous page's last).
pub async fn list_events(
    conn: &mut PgConn,
    filter: &EventFilter,
    before_seq: Option<i64>,
    limit: i64,
) -> Result<Vec<Event>, EventsError> {
    let mut query = merchant_events::table
        .select(EventRow::as_select())
        .order(merchant_events::seq.desc())
        .limit(limit)
        .into_boxed()
        .in_scope(merchant_events::merchant_id, filter.merchant);
    if let Some(seq) = before_seq {
        query = query.filter(merchant_events::seq.lt(seq));
    }
    if !filter.types.is_empty() {
        let types: Vec<&str> = filter.types.iter().map(|t| t.as_str()).collect();
        query = query.filter(merchant_events::event_type.eq_any(types));
    }
    if let Some(from) = filter.created_gte {
        query = query.filter(merchant_events::created_at.ge(from));
    }
    if let Some(to) = filter.created_lte {
        query = query.filter(merchant_events::created_at.le(to));
    }
    // Each probe reads the deliveries of one event by the primary key's `event_id` prefix.
    let undelivered = || {
        exists(
            event_deliveries::table
                .filter(event_deliveries::event_id.eq(merchant_events::id))
                .filter(event_deliveries::state.ne("succeeded")),
        )
    };
    match filter.delivery_success {
        None => {}
        Some(false) => query = query.filter(undelivered()),
        Some(true) => {
            let delivered = exists(
                event_deliveries::table.filter(event_deliveries::event_id.eq(merchant_events::id)),
            );
            query = query.filter(delivered).filter(not(undelivered()));
        }
    }
    let rows = query.load(conn).await?;
    Ok(rows
        .into_iter()
        .map(Event::from_row)
        .collect::<Result<_, _>>()?)
}
