//! What support reads of an event's way to the merchant (docs/guides/support.md, "Support"): each delivery
//! (one event to one endpoint) as it stands, and every send of it.

use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use serde_json::Value;
use uuid::Uuid;

use super::EventRequest;
use crate::db::schema::{delivery_attempts, event_deliveries, merchant_events, webhook_endpoints};
use crate::db::PgConn;
use crate::ids::{EndpointId, EventId, MerchantId, OrderId};

/// One event to one endpoint, as it stands.
#[derive(Debug, Clone)]
pub struct Delivery {
    pub event_id: EventId,
    pub endpoint_id: EndpointId,
    /// The endpoint's URL now (an endpoint's URL may have changed since the delivery began).
    pub url: String,
    /// `pending`, `succeeded`, `failed` or `canceled`.
    pub state: String,
    /// Sends made so far.
    pub attempts: i32,
    /// While `pending`: when a worker may send it next.
    pub next_attempt_at: DateTime<Utc>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

type DeliveryColumns = (
    event_deliveries::event_id,
    event_deliveries::endpoint_id,
    webhook_endpoints::url,
    event_deliveries::state,
    event_deliveries::attempts,
    event_deliveries::next_attempt_at,
    event_deliveries::created_at,
    event_deliveries::updated_at,
);

const DELIVERY_COLUMNS: DeliveryColumns = (
    event_deliveries::event_id,
    event_deliveries::endpoint_id,
    webhook_endpoints::url,
    event_deliveries::state,
    event_deliveries::attempts,
    event_deliveries::next_attempt_at,
    event_deliveries::created_at,
    event_deliveries::updated_at,
);

type DeliveryRow = (
    Uuid,
    Uuid,
    String,
    String,
    i32,
    DateTime<Utc>,
    DateTime<Utc>,
    DateTime<Utc>,
);

impl From<DeliveryRow> for Delivery {
    fn from(r: DeliveryRow) -> Self {
        Delivery {
            event_id: EventId(r.0),
            endpoint_id: EndpointId(r.1),
            url: r.2,
            state: r.3,
            attempts: r.4,
            next_attempt_at: r.5,
            created_at: r.6,
            updated_at: r.7,
        }
    }
}

/// One send of a delivery: what the endpoint answered, or why nothing was.
#[derive(Debug, Clone)]
pub struct DeliveryAttempt {
    pub event_id: EventId,
    pub endpoint_id: EndpointId,
    pub attempted_at: DateTime<Utc>,
    /// `None` when no answer came (refused, timed out, not sent).
    pub http_status: Option<i16>,
    pub latency_ms: i32,
    pub error: Option<String>,
}

/// The deliveries of the events `ids`, oldest first, each with its endpoint's URL (a deleted
/// endpoint is kept, hidden, for this).
pub async fn deliveries_of(conn: &mut PgConn, ids: &[Uuid]) -> QueryResult<Vec<Delivery>> {
    let rows: Vec<DeliveryRow> = event_deliveries::table
        .inner_join(
            webhook_endpoints::table.on(webhook_endpoints::merchant_id
                .eq(event_deliveries::merchant_id)
                .and(webhook_endpoints::id.eq(event_deliveries::endpoint_id))),
        )
        .filter(event_deliveries::event_id.eq_any(ids))
        .order((event_deliveries::created_at, event_deliveries::endpoint_id))
        .select(DELIVERY_COLUMNS)
        .load(conn)
        .await?;
    Ok(rows.into_iter().map(Delivery::from).collect())
}

/// Every send of the deliveries of the events `ids`, in the order they were made.
pub async fn attempts_of(conn: &mut PgConn, ids: &[Uuid]) -> QueryResult<Vec<DeliveryAttempt>> {
    type AttemptRow = (Uuid, Uuid, DateTime<Utc>, Option<i16>, i32, Option<String>);
    let rows: Vec<AttemptRow> = delivery_attempts::table
        .filter(delivery_attempts::event_id.eq_any(ids))
        .order(delivery_attempts::id)
        .select((
            delivery_attempts::event_id,
            delivery_attempts::endpoint_id,
            delivery_attempts::attempted_at,
            delivery_attempts::http_status,
            delivery_attempts::latency_ms,
            delivery_attempts::error,
        ))
        .load(conn)
        .await?;
    Ok(rows
        .into_iter()
        .map(|r| DeliveryAttempt {
            event_id: EventId(r.0),
            endpoint_id: EndpointId(r.1),
            attempted_at: r.2,
            http_status: r.3,
            latency_ms: r.4,
            error: r.5,
        })
        .collect())
}

/// One event of a payment's story: what it told, and how it went to each endpoint.
#[derive(Debug, Clone)]
pub struct EventStory {
    pub id: EventId,
    /// The event's type as the row holds it (the `event_type` domain allows only known ones).
    pub event_type: String,
    pub created_at: DateTime<Utc>,
    pub request: Option<EventRequest>,
    pub deliveries: Vec<Delivery>,
    /// Every send to any endpoint, in the order they were made.
    pub attempts: Vec<DeliveryAttempt>,
}

/// The events of `order` (a payment's story), oldest first, with their deliveries and sends.
/// Read without decoding the snapshots: a story is shown whole even beside an event this
/// version cannot decode.
pub async fn story_of_order(
    conn: &mut PgConn,
    merchant: MerchantId,
    order: OrderId,
) -> QueryResult<Vec<EventStory>> {
    let rows: Vec<(Uuid, String, DateTime<Utc>, Option<Value>)> = merchant_events::table
        .filter(merchant_events::merchant_id.eq(merchant.0))
        .filter(merchant_events::order_id.eq(order.0))
        .order(merchant_events::seq)
        .select((
            merchant_events::id,
            merchant_events::event_type,
            merchant_events::created_at,
            merchant_events::request,
        ))
        .load(conn)
        .await?;
    let ids: Vec<Uuid> = rows.iter().map(|r| r.0).collect();
    let mut deliveries = deliveries_of(conn, &ids).await?;
    let mut attempts = attempts_of(conn, &ids).await?;
    Ok(rows
        .into_iter()
        .map(|(id, event_type, created_at, request)| {
            let id = EventId(id);
            EventStory {
                id,
                event_type,
                created_at,
                // A request this version cannot read is shown as none rather than failing
                // the story; `GET /v1/events/{id}` says what is wrong with it.
                request: request.and_then(|r| serde_json::from_value(r).ok()),
                deliveries: take(&mut deliveries, |d| d.event_id == id),
                attempts: take(&mut attempts, |a| a.event_id == id),
            }
        })
        .collect())
}

/// The items of `all` that are `mine`, in their order; the others stay.
fn take<T>(all: &mut Vec<T>, mine: impl Fn(&T) -> bool) -> Vec<T> {
    let (taken, rest) = std::mem::take(all).into_iter().partition(|x| mine(x));
    *all = rest;
    taken
}
