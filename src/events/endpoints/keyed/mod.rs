//! The keyed statements of a webhook endpoint, one file each: [`create_endpoint`] and
//! [`rotate_secret`], the work that runs inside the claim statement of
//! [`crate::idempotency::claim()`], so that a new key, its work and its record are one
//! statement (their whole text: `tests/sql/claim_create_webhook_endpoint.sql`,
//! `tests/sql/claim_rotate_webhook_secret.sql`; docs/DESIGN.md, "The write path").
//!
//! Each work returns a `jsonb` object `{"endpoint": …}` of the row it made (from `RETURNING`),
//! and each replay the same object of the row as it is now, its current secret with it; the
//! claim decodes it once as [`EndpointMade`]. The secret a rotation replaced never leaves the
//! database here.

pub mod create_endpoint;
pub mod rotate_secret;

use serde::Deserialize;

pub use create_endpoint::CreateEndpoint;
pub use rotate_secret::RotateSecret;

use super::sealed::SealedSecret;
use super::{EndpointRow, UnreadableEndpoint, WebhookEndpoint};
use crate::db::statement::{Param, Statement};
use crate::events::signing::Secret;
use crate::sealing::MasterKeys;

/// What an endpoint's keyed statement made, or its replay read.
#[derive(Default, Deserialize)]
pub struct EndpointMade {
    endpoint: Option<MadeRow>,
}

#[derive(Deserialize)]
struct MadeRow {
    #[serde(flatten)]
    row: EndpointRow,
    secret: SealedSecret,
}

impl EndpointMade {
    /// The endpoint and the secret that signs for it now, opened under `keys`; `None` when
    /// the key names none.
    pub fn endpoint(
        self,
        keys: &MasterKeys,
    ) -> Result<Option<(WebhookEndpoint, Secret)>, UnreadableEndpoint> {
        self.endpoint
            .map(|made| {
                let endpoint = WebhookEndpoint::try_from(made.row)?;
                let secret =
                    made.secret
                        .open(keys, endpoint.id)
                        .map_err(|err| UnreadableEndpoint {
                            id: endpoint.id,
                            what: err.to_string(),
                        })?;
                Ok((endpoint, secret))
            })
            .transpose()
    }
}

/// A replay's `jsonb`: the endpoint a key names, as it is now.
fn endpoint_now(q: &mut Statement<'_>, merchant: Param) {
    q.push(format_args!(
        "jsonb_build_object('endpoint', (
    SELECT to_jsonb(e) - 'previous_secret' FROM webhook_endpoints e
    WHERE e.merchant_id = {merchant} AND e.id = found.resource_id))"
    ));
}

/// What the CTE `made_endpoint` wrote: `{"endpoint": …}`.
fn endpoint_made(q: &mut Statement<'_>) {
    q.push(
        "jsonb_build_object('endpoint', (
    SELECT to_jsonb(m) - 'previous_secret' FROM made_endpoint m))",
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::snapshot::assert_sql_snapshot;
    use crate::events::endpoints::fields::NewEndpoint;
    use crate::events::endpoints::EnabledEvents;
    use crate::idempotency::claim::snapshot::claim_text;
    use crate::idempotency::Operation;
    use crate::ids::EndpointId;

    #[test]
    fn the_claim_statements_of_an_endpoint_read_as_their_snapshots() {
        let endpoint = NewEndpoint {
            url: "https://shop.example/webhooks".into(),
            enabled_events: EnabledEvents::All,
            description: Some("orders".into()),
        };
        let (keys, _) = MasterKeys::generate("k1");
        let sql = claim_text(
            Operation::CreateWebhookEndpoint,
            &CreateEndpoint::new(&endpoint, &keys),
        );
        assert_sql_snapshot("claim_create_webhook_endpoint", &sql);
        let sql = claim_text(
            Operation::RotateWebhookSecret,
            &RotateSecret::new(EndpointId::new(), &keys),
        );
        assert_sql_snapshot("claim_rotate_webhook_secret", &sql);
    }
}
