//! `POST /v1/webhook_endpoints/{id}/rotate_secret`: a new secret, inside the claim statement
//! (whole text: `tests/sql/claim_rotate_webhook_secret.sql`), by a conditional update of an
//! endpoint that is not deleted. Declined (no row, nothing recorded) when there is none; the
//! caller answers `404`.
//!
//! The secret it replaces keeps signing beside the new one for
//! [`PREVIOUS_SECRET_WINDOW`] (`previous_secret`, `previous_secret_until`; docs/guides/events.md, "Webhook
//! endpoints"). A rotation inside that window replaces the previous secret too: only the one
//! just replaced keeps signing.

use diesel::result::DatabaseErrorKind;
use diesel::sql_types::{Text, Uuid as SqlUuid};

use super::{endpoint_made, endpoint_now, EndpointMade};
use crate::db::statement::{Param, Statement};
use crate::events::endpoints::sealed::{seal, SealedSecret};
use crate::events::endpoints::PREVIOUS_SECRET_WINDOW;
use crate::events::signing::Secret;
use crate::idempotency::{ClaimParams, KeyedWork, RecordAs, ResourceType};
use crate::ids::EndpointId;
use crate::sealing::MasterKeys;

/// `POST /v1/webhook_endpoints/{id}/rotate_secret`.
pub struct RotateSecret {
    id: EndpointId,
    /// The new secret, sealed for the endpoint.
    secret: SealedSecret,
}

impl RotateSecret {
    pub fn new(id: EndpointId, keys: &MasterKeys) -> Self {
        RotateSecret {
            id,
            secret: seal(keys, id, &Secret::generate()),
        }
    }
}

impl KeyedWork for RotateSecret {
    type Made = EndpointMade;

    fn resource_type(&self) -> ResourceType {
        ResourceType::WebhookEndpoint
    }
    fn record_as(&self) -> RecordAs {
        RecordAs::Completed { status: 200 }
    }
    fn ctes<'f>(&'f self, q: &mut Statement<'f>, claim: &ClaimParams) {
        let id = q.bind::<SqlUuid, _>(self.id.0);
        let secret = q.bind::<Text, _>(self.secret.stored());
        q.push(format_args!(
            "made_endpoint AS (
    UPDATE webhook_endpoints SET secret = {secret}, previous_secret = secret,
        previous_secret_until = now() + interval '{window} seconds', updated_at = now()
    WHERE merchant_id = {merchant} AND id = {id} AND deleted_at IS NULL
      AND EXISTS (SELECT 1 FROM go) RETURNING *),
done AS (SELECT id AS resource_id FROM made_endpoint)",
            merchant = claim.merchant,
            window = PREVIOUS_SECRET_WINDOW.num_seconds(),
        ));
    }
    fn fresh(&self, q: &mut Statement<'_>) {
        endpoint_made(q);
    }
    fn replay(&self, q: &mut Statement<'_>, merchant: Param) {
        endpoint_now(q, merchant);
    }
    fn is_refusal(&self, _: &DatabaseErrorKind, _: Option<&str>) -> bool {
        false
    }
}
