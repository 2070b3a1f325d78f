//! A payment's disputes as support's story shows them (docs/guides/support.md, "Disputes"):
//! the dispute as `GET /v1/disputes/{id}` shows it, its moves, the merchant's answers, and
//! all of it in one line.

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::payments::disputes::{DisputeTransition, DisputeView};
use crate::payments::support::disputes::{ActionLine, DisputeStory};

/// One dispute of the payment, with what happened to it.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct DisputeStoryView {
    dispute: DisputeView,
    /// "2026-11-20 needs_response (chargeback, fraudulent): 4200 eur withdrawn; 2026-11-21
    /// evidence submitted; …": every move and answer in order, and what a refund returned
    /// before it.
    told: String,
    /// Every move, oldest first.
    moves: Vec<DisputeMove>,
    /// The merchant's answers, oldest first (their evidence is not shown).
    answers: Vec<DisputeAnswer>,
}

/// One move of a dispute.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct DisputeMove {
    /// `null` for the move that made the dispute.
    from: Option<String>,
    to: String,
    stage: String,
    /// What told it: `webhook` (the provider's news) or `api` (the answer to an action).
    source: String,
    detail: Option<String>,
    at: DateTime<Utc>,
}

/// One answer the merchant sent: evidence, or an accept.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct DisputeAnswer {
    /// `evidence` or `accept`.
    kind: String,
    /// `pending` (its answer told nothing yet), `succeeded` or `failed` (the provider refused
    /// it: nothing was done).
    status: String,
    failure_code: Option<String>,
    failure_message: Option<String>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

impl From<DisputeTransition> for DisputeMove {
    fn from(t: DisputeTransition) -> Self {
        DisputeMove {
            from: t.from_status,
            to: t.to_status,
            stage: t.stage,
            source: t.source,
            detail: t.detail,
            at: t.created_at,
        }
    }
}

impl From<ActionLine> for DisputeAnswer {
    fn from(a: ActionLine) -> Self {
        DisputeAnswer {
            kind: a.kind,
            status: a.status,
            failure_code: a.failure_code,
            failure_message: a.failure_message,
            created_at: a.created_at,
            updated_at: a.updated_at,
        }
    }
}

impl From<DisputeStory> for DisputeStoryView {
    fn from(s: DisputeStory) -> Self {
        DisputeStoryView {
            dispute: s.dispute,
            told: s.told,
            moves: s.moves.into_iter().map(Into::into).collect(),
            answers: s.actions.into_iter().map(Into::into).collect(),
        }
    }
}
