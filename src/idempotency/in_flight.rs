//! A key's life after its claim: what it names, how far its work got, and every statement
//! that finishes it. Every write to `idempotency_keys` lives in this module's folder
//! (`claim`, `takeover`, `reaper` and here); the statements of `payments` that finish a key
//! take the fragment from here (docs/DESIGN.md, "The write path").
//!
//! The request that claimed a key for work that stays in flight (a payment, a refund, a
//! capture or void between its two transactions) holds an [`InFlightKey`]: the claim (or a
//! takeover) is its only maker, and each way of finishing it takes it by value, so a key is
//! finished once. One way per situation:
//!
//! - **The request records its work's answer in one statement** (a payment's transaction 2):
//!   [`InFlightKey::settle`], the CTE `settled` of that statement. The [`Settling`] it
//!   returns is resolved by what the statement wrote: [`Settling::written`] (completed) or
//!   [`Settling::unwritten`] (the resource was not as read: the key comes back).
//! - **The request moves its key to a new resource** (failover's next attempt):
//!   [`InFlightKey::repoint`], resolved by [`Repointing::moved`] or [`Repointing::unmoved`].
//! - **The request finishes its work by more than one statement**, in one transaction (its
//!   resource was final already, a webhook moved it first, its send never reached the
//!   provider, a refund's or hold operation's answer): [`InFlightKey::complete`] inside that
//!   transaction; a transaction that rolls back before it hands the key back by
//!   [`Unfinished::Back`].
//! - **Someone else finished the work** (the reconciler, a webhook, support): it holds no
//!   token and completes the key by its resource, in the statement that moved it
//!   ([`settle_by_resource`]) or, when the move took more than one, by a statement of its own
//!   ([`complete_for_resource`]).

use diesel::sql_types::{Bool, Int2, Nullable, Text, Timestamptz, Uuid as SqlUuid};
use diesel::QueryResult;
use diesel_async::RunQueryDsl;
use uuid::Uuid;

use super::origin::RequestOrigin;
use super::words::words;
use super::{IdempotencyKey, KeyedRequest, Recorded};
use crate::db::statement::{span, Param, Statement};
use crate::db::PgConn;
use crate::ids::MerchantId;
use tracing::Instrument;

words! {
    /// What a key names (`idempotency_keys.resource_type`).
    pub enum ResourceType {
        Order => "order",
        PaymentAttempt => "payment_attempt",
        Refund => "refund",
        WebhookEndpoint => "webhook_endpoint",
        /// A capture or a void of a payment's hold.
        HoldOperation => "hold_operation",
        /// Evidence for a dispute, or its accept (`dispute_actions`).
        DisputeAction => "dispute_action",
    }
}

impl ResourceType {
    /// Keys of work that moved money are retired past their TTL instead of freed
    /// (migrations `…_key_retirement`, `idempotency_key_made_money_move`).
    pub fn made_money_move(self) -> bool {
        matches!(
            self,
            ResourceType::PaymentAttempt
                | ResourceType::Refund
                | ResourceType::HoldOperation
                | ResourceType::DisputeAction
        )
    }
}

words! {
    /// Where a key is in its life (`idempotency_keys.state`).
    pub enum KeyState {
        /// Its request (or whoever took it over) is doing the work, under a lease once
        /// committed.
        InFlight => "in_flight",
        /// Its work is done: a retry replays it.
        Completed => "completed",
        /// Retired past its TTL: its work moved money, so it names what it made until its
        /// horizon.
        Expired => "expired",
    }
}

impl KeyState {
    /// As an SQL literal, for a statement's text: a fixed value keeps one plan.
    pub fn sql(self) -> String {
        format!("'{}'", self.as_str())
    }
}

words! {
    /// How far a key's work had got when its request last recorded it
    /// (`idempotency_keys.recovery_point`): where a request that takes the key over resumes.
    pub enum RecoveryPoint {
        /// The attempt exists (transaction 1 committed); its charge may or may not have been
        /// sent.
        AttemptCreated => "attempt_created",
        /// The refund exists; its provider call may or may not have been sent.
        RefundCreated => "refund_created",
        /// The capture or void exists; its provider call may or may not have been sent.
        HoldOperationCreated => "hold_operation_created",
        /// The dispute action exists; its provider call may or may not have been sent.
        DisputeActionCreated => "dispute_action_created",
        /// The work is done and the key completed.
        Finished => "finished",
    }
}

impl RecoveryPoint {
    /// As an SQL literal.
    pub fn sql(self) -> String {
        format!("'{}'", self.as_str())
    }
}

/// A key this request holds in flight: handed out by the claim (a new key whose work stays
/// open, or a key taken over from a request that died), and consumed by the statement that
/// finishes it. Holding one means no other request is doing this key's work.
#[derive(Debug)]
#[must_use = "a key in flight is finished by the statement that records its work's answer"]
pub struct InFlightKey {
    merchant_id: MerchantId,
    key: IdempotencyKey,
    resource: ResourceType,
    resource_id: Uuid,
    recovery_point: RecoveryPoint,
    /// The request holding it, as the events of its work name it.
    origin: RequestOrigin,
}

impl InFlightKey {
    pub(super) fn new(
        request: &KeyedRequest,
        resource: ResourceType,
        resource_id: Uuid,
        recovery_point: RecoveryPoint,
    ) -> Self {
        InFlightKey {
            merchant_id: request.merchant_id,
            key: request.key.clone(),
            resource,
            resource_id,
            recovery_point,
            origin: RequestOrigin::of(request),
        }
    }

    pub fn recovery_point(&self) -> RecoveryPoint {
        self.recovery_point
    }

    /// The client's key, as the resource it made records it.
    pub fn as_str(&self) -> &str {
        self.key.as_str()
    }

    /// The CTE `settled`, for the statement that records the answer to this key's work:
    /// completes the key, so a replay answers with the resource as it is then. The key goes
    /// into the statement; what the statement came to says whether it comes back
    /// ([`Settling`]).
    pub fn settle(self, q: &mut Statement<'_>, settle: Settle<'_>) -> Settling {
        let merchant = q.bind::<SqlUuid, _>(self.merchant_id.0);
        let key = q.bind::<Text, _>(self.key.as_str().to_owned());
        let origin = self.origin.set_config(q);
        settled_cte(
            q,
            merchant,
            key,
            self.resource,
            self.resource_id,
            settle,
            Completer::Request { origin },
        );
        Settling(self)
    }

    /// The CTE `repointed`: the key now names `made_id` (the `id` of CTE `made`'s row)
    /// instead of this key's resource, with a fresh lease ending at `lease_end`: one RETURNING
    /// row exactly when the key was still ours, as claimed. Failover's one statement (see
    /// `payments::attempts::keyed::fail_over`). What the statement came to says which key is
    /// in flight after it ([`Repointing`]).
    pub fn repoint(
        self,
        q: &mut Statement<'_>,
        made: &str,
        made_id: Uuid,
        lease_end: chrono::DateTime<chrono::Utc>,
    ) -> Repointing {
        let merchant = q.bind::<SqlUuid, _>(self.merchant_id.0);
        let key = q.bind::<Text, _>(self.key.as_str().to_owned());
        let was = q.bind::<SqlUuid, _>(self.resource_id);
        let lease = q.bind::<Timestamptz, _>(lease_end);
        let resource = q.bind::<Text, _>(self.resource.as_str());
        let origin = self.origin.set_config(q);
        q.push(format_args!(
            "repointed AS (
    UPDATE idempotency_keys SET resource_id = (SELECT id FROM {made}),
        locked_until = {lease}, updated_at = now()
    WHERE merchant_id = {merchant} AND key = {key} AND state = {in_flight}
      AND resource_type = {resource} AND resource_id = {was}
    RETURNING {origin})",
            in_flight = KeyState::InFlight.sql(),
        ));
        let now = InFlightKey {
            merchant_id: self.merchant_id,
            key: self.key.clone(),
            resource: self.resource,
            resource_id: made_id,
            recovery_point: self.recovery_point,
            origin: self.origin.clone(),
        };
        Repointing { was: self, now }
    }

    /// Names this key's request to the event triggers for the rest of the caller's
    /// transaction: first thing in a transaction that changes the key's resource in one
    /// statement and completes the key in a later one ([`complete`](Self::complete)).
    pub async fn name_request(&self, conn: &mut PgConn) -> QueryResult<()> {
        self.origin.name_request(conn).await
    }

    /// Completes this key on its own, inside the caller's transaction, for a function that
    /// took the key by value and finishes its work by more than one statement (a webhook
    /// moved the attempt first; a send that never reached its provider). A transaction that
    /// may still roll back before it reaches this hands the key back by [`Unfinished::Back`].
    pub async fn complete(self, conn: &mut PgConn, recorded: &Recorded) -> QueryResult<()> {
        complete_for_resource(conn, self.merchant_id, self.key.as_str(), recorded).await
    }
}

/// A key whose `settled` CTE is in a statement: the statement's result says which way it
/// went. Wrote its row: the key is completed ([`written`](Self::written)). Wrote nothing (the
/// resource was not as read): the key is still in flight and this request's
/// ([`unwritten`](Self::unwritten)).
#[derive(Debug)]
#[must_use = "the statement's result says whether the key was completed or comes back"]
pub struct Settling(InFlightKey);

impl Settling {
    /// The statement wrote its row: the key is completed, and nothing is left to hold.
    pub fn written(self) {}

    /// The statement wrote nothing: the key, still in flight, comes back.
    pub fn unwritten(self) -> InFlightKey {
        self.0
    }
}

/// A key whose `repointed` CTE is in a statement: in flight on the made resource if the
/// statement moved it, on the old one if not.
#[derive(Debug)]
#[must_use = "the statement's result says which key is in flight after it"]
pub struct Repointing {
    was: InFlightKey,
    now: InFlightKey,
}

impl Repointing {
    /// The key moved: in flight on the resource the statement made.
    pub fn moved(self) -> InFlightKey {
        self.now
    }

    /// The key did not move (it was not as claimed): as it was.
    pub fn unmoved(self) -> InFlightKey {
        self.was
    }
}

/// A transaction that was to finish a key and did not: it rolled back with the key handed
/// back (nothing was written; this request still holds the key), or it failed.
#[derive(Debug)]
pub enum Unfinished {
    Back(InFlightKey),
    Failed(diesel::result::Error),
}

impl From<diesel::result::Error> for Unfinished {
    fn from(err: diesel::result::Error) -> Self {
        Unfinished::Failed(err)
    }
}

/// How a statement that moved a key's resource completes the key: `from` is the CTE with the
/// moved row (and its `status`), `status` what a replay answers, and `open` the SQL list of
/// the statuses in which the work is still open (the key is then `unresolved` and outlives
/// its TTL).
#[derive(Debug, Clone, Copy)]
pub struct Settle<'a> {
    pub from: &'a str,
    pub status: u16,
    pub open: &'a str,
}

/// The CTE `settled` for whoever finished work that is not its request's (a webhook, the
/// reconciler): the key `key` (the value of the resource's own `idempotency_key` column; none
/// for a resource made without one) completes once the moved row's status is in
/// `answered_statuses` (an SQL list: the statuses at which the work has its answer; `None`:
/// at whatever status the row is left, open or final), unless it was completed already and
/// resolved.
pub fn settle_by_resource<'f>(
    q: &mut Statement<'f>,
    merchant_id: MerchantId,
    key: Option<&'f str>,
    (resource, resource_id): (ResourceType, Uuid),
    settle: Settle<'_>,
    answered_statuses: Option<&str>,
) {
    let merchant = q.bind::<SqlUuid, _>(merchant_id.0);
    let key = q.bind::<Nullable<Text>, _>(key);
    settled_cte(
        q,
        merchant,
        key,
        resource,
        resource_id,
        settle,
        Completer::Other { answered_statuses },
    );
}

/// Who completes a key in a `settled` CTE.
enum Completer<'a> {
    /// The request holding it: the CTE names it to the event triggers (the SQL of
    /// [`RequestOrigin::set_config`]).
    Request { origin: String },
    /// Someone else (a webhook, the reconciler): only once the moved row's status is in
    /// `answered_statuses`, if given.
    Other { answered_statuses: Option<&'a str> },
}

/// See [`InFlightKey::settle`] and [`settle_by_resource`].
fn settled_cte(
    q: &mut Statement<'_>,
    merchant: Param,
    key: Param,
    resource: ResourceType,
    resource_id: Uuid,
    Settle { from, status, open }: Settle<'_>,
    completer: Completer<'_>,
) {
    let id = q.bind::<SqlUuid, _>(resource_id);
    let resource = q.bind::<Text, _>(resource.as_str());
    let status = q.bind::<Int2, _>(status as i16);
    let (when, returning) = match completer {
        Completer::Other {
            answered_statuses: Some(answered),
        } => (
            format!("SELECT 1 FROM {from} WHERE status IN {answered}"),
            String::new(),
        ),
        Completer::Other {
            answered_statuses: None,
        } => (format!("SELECT 1 FROM {from}"), String::new()),
        Completer::Request { origin } => (
            format!("SELECT 1 FROM {from}"),
            format!("\n    RETURNING {origin}"),
        ),
    };
    q.push(format_args!(
        "settled AS (
    UPDATE idempotency_keys SET state = {completed}, locked_until = NULL,
        recovery_point = {finished}, response_status = {status},
        unresolved = (SELECT status IN {open} FROM {from}),
        updated_at = now()
    WHERE merchant_id = {merchant} AND key = {key} AND resource_type = {resource}
      AND resource_id = {id} AND (state = {in_flight} OR unresolved)
      AND EXISTS ({when}){returning})",
        completed = KeyState::Completed.sql(),
        finished = RecoveryPoint::Finished.sql(),
        in_flight = KeyState::InFlight.sql(),
    ));
}

/// Completes the key that made `recorded`'s resource when someone other than its request
/// finished the work (the reconciler, a webhook): in flight or completed-but-unresolved, it
/// now replays `recorded`. Inside the caller's transaction.
pub async fn complete_for_resource(
    conn: &mut PgConn,
    merchant_id: MerchantId,
    key: &str,
    recorded: &Recorded,
) -> QueryResult<()> {
    let mut q = Statement::new();
    let merchant = q.bind::<SqlUuid, _>(merchant_id.0);
    let key = q.bind::<Text, _>(key);
    let resource = q.bind::<Text, _>(recorded.resource_type.as_str());
    let id = q.bind::<SqlUuid, _>(recorded.resource_id);
    let status = q.bind::<Int2, _>(recorded.status as i16);
    let unresolved = q.bind::<Bool, _>(recorded.unresolved);
    q.push(format_args!(
        "UPDATE idempotency_keys SET state = {completed}, locked_until = NULL,
    recovery_point = {finished}, response_status = {status}, unresolved = {unresolved},
    updated_at = now()
WHERE merchant_id = {merchant} AND key = {key} AND resource_type = {resource}
  AND resource_id = {id} AND (state = {in_flight} OR unresolved)",
        completed = KeyState::Completed.sql(),
        finished = RecoveryPoint::Finished.sql(),
        in_flight = KeyState::InFlight.sql(),
    ));
    q.finish()
        .execute(conn)
        .instrument(span("complete_key"))
        .await
        .map(|_| ())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::idempotency::{fingerprint, Operation};

    /// A key in flight for a payment attempt, as a claim hands it out.
    pub(crate) fn a_key_in_flight() -> InFlightKey {
        let request = KeyedRequest {
            merchant_id: MerchantId(Uuid::nil()),
            key: IdempotencyKey::parse(Some(b"k")).expect("a key"),
            operation: Operation::Checkout,
            fingerprint: fingerprint("POST", "/v1/checkout", None),
            request_id: "req_test".into(),
        };
        InFlightKey::new(
            &request,
            ResourceType::PaymentAttempt,
            Uuid::nil(),
            RecoveryPoint::AttemptCreated,
        )
    }

    #[test]
    fn each_word_reads_back_as_itself() {
        // Over `ALL`, so a new variant is covered without touching this test.
        for t in ResourceType::ALL {
            assert_eq!(ResourceType::parse(t.as_str()), Some(t));
        }
        for p in RecoveryPoint::ALL {
            assert_eq!(RecoveryPoint::parse(p.as_str()), Some(p));
        }
        for s in KeyState::ALL {
            assert_eq!(KeyState::parse(s.as_str()), Some(s));
        }
        assert_eq!(RecoveryPoint::parse("attempt_made"), None);
    }
}
