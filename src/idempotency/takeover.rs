//! The statements a claim falls back on (see [`claim`](super::claim)): freeing a key whose
//! time is up, and taking over a key whose request died in flight.

use chrono::Utc;
use diesel::prelude::*;
use diesel::sql_types::{Text, Uuid as SqlUuid};
use diesel_async::RunQueryDsl;

use super::{IdempotencySettings, KeyState, KeyedRequest, StoredKey};
use crate::db::schema::idempotency_keys;
use crate::db::statement::Statement;
use crate::db::PgConn;

/// Deletes the key if its time is up, so the next claim opens it afresh: a key of an order or
/// a cancel past its TTL, or a retired key past its horizon. Never a key whose work is open,
/// nor one of a payment or refund that is not retired yet (the reaper's
/// [`retire_expired`](super::reaper::retire_expired) comes first; the database refuses it too).
pub async fn free_expired(conn: &mut PgConn, request: &KeyedRequest) -> QueryResult<usize> {
    let mut q = Statement::new();
    let merchant = q.bind::<SqlUuid, _>(request.merchant_id.0);
    let key = q.bind::<Text, _>(request.key.as_str());
    q.push(format_args!(
        "DELETE FROM idempotency_keys i
WHERE merchant_id = {merchant} AND key = {key} AND NOT unresolved AND expires_at <= now()
  AND (state = {expired}
       OR (state = {completed} AND NOT idempotency_key_made_money_move(i)))",
        expired = KeyState::Expired.sql(),
        completed = KeyState::Completed.sql(),
    ));
    q.finish().execute(conn).await
}

/// Extends the lease of an in-flight key whose lease ran out, if nobody else did first.
pub async fn take_over(
    conn: &mut PgConn,
    settings: &IdempotencySettings,
    request: &KeyedRequest,
) -> QueryResult<Option<StoredKey>> {
    let lease_end = Utc::now()
        + chrono::Duration::from_std(settings.lease).unwrap_or(chrono::Duration::seconds(30));
    diesel::update(idempotency_keys::table.find((request.merchant_id.0, request.key.as_str())))
        .filter(idempotency_keys::state.eq(KeyState::InFlight.as_str()))
        .filter(idempotency_keys::locked_until.lt(diesel::dsl::now))
        .set((
            idempotency_keys::locked_until.eq(lease_end),
            idempotency_keys::updated_at.eq(diesel::dsl::now),
        ))
        .returning(StoredKey::as_returning())
        .load(conn)
        .await
        .and_then(crate::db::one)
        .optional()
}
