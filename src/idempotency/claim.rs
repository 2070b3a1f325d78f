//! Claiming a key and doing the work under it in **one statement**, and answering a replay
//! in the same statement.
//!
//! Every keyed request starts with one SQL statement, run on its own (autocommit, so it is
//! its own transaction) and built like this:
//!
//! ```sql
//! WITH lock  AS MATERIALIZED (SELECT pg_try_advisory_xact_lock($1) AS got),
//!      found AS MATERIALIZED (SELECT … FROM idempotency_keys WHERE merchant_id = $2 AND key = $3),
//!      go    AS MATERIALIZED (SELECT 1 FROM lock WHERE got AND $4 AND NOT EXISTS (SELECT 1 FROM found)),
//!      <the work's CTEs, which run only FROM go, ending in `done (resource_id)`>,
//!      recorded AS (INSERT INTO idempotency_keys … SELECT … FROM done RETURNING 1)
//! SELECT lock.got, <recorded?>, found.*, <the fresh resources>, <the replayed resources>
//! ```
//!
//! - A new key: the work runs and the key is inserted **from the work's result**, so the
//!   key row exists exactly when the work happened. A refusal by the database (a unique
//!   index, a trigger) fails the whole statement: nothing is recorded (docs/DESIGN.md, "The
//!   Idempotency-Key protocol").
//! - A finished key: nothing runs; the same statement returns the recorded status and the
//!   resource *as it is now*. A replay is one round trip and no explicit transaction.
//! - A key in flight: the transaction-scoped advisory lock tells "someone is in this
//!   statement right now" apart without blocking on the unique index; a committed in-flight
//!   key (a payment between its two transactions) carries a lease. The caller polls.
//! - A key past its TTL whose work is final: an order's or a cancel's is deleted and opened
//!   afresh; a payment's or refund's is never done again, and answers
//!   `409 idempotency_key_expired` naming what it made, until its horizon ends (README, "A
//!   key's life"). A key whose payment or refund is still open never expires.
//!
//! The key insert has no `ON CONFLICT`: if another request committed the same key between
//! this statement's snapshot and its lock, the insert fails on the primary key and the claim
//! simply runs again (and then replays).

use std::time::{Duration, Instant};

use crate::db::sql::Sql;
use chrono::{DateTime, Utc};
use diesel::result::{DatabaseErrorKind, Error as DieselError};
use diesel::sql_types::{BigInt, Bool, Bytea, Int2, Jsonb, Nullable, Text, Timestamptz};
use diesel::QueryableByName;
use diesel_async::RunQueryDsl;
use serde_json::Value;

use super::recent::Finished;
use super::takeover::{free_expired, take_over};
use super::{ExpiredKey, IdempotencyError, IdempotencySettings, StoredKey};
use super::{KeyedRequest, Keys};
use crate::db::DbPool;

/// How the key of a finished piece of work is recorded.
#[derive(Debug, Clone, Copy)]
pub enum RecordAs {
    /// Database-only work: finished in the same statement; a replay answers `status`.
    Completed { status: u16 },
    /// A payment between its two transactions: in flight under a lease, at `recovery_point`,
    /// completed by transaction 2 (or by whoever finishes the attempt).
    InFlight { recovery_point: &'static str },
}

/// The work a key protects, as SQL that runs inside the claim statement.
pub trait KeyedWork: Sync {
    /// The resource the key names (`order`, `payment_attempt`).
    fn resource_type(&self) -> &'static str;
    fn record_as(&self) -> RecordAs;
    /// CTEs (each `name AS (…)`, comma-separated, no leading `WITH`) that do the work only
    /// when the relation `go` has its row, and end in a CTE `done` with one column
    /// `resource_id uuid`, one row exactly when the work happened.
    fn ctes(&self) -> String;
    /// A `jsonb` expression: what the work made, read from its CTEs' `RETURNING`.
    fn fresh(&self) -> String;
    /// A `jsonb` expression: the resource(s) of the finished key as they are now, read
    /// through `found.resource_id` and the merchant `$2`, and nothing else (it also runs
    /// alone, for a key this replica remembers).
    fn replay(&self) -> String;
    /// Binds the work's parameters, `$14` onwards, in order. The work may also use the
    /// claim's `$2` (the merchant id) and `$3` (the key).
    fn bind<'f>(&'f self, query: Sql<'f>) -> Sql<'f>;
    /// Whether a failed statement is the database refusing the work (an invariant), which is
    /// answered to the client and never recorded.
    fn is_refusal(&self, kind: &DatabaseErrorKind, constraint: Option<&str>) -> bool;
}

/// What claiming a key came to.
#[derive(Debug)]
pub enum Claimed {
    /// The work ran and its key was recorded with it; `fresh` is what it made.
    Done { fresh: Value },
    /// A request with this key finished before: answer `status` with `current`, the
    /// resource as it is now.
    Replay { status: u16, current: Value },
    /// An earlier request died holding the key and its lease ran out: it is ours now, to
    /// resume from its recovery point. `current` is its resource as it is now.
    TakenOver { stored: StoredKey, current: Value },
    /// The work declined: it found nothing to do (no row matched), or the database refused
    /// it (`refusal`). Nothing was recorded and no other request holds the key.
    Declined { refusal: Option<DieselError> },
}

/// Claims `request`'s key and, if it is new, does `work` in the same statement. Waits up
/// to `settings.wait` while another request holds the key, holding no connection between
/// polls. A new key takes a slot of the merchant's per-minute quota; past it the key is
/// still looked up (a replay is answered), but no work runs and the answer is `429`. A key
/// this replica saw finished is answered by reading its resource only.
pub async fn claim(
    pool: &DbPool,
    keys: &Keys,
    request: &KeyedRequest,
    work: &dyn KeyedWork,
) -> Result<Claimed, IdempotencyError> {
    let started = Instant::now();
    let outcome = match keys.recent.get(request) {
        Some(finished) => replay_remembered(pool, request, work, finished).await,
        None => claim_new(pool, keys, request, work, started).await,
    };
    let label = match &outcome {
        Ok(Claimed::Done { .. }) => "created",
        Ok(Claimed::Declined { .. }) => "declined",
        Ok(Claimed::TakenOver { .. }) => "taken_over",
        Ok(Claimed::Replay { .. }) => "replayed",
        Err(IdempotencyError::InUse { .. }) => "in_use",
        Err(IdempotencyError::Reused) => "reused_mismatch",
        Err(IdempotencyError::Expired(_)) => "expired",
        Err(IdempotencyError::RateLimited { .. }) => "rate_limited",
        Err(IdempotencyError::Database(_) | IdempotencyError::Unavailable(_)) => "error",
    };
    let waited = started.elapsed();
    keys.metrics.observe(request.operation, label, waited);
    tracing::Span::current().record("idempotency_outcome", label);
    // One line per keyed request, for support and on-call: what the key came to, and where.
    tracing::info!(
        outcome = label,
        route = request.operation.route(),
        merchant = %request.merchant_id,
        key = request.key.as_str(),
        waited_ms = waited.as_millis() as u64,
        "keyed request"
    );
    outcome
}

async fn claim_new(
    pool: &DbPool,
    keys: &Keys,
    request: &KeyedRequest,
    work: &dyn KeyedWork,
    started: Instant,
) -> Result<Claimed, IdempotencyError> {
    let quota = &keys.quota;
    let allowance = quota.take(request.merchant_id);
    let outcome = claim_loop(pool, keys, request, work, allowance.is_ok(), started).await;
    if allowance.is_ok() && !matches!(outcome, Ok(Claimed::Done { .. })) {
        // Only a key that was really opened counts.
        quota.give_back(request.merchant_id);
    }
    match (outcome, allowance) {
        (Ok(Claimed::Declined { .. }), Err(retry_after)) => {
            Err(IdempotencyError::RateLimited { retry_after })
        }
        (outcome, _) => outcome,
    }
}

/// A replay of a key remembered finished: its resource as it is now, one statement.
async fn replay_remembered(
    pool: &DbPool,
    request: &KeyedRequest,
    work: &dyn KeyedWork,
    finished: Finished,
) -> Result<Claimed, IdempotencyError> {
    if finished.fingerprint != request.fingerprint
        || finished.operation != request.operation.as_str()
    {
        return Err(IdempotencyError::Reused);
    }
    #[derive(QueryableByName)]
    struct Current {
        #[diesel(sql_type = Nullable<Jsonb>)]
        current: Option<Value>,
    }
    let sql = format!(
        "WITH found AS (SELECT $1::uuid AS resource_id) SELECT {} AS current FROM found",
        work.replay()
    );
    let mut conn = pool.get().await?;
    let row: Current = Sql::new(&sql)
        .bind::<diesel::sql_types::Uuid, _>(finished.resource_id)
        .bind::<diesel::sql_types::Uuid, _>(request.merchant_id.0)
        .get_result(&mut conn)
        .await?;
    Ok(Claimed::Replay {
        status: finished.status,
        current: row.current.unwrap_or(Value::Null),
    })
}

async fn claim_loop(
    pool: &DbPool,
    keys: &Keys,
    request: &KeyedRequest,
    work: &dyn KeyedWork,
    mut allowed: bool,
    started: Instant,
) -> Result<Claimed, IdempotencyError> {
    let settings = &keys.settings;
    let mut pause = Duration::from_millis(10);
    // Set once the work has declined, to make sure no request with the same key finished
    // in the instant before our lock; the next round only looks.
    let mut declined: Option<Option<DieselError>> = None;
    loop {
        let round = {
            let mut conn = pool.get().await?;
            claim_statement(settings, request, work, allowed)
                .get_result::<ClaimRow>(&mut conn)
                .await
        };
        let row = match round {
            Ok(row) => row,
            Err(DieselError::DatabaseError(DatabaseErrorKind::UniqueViolation, info))
                if info.constraint_name() == Some("idempotency_keys_pkey") =>
            {
                // Committed by another request after our snapshot: look again.
                continue;
            }
            Err(DieselError::DatabaseError(kind, info))
                if work.is_refusal(&kind, info.constraint_name()) && declined.is_none() =>
            {
                declined = Some(Some(DieselError::DatabaseError(kind, info)));
                allowed = false;
                continue;
            }
            Err(err) => return Err(err.into()),
        };
        let finished = remembered(&row, request, work, settings);
        match judge(row, request)? {
            Round::Done(fresh) => {
                if let Some(finished) = finished {
                    keys.recent.remember(request, finished);
                }
                return Ok(Claimed::Done { fresh });
            }
            Round::Replay { status, current } => {
                if let Some(finished) = finished {
                    keys.recent.remember(request, finished);
                }
                return Ok(Claimed::Replay { status, current });
            }
            Round::Nothing if declined.is_some() || !allowed => {
                return Ok(Claimed::Declined {
                    refusal: declined.flatten(),
                })
            }
            Round::Nothing => {
                declined = Some(None);
                allowed = false;
                continue;
            }
            Round::Free => {
                free_expired(&mut *pool.get().await?, request).await?;
                continue;
            }
            Round::Orphaned { current } => {
                let taken = take_over(&mut *pool.get().await?, settings, request).await?;
                if let Some(stored) = taken {
                    return Ok(Claimed::TakenOver { stored, current });
                }
                // Someone else took it over first: wait for them like for any holder.
                if started.elapsed() >= settings.wait {
                    return Err(IdempotencyError::InUse {
                        retry_after: Duration::from_secs(1),
                    });
                }
            }
            Round::Busy { lease_ends } => {
                if started.elapsed() >= settings.wait {
                    let retry_after = lease_ends
                        .and_then(|end| (end - Utc::now()).to_std().ok())
                        .unwrap_or(Duration::from_secs(1))
                        .clamp(Duration::from_secs(1), Duration::from_secs(60));
                    return Err(IdempotencyError::InUse { retry_after });
                }
            }
        }
        // Busy: wait for the request that holds the key, without a connection.
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(100));
    }
}

/// What to remember of a key this round found or made finished.
fn remembered(
    row: &ClaimRow,
    request: &KeyedRequest,
    work: &dyn KeyedWork,
    settings: &IdempotencySettings,
) -> Option<Finished> {
    let finished = |status: u16, resource_id: uuid::Uuid, expires_at| Finished {
        operation: request.operation.as_str(),
        fingerprint: request.fingerprint,
        status,
        resource_id,
        expires_at,
    };
    if row.recorded {
        // Made just now; its expiry counted from our clock, a minute early for skew.
        let RecordAs::Completed { status } = work.record_as() else {
            return None;
        };
        let ttl = chrono::Duration::from_std(settings.ttl(request.operation)).ok()?;
        let expires_at = Utc::now() + ttl - chrono::Duration::minutes(1);
        return Some(finished(status, row.made?, expires_at));
    }
    match (row.state.as_deref(), row.response_status, row.resource_id) {
        (Some("completed"), Some(status), Some(resource_id)) => {
            Some(finished(status as u16, resource_id, row.expires_at?))
        }
        _ => None,
    }
}

/// The claim statement; see the module comment for its shape.
fn claim_statement<'f>(
    settings: &IdempotencySettings,
    request: &'f KeyedRequest,
    work: &'f dyn KeyedWork,
    allowed: bool,
) -> Sql<'f> {
    let sql = format!(
        "WITH lock AS MATERIALIZED (SELECT pg_try_advisory_xact_lock($1) AS got), \
         found AS MATERIALIZED ( \
             SELECT operation, fingerprint, state, locked_until, recovery_point, resource_type, \
                    resource_id, response_status, expires_at, unresolved \
             FROM idempotency_keys WHERE merchant_id = $2 AND key = $3), \
         go AS MATERIALIZED ( \
             SELECT 1 AS go FROM lock WHERE got AND $4 AND NOT EXISTS (SELECT 1 FROM found)), \
         {ctes}, \
         recorded AS ( \
             INSERT INTO idempotency_keys (merchant_id, key, operation, fingerprint, state, \
                 locked_until, recovery_point, resource_type, resource_id, response_status, \
                 unresolved, expires_at) \
             SELECT $2, $3, $5, $6, $7, \
                 CASE WHEN $7 = 'in_flight' THEN now() + $8 * interval '1 millisecond' END, \
                 $9, $10, done.resource_id, $11, $12, now() + $13 * interval '1 millisecond' \
             FROM done RETURNING 1) \
         SELECT lock.got, EXISTS (SELECT 1 FROM recorded) AS recorded, \
                found.operation, found.fingerprint, found.state, found.locked_until, \
                found.response_status, found.resource_type, found.resource_id, \
                found.expires_at, found.unresolved, \
                (SELECT resource_id FROM done) AS made, \
                {fresh} AS fresh, \
                CASE WHEN found.state <> 'in_flight' OR found.locked_until < now() \
                     THEN {replay} END AS current \
         FROM lock LEFT JOIN found ON true",
        ctes = work.ctes(),
        fresh = work.fresh(),
        replay = work.replay(),
    );
    let (state, recovery_point, status) = match work.record_as() {
        RecordAs::Completed { status } => ("completed", "finished", Some(status as i16)),
        RecordAs::InFlight { recovery_point } => ("in_flight", recovery_point, None),
    };
    let query = Sql::new(&sql)
        .bind::<BigInt, _>(lock_key(request))
        .bind::<diesel::sql_types::Uuid, _>(request.merchant_id.0)
        .bind::<Text, _>(request.key.as_str())
        .bind::<Bool, _>(allowed)
        .bind::<Text, _>(request.operation.as_str())
        .bind::<Bytea, _>(request.fingerprint.as_slice())
        .bind::<Text, _>(state)
        .bind::<BigInt, _>(settings.lease.as_millis() as i64)
        .bind::<Text, _>(recovery_point)
        .bind::<Text, _>(work.resource_type())
        .bind::<Nullable<Int2>, _>(status)
        // A payment in flight is unresolved until transaction 2 says otherwise.
        .bind::<Bool, _>(status.is_none())
        .bind::<BigInt, _>(settings.ttl(request.operation).as_millis() as i64);
    work.bind(query)
}

/// The resource types of keys that moved money, and so are retired past their TTL instead
/// of freed (migrations `…_key_retirement`, `idempotency_key_made_money_move`).
const PAYMENT_ATTEMPT: &str = "payment_attempt";
const REFUND: &str = "refund";

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

#[derive(QueryableByName)]
struct ClaimRow {
    #[diesel(sql_type = Bool)]
    got: bool,
    #[diesel(sql_type = Bool)]
    recorded: bool,
    #[diesel(sql_type = Nullable<Text>)]
    operation: Option<String>,
    #[diesel(sql_type = Nullable<Bytea>)]
    fingerprint: Option<Vec<u8>>,
    #[diesel(sql_type = Nullable<Text>)]
    state: Option<String>,
    #[diesel(sql_type = Nullable<Timestamptz>)]
    locked_until: Option<DateTime<Utc>>,
    #[diesel(sql_type = Nullable<Int2>)]
    response_status: Option<i16>,
    #[diesel(sql_type = Nullable<Text>)]
    resource_type: Option<String>,
    #[diesel(sql_type = Nullable<diesel::sql_types::Uuid>)]
    resource_id: Option<uuid::Uuid>,
    #[diesel(sql_type = Nullable<Timestamptz>)]
    expires_at: Option<DateTime<Utc>>,
    #[diesel(sql_type = Nullable<Bool>)]
    unresolved: Option<bool>,
    /// The resource the work made, when it ran.
    #[diesel(sql_type = Nullable<diesel::sql_types::Uuid>)]
    made: Option<uuid::Uuid>,
    #[diesel(sql_type = Nullable<Jsonb>)]
    fresh: Option<Value>,
    #[diesel(sql_type = Nullable<Jsonb>)]
    current: Option<Value>,
}

enum Round {
    Done(Value),
    Replay {
        status: u16,
        current: Value,
    },
    /// Nobody has the key and the work did not run.
    Nothing,
    /// The key's time is up and it may be opened afresh: delete it and claim again.
    Free,
    /// In flight past its lease: whoever held it died.
    Orphaned {
        current: Value,
    },
    /// Another request holds the key (until `lease_ends`, if it has committed it).
    Busy {
        lease_ends: Option<DateTime<Utc>>,
    },
}

fn judge(row: ClaimRow, request: &KeyedRequest) -> Result<Round, IdempotencyError> {
    if row.recorded {
        return Ok(Round::Done(row.fresh.unwrap_or(Value::Null)));
    }
    let (Some(operation), Some(fingerprint), Some(state), Some(expires_at)) =
        (row.operation, row.fingerprint, row.state, row.expires_at)
    else {
        // No committed key: either nobody has it, or a request is inside its statement now.
        return Ok(if row.got {
            Round::Nothing
        } else {
            Round::Busy { lease_ends: None }
        });
    };
    let now = Utc::now();
    // Past its lifetime (and a completed key only once its work is final), the key no longer
    // answers for the request that made it, whatever this one's body: see the module comment.
    let past_ttl = match state.as_str() {
        "expired" => true,
        "completed" => row.unresolved == Some(false) && expires_at <= now,
        _ => false,
    };
    if past_ttl {
        let made_money_move =
            matches!(row.resource_type.as_deref(), Some(PAYMENT_ATTEMPT | REFUND));
        return match (made_money_move, state.as_str()) {
            (true, "expired") if expires_at <= now => Ok(Round::Free),
            (true, _) => Err(IdempotencyError::Expired(Box::new(ExpiredKey::read(
                row.resource_type.unwrap_or_default(),
                row.resource_id.unwrap_or_default(),
                row.current.as_ref().unwrap_or(&Value::Null),
            )))),
            (false, _) => Ok(Round::Free),
        };
    }
    if fingerprint != request.fingerprint.as_slice() || operation != request.operation.as_str() {
        return Err(IdempotencyError::Reused);
    }
    if state == "completed" {
        return Ok(Round::Replay {
            status: row.response_status.map_or(200, |s| s as u16),
            current: row.current.unwrap_or(Value::Null),
        });
    }
    // The lease is over only if the statement itself saw it over (it read `current` then):
    // judged by this clock alone, a lease that ran out between the statement's `now()` and
    // here would hand a takeover no resource to resume.
    match (row.locked_until, row.current) {
        (Some(until), Some(current)) if until <= now => Ok(Round::Orphaned { current }),
        (None, Some(current)) => Ok(Round::Orphaned { current }),
        (until, _) => Ok(Round::Busy { lease_ends: until }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::idempotency::{fingerprint, IdempotencyKey, Operation};
    use crate::ids::MerchantId;

    fn request() -> KeyedRequest {
        KeyedRequest {
            merchant_id: MerchantId(uuid::Uuid::now_v7()),
            key: IdempotencyKey::parse(Some(b"k")).unwrap(),
            operation: Operation::CreateRefund,
            fingerprint: fingerprint("POST", "/v1/payments/p/refunds", None),
        }
    }

    /// A key in flight whose lease ends at `locked_until`, as the claim statement read it.
    fn in_flight(
        request: &KeyedRequest,
        locked_until: DateTime<Utc>,
        current: Option<Value>,
    ) -> ClaimRow {
        ClaimRow {
            got: true,
            recorded: false,
            operation: Some(request.operation.as_str().into()),
            fingerprint: Some(request.fingerprint.as_slice().to_vec()),
            state: Some("in_flight".into()),
            locked_until: Some(locked_until),
            response_status: None,
            resource_type: Some(REFUND.into()),
            resource_id: Some(uuid::Uuid::now_v7()),
            expires_at: Some(Utc::now() + chrono::Duration::hours(1)),
            unresolved: Some(true),
            made: None,
            fresh: None,
            current,
        }
    }

    #[test]
    fn a_lease_the_statement_still_saw_running_is_waited_for_not_taken_over() {
        // The lease ran out between the statement's `now()` and the judging: the statement
        // read no resource, so there is nothing to resume yet; the next round takes it over.
        let request = request();
        let ended = Utc::now() - chrono::Duration::milliseconds(5);
        let round = judge(in_flight(&request, ended, None), &request).unwrap();
        assert!(matches!(round, Round::Busy { .. }));
        let current = serde_json::json!({"refund": {"id": "x"}});
        let round = judge(in_flight(&request, ended, Some(current.clone())), &request).unwrap();
        assert!(matches!(round, Round::Orphaned { current: c } if c == current));
    }
}
