//! Webhook endpoints: where a merchant's events are pushed (docs/guides/events.md, "Webhook endpoints").
//!
//! An endpoint is made and its secret rotated under an Idempotency-Key, by keyed work inside
//! the claim statement like every other state-changing POST ([`keyed`], [`command`]); it is
//! read and deleted by plain statements ([`store`]). Its secret is shown only in the answer to
//! the request that made it (and that request's replays): never by `GET`.
//!
//! What the database holds (the `…_merchant_events` migration): the URL's length, the event
//! types an endpoint may list, at most [`MAX_ENDPOINTS`] endpoints per merchant that are not
//! deleted (`webhook_endpoints_limit`, under the merchant's row lock, so two registrations at
//! once cannot both take the last place), and a previous secret only with its end. Secrets
//! are stored sealed under the master key ([`sealed`]; the `…_secrets_at_rest_…` migration
//! refuses a clear one).

pub mod command;
pub mod fields;
pub mod keyed;
pub mod sealed;
pub mod store;

use chrono::{DateTime, Utc};
use diesel::prelude::*;
use serde::Deserialize;

use crate::db::schema::webhook_endpoints;
use crate::events::EventType;
use crate::ids::{EndpointId, MerchantId};
use crate::words::words;

/// The most endpoints a merchant may have that are not deleted, enabled or disabled: the
/// number the trigger `webhook_endpoints_limit` holds (the `…_merchant_events` migration).
pub const MAX_ENDPOINTS: i64 = 16;

/// How long the secret a rotation replaced keeps signing beside the new one, so that a
/// receiver verifies while its new secret is deployed (docs/guides/events.md, "Webhook endpoints").
pub const PREVIOUS_SECRET_WINDOW: chrono::Duration = chrono::Duration::hours(24);

/// What `enabled_events` holds for "every type", now and to come.
pub const ALL_EVENTS: &str = "*";

/// The events an endpoint receives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EnabledEvents {
    /// `["*"]`: every type, including types added later.
    All,
    /// These types, each once, in [`EventType::ALL`]'s order.
    Only(Vec<EventType>),
}

impl EnabledEvents {
    /// As `webhook_endpoints.enabled_events` holds it, and the API shows it.
    pub fn to_strings(&self) -> Vec<String> {
        match self {
            EnabledEvents::All => vec![ALL_EVENTS.to_owned()],
            EnabledEvents::Only(types) => types.iter().map(|t| t.as_str().to_owned()).collect(),
        }
    }

    /// The column's value read back; `None` for a value this version does not know.
    fn from_strings(raw: &[String]) -> Option<Self> {
        if raw == [ALL_EVENTS] {
            return Some(EnabledEvents::All);
        }
        let types = raw
            .iter()
            .map(|t| EventType::parse(t))
            .collect::<Option<Vec<_>>>()?;
        (!types.is_empty()).then_some(EnabledEvents::Only(types))
    }
}

words! {
    /// Whether payorch sends to an endpoint (`webhook_endpoints.status`).
    pub enum EndpointStatus {
        Enabled => "enabled",
        /// Given up on (`disabled_reason` says why): it is sent nothing.
        Disabled => "disabled",
    }
}

/// An endpoint as `GET` shows it: everything but its secrets.
#[derive(Debug, Clone)]
pub struct WebhookEndpoint {
    pub id: EndpointId,
    pub merchant_id: MerchantId,
    pub url: String,
    pub description: Option<String>,
    pub enabled_events: EnabledEvents,
    pub status: EndpointStatus,
    pub disabled_reason: Option<String>,
    /// While the secret a rotation replaced still signs: until when.
    pub previous_secret_until: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub deleted_at: Option<DateTime<Utc>>,
}

/// The row without its secrets: what reads select, and what the keyed statements' `jsonb`
/// holds besides the secret.
#[derive(Debug, Deserialize, Queryable, Selectable)]
#[diesel(table_name = webhook_endpoints)]
pub struct EndpointRow {
    id: uuid::Uuid,
    merchant_id: uuid::Uuid,
    url: String,
    description: Option<String>,
    enabled_events: Vec<String>,
    status: String,
    disabled_reason: Option<String>,
    previous_secret_until: Option<DateTime<Utc>>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
    deleted_at: Option<DateTime<Utc>>,
}

/// A row this version cannot read (a value a newer replica wrote): never shown half-read.
#[derive(Debug, thiserror::Error)]
#[error("webhook endpoint {id} cannot be read: {what}")]
pub struct UnreadableEndpoint {
    pub id: EndpointId,
    pub what: String,
}

impl TryFrom<EndpointRow> for WebhookEndpoint {
    type Error = UnreadableEndpoint;

    fn try_from(row: EndpointRow) -> Result<Self, UnreadableEndpoint> {
        let id = EndpointId(row.id);
        let unreadable = |what: String| UnreadableEndpoint { id, what };
        let enabled_events = EnabledEvents::from_strings(&row.enabled_events)
            .ok_or_else(|| unreadable(format!("enabled_events {:?}", row.enabled_events)))?;
        let status = EndpointStatus::parse(&row.status)
            .ok_or_else(|| unreadable(format!("status {:?}", row.status)))?;
        Ok(WebhookEndpoint {
            id,
            merchant_id: MerchantId(row.merchant_id),
            url: row.url,
            description: row.description,
            enabled_events,
            status,
            disabled_reason: row.disabled_reason,
            previous_secret_until: row.previous_secret_until,
            created_at: row.created_at,
            updated_at: row.updated_at,
            deleted_at: row.deleted_at,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_endpoint_status_reads_back_as_itself() {
        for s in EndpointStatus::ALL {
            assert_eq!(EndpointStatus::parse(s.as_str()), Some(s));
        }
    }

    #[test]
    fn enabled_events_read_back_as_written() {
        for events in [
            EnabledEvents::All,
            EnabledEvents::Only(vec![EventType::PaymentSucceeded, EventType::OrderRefunded]),
        ] {
            let stored = events.to_strings();
            assert_eq!(EnabledEvents::from_strings(&stored), Some(events));
        }
        assert_eq!(EnabledEvents::from_strings(&[]), None);
        assert_eq!(EnabledEvents::from_strings(&["payment.lost".into()]), None);
    }
}
