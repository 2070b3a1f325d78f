//! The key store: claim a key (or learn it is taken, done or reused), record how far the work
//! got, complete it with the response, and reap expired keys.
//!
//! A claim runs inside a transaction the caller then continues: for database-only work the
//! key, the work and the recorded response commit together, so a duplicate can only ever see
//! "nothing yet" or "done". A per-key transaction-scoped advisory lock tells "someone is
//! mid-transaction with this key" apart without blocking on the unique index.

use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel::sql_types::{BigInt, Bool, Bytea, Int2, Jsonb, Nullable, Text, Uuid as SqlUuid};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use serde_json::Value;
use uuid::Uuid;

use super::{Fingerprint, IdempotencyKey, IdempotencyMetrics, Operation};
use crate::db::pool::PoolError;
use crate::db::schema::idempotency_keys;
use crate::db::transaction::{begin_transaction, commit, finish_transaction, rollback};
use crate::db::{DbConn, DbPool};
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

/// A key row as stored.
#[derive(Debug, Clone, Queryable, Selectable)]
#[diesel(table_name = idempotency_keys)]
pub struct StoredKey {
    pub operation: String,
    pub fingerprint: Vec<u8>,
    pub state: String,
    pub locked_until: Option<DateTime<Utc>>,
    pub recovery_point: String,
    pub resource_type: Option<String>,
    pub resource_id: Option<Uuid>,
    pub response_status: Option<i16>,
    pub response_body: Option<Value>,
    pub expires_at: DateTime<Utc>,
}

/// What a finished request recorded, to replay later.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub status: u16,
    pub resource_type: &'static str,
    pub resource_id: Uuid,
    pub body: Value,
    /// The work behind it is still open (a pending payment): the key must outlive its TTL.
    pub unresolved: bool,
}

/// The answer a finished request gave: its status, and the resource to show as it is now.
#[derive(Debug, Clone)]
pub struct Replay {
    pub status: u16,
    pub resource_type: Option<String>,
    pub resource_id: Option<Uuid>,
    pub body: Value,
}

/// The outcome of [`begin`].
#[derive(Debug)]
pub enum Begun {
    /// The key is new and ours: a transaction is open; finish with [`complete`] + [`commit`].
    Fresh,
    /// An earlier request died holding the key and its lease ran out: it is ours now, to
    /// resume from its recovery point. A transaction is open.
    TakenOver(StoredKey),
    /// The first request finished: answer as it did. No transaction is open.
    Replay(Replay),
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

/// Claims `request`'s key, waiting up to `settings.wait` while another request holds it,
/// and answers with the connection to go on with (inside the claim's transaction for
/// `Fresh` and `TakenOver`). No connection is held while waiting, so a crowd of duplicates
/// cannot drain the pool.
pub async fn begin(
    pool: &DbPool,
    settings: &IdempotencySettings,
    metrics: &IdempotencyMetrics,
    request: &KeyedRequest,
) -> Result<(Begun, DbConn), IdempotencyError> {
    let started = Instant::now();
    let outcome = claim_loop(pool, settings, request, started).await;
    let label = match &outcome {
        Ok((Begun::Fresh, _)) => "created",
        Ok((Begun::TakenOver(_), _)) => "taken_over",
        Ok((Begun::Replay(_), _)) => "replayed",
        Err(IdempotencyError::InUse { .. }) => "in_use",
        Err(IdempotencyError::Reused) => "reused_mismatch",
        Err(IdempotencyError::RateLimited { .. }) => "rate_limited",
        Err(IdempotencyError::Database(_) | IdempotencyError::Unavailable(_)) => "error",
    };
    metrics.observe(label, started.elapsed());
    tracing::Span::current().record("idempotency_outcome", label);
    outcome
}

async fn claim_loop(
    pool: &DbPool,
    settings: &IdempotencySettings,
    request: &KeyedRequest,
    started: Instant,
) -> Result<(Begun, DbConn), IdempotencyError> {
    let mut pause = Duration::from_millis(10);
    loop {
        let mut conn = pool.get().await?;
        begin_transaction(&mut conn).await?;
        let step = match claim_once(&mut conn, settings, request).await {
            Ok(step) => step,
            Err(err) => {
                rollback(&mut conn).await;
                return Err(err);
            }
        };
        match step {
            Step::Done(begun @ (Begun::Fresh | Begun::TakenOver(_))) => return Ok((begun, conn)),
            Step::Done(replay) => {
                rollback(&mut conn).await;
                return Ok((replay, conn));
            }
            Step::Refused(err) => {
                rollback(&mut conn).await;
                return Err(err);
            }
            Step::Expired => {
                // Deleted inside this transaction; commit so the next round inserts afresh.
                commit(&mut conn).await?;
                continue;
            }
            Step::Busy { lease_ends } => {
                rollback(&mut conn).await;
                drop(conn);
                if started.elapsed() >= settings.wait {
                    let retry_after = lease_ends
                        .and_then(|end| (end - Utc::now()).to_std().ok())
                        .unwrap_or(Duration::from_secs(1))
                        .clamp(Duration::from_secs(1), Duration::from_secs(60));
                    return Err(IdempotencyError::InUse { retry_after });
                }
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_millis(100));
            }
        }
    }
}

enum Step {
    Done(Begun),
    Refused(IdempotencyError),
    Busy { lease_ends: Option<DateTime<Utc>> },
    Expired,
}

/// One round inside an open transaction.
async fn claim_once(
    conn: &mut AsyncPgConnection,
    settings: &IdempotencySettings,
    request: &KeyedRequest,
) -> Result<Step, IdempotencyError> {
    if try_insert(conn, settings, request).await? {
        check_rate(conn, settings, request.merchant_id).await?;
        return Ok(Step::Done(Begun::Fresh));
    }
    let Some(stored) = load(conn, request).await? else {
        // Not visible and not insertable: another transaction holds the key right now.
        return Ok(Step::Busy { lease_ends: None });
    };
    if stored.fingerprint != request.fingerprint || stored.operation != request.operation.as_str() {
        return Ok(Step::Refused(IdempotencyError::Reused));
    }
    let now = Utc::now();
    if stored.state == "completed" {
        if stored.expires_at <= now {
            delete(conn, request).await?;
            return Ok(Step::Expired);
        }
        return Ok(Step::Done(Begun::Replay(Replay {
            status: stored.response_status.unwrap_or(200) as u16,
            resource_type: stored.resource_type,
            resource_id: stored.resource_id,
            body: stored.response_body.unwrap_or(Value::Null),
        })));
    }
    match stored.locked_until {
        Some(until) if until > now => Ok(Step::Busy {
            lease_ends: Some(until),
        }),
        _ => match take_over(conn, settings, request).await? {
            Some(taken) => Ok(Step::Done(Begun::TakenOver(taken))),
            // Someone else took it over first.
            None => Ok(Step::Busy { lease_ends: None }),
        },
    }
}

/// Inserts the key as in flight, unless it exists or another transaction holds its lock.
async fn try_insert(
    conn: &mut AsyncPgConnection,
    settings: &IdempotencySettings,
    request: &KeyedRequest,
) -> QueryResult<bool> {
    #[derive(QueryableByName)]
    struct Inserted {
        #[diesel(sql_type = Bool)]
        #[allow(dead_code)]
        inserted: bool,
    }
    let rows: Vec<Inserted> = diesel::sql_query(
        "WITH lock AS (SELECT pg_try_advisory_xact_lock($1) AS got) \
         INSERT INTO idempotency_keys \
             (merchant_id, key, operation, fingerprint, state, locked_until, expires_at) \
         SELECT $2, $3, $4, $5, 'in_flight', now() + $6 * interval '1 millisecond', \
                now() + $7 * interval '1 millisecond' \
         FROM lock WHERE lock.got \
         ON CONFLICT (merchant_id, key) DO NOTHING \
         RETURNING true AS inserted",
    )
    .bind::<BigInt, _>(lock_key(request))
    .bind::<SqlUuid, _>(request.merchant_id.0)
    .bind::<Text, _>(request.key.as_str())
    .bind::<Text, _>(request.operation.as_str())
    .bind::<Bytea, _>(request.fingerprint.as_slice())
    .bind::<BigInt, _>(settings.lease.as_millis() as i64)
    .bind::<BigInt, _>(settings.ttl(request.operation).as_millis() as i64)
    .load(conn)
    .await?;
    Ok(!rows.is_empty())
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

/// Refuses a new key past the merchant's per-minute allowance. Counted from the key table
/// itself (bounded by the limit), so only keys that were really opened count.
async fn check_rate(
    conn: &mut AsyncPgConnection,
    settings: &IdempotencySettings,
    merchant_id: MerchantId,
) -> Result<(), IdempotencyError> {
    #[derive(QueryableByName)]
    struct Count {
        #[diesel(sql_type = BigInt)]
        opened: i64,
    }
    let count: Count = diesel::sql_query(
        "SELECT count(*) AS opened FROM (SELECT 1 FROM idempotency_keys \
         WHERE merchant_id = $1 AND created_at > now() - interval '1 minute' LIMIT $2) recent",
    )
    .bind::<SqlUuid, _>(merchant_id.0)
    .bind::<BigInt, _>(settings.max_new_keys_per_minute + 1)
    .get_result(conn)
    .await?;
    if count.opened > settings.max_new_keys_per_minute {
        let into_minute = Utc::now().timestamp().rem_euclid(60) as u64;
        return Err(IdempotencyError::RateLimited {
            retry_after: Duration::from_secs((60 - into_minute).max(1)),
        });
    }
    Ok(())
}

async fn load(
    conn: &mut AsyncPgConnection,
    request: &KeyedRequest,
) -> QueryResult<Option<StoredKey>> {
    idempotency_keys::table
        .find((request.merchant_id.0, request.key.as_str()))
        .select(StoredKey::as_select())
        .first(conn)
        .await
        .optional()
}

async fn delete(conn: &mut AsyncPgConnection, request: &KeyedRequest) -> QueryResult<usize> {
    diesel::delete(idempotency_keys::table.find((request.merchant_id.0, request.key.as_str())))
        .execute(conn)
        .await
}

/// Extends the lease of an in-flight key whose lease ran out, if nobody else did first.
async fn take_over(
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

/// Records how far a multi-step operation got (and which resource it made), so a takeover
/// resumes from there. Inside the caller's transaction.
pub async fn set_recovery_point(
    conn: &mut AsyncPgConnection,
    request: &KeyedRequest,
    point: &str,
    resource: Option<(&'static str, Uuid)>,
) -> QueryResult<()> {
    diesel::update(idempotency_keys::table.find((request.merchant_id.0, request.key.as_str())))
        .set((
            idempotency_keys::recovery_point.eq(point),
            idempotency_keys::resource_type.eq(resource.map(|r| r.0)),
            idempotency_keys::resource_id.eq(resource.map(|r| r.1)),
            idempotency_keys::updated_at.eq(diesel::dsl::now),
        ))
        .execute(conn)
        .await
        .map(|_| ())
}

/// Marks the key done with the response to replay. Inside the caller's transaction.
pub async fn complete(
    conn: &mut AsyncPgConnection,
    request: &KeyedRequest,
    recorded: &Recorded,
) -> QueryResult<()> {
    diesel::sql_query(
        "UPDATE idempotency_keys SET state = 'completed', locked_until = NULL, \
             recovery_point = 'finished', resource_type = $3, resource_id = $4, \
             response_status = $5, response_body = $6, unresolved = $7, updated_at = now() \
         WHERE merchant_id = $1 AND key = $2",
    )
    .bind::<SqlUuid, _>(request.merchant_id.0)
    .bind::<Text, _>(request.key.as_str())
    .bind::<Nullable<Text>, _>(Some(recorded.resource_type))
    .bind::<Nullable<SqlUuid>, _>(Some(recorded.resource_id))
    .bind::<Int2, _>(recorded.status as i16)
    .bind::<Jsonb, _>(&recorded.body)
    .bind::<Bool, _>(recorded.unresolved)
    .execute(conn)
    .await
    .map(|_| ())
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
             recovery_point = 'finished', response_status = $5, response_body = $6, \
             unresolved = $7, updated_at = now() \
         WHERE merchant_id = $1 AND key = $2 AND resource_type = $3 AND resource_id = $4 \
           AND (state = 'in_flight' OR unresolved)",
    )
    .bind::<SqlUuid, _>(merchant_id.0)
    .bind::<Text, _>(key)
    .bind::<Text, _>(recorded.resource_type)
    .bind::<SqlUuid, _>(recorded.resource_id)
    .bind::<Int2, _>(recorded.status as i16)
    .bind::<Jsonb, _>(&recorded.body)
    .bind::<Bool, _>(recorded.unresolved)
    .execute(conn)
    .await
    .map(|_| ())
}

/// Runs database-only `work` exactly once per key: key, work and response in one transaction.
/// A refusal by `work` (its `Err`) rolls everything back, so the key is not recorded and a
/// retry with it is judged afresh.
pub async fn run_once<T, E>(
    pool: &DbPool,
    settings: &IdempotencySettings,
    metrics: &IdempotencyMetrics,
    request: &KeyedRequest,
    work: impl AsyncFnOnce(&mut AsyncPgConnection) -> Result<(T, Recorded), E>,
) -> Result<Completion<T>, E>
where
    E: From<IdempotencyError> + From<diesel::result::Error>,
{
    let (begun, mut conn) = begin(pool, settings, metrics, request).await?;
    let conn = &mut *conn;
    match begun {
        Begun::Replay(replay) => Ok(Completion::Replayed(replay)),
        // Database-only work never leaves a key in flight after its transaction, so a
        // takeover means the key row came from elsewhere: redo the work under it.
        Begun::Fresh | Begun::TakenOver(_) => {
            finish_transaction(conn, async |conn| {
                let (value, recorded) = work(conn).await?;
                complete(conn, request, &recorded).await?;
                Ok(Completion::Fresh(value))
            })
            .await
        }
    }
}

pub enum Completion<T> {
    Fresh(T),
    Replayed(Replay),
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
