//! The statements a claim falls back on (see [`claim`](super::claim)): deleting a key whose
//! time is up, and taking over a key whose request died in flight.

use chrono::Utc;
use diesel::prelude::*;
use diesel_async::{AsyncPgConnection, RunQueryDsl};

use super::{IdempotencySettings, KeyedRequest, StoredKey};
use crate::db::schema::idempotency_keys;

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
