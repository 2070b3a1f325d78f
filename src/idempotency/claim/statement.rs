//! The claim statement: a key claimed and its work done (or its finished answer read) in one
//! statement, one round trip, its own transaction. Its frame is written here; the work's CTEs,
//! what it made and what a replay reads come from the work (`payments::*::keyed`), joined by
//! the placeholders each binds itself (`db::statement`). The whole text of each keyed
//! operation's claim is in `tests/sql/claim_*.sql`.
//!
//! What it relies on (docs/DESIGN.md, "The Idempotency-Key protocol"):
//! - `idempotency_keys_pkey (merchant_id, key)`: two requests that both saw no key cannot both
//!   insert it; the loser's statement fails whole, work and all, and claims again.
//! - the key row is inserted **from** the work's `done` row, so it exists exactly when the work
//!   happened; a refusal by the database (a unique index, a trigger) fails the whole statement.
//! - `pg_try_advisory_xact_lock` on the key tells "a request is inside this statement now"
//!   apart from "nobody has the key" without waiting on the index.

use chrono::{DateTime, Utc};
use diesel::sql_types::{BigInt, Bool, Bytea, Int2, Jsonb, Nullable, Text, Timestamptz};
use diesel::QueryableByName;
use serde_json::Value;

use super::{KeyedWork, RecordAs};
use crate::db::sql::Sql;
use crate::db::statement::{Param, Statement};
use crate::idempotency::in_flight::{KeyState, RecoveryPoint};
use crate::idempotency::origin::RequestOrigin;
use crate::idempotency::{IdempotencySettings, KeyedRequest};

/// The claim's placeholders a work may use: the merchant and the key.
#[derive(Debug, Clone, Copy)]
pub struct ClaimParams {
    pub merchant: Param,
    pub key: Param,
}

/// The claim statement of `request` for `work`; `allowed`: whether new work may run (the
/// quota had room and no earlier round declined).
pub(super) fn claim_statement<'f, W: KeyedWork>(
    settings: &IdempotencySettings,
    request: &'f KeyedRequest,
    work: &'f W,
    allowed: bool,
) -> Sql<'f> {
    let mut q = Statement::new();
    let lock = q.bind::<BigInt, _>(lock_key(request));
    let claim = ClaimParams {
        merchant: q.bind::<diesel::sql_types::Uuid, _>(request.merchant_id.0),
        key: q.bind::<Text, _>(request.key.as_str()),
    };
    let allowed = q.bind::<Bool, _>(allowed);
    let ClaimParams { merchant, key } = claim;
    q.push(format_args!(
        "WITH lock AS MATERIALIZED (SELECT pg_try_advisory_xact_lock({lock}) AS got),
found AS MATERIALIZED (
    SELECT operation, fingerprint, state, locked_until, recovery_point, resource_type,
           resource_id, response_status, expires_at, unresolved
    FROM idempotency_keys WHERE merchant_id = {merchant} AND key = {key}),
go AS MATERIALIZED (
    SELECT 1 AS go FROM lock WHERE got AND {allowed} AND NOT EXISTS (SELECT 1 FROM found)),
"
    ));
    work.ctes(&mut q, &claim);
    q.push(",\n");
    record_key(&mut q, settings, request, work, &claim);
    q.push(
        "
SELECT lock.got, EXISTS (SELECT 1 FROM recorded) AS recorded,
       found.operation, found.fingerprint, found.state, found.locked_until,
       found.response_status, found.resource_type, found.resource_id,
       found.expires_at, found.unresolved,
       (SELECT resource_id FROM done) AS made,
       ",
    );
    work.fresh(&mut q);
    q.push(format_args!(
        " AS fresh,
       CASE WHEN found.state <> {in_flight} OR found.locked_until < now()
            THEN ",
        in_flight = KeyState::InFlight.sql()
    ));
    work.replay(&mut q, merchant);
    q.push(" END AS current\nFROM lock LEFT JOIN found ON true");
    q.finish()
}

/// The CTE `recorded`: the key, inserted from the work's `done` row; it names the request to
/// the event triggers (`idempotency::origin`).
fn record_key<'f, W: KeyedWork>(
    q: &mut Statement<'f>,
    settings: &IdempotencySettings,
    request: &'f KeyedRequest,
    work: &W,
    claim: &ClaimParams,
) {
    let (state, lease, recovery_point, status) = match work.record_as() {
        RecordAs::Completed { status } => (
            KeyState::Completed,
            None,
            RecoveryPoint::Finished,
            Some(status as i16),
        ),
        RecordAs::InFlight { recovery_point } => (
            KeyState::InFlight,
            Some(settings.lease.as_millis() as i64),
            recovery_point,
            None,
        ),
    };
    let operation = q.bind::<Text, _>(request.operation.as_str());
    let fingerprint = q.bind::<Bytea, _>(request.fingerprint.as_slice());
    let state = q.bind::<Text, _>(state.as_str());
    let lease = q.bind::<Nullable<BigInt>, _>(lease);
    let recovery_point = q.bind::<Text, _>(recovery_point.as_str());
    let resource_type = q.bind::<Text, _>(work.resource_type().as_str());
    let status_param = q.bind::<Nullable<Int2>, _>(status);
    // Work in flight is unresolved until its answer says otherwise.
    let unresolved = q.bind::<Bool, _>(status.is_none());
    let ttl = q.bind::<BigInt, _>(settings.ttl(request.operation).as_millis() as i64);
    let origin = RequestOrigin::of(request).set_config(q);
    let ClaimParams { merchant, key } = *claim;
    q.push(format_args!(
        "recorded AS (
    INSERT INTO idempotency_keys (merchant_id, key, operation, fingerprint, state,
        locked_until, recovery_point, resource_type, resource_id, response_status,
        unresolved, expires_at)
    SELECT {merchant}, {key}, {operation}, {fingerprint}, {state},
        now() + {lease} * interval '1 millisecond',
        {recovery_point}, {resource_type}, done.resource_id, {status_param}, {unresolved},
        now() + {ttl} * interval '1 millisecond'
    FROM done RETURNING {origin})"
    ));
}

/// The statement that answers a key this replica remembers finished: its resource as it is
/// now, read the way the claim statement's replay reads it.
pub(super) fn replay_statement<'f, W: KeyedWork>(
    request: &KeyedRequest,
    work: &W,
    resource_id: uuid::Uuid,
) -> Sql<'f> {
    let mut q = Statement::new();
    let id = q.bind::<diesel::sql_types::Uuid, _>(resource_id);
    let merchant = q.bind::<diesel::sql_types::Uuid, _>(request.merchant_id.0);
    q.push(format_args!(
        "WITH found AS (SELECT {id}::uuid AS resource_id) SELECT "
    ));
    work.replay(&mut q, merchant);
    q.push(" AS current FROM found");
    q.finish()
}

/// The advisory lock naming this `(merchant, key)`; a collision only costs a short wait.
fn lock_key(request: &KeyedRequest) -> i64 {
    use sha2::{Digest, Sha256};
    let mut hasher = Sha256::new();
    hasher.update(request.merchant_id.0.as_bytes());
    hasher.update(request.key.as_str().as_bytes());
    let digest = hasher.finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    i64::from_be_bytes(first)
}

/// What the claim statement returns.
#[derive(QueryableByName)]
pub(super) struct ClaimRow {
    #[diesel(sql_type = Bool)]
    pub got: bool,
    #[diesel(sql_type = Bool)]
    pub recorded: bool,
    #[diesel(sql_type = Nullable<Text>)]
    pub operation: Option<String>,
    #[diesel(sql_type = Nullable<Bytea>)]
    pub fingerprint: Option<Vec<u8>>,
    #[diesel(sql_type = Nullable<Text>)]
    pub state: Option<String>,
    #[diesel(sql_type = Nullable<Timestamptz>)]
    pub locked_until: Option<DateTime<Utc>>,
    #[diesel(sql_type = Nullable<Int2>)]
    pub response_status: Option<i16>,
    #[diesel(sql_type = Nullable<Text>)]
    pub resource_type: Option<String>,
    #[diesel(sql_type = Nullable<diesel::sql_types::Uuid>)]
    pub resource_id: Option<uuid::Uuid>,
    #[diesel(sql_type = Nullable<Timestamptz>)]
    pub expires_at: Option<DateTime<Utc>>,
    #[diesel(sql_type = Nullable<Bool>)]
    pub unresolved: Option<bool>,
    /// The resource the work made, when it ran.
    #[diesel(sql_type = Nullable<diesel::sql_types::Uuid>)]
    pub made: Option<uuid::Uuid>,
    #[diesel(sql_type = Nullable<Jsonb>)]
    pub fresh: Option<Value>,
    #[diesel(sql_type = Nullable<Jsonb>)]
    pub current: Option<Value>,
}
