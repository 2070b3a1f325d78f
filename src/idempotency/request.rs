//! A keyed request as the claim sees it, what a finished one records, and how a claim can go
//! wrong.

use std::time::Duration;

use diesel::prelude::*;
use uuid::Uuid;

use super::{Fingerprint, IdempotencyKey, Operation};
use crate::db::pool::PoolError;
use crate::db::schema::idempotency_keys;
use crate::ids::MerchantId;

/// One request that presents a key.
#[derive(Debug, Clone)]
pub struct KeyedRequest {
    pub merchant_id: MerchantId,
    pub key: IdempotencyKey,
    pub operation: Operation,
    pub fingerprint: Fingerprint,
    /// Its `X-Request-Id`: the events of what it changes name it (`idempotency::origin`).
    pub request_id: String,
}

/// How far the work of a key taken over had got, and what it made.
#[derive(Debug, Clone, Queryable, Selectable)]
#[diesel(table_name = idempotency_keys)]
pub struct StoredKey {
    pub recovery_point: String,
    pub resource_type: Option<String>,
    pub resource_id: Option<Uuid>,
}

/// What a finished request recorded, to replay later: its status and the resource it made,
/// which a replay shows as it is then, so no response body is kept (docs/DESIGN.md, "The
/// Idempotency-Key protocol").
#[derive(Debug, Clone)]
pub struct Recorded {
    pub status: u16,
    pub resource_type: super::ResourceType,
    pub resource_id: Uuid,
    /// The work behind it is still open (a pending payment): the key must outlive its TTL.
    pub unresolved: bool,
}

/// The payment or refund that a key past its TTL made: named to a late retry instead of being
/// made again (docs/guides/idempotency.md, "A key's life").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpiredKey {
    /// `payment_attempt` or `refund`.
    pub resource_type: String,
    pub resource_id: Uuid,
    /// Its status now; `None` only if the resource could not be read.
    pub status: Option<String>,
    /// The order it belongs to, and for a refund the payment it gives money back from.
    pub order_id: Option<Uuid>,
    pub payment_id: Option<Uuid>,
}

impl ExpiredKey {
    /// Reads the resource out of `current`, the key's resources as they are now (the object
    /// a replay answers with: `{"order": …, "attempt": …}` or `{"refund": …}`).
    pub fn read(resource_type: String, resource_id: Uuid, current: &serde_json::Value) -> Self {
        let id = resource_id.to_string();
        let row = current
            .as_object()
            .into_iter()
            .flat_map(|resources| resources.values())
            .find(|row| row.get("id").and_then(|v| v.as_str()) == Some(id.as_str()));
        let field = |name: &str| row.and_then(|row| row.get(name)).and_then(|v| v.as_str());
        let uuid = |name: &str| field(name).and_then(|v| Uuid::parse_str(v).ok());
        ExpiredKey {
            status: field("status").map(str::to_owned),
            order_id: uuid("order_id"),
            payment_id: uuid("payment_id"),
            resource_type,
            resource_id,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum IdempotencyError {
    #[error("another request with this Idempotency-Key is still in progress")]
    InUse { retry_after: Duration },
    #[error("this Idempotency-Key was used with another request")]
    Reused,
    #[error("this Idempotency-Key is past its lifetime and made {} {}", .0.resource_type, .0.resource_id)]
    Expired(Box<ExpiredKey>),
    #[error("too many new Idempotency-Keys this minute")]
    RateLimited { retry_after: Duration },
    #[error(transparent)]
    Database(#[from] diesel::result::Error),
    #[error(transparent)]
    Unavailable(#[from] PoolError),
}
