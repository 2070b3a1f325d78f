//! An endpoint's keyed use cases, behind `POST /v1/webhook_endpoints` and
//! `POST /v1/webhook_endpoints/{id}/rotate_secret`: one entry ([`run`]) taking one context
//! ([`EndpointContext`]), as an order's commands enter
//! ([`crate::payments::orders::command::run`]). Each is database-only: its work runs once per
//! key, in the claim statement ([`super::keyed`]).
//!
//! What an answer shows (docs/guides/events.md, "Webhook endpoints"): the endpoint and the secret that signs
//! for it. Fresh, the secret the request made. Replayed, the endpoint **as it is now** (the
//! protocol keeps no response body; docs/DESIGN.md, "The Idempotency-Key protocol") with the
//! secret that signs now: the one the request made, or, if the endpoint was rotated since,
//! the newer one, so that a client that lost its answer is never left holding a secret that
//! no longer signs. A deleted endpoint's replay shows it deleted, without a secret.

use super::fields::EndpointFields;
use super::keyed::{CreateEndpoint, EndpointMade, RotateSecret};
use super::store::StoreError;
use super::{UnreadableEndpoint, WebhookEndpoint, MAX_ENDPOINTS};
use crate::db::pool::PoolError;
use crate::db::DbPool;
use crate::events::safe_url::UrlPolicy;
use crate::events::signing::Secret;
use crate::fields::FieldProblems;
use crate::idempotency::{claim, IdempotencyError, Keyed, KeyedRequest, KeyedWork, Keys, RecordAs};
use crate::ids::EndpointId;
use crate::sealing::MasterKeys;

/// Everything one endpoint request needs: the command is its input.
pub struct EndpointContext<'a> {
    pub pool: &'a DbPool,
    pub keys: &'a Keys,
    /// What seals a new secret and opens the stored one for the answer.
    pub master_keys: &'a MasterKeys,
    /// The request's merchant, key, operation and fingerprint.
    pub keyed: &'a KeyedRequest,
    pub command: EndpointCommand,
}

/// What to do.
#[derive(Debug, Clone)]
pub enum EndpointCommand {
    /// `POST /v1/webhook_endpoints`: make an endpoint of these fields, its URL allowed by
    /// `policy`.
    Create {
        fields: EndpointFields,
        policy: UrlPolicy,
    },
    /// `POST /v1/webhook_endpoints/{id}/rotate_secret`.
    RotateSecret(EndpointId),
}

/// The answer to an endpoint request.
#[derive(Debug)]
pub struct EndpointAnswer {
    pub endpoint: WebhookEndpoint,
    /// The secret that signs for it now; `None` for a deleted endpoint (replayed).
    pub secret: Option<Secret>,
    pub status: u16,
    pub replayed: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum EndpointError {
    #[error("the request's fields do not hold: {0:?}")]
    Invalid(FieldProblems),
    #[error("no such webhook endpoint")]
    NotFound,
    #[error("the merchant has {MAX_ENDPOINTS} webhook endpoints already")]
    LimitReached,
    #[error(transparent)]
    Idempotency(#[from] IdempotencyError),
    #[error(transparent)]
    Unavailable(#[from] PoolError),
    #[error(transparent)]
    Database(#[from] diesel::result::Error),
    #[error("{0}")]
    Inconsistent(String),
}

impl From<UnreadableEndpoint> for EndpointError {
    fn from(err: UnreadableEndpoint) -> Self {
        EndpointError::Inconsistent(err.to_string())
    }
}

impl From<StoreError> for EndpointError {
    fn from(err: StoreError) -> Self {
        match err {
            StoreError::Database(err) => EndpointError::Database(err),
            StoreError::Unreadable(err) => err.into(),
        }
    }
}

/// Runs the context's command once per key.
pub async fn run(ctx: &EndpointContext<'_>) -> Result<EndpointAnswer, EndpointError> {
    match &ctx.command {
        EndpointCommand::Create { fields, policy } => {
            let endpoint = fields.validate(*policy).map_err(EndpointError::Invalid)?;
            // Only the limit refuses a new endpoint (ids are fresh UUIDv7s), and an insert
            // from `go` never finds nothing to do.
            keyed(
                ctx,
                &CreateEndpoint::new(&endpoint, ctx.master_keys),
                |refused| {
                    if refused {
                        EndpointError::LimitReached
                    } else {
                        EndpointError::Inconsistent(
                            "a new webhook endpoint was not inserted".into(),
                        )
                    }
                },
            )
            .await
        }
        // Only a missing endpoint declines a rotation: unknown, another merchant's, or
        // deleted.
        EndpointCommand::RotateSecret(id) => {
            keyed(ctx, &RotateSecret::new(*id, ctx.master_keys), |_| {
                EndpointError::NotFound
            })
            .await
        }
    }
}

/// Runs a database-only endpoint operation once per key, in one statement, and answers with
/// the endpoint and its secret (module comment). `declined` says why the work did nothing,
/// told whether the database refused it (the work's [`KeyedWork::is_refusal`]).
async fn keyed<W: KeyedWork<Made = EndpointMade>>(
    ctx: &EndpointContext<'_>,
    work: &W,
    declined: impl FnOnce(bool) -> EndpointError,
) -> Result<EndpointAnswer, EndpointError> {
    let answer = |made: EndpointMade, status: u16, replayed: bool| {
        let (endpoint, secret) = made.endpoint(ctx.master_keys)?.ok_or_else(|| {
            EndpointError::Inconsistent("a webhook endpoint key names no endpoint".into())
        })?;
        let secret = endpoint.deleted_at.is_none().then_some(secret);
        Ok(EndpointAnswer {
            endpoint,
            secret,
            status,
            replayed,
        })
    };
    match claim(ctx.pool, ctx.keys, ctx.keyed, work).await? {
        Keyed::Made { made, key: None } => {
            let RecordAs::Completed { status } = work.record_as() else {
                return Err(left_in_flight());
            };
            answer(made, status, false)
        }
        Keyed::Replayed { status, current } => answer(current, status, true),
        Keyed::Declined { refusal } => Err(declined(refusal.is_some())),
        Keyed::Made { key: Some(_), .. } | Keyed::Resumed { .. } => Err(left_in_flight()),
    }
}

fn left_in_flight() -> EndpointError {
    EndpointError::Inconsistent("a webhook endpoint key was left in flight".into())
}
