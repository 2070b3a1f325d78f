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

use super::evidence_json::{self, EvidenceInput};
use super::resolve::{recorded, resolve, take_over};
use super::{
    ActionMade, DisputeActionKind, DisputeActionRow, DisputeActionStatus, StartDisputeAction,
};
use crate::db::DbPool;
use crate::db::PgConn;
use crate::idempotency::{claim, InFlightKey, Keyed, RecoveryPoint};
use crate::ids::{DisputeActionId, DisputeId, MerchantId};
use crate::payments::disputes::{find, DisputeRow, DisputeStatus, DisputeView};
use crate::payments::service::{Context, Payments};
use crate::providers::{adyen, stripe};

pub use super::resolve::actions_of;
pub use super::ActError;

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
    // At most twice: a second round after a pending action in the way was settled by this
    // request (see the refusal below).
    let mut took_over = false;
    loop {
        return match claim(pool, keys, keyed, &work).await? {
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
                let refused = why_refused(&mut conn, keyed.merchant_id, dispute_id, kind).await?;
                drop(conn);
                // A pending action whose request let its lease pass is settled first, as its own
                // client's retry would (resolve::take_over); then this request is judged again.
                if let ActError::InProgress { action } = refused {
                    if !took_over
                        && take_over(pool, payments, &keys.settings, keyed.merchant_id, action)
                            .await?
                    {
                        took_over = true;
                        continue;
                    }
                }
                Err(refused)
            }
        };
    }
}

/// Why the database refused an action on `dispute_id`, as the dispute stands now.
pub async fn why_refused(
    conn: &mut PgConn,
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

/// Steps 2 and 3: the provider call under the action's key, then its answer; the key is
/// completed once the action is final, and left in flight while it is pending.
async fn finish(
    pool: &DbPool,
    payments: &Payments,
    action: DisputeActionRow,
    dispute: DisputeRow,
    key: InFlightKey,
) -> Result<Acted, ActError> {
    let resolved = resolve(pool, payments, action, dispute.into()).await?;
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
