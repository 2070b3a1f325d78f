//! The key store: settings, the key row, and the statements around a claim (see
//! [`claim`](super::claim) for the claim itself): taking over an orphaned key, deleting an
//! expired one, completing a key for whoever finished its work, and reaping.

use std::time::Duration;

use chrono::Utc;
use diesel::prelude::*;
use diesel::sql_types::{BigInt, Bool, Int2, Text, Uuid as SqlUuid};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use uuid::Uuid;

use super::{Fingerprint, IdempotencyKey, Operation};
use crate::db::pool::PoolError;
use crate::db::schema::idempotency_keys;
use crate::ids::MerchantId;

#[derive(Debug, Clone)]
pub struct IdempotencySettings {
    /// How long a duplicate waits for the first request to finish before `409`.
    pub wait: Duration,
    /// How long an in-flight multi-step request holds its key; a retry after that takes over.
    pub lease: Duration,
    pub order_ttl: Duration,
    pub payment_ttl: Duration,
    pub max_new_keys_per_minute: i64,
}

impl Default for IdempotencySettings {
    fn default() -> Self {
        IdempotencySettings {
            wait: Duration::from_secs(2),
            lease: Duration::from_secs(30),
            order_ttl: Duration::from_secs(24 * 3600),
            payment_ttl: Duration::from_secs(72 * 3600),
            max_new_keys_per_minute: 6000,
        }
    }
}

impl IdempotencySettings {
    pub fn ttl(&self, operation: Operation) -> Duration {
        match operation {
            Operation::CreateOrder | Operation::CancelOrder => self.order_ttl,
            Operation::CreatePayment | Operation::Checkout => self.payment_ttl,
        }
    }
}

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

/// Deletes the key if it has expired (a late retry of a reaped-soon key), so the next claim
/// opens it afresh.
pub async fn delete_expired(
    conn: &mut AsyncPgConnection,
    request: &KeyedRequest,
) -> QueryResult<usize> {
    diesel::delete(idempotency_keys::table.find((request.merchant_id.0, request.key.as_str())))
        .filter(idempotency_keys::state.eq("completed"))
        .filter(idempotency_keys::expires_at.le(diesel::dsl::now))
        .execute(conn)
        .await
}

/// Extends the lease of an in-flight key whose lease ran out, if nobody else did first.
pub async fn take_over(
    conn: &mut AsyncPgConnection,
    settings: &IdempotencySettings,
    request: &KeyedRequest,
) -> QueryResult<Option<StoredKey>> {
    let lease_end = Utc::now()
        + chrono::Duration::from_std(settings.lease).unwrap_or(chrono::Duration::seconds(30));
    diesel::update(idempotency_keys::table.find((request.merchant_id.0, request.key.as_str())))
        .filter(idempotency_keys::state.eq("in_flight"))
        .filter(idempotency_keys::locked_until.lt(diesel::dsl::now))
        .set((
            idempotency_keys::locked_until.eq(lease_end),
            idempotency_keys::updated_at.eq(diesel::dsl::now),
        ))
        .returning(StoredKey::as_returning())
        .get_result(conn)
        .await
        .optional()
}

/// Completes the key that made `recorded`'s resource when someone other than its request
/// finished the work (the reconciler, a webhook): in flight or completed-but-unresolved, it
/// now replays `recorded`. Inside the caller's transaction.
pub async fn complete_for_resource(
    conn: &mut AsyncPgConnection,
    merchant_id: MerchantId,
    key: &str,
    recorded: &Recorded,
) -> QueryResult<()> {
    diesel::sql_query(
        "UPDATE idempotency_keys SET state = 'completed', locked_until = NULL, \
             recovery_point = 'finished', response_status = $5, unresolved = $6, \
             updated_at = now() \
         WHERE merchant_id = $1 AND key = $2 AND resource_type = $3 AND resource_id = $4 \
           AND (state = 'in_flight' OR unresolved)",
    )
    .bind::<SqlUuid, _>(merchant_id.0)
    .bind::<Text, _>(key)
    .bind::<Text, _>(recorded.resource_type)
    .bind::<SqlUuid, _>(recorded.resource_id)
    .bind::<Int2, _>(recorded.status as i16)
    .bind::<Bool, _>(recorded.unresolved)
    .execute(conn)
    .await
    .map(|_| ())
}

/// Deletes up to `batch` expired, resolved keys; replicas share the work without waiting on
/// each other. Returns how many went.
pub async fn reap_expired(conn: &mut AsyncPgConnection, batch: i64) -> QueryResult<usize> {
    diesel::sql_query(
        "DELETE FROM idempotency_keys k USING ( \
             SELECT merchant_id, key FROM idempotency_keys \
             WHERE state = 'completed' AND NOT unresolved AND expires_at < now() \
             ORDER BY expires_at LIMIT $1 FOR UPDATE SKIP LOCKED) expired \
         WHERE k.merchant_id = expired.merchant_id AND k.key = expired.key",
    )
    .bind::<BigInt, _>(batch)
    .execute(conn)
    .await
}

/// The planner's estimate of the key table's size: cheap enough to read on every scrape.
pub async fn estimated_key_count(conn: &mut AsyncPgConnection) -> QueryResult<i64> {
    #[derive(QueryableByName)]
    struct Estimate {
        #[diesel(sql_type = BigInt)]
        rows: i64,
    }
    diesel::sql_query(
        "SELECT coalesce(n_live_tup, 0)::bigint AS rows FROM pg_stat_user_tables \
         WHERE relname = 'idempotency_keys'",
    )
    .get_result::<Estimate>(conn)
    .await
    .optional()
    .map(|e| e.map_or(0, |e| e.rows))
}
