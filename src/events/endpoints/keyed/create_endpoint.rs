//! `POST /v1/webhook_endpoints`: the endpoint and its secret, inside the claim statement
//! (whole text: `tests/sql/claim_create_webhook_endpoint.sql`).
//!
//! What it relies on (the `…_merchant_events` migration): `webhook_endpoints_limit` refuses a
//! merchant's endpoint past [`MAX_ENDPOINTS`](crate::events::endpoints::MAX_ENDPOINTS) (the
//! statement fails whole and no key is recorded, so the same key succeeds once one is
//! deleted); the table's CHECKs hold the URL's length and the event types; it starts
//! `enabled` by the column's default.

use diesel::result::DatabaseErrorKind;
use diesel::sql_types::{Array, Nullable, Text, Uuid as SqlUuid};

use super::{endpoint_made, endpoint_now, EndpointMade};
use crate::db::statement::{Param, Statement};
use crate::events::endpoints::fields::NewEndpoint;
use crate::events::endpoints::sealed::{seal, SealedSecret};
use crate::events::signing::Secret;
use crate::idempotency::{ClaimParams, KeyedWork, RecordAs, ResourceType};
use crate::ids::EndpointId;
use crate::sealing::MasterKeys;

/// `POST /v1/webhook_endpoints`.
pub struct CreateEndpoint<'a> {
    id: EndpointId,
    endpoint: &'a NewEndpoint,
    enabled_events: Vec<String>,
    /// A new secret, sealed for the new endpoint: the clear one is read back from it for
    /// the answer.
    secret: SealedSecret,
}

impl<'a> CreateEndpoint<'a> {
    pub fn new(endpoint: &'a NewEndpoint, keys: &MasterKeys) -> Self {
        let id = EndpointId::new();
        CreateEndpoint {
            id,
            endpoint,
            enabled_events: endpoint.enabled_events.to_strings(),
            secret: seal(keys, id, &Secret::generate()),
        }
    }
}

/// The one refusal of a new endpoint: the merchant has as many as it may.
pub fn is_limit_reached(kind: &DatabaseErrorKind, constraint: Option<&str>) -> bool {
    matches!(kind, DatabaseErrorKind::CheckViolation)
        && constraint == Some("webhook_endpoints_limit")
}

impl KeyedWork for CreateEndpoint<'_> {
    type Made = EndpointMade;

    fn resource_type(&self) -> ResourceType {
        ResourceType::WebhookEndpoint
    }
    fn record_as(&self) -> RecordAs {
        RecordAs::Completed { status: 201 }
    }
    fn ctes<'f>(&'f self, q: &mut Statement<'f>, claim: &ClaimParams) {
        let id = q.bind::<SqlUuid, _>(self.id.0);
        let url = q.bind::<Text, _>(self.endpoint.url.as_str());
        let description = q.bind::<Nullable<Text>, _>(self.endpoint.description.as_deref());
        let events = q.bind::<Array<Text>, _>(&self.enabled_events);
        let secret = q.bind::<Text, _>(self.secret.stored());
        q.push(format_args!(
            "made_endpoint AS (
    INSERT INTO webhook_endpoints (merchant_id, id, url, description, enabled_events, secret)
    SELECT {merchant}, {id}, {url}, {description}, {events}, {secret}
    FROM go RETURNING *),
done AS (SELECT id AS resource_id FROM made_endpoint)",
            merchant = claim.merchant,
        ));
    }
    fn fresh(&self, q: &mut Statement<'_>) {
        endpoint_made(q);
    }
    fn replay(&self, q: &mut Statement<'_>, merchant: Param) {
        endpoint_now(q, merchant);
    }
    fn is_refusal(&self, kind: &DatabaseErrorKind, constraint: Option<&str>) -> bool {
        is_limit_reached(kind, constraint)
    }
}
