//! Claiming a key and doing the work under it in **one statement**, and answering a replay
//! in the same statement.
//!
//! Every keyed request starts with one SQL statement, run on its own (autocommit, so it is
//! its own transaction): see [`statement`] for its frame and `tests/sql/claim_*.sql` for the
//! whole text of each operation's.
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
//!   `409 idempotency_key_expired` naming what it made, until its horizon ends (docs/guides/idempotency.md, "A
//!   key's life"). A key whose payment or refund is still open never expires.
//!
//! The key insert has no `ON CONFLICT`: if another request committed the same key between
//! this statement's snapshot and its lock, the insert fails on the primary key and the claim
//! simply runs again (and then replays).

mod round;
mod statement;

#[cfg(test)]
pub(crate) mod snapshot {
    //! The claim statement's text for a statement snapshot (`db::snapshot`).

    use super::{claim_statement, KeyedWork};
    use crate::db::sql::Sql;
    use crate::idempotency::{
        fingerprint, IdempotencyKey, IdempotencySettings, KeyedRequest, Operation,
    };
    use crate::ids::MerchantId;

    /// The claim statement of `operation` for `work`, under a made-up key.
    pub(crate) fn claim_text<W: KeyedWork>(operation: Operation, work: &W) -> Sql<'static> {
        let request = KeyedRequest {
            merchant_id: MerchantId(uuid::Uuid::nil()),
            key: IdempotencyKey::parse(Some(b"k")).expect("a key"),
            operation,
            fingerprint: fingerprint("POST", operation.route(), None),
            request_id: "req_test".into(),
        };
        let sql = claim_statement(&IdempotencySettings::default(), &request, work, true);
        // Only its text is read: the values, which borrow `request`, may go.
        sql.text_only()
    }
}

use std::time::{Duration, Instant};

use chrono::Utc;
use diesel::result::{DatabaseErrorKind, Error as DieselError};
use diesel_async::RunQueryDsl;
use serde::de::DeserializeOwned;
use serde_json::Value;

use round::{judge, Round};
pub use statement::ClaimParams;
use statement::{claim_statement, replay_statement, ClaimRow};

use super::in_flight::{InFlightKey, KeyState, RecoveryPoint, ResourceType};
use super::recent::Finished;
use super::takeover::{free_expired, take_over};
use super::{IdempotencyError, IdempotencySettings};
use super::{KeyedRequest, Keys};
use crate::db::statement::{span, Param, Statement};
use crate::db::DbPool;
use tracing::Instrument;

/// How the key of a finished piece of work is recorded.
#[derive(Debug, Clone, Copy)]
pub enum RecordAs {
    /// Database-only work: finished in the same statement; a replay answers `status`.
    Completed { status: u16 },
    /// A payment or refund between its two transactions: in flight under a lease, at
    /// `recovery_point`, finished by the statement that records its answer (which consumes
    /// the [`InFlightKey`] the claim hands out), or by whoever finishes the work.
    InFlight { recovery_point: RecoveryPoint },
}

/// The work a key protects, as SQL that runs inside the claim statement. Each fragment binds
/// its own values on the [`Statement`] and writes the placeholders it gets back.
pub trait KeyedWork: Sync {
    /// What the work made, and what a replay reads: the `jsonb` object of [`Self::fresh`] and
    /// [`Self::replay`], decoded once, here.
    type Made: DeserializeOwned + Default;
    /// The resource the key names.
    fn resource_type(&self) -> ResourceType;
    fn record_as(&self) -> RecordAs;
    /// CTEs (each `name AS (…)`, comma-separated, no leading `WITH`) that do the work only
    /// when the relation `go` has its row, and end in a CTE `done` with one column
    /// `resource_id uuid`, one row exactly when the work happened. They may use the claim's
    /// merchant and key.
    fn ctes<'f>(&'f self, q: &mut Statement<'f>, claim: &ClaimParams);
    /// A `jsonb` expression: what the work made, read from its CTEs' `RETURNING`.
    fn fresh(&self, q: &mut Statement<'_>);
    /// A `jsonb` expression: the resource(s) of the finished key as they are now, read
    /// through `found.resource_id` and the merchant, and nothing else (it also runs alone,
    /// for a key this replica remembers).
    fn replay(&self, q: &mut Statement<'_>, merchant: Param);
    /// Whether a failed statement is the database refusing the work (an invariant), which is
    /// answered to the client and never recorded.
    fn is_refusal(&self, kind: &DatabaseErrorKind, constraint: Option<&str>) -> bool;
}

/// What claiming a key came to, with the work's resources decoded. Every use case (orders,
/// payments, refunds) answers from this one shape.
#[derive(Debug)]
pub enum Keyed<T> {
    /// The work ran now and its key was recorded with it. `key`: the key still in flight,
    /// when the work stays open (a payment, a refund) — the statement recording its answer
    /// consumes it; `None` when the key was completed in the same statement.
    Made { made: T, key: Option<InFlightKey> },
    /// A request with this key finished before: answer `status` with `current`, the
    /// resource as it is now.
    Replayed { status: u16, current: T },
    /// An earlier request died holding the key and its lease ran out: it is ours now, to
    /// resume from `key`'s recovery point. `current` is its resource as it is now.
    Resumed { current: T, key: InFlightKey },
    /// The work declined: it found nothing to do (no row matched), or the database refused
    /// it (`refusal`). Nothing was recorded and no other request holds the key.
    Declined { refusal: Option<DieselError> },
}

impl<T> Keyed<T> {
    /// The label of metrics and the log line.
    fn label(&self) -> &'static str {
        match self {
            Keyed::Made { .. } => "created",
            Keyed::Declined { .. } => "declined",
            Keyed::Resumed { .. } => "taken_over",
            Keyed::Replayed { .. } => "replayed",
        }
    }
}

/// What a round of the claim came to, before decoding.
enum Claimed {
    Done {
        fresh: Value,
        made: Option<uuid::Uuid>,
    },
    Replay {
        status: u16,
        current: Value,
    },
    TakenOver {
        taken: TakenKey,
        current: Value,
    },
    Declined {
        refusal: Option<DieselError>,
    },
}

/// The key a takeover extended, as its row says.
struct TakenKey {
    resource_type: Option<String>,
    resource_id: Option<uuid::Uuid>,
    recovery_point: String,
}

/// Claims `request`'s key and, if it is new, does `work` in the same statement. Waits up
/// to `settings.wait` while another request holds the key, holding no connection between
/// polls. A new key takes a slot of the merchant's per-minute quota; past it the key is
/// still looked up (a replay is answered), but no work runs and the answer is `429`. A key
/// this replica saw finished is answered by reading its resource only.
pub async fn claim<W: KeyedWork>(
    pool: &DbPool,
    keys: &Keys,
    request: &KeyedRequest,
    work: &W,
) -> Result<Keyed<W::Made>, IdempotencyError> {
    let started = Instant::now();
    let claim_span = tracing::debug_span!(
        target: crate::telemetry::TRACE,
        "idempotency.claim",
        operation = request.operation.as_str(),
        outcome = tracing::field::Empty,
    );
    let outcome = async {
        let claimed = match keys.recent.get(request) {
            Some(finished) => replay_remembered(pool, request, work, finished).await,
            None => claim_new(pool, keys, request, work, started).await,
        };
        claimed.and_then(|claimed| decode(request, work, claimed))
    };
    let outcome = outcome.instrument(claim_span.clone()).await;
    let label = match &outcome {
        Ok(keyed) => keyed.label(),
        Err(IdempotencyError::InUse { .. }) => "in_use",
        Err(IdempotencyError::Reused) => "reused_mismatch",
        Err(IdempotencyError::Expired(_)) => "expired",
        Err(IdempotencyError::RateLimited { .. }) => "rate_limited",
        Err(IdempotencyError::Database(_) | IdempotencyError::Unavailable(_)) => "error",
    };
    claim_span.record("outcome", label);
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

/// The round's resources read into the work's type, and a key in flight handed out as its
/// token.
fn decode<W: KeyedWork>(
    request: &KeyedRequest,
    work: &W,
    claimed: Claimed,
) -> Result<Keyed<W::Made>, IdempotencyError> {
    let read = |value: Value| -> Result<W::Made, IdempotencyError> {
        if value.is_null() {
            return Ok(W::Made::default());
        }
        serde_json::from_value(value).map_err(|err| unreadable(format!("its resources: {err}")))
    };
    Ok(match claimed {
        Claimed::Done { fresh, made } => {
            let key = match (work.record_as(), made) {
                (RecordAs::Completed { .. }, _) => None,
                (RecordAs::InFlight { recovery_point }, Some(id)) => Some(InFlightKey::new(
                    request,
                    work.resource_type(),
                    id,
                    recovery_point,
                )),
                (RecordAs::InFlight { .. }, None) => {
                    return Err(unreadable("no resource made".into()))
                }
            };
            Keyed::Made {
                made: read(fresh)?,
                key,
            }
        }
        Claimed::Replay { status, current } => Keyed::Replayed {
            status,
            current: read(current)?,
        },
        Claimed::TakenOver { taken, current } => {
            let resource = taken.resource_type.as_deref().and_then(ResourceType::parse);
            let point = RecoveryPoint::parse(&taken.recovery_point);
            let (Some(resource), Some(id), Some(point)) = (resource, taken.resource_id, point)
            else {
                return Err(unreadable(format!(
                    "a key taken over names {:?} {:?} at {:?}",
                    taken.resource_type, taken.resource_id, taken.recovery_point
                )));
            };
            if resource != work.resource_type() {
                return Err(unreadable(format!(
                    "a key of {} taken over by work on {}",
                    resource.as_str(),
                    work.resource_type().as_str()
                )));
            }
            Keyed::Resumed {
                current: read(current)?,
                key: InFlightKey::new(request, resource, id, point),
            }
        }
        Claimed::Declined { refusal } => Keyed::Declined { refusal },
    })
}

/// A key row or resource that does not read as it must: an error, never a silent default.
pub(super) fn unreadable(what: String) -> IdempotencyError {
    IdempotencyError::Database(DieselError::DeserializationError(
        format!("idempotency key: {what}").into(),
    ))
}

async fn claim_new<W: KeyedWork>(
    pool: &DbPool,
    keys: &Keys,
    request: &KeyedRequest,
    work: &W,
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
async fn replay_remembered<W: KeyedWork>(
    pool: &DbPool,
    request: &KeyedRequest,
    work: &W,
    finished: Finished,
) -> Result<Claimed, IdempotencyError> {
    if finished.fingerprint != request.fingerprint
        || finished.operation != request.operation.as_str()
    {
        return Err(IdempotencyError::Reused);
    }
    #[derive(diesel::QueryableByName)]
    struct Current {
        #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::Jsonb>)]
        current: Option<Value>,
    }
    let mut conn = pool.get().await?;
    let row: Current = replay_statement(request, work, finished.resource_id)
        .load(&mut conn)
        .instrument(span("claim_replay"))
        .await
        .and_then(crate::db::one)?;
    Ok(Claimed::Replay {
        status: finished.status,
        current: row.current.unwrap_or(Value::Null),
    })
}

async fn claim_loop<W: KeyedWork>(
    pool: &DbPool,
    keys: &Keys,
    request: &KeyedRequest,
    work: &W,
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
                .load::<ClaimRow>(&mut conn)
                .instrument(span("claim"))
                .await
                .and_then(crate::db::one)
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
        let finished = remembered(&row, request, work.record_as(), settings);
        let made = row.made;
        match judge(row, request)? {
            Round::Done(fresh) => {
                if let Some(finished) = finished {
                    keys.recent.remember(request, finished);
                }
                return Ok(Claimed::Done { fresh, made });
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
                    let taken = TakenKey {
                        resource_type: stored.resource_type,
                        resource_id: stored.resource_id,
                        recovery_point: stored.recovery_point,
                    };
                    return Ok(Claimed::TakenOver { taken, current });
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
    record_as: RecordAs,
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
        let RecordAs::Completed { status } = record_as else {
            return None;
        };
        let ttl = chrono::Duration::from_std(settings.ttl(request.operation)).ok()?;
        let expires_at = Utc::now() + ttl - chrono::Duration::minutes(1);
        return Some(finished(status, row.made?, expires_at));
    }
    let state = row.state.as_deref().and_then(KeyState::parse);
    match (state, row.response_status, row.resource_id) {
        (Some(KeyState::Completed), Some(status), Some(resource_id)) => {
            Some(finished(status as u16, resource_id, row.expires_at?))
        }
        _ => None,
    }
}
