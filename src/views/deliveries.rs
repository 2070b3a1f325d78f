//! What support sees of an event's way to the merchant: its deliveries (one event to one
//! endpoint) and every send of them (docs/guides/support.md, "Support").

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::events::deliveries::{self, EventStory};
use crate::events::disabled;
use crate::events::EventRequest;
use crate::ids::{EndpointId, EventId, MerchantId};

/// One event to one endpoint, as it stands.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Delivery {
    endpoint_id: EndpointId,
    /// The endpoint's URL now.
    url: String,
    /// `pending` (a worker sends it at `next_attempt_at`), `succeeded`, `failed` (given up
    /// after the last retry) or `canceled` (its endpoint was disabled or deleted first).
    state: String,
    /// Sends made so far.
    attempts: i32,
    /// While `pending`: when it is sent next.
    next_attempt_at: DateTime<Utc>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

impl From<deliveries::Delivery> for Delivery {
    fn from(d: deliveries::Delivery) -> Self {
        Delivery {
            endpoint_id: d.endpoint_id,
            url: d.url,
            state: d.state,
            attempts: d.attempts,
            next_attempt_at: d.next_attempt_at,
            created_at: d.created_at,
            updated_at: d.updated_at,
        }
    }
}

/// One send of a delivery.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct DeliveryAttempt {
    endpoint_id: EndpointId,
    at: DateTime<Utc>,
    /// What the endpoint answered; `null` when no answer came.
    http_status: Option<i16>,
    latency_ms: i32,
    /// Why the send failed, when it did (a timeout, a refused connection, the answer's status).
    error: Option<String>,
}

impl From<deliveries::DeliveryAttempt> for DeliveryAttempt {
    fn from(a: deliveries::DeliveryAttempt) -> Self {
        DeliveryAttempt {
            endpoint_id: a.endpoint_id,
            at: a.attempted_at,
            http_status: a.http_status,
            latency_ms: a.latency_ms,
            error: a.error,
        }
    }
}

/// One event of a payment's order, with its deliveries and every send of them.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct StoryEvent {
    id: EventId,
    /// `payment.succeeded`, `order.paid`, … (the `Event` schema's `type`).
    #[serde(rename = "type")]
    event_type: String,
    created: DateTime<Utc>,
    /// The API request that made the change; `null` when a webhook, the reconciler or
    /// support did.
    request: Option<EventRequest>,
    /// One per endpoint the event is for, oldest first.
    deliveries: Vec<Delivery>,
    /// Every send to any of them, in order.
    delivery_attempts: Vec<DeliveryAttempt>,
}

impl From<EventStory> for StoryEvent {
    fn from(e: EventStory) -> Self {
        StoryEvent {
            id: e.id,
            event_type: e.event_type,
            created: e.created_at,
            request: e.request,
            deliveries: e.deliveries.into_iter().map(Delivery::from).collect(),
            delivery_attempts: e.attempts.into_iter().map(DeliveryAttempt::from).collect(),
        }
    }
}

/// An event's deliveries after support asked for them again.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Redelivered {
    event_id: EventId,
    deliveries: Vec<Delivery>,
}

impl Redelivered {
    pub fn new(event_id: EventId, deliveries: Vec<deliveries::Delivery>) -> Self {
        Redelivered {
            event_id,
            deliveries: deliveries.into_iter().map(Delivery::from).collect(),
        }
    }
}

/// A webhook endpoint payorch no longer sends to.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct DisabledEndpoint {
    id: EndpointId,
    merchant_id: MerchantId,
    url: String,
    /// Why: the endpoint answered `410 Gone`, or failed every delivery for too long.
    disabled_reason: Option<String>,
    /// The first failed delivery since the last one that succeeded.
    failing_since: Option<DateTime<Utc>>,
    /// When it was disabled (its last change).
    updated_at: DateTime<Utc>,
}

impl From<disabled::DisabledEndpoint> for DisabledEndpoint {
    fn from(e: disabled::DisabledEndpoint) -> Self {
        DisabledEndpoint {
            id: e.id,
            merchant_id: e.merchant_id,
            url: e.url,
            disabled_reason: e.disabled_reason,
            failing_since: e.failing_since,
            updated_at: e.updated_at,
        }
    }
}
