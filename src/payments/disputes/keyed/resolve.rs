//! One send of a pending dispute action and what its answer proves (docs/guides/disputes.md,
//! "Answering a dispute"): [`resolve`], for the request that made the action or its retry
//! ([`act`](super::act)), and for another action's request on the same dispute once the
//! pending one's client has let its lease pass ([`take_over`]).

use chrono::Utc;
use diesel::sql_types::{Integer, Jsonb, Nullable, Text, Timestamptz, Uuid as SqlUuid};
use diesel::QueryableByName;
use diesel_async::{AsyncConnection, RunQueryDsl};
use serde_json::Value;

use super::evidence_json;
use super::{ActError, ActionMade, DisputeActionKind, DisputeActionRow, DisputeActionStatus};
use crate::db::statement::Statement;
use crate::db::DbPool;
use crate::db::PgConn;
use crate::idempotency::in_flight::complete_for_resource;
use crate::idempotency::{IdempotencySettings, Recorded, ResourceType};
use crate::ids::{DisputeActionId, DisputeId, MerchantId};
use crate::payments::disputes::{find, DisputeView};
use crate::payments::service::Payments;
use crate::providers::dispute_actions::{AcceptDisputeRequest, DisputeEvidenceRequest};
use crate::providers::{ProviderCall, ProviderOutcome};

/// Resends `pending`, the pending action in the way of another action's request on its
/// dispute, if its own request has let its key's lease pass: under a fresh lease of that key
/// and the action's own provider key, exactly as its client's retry would. `true` when the
/// action is final after it (its key then completed): the other request may go on, judged by
/// the dispute as it now stands. `false`: the action is still pending (its key's holder is at
/// it, or the answer told nothing again), and the other request waits as before.
///
/// The smallest rule that frees a dispute from a client that gave up without ever sending a
/// second answer while the first may still be taken: the pending answer is settled first,
/// by its own request's means.
pub async fn take_over(
    pool: &DbPool,
    payments: &Payments,
    settings: &IdempotencySettings,
    merchant_id: MerchantId,
    pending: DisputeActionId,
) -> Result<bool, ActError> {
    let lease_end = Utc::now()
        + chrono::Duration::from_std(settings.lease).unwrap_or(chrono::Duration::seconds(30));
    let mut conn = pool.get().await?;
    let mut q = Statement::new();
    let merchant = q.bind::<SqlUuid, _>(merchant_id.0);
    let id = q.bind::<SqlUuid, _>(pending.0);
    let lease = q.bind::<Timestamptz, _>(lease_end);
    let resource = q.bind::<Text, _>(ResourceType::DisputeAction.as_str());
    q.push(format_args!(
        "UPDATE idempotency_keys k SET locked_until = {lease}, updated_at = now()
FROM dispute_actions a
WHERE a.merchant_id = {merchant} AND a.id = {id} AND a.status = 'pending'
  AND k.merchant_id = a.merchant_id AND k.key = a.idempotency_key
  AND k.resource_type = {resource} AND k.resource_id = a.id
  AND k.state = 'in_flight' AND k.locked_until < now()
RETURNING to_jsonb(a) AS row"
    ));
    let rows: Vec<JsonRow> = q.finish().load(&mut conn).await?;
    let Some(row) = rows.into_iter().next() else {
        return Ok(false);
    };
    let action: DisputeActionRow = serde_json::from_value(row.row)
        .map_err(|e| ActError::Inconsistent(format!("a dispute action row: {e}")))?;
    tracing::info!(action = %pending, "resending a pending dispute action whose request let its lease pass");
    let dispute = find(&mut conn, Some(merchant_id), DisputeId(action.dispute_id))
        .await?
        .ok_or(ActError::DisputeNotFound)?;
    drop(conn);
    let key = action.idempotency_key.clone();
    let resolved = resolve(pool, payments, action, dispute).await?;
    if resolved.pending {
        return Ok(false);
    }
    let mut conn = pool.get().await?;
    complete_for_resource(&mut conn, merchant_id, &key, &recorded(&resolved.action)).await?;
    Ok(true)
}

#[derive(QueryableByName)]
struct JsonRow {
    #[diesel(sql_type = Jsonb)]
    row: Value,
}

/// The actions on a dispute, oldest first.
pub async fn actions_of(
    conn: &mut PgConn,
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

/// An action after one send of it, and whether it is still pending.
pub(super) struct Resolved {
    pub action: DisputeActionRow,
    pub dispute: DisputeView,
    pub pending: bool,
}

/// Sends a pending action once and records what its answer proves. A refusal proves nothing
/// was done only when no earlier send may have reached the provider (`sends`, counted before
/// the call): after a send whose answer was lost, the provider may have taken the first and
/// refuse the resend for that very reason (Stripe past its key's 24 hours: "already under
/// review"; Adyen `success: false`), so the action stays pending and the dispute's news
/// settles it (migration 000029's `dispute_actions_end_with_the_dispute`).
pub(super) async fn resolve(
    pool: &DbPool,
    payments: &Payments,
    action: DisputeActionRow,
    dispute: DisputeView,
) -> Result<Resolved, ActError> {
    if action.status() != DisputeActionStatus::Pending {
        return Ok(Resolved {
            action,
            dispute,
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

fn still_pending(action: DisputeActionRow, dispute: DisputeView) -> Result<Resolved, ActError> {
    Ok(Resolved {
        action,
        dispute,
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
    conn: &mut PgConn,
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

pub(super) fn recorded(action: &DisputeActionRow) -> Recorded {
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
    conn: &mut PgConn,
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
    // The dispute's row is locked first, in the same transaction: the news that moves a
    // dispute locks it before its pending action (dispute_actions_end_with_the_dispute), and
    // this statement, taking the action first, would deadlock with it. Locked, a move the news
    // committed first is what the statement reads, and it moves nothing from there.
    let mut lock = Statement::new();
    let lock_merchant = lock.bind::<SqlUuid, _>(action.merchant_id);
    let dispute = lock.bind::<SqlUuid, _>(action.dispute_id);
    lock.push(format_args!(
        "SELECT 1 FROM disputes WHERE merchant_id = {lock_merchant} AND id = {dispute}
FOR NO KEY UPDATE"
    ));
    let row: JsonRow = conn
        .transaction::<_, diesel::result::Error, _>(async |conn| {
            lock.finish().execute(conn).await?;
            q.finish().load(conn).await.and_then(crate::db::one)
        })
        .await?;
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
    conn: &mut PgConn,
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
