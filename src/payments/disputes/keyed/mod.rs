//! `POST /v1/disputes/{id}/evidence` and `…/accept`, step 1: the action `pending` and the
//! key, in the claim statement (whole text: `tests/sql/claim_submit_dispute_evidence.sql`).
//! The database decides whether the dispute takes it (`dispute_actions_dispute_answerable`:
//! it awaits an answer; `dispute_actions_one_pending`: no other action under way); the
//! statement then fails whole, nothing is recorded, and [`act::why_refused`] says why.
//! [`act`] is the rest: the provider call under the action's own key, and its answer.

pub mod act;
pub mod evidence_json;
pub mod resolve;

use chrono::{DateTime, Utc};
use diesel::result::DatabaseErrorKind;
use diesel::sql_types::{Jsonb, Text, Uuid as SqlUuid};
use serde::Deserialize;
use uuid::Uuid;

use super::{DisputeRow, DisputeStatus};
use crate::db::pool::PoolError;
use crate::db::statement::Statement;
use crate::idempotency::{
    ClaimParams, IdempotencyError, KeyedWork, RecordAs, RecoveryPoint, ResourceType,
};
use crate::ids::{DisputeActionId, DisputeId};
use crate::words::words;

words! {
    /// What a merchant did about a dispute (`dispute_actions.kind`).
    pub enum DisputeActionKind {
        /// Evidence answering it (Stripe submits it at once; Adyen defends with it).
        Evidence => "evidence",
        /// Accepted: the merchant gives the money up (Stripe's close).
        Accept => "accept",
    }
}

words! {
    /// Where an action is (`dispute_actions.status`).
    pub enum DisputeActionStatus {
        /// Made; its provider call unanswered, or answered with nothing certain: a retry of the
        /// request resends it under the same provider key.
        Pending => "pending",
        /// The provider took it.
        Succeeded => "succeeded",
        /// The provider refused it: nothing was done.
        Failed => "failed",
    }
}

/// Why an evidence or accept request was not done.
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

/// The provider key of an action: the same on every resend.
pub fn provider_action_key(id: DisputeActionId) -> String {
    format!("payorch_{id}")
}

/// The row as `to_jsonb` shows it.
#[derive(Debug, Clone, Deserialize)]
pub struct DisputeActionRow {
    pub merchant_id: Uuid,
    pub id: Uuid,
    pub dispute_id: Uuid,
    pub kind: String,
    pub status: String,
    pub provider: String,
    pub provider_dispute_id: String,
    pub provider_idempotency_key: String,
    pub evidence: serde_json::Value,
    pub failure_code: Option<String>,
    pub failure_message: Option<String>,
    /// The client's Idempotency-Key that made it.
    pub idempotency_key: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl DisputeActionRow {
    pub fn status(&self) -> DisputeActionStatus {
        DisputeActionStatus::parse(&self.status).unwrap_or(DisputeActionStatus::Pending)
    }
}

/// An action on `dispute_id`, its evidence (`{}` for an accept) as stored.
pub struct StartDisputeAction {
    pub id: DisputeActionId,
    pub dispute_id: DisputeId,
    pub kind: DisputeActionKind,
    pub evidence: serde_json::Value,
    provider_key: String,
}

impl StartDisputeAction {
    pub fn new(
        dispute_id: DisputeId,
        kind: DisputeActionKind,
        evidence: serde_json::Value,
    ) -> Self {
        let id = DisputeActionId::new();
        StartDisputeAction {
            id,
            dispute_id,
            kind,
            evidence,
            provider_key: provider_action_key(id),
        }
    }
}

impl KeyedWork for StartDisputeAction {
    type Made = ActionMade;

    fn resource_type(&self) -> ResourceType {
        ResourceType::DisputeAction
    }
    fn record_as(&self) -> RecordAs {
        RecordAs::InFlight {
            recovery_point: RecoveryPoint::DisputeActionCreated,
        }
    }
    fn ctes<'f>(&'f self, q: &mut Statement<'f>, claim: &ClaimParams) {
        let ClaimParams { merchant, key } = *claim;
        let id = q.bind::<SqlUuid, _>(self.id.0);
        let dispute = q.bind::<SqlUuid, _>(self.dispute_id.0);
        let kind = q.bind::<Text, _>(self.kind.as_str());
        let evidence = q.bind::<Jsonb, _>(&self.evidence);
        let provider_key = q.bind::<Text, _>(&self.provider_key);
        // `provider` and `provider_dispute_id` are the dispute's, set by the trigger under the
        // dispute's row lock, which also refuses a dispute that takes no answer.
        q.push(format_args!(
            "made_action AS (
    INSERT INTO dispute_actions (merchant_id, id, dispute_id, kind, status, provider,
        provider_dispute_id, provider_idempotency_key, evidence, idempotency_key)
    SELECT d.merchant_id, {id}, d.id, {kind}, 'pending', d.provider, d.provider_dispute_id,
        {provider_key}, {evidence}, {key}
    FROM go, disputes d WHERE d.merchant_id = {merchant} AND d.id = {dispute}
    RETURNING *),
done AS (SELECT id AS resource_id FROM made_action)"
        ));
    }
    fn fresh(&self, q: &mut Statement<'_>) {
        q.push(
            "jsonb_build_object('action', (SELECT to_jsonb(m) FROM made_action m),
    'dispute', (SELECT to_jsonb(d) FROM disputes d, made_action m
        WHERE d.merchant_id = m.merchant_id AND d.id = m.dispute_id))",
        );
    }
    fn replay(&self, q: &mut Statement<'_>, merchant: crate::db::statement::Param) {
        q.push(format_args!(
            "(SELECT jsonb_build_object('action', to_jsonb(a), 'dispute', to_jsonb(d))
    FROM dispute_actions a JOIN disputes d
        ON d.merchant_id = a.merchant_id AND d.id = a.dispute_id
    WHERE a.merchant_id = {merchant} AND a.id = found.resource_id)"
        ));
    }
    fn is_refusal(&self, kind: &DatabaseErrorKind, constraint: Option<&str>) -> bool {
        matches!(
            (kind, constraint),
            (
                DatabaseErrorKind::CheckViolation,
                Some("dispute_actions_dispute_answerable")
            ) | (
                DatabaseErrorKind::UniqueViolation,
                Some("dispute_actions_one_pending")
            )
        )
    }
}

/// What an action's claim statement made, or its replay read.
#[derive(Default, Deserialize)]
pub struct ActionMade {
    action: Option<DisputeActionRow>,
    dispute: Option<DisputeRow>,
}

impl ActionMade {
    pub fn parts(self) -> Option<(DisputeActionRow, DisputeRow)> {
        Some((self.action?, self.dispute?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::snapshot::assert_sql_snapshot;
    use crate::idempotency::claim::snapshot::claim_text;
    use crate::idempotency::Operation;

    #[test]
    fn the_claim_statements_of_dispute_actions_read_as_their_snapshots() {
        let work = StartDisputeAction::new(
            DisputeId::new(),
            DisputeActionKind::Evidence,
            serde_json::json!({}),
        );
        assert_sql_snapshot(
            "claim_submit_dispute_evidence",
            &claim_text(Operation::SubmitDisputeEvidence, &work),
        );
        let work = StartDisputeAction::new(
            DisputeId::new(),
            DisputeActionKind::Accept,
            serde_json::json!({}),
        );
        assert_sql_snapshot(
            "claim_accept_dispute",
            &claim_text(Operation::AcceptDispute, &work),
        );
    }

    #[test]
    fn every_kind_and_status_reads_back_as_itself() {
        for k in DisputeActionKind::ALL {
            assert_eq!(DisputeActionKind::parse(k.as_str()), Some(k));
        }
        for s in DisputeActionStatus::ALL {
            assert_eq!(DisputeActionStatus::parse(s.as_str()), Some(s));
        }
    }
}
