//! The evidence and accept flow, behind `POST /v1/disputes/{id}/evidence` and `…/accept`,
//! entered by [`act`] with one [`ActContext`] (as a capture enters): the evidence validated
//! and held to what the dispute's provider takes, then the claim statement with
//! [`StartDisputeAction`], the provider call under the action's own key, then its answer in
//! one statement that also moves the dispute (evidence: `under_review`, or
//! `warning_under_review` for an inquiry; accept: `lost`) along the moves the `…_disputes`
//! migration allows. An accepted inquiry does not move: what follows is the provider's to
//! tell (Adyen books the chargeback, `lost`; Stripe closes it, `warning_closed`), and a
//! `warning_closed` of payorch's own would be final, refusing the chargeback's news that the
//! payer has the money (docs/guides/disputes.md, "Answering a dispute").
//!
//! An answer that told nothing (a timeout, a `5xx`, anything unread) leaves the action
//! `pending` and its key in flight: a retry of the request, once the lease has passed, takes
//! the key over and resends under the same provider key, never under a new one.

use diesel::sql_types::{Integer, Jsonb, Nullable, Text, Uuid as SqlUuid};
use diesel::QueryableByName;
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use serde_json::Value;

use super::evidence_json::{self, EvidenceInput};
use super::{
    ActionMade, DisputeActionKind, DisputeActionRow, DisputeActionStatus, StartDisputeAction,
};
use crate::db::pool::PoolError;
use crate::db::statement::Statement;
use crate::db::DbPool;
use crate::idempotency::{
    claim, IdempotencyError, InFlightKey, Keyed, Recorded, RecoveryPoint, ResourceType,
};
use crate::ids::{DisputeActionId, DisputeId, MerchantId};
use crate::payments::disputes::{find, DisputeRow, DisputeStatus, DisputeView};
use crate::payments::service::{Context, Payments};
use crate::providers::dispute_actions::{AcceptDisputeRequest, DisputeEvidenceRequest};
use crate::providers::{adyen, stripe, ProviderCall, ProviderOutcome};

/// Everything one evidence or accept request needs.
pub type ActContext<'a> = Context<'a, ActInput>;

/// An evidence or accept request as the client sent it, read but not yet validated.
#[derive(Debug, Clone)]
pub struct ActInput {
    pub dispute_id: DisputeId,
    pub kind: DisputeActionKind,
    /// The evidence's body; `None` for an accept.
    pub evidence: Option<EvidenceInput>,
}

/// What an evidence or accept request came to.
#[derive(Debug)]
pub struct Acted {
    pub action: DisputeActionRow,
    pub dispute: DisputeView,
    /// `200`, or `202` for an action still pending; a replay's recorded status.
    pub status: u16,
    pub replayed: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum ActError {
    #[error("the request's fields do not hold: {0:?}")]
    Invalid(Vec<(String, String)>),
    #[error(transparent)]
    Idempotency(#[from] IdempotencyError),
    #[error("no such dispute")]
    DisputeNotFound,
    /// The dispute takes no answer now: `detail` says why and what to do.
    #[error("{detail}")]
    NotAnswerable {
        status: DisputeStatus,
        detail: String,
    },
    #[error("another action on this dispute is under way")]
    InProgress { action: DisputeActionId },
    #[error(transparent)]
    Unavailable(#[from] PoolError),
    #[error(transparent)]
    Database(#[from] diesel::result::Error),
    #[error("{0}")]
    Inconsistent(String),
}

/// Answers or accepts the context's dispute, once per key.
pub async fn act(ctx: &ActContext<'_>) -> Result<Acted, ActError> {
    let (pool, keys, payments, keyed) = (ctx.pool, ctx.keys, ctx.payments, ctx.keyed);
    let ActInput {
        dispute_id, kind, ..
    } = ctx.input;
    let stored = match &ctx.input.evidence {
        Some(input) => {
            let evidence = evidence_json::validate(input).map_err(ActError::Invalid)?;
            // What the dispute's provider cannot take is refused before anything is recorded.
            let mut conn = pool.get().await?;
            let dispute = find(&mut conn, Some(keyed.merchant_id), dispute_id)
                .await?
                .ok_or(ActError::DisputeNotFound)?;
            let refusal = match payments.adapter(&dispute.provider).name() {
                "stripe" => stripe::disputes::evidence_refusal(&evidence),
                "adyen" => adyen::disputes::evidence_refusal(&evidence),
                _ => None,
            };
            if let Some(message) = refusal {
                return Err(ActError::Invalid(vec![("".into(), message)]));
            }
            evidence_json::to_json(&evidence)
        }
        None => serde_json::json!({}),
    };
    let work = StartDisputeAction::new(dispute_id, kind, stored);
    let parts = |made: ActionMade| {
        made.parts()
            .ok_or_else(|| ActError::Inconsistent("a dispute action key names no action".into()))
    };
    match claim(pool, keys, keyed, &work).await? {
        Keyed::Made {
            made,
            key: Some(key),
        } => {
            let (action, dispute) = parts(made)?;
            finish(pool, payments, action, dispute, key).await
        }
        Keyed::Replayed { status, current } => {
            let (action, dispute) = parts(current)?;
            Ok(Acted {
                action,
                dispute: dispute.into(),
                status,
                replayed: true,
            })
        }
        // An earlier request made the action and died, or its answer told nothing: resume
        // it under the same provider key, never make another.
        Keyed::Resumed { current, key }
            if key.recovery_point() == RecoveryPoint::DisputeActionCreated =>
        {
            let (action, dispute) = parts(current)?;
            finish(pool, payments, action, dispute, key).await
        }
        Keyed::Resumed { key, .. } => Err(ActError::Inconsistent(format!(
            "a dispute action key in flight at recovery point {}",
            key.recovery_point().as_str()
        ))),
        Keyed::Made { key: None, .. } => Err(ActError::Inconsistent(
            "a dispute action key was not left in flight".into(),
        )),
        Keyed::Declined { .. } => {
            let mut conn = pool.get().await?;
            Err(why_refused(&mut conn, keyed.merchant_id, dispute_id, kind).await?)
        }
    }
}

/// Why the database refused an action on `dispute_id`, as the dispute stands now.
pub async fn why_refused(
    conn: &mut AsyncPgConnection,
    merchant_id: MerchantId,
    dispute_id: DisputeId,
    kind: DisputeActionKind,
) -> Result<ActError, ActError> {
    let Some(dispute) = find(conn, Some(merchant_id), dispute_id).await? else {
        return Ok(ActError::DisputeNotFound);
    };
    let actions = actions_of(conn, merchant_id, dispute_id).await?;
    if let Some(pending) = actions
        .iter()
        .find(|a| a.status() == DisputeActionStatus::Pending)
    {
        return Ok(ActError::InProgress {
            action: DisputeActionId(pending.id),
        });
    }
    let accepted = actions.iter().any(|a| {
        a.kind == DisputeActionKind::Accept.as_str() && a.status() == DisputeActionStatus::Succeeded
    });
    let status = dispute.status;
    let what = if kind == DisputeActionKind::Accept {
        "accepted"
    } else {
        "answered"
    };
    let detail = if accepted {
        format!(
            "the dispute was accepted already and is {}: nothing more can be sent",
            status.as_str()
        )
    } else if matches!(
        status,
        DisputeStatus::Won | DisputeStatus::Lost | DisputeStatus::WarningClosed
    ) {
        format!(
            "the dispute is {} and closed: it can no longer be {what}",
            status.as_str()
        )
    } else {
        format!(
            "the dispute is {}: evidence was submitted and the bank is deciding; wait for its \
             dispute.closed event",
            status.as_str()
        )
    };
    Ok(ActError::NotAnswerable { status, detail })
}

#[derive(QueryableByName)]
struct JsonRow {
    #[diesel(sql_type = Jsonb)]
    row: Value,
}

/// The actions on a dispute, oldest first.
pub async fn actions_of(
    conn: &mut AsyncPgConnection,
    merchant_id: MerchantId,
    dispute_id: DisputeId,
) -> Result<Vec<DisputeActionRow>, ActError> {
    let mut q = Statement::new();
    let merchant = q.bind::<SqlUuid, _>(merchant_id.0);
    let dispute = q.bind::<SqlUuid, _>(dispute_id.0);
    q.push(format_args!(
        "SELECT to_jsonb(a) AS row FROM dispute_actions a \
         WHERE a.merchant_id = {merchant} AND a.dispute_id = {dispute} ORDER BY a.id"
    ));
    let rows: Vec<JsonRow> = q.finish().load(conn).await?;
    rows.into_iter()
        .map(|r| {
            serde_json::from_value(r.row)
                .map_err(|e| ActError::Inconsistent(format!("a dispute action row: {e}")))
        })
        .collect()
}

/// Steps 2 and 3: the provider call under the action's key, then its answer; the key is
/// completed once the action is final, and left in flight while it is pending.
async fn finish(
    pool: &DbPool,
    payments: &Payments,
    action: DisputeActionRow,
    dispute: DisputeRow,
    key: InFlightKey,
) -> Result<Acted, ActError> {
    let resolved = resolve(pool, payments, action, dispute).await?;
    if resolved.pending {
        // Nothing certain: the action stays pending, and so does its key (see the module).
        drop(key);
        return Ok(Acted {
            action: resolved.action,
            dispute: resolved.dispute,
            status: 202,
            replayed: false,
        });
    }
    let mut conn = pool.get().await?;
    key.complete(&mut conn, &recorded(&resolved.action)).await?;
    Ok(Acted {
        action: resolved.action,
        dispute: resolved.dispute,
        status: 200,
        replayed: false,
    })
}

/// An action after one send of it, and whether it is still pending.
struct Resolved {
    action: DisputeActionRow,
    dispute: DisputeView,
    pending: bool,
}

/// Sends a pending action once and records what its answer proves. A refusal proves nothing
/// was done only when no earlier send may have reached the provider (`sends`, counted before
/// the call): after a send whose answer was lost, the provider may have taken the first and
/// refuse the resend for that very reason (Stripe past its key's 24 hours: "already under
/// review"; Adyen `success: false`), so the action stays pending and the dispute's news
/// settles it (migration 000029's `dispute_actions_end_with_the_dispute`).
async fn resolve(
    pool: &DbPool,
    payments: &Payments,
    action: DisputeActionRow,
    dispute: DisputeRow,
) -> Result<Resolved, ActError> {
    if action.status() != DisputeActionStatus::Pending {
        return Ok(Resolved {
            action,
            dispute: dispute.into(),
            pending: false,
        });
    }
    let mut conn = pool.get().await?;
    let Some(sends) = count_send(&mut conn, &action, 1).await? else {
        // Settled since it was read (the dispute's news): as it is now.
        let (action, dispute) = current(&mut conn, &action).await?;
        return Ok(Resolved {
            action,
            dispute,
            pending: false,
        });
    };
    // No connection is held across the provider's answer.
    drop(conn);
    let call = send(payments, &action).await;
    let pending = |why: &str| {
        tracing::warn!(action = %DisputeActionId(action.id), outcome = call.outcome.label(),
            sends, "a dispute action's answer {why}; a retry of the request resends it");
    };
    let (status, code, message) = match &call.outcome {
        ProviderOutcome::Succeeded { .. } => (DisputeActionStatus::Succeeded, None, None),
        ProviderOutcome::Failed { code, message, .. } if sends <= 1 => (
            DisputeActionStatus::Failed,
            Some(code.clone()),
            Some(message.clone()),
        ),
        ProviderOutcome::Failed { .. } => {
            pending("refused a resend after a send whose answer was lost, which it may have taken");
            return still_pending(action, dispute);
        }
        ProviderOutcome::Unavailable { .. } => {
            // Provably never left: it does not count as a send that may have reached.
            let mut conn = pool.get().await?;
            count_send(&mut conn, &action, -1).await?;
            pending("never left");
            return still_pending(action, dispute);
        }
        _ => {
            pending("told nothing");
            return still_pending(action, dispute);
        }
    };
    let mut conn = pool.get().await?;
    let (action, dispute) = record(&mut conn, &action, status, code, message).await?;
    Ok(Resolved {
        action,
        dispute,
        pending: false,
    })
}

fn still_pending(action: DisputeActionRow, dispute: DisputeRow) -> Result<Resolved, ActError> {
    Ok(Resolved {
        action,
        dispute: dispute.into(),
        pending: true,
    })
}

#[derive(QueryableByName)]
struct Sends {
    #[diesel(sql_type = Integer)]
    sends: i32,
}

/// Counts one more send of the pending `action` (`by` 1), or uncounts one that never left
/// (`by` -1): its sends after it, `None` when the action is no longer pending.
async fn count_send(
    conn: &mut AsyncPgConnection,
    action: &DisputeActionRow,
    by: i32,
) -> Result<Option<i32>, ActError> {
    let mut q = Statement::new();
    let merchant = q.bind::<SqlUuid, _>(action.merchant_id);
    let id = q.bind::<SqlUuid, _>(action.id);
    let by = q.bind::<Integer, _>(by);
    q.push(format_args!(
        "UPDATE dispute_actions SET sends = greatest(sends + {by}, 0)
WHERE merchant_id = {merchant} AND id = {id} AND status = 'pending' RETURNING sends"
    ));
    let rows: Vec<Sends> = q.finish().load(conn).await?;
    Ok(rows.into_iter().next().map(|r| r.sends))
}

fn recorded(action: &DisputeActionRow) -> Recorded {
    Recorded {
        status: 200,
        resource_type: ResourceType::DisputeAction,
        resource_id: action.id,
        unresolved: false,
    }
}

/// The provider call of `action`, under its own key: the same on every resend.
async fn send(payments: &Payments, action: &DisputeActionRow) -> ProviderCall {
    let provider = payments.adapter(&action.provider);
    let id = DisputeActionId(action.id).to_string();
    let merchant = MerchantId(action.merchant_id).to_string();
    let dispute_id = DisputeId(action.dispute_id).to_string();
    if action.kind == DisputeActionKind::Accept.as_str() {
        provider
            .accept_dispute(&AcceptDisputeRequest {
                provider_dispute_id: action.provider_dispute_id.clone(),
                idempotency_key: action.provider_idempotency_key.clone(),
                dispute_id,
                merchant_id: merchant,
            })
            .await
    } else {
        tracing::debug!(action = %id, "submitting dispute evidence");
        provider
            .submit_dispute_evidence(&DisputeEvidenceRequest {
                provider_dispute_id: action.provider_dispute_id.clone(),
                idempotency_key: action.provider_idempotency_key.clone(),
                dispute_id,
                merchant_id: merchant,
                evidence: evidence_json::from_json(&action.evidence),
            })
            .await
    }
}

/// The answer, in one statement: the action final, and on success the dispute moved (if it
/// is still as the statement read it: a webhook may have moved it first, and the update then
/// leaves it alone rather than try a move from where the webhook took it) with its timeline
/// row.
async fn record(
    conn: &mut AsyncPgConnection,
    action: &DisputeActionRow,
    status: DisputeActionStatus,
    code: Option<String>,
    message: Option<String>,
) -> Result<(DisputeActionRow, DisputeView), ActError> {
    let mut q = Statement::new();
    let merchant = q.bind::<SqlUuid, _>(action.merchant_id);
    let id = q.bind::<SqlUuid, _>(action.id);
    let status = q.bind::<Text, _>(status.as_str());
    let code = q.bind::<Nullable<Text>, _>(code);
    let message = q.bind::<Nullable<Text>, _>(message);
    q.push(format_args!(
        "WITH acted AS (
    UPDATE dispute_actions SET status = {status}, failure_code = {code}, failure_message = {message}
    WHERE merchant_id = {merchant} AND id = {id} AND status = 'pending' RETURNING *),
before AS (
    SELECT d.merchant_id, d.id, d.status, a.kind FROM disputes d JOIN acted a
        ON d.merchant_id = a.merchant_id AND d.id = a.dispute_id
    WHERE a.status = 'succeeded' AND (d.status = 'needs_response'
        OR (d.status = 'warning_needs_response' AND a.kind = 'evidence'))),
moved AS (
    UPDATE disputes d SET
        status = CASE WHEN b.kind = 'evidence' AND b.status = 'needs_response' THEN 'under_review'
                      WHEN b.kind = 'evidence' THEN 'warning_under_review'
                      ELSE 'lost' END,
        evidence_submitted_at = CASE WHEN b.kind = 'evidence' THEN now()
                                     ELSE d.evidence_submitted_at END
    FROM before b WHERE d.merchant_id = b.merchant_id AND d.id = b.id AND d.status = b.status
    RETURNING d.*),
told AS (
    INSERT INTO dispute_transitions (merchant_id, dispute_id, from_status, to_status, stage,
        source, detail)
    SELECT m.merchant_id, m.id, b.status, m.status, m.stage, 'api',
        CASE WHEN b.kind = 'evidence' THEN 'evidence submitted' ELSE 'accepted' END
    FROM moved m JOIN before b ON b.merchant_id = m.merchant_id AND b.id = m.id)
SELECT jsonb_build_object('action', (SELECT to_jsonb(a) FROM acted a),
    'dispute', (SELECT to_jsonb(m) FROM moved m)) AS row"
    ));
    let row: JsonRow = q.finish().load(conn).await.and_then(crate::db::one)?;
    let made: ActionMade = serde_json::from_value(row.row)
        .map_err(|e| ActError::Inconsistent(format!("a dispute action's answer: {e}")))?;
    match made.parts() {
        Some((action, dispute)) => Ok((action, dispute.into())),
        // Nothing moved (the dispute's news moved it first, or an accepted inquiry waits for
        // the provider's), or someone recorded the action first (a request that took the key
        // over, the dispute's news): both read as they are now, after this statement, not as
        // its snapshot saw them.
        None => current(conn, action).await,
    }
}

/// `action` and its dispute as they are now.
async fn current(
    conn: &mut AsyncPgConnection,
    action: &DisputeActionRow,
) -> Result<(DisputeActionRow, DisputeView), ActError> {
    let actions = actions_of(
        conn,
        MerchantId(action.merchant_id),
        DisputeId(action.dispute_id),
    )
    .await?;
    let action = actions
        .into_iter()
        .find(|a| a.id == action.id)
        .ok_or_else(|| ActError::Inconsistent("a dispute action vanished".into()))?;
    let dispute = find(
        conn,
        Some(MerchantId(action.merchant_id)),
        DisputeId(action.dispute_id),
    )
    .await?
    .ok_or(ActError::DisputeNotFound)?;
    Ok((action, dispute))
}
