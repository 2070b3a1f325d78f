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
    pub resource_type: &'static str,
    pub resource_id: Uuid,
    /// The work behind it is still open (a pending payment): the key must outlive its TTL.
    pub unresolved: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum IdempotencyError {
    #[error("another request with this Idempotency-Key is still in progress")]
    InUse { retry_after: Duration },
    #[error("this Idempotency-Key was used with another request")]
    Reused,
    #[error("too many new Idempotency-Keys this minute")]
    RateLimited { retry_after: Duration },
    #[error(transparent)]
    Database(#[from] diesel::result::Error),
    #[error(transparent)]
    Unavailable(#[from] PoolError),
}
