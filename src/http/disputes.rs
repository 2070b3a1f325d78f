//! A merchant's answer to a dispute, as the API takes it (docs/guides/disputes.md, "Answering
//! a dispute"): `POST /v1/disputes/{id}/evidence` and `POST /v1/disputes/{id}/accept`, keyed
//! like every POST, each action sent to the provider under its own provider key.

use actix_web::{web, HttpResponse};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::http::errors::ApiError;
use crate::http::keyed::{respond, Keyed, KeyedBody, PathId};
use crate::http::AppState;
use crate::idempotency::{KeyedRequest, Operation};
use crate::ids::{DisputeActionId, DisputeId};
use crate::payments::disputes::keyed::act::{act, ActError, ActInput, Acted};
use crate::payments::disputes::keyed::evidence_json::EvidenceInput;
use crate::payments::disputes::keyed::DisputeActionKind;
use crate::payments::disputes::DisputeView;

impl PathId for DisputeId {
    fn from_path(raw: &str) -> Result<Self, ApiError> {
        raw.parse().map_err(|_| ApiError::NotFound("dispute"))
    }
}

impl KeyedBody for EvidenceInput {
    const OPERATION: Operation = Operation::SubmitDisputeEvidence;
    type Id = DisputeId;
}

/// `POST /v1/disputes/{id}/accept` takes no body.
#[derive(Debug, Deserialize)]
pub struct AcceptDisputeBody;

impl KeyedBody for AcceptDisputeBody {
    const OPERATION: Operation = Operation::AcceptDispute;
    type Id = DisputeId;
    const HAS_BODY: bool = false;
}

/// Evidence sent for a dispute, or its accept, and the dispute as it is after it.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct DisputeActionView {
    pub id: DisputeActionId,
    /// Always `dispute_action`.
    pub object: &'static str,
    /// `evidence` or `accept`.
    pub kind: String,
    /// `succeeded` (the provider took it), `failed` (refused: nothing was done, see
    /// `failure_code`), or `pending` (its answer told nothing: retry the request with the
    /// same `Idempotency-Key` to send it again under the same provider key).
    pub status: String,
    pub failure_code: Option<String>,
    pub failure_message: Option<String>,
    pub created_at: DateTime<Utc>,
    pub dispute: DisputeView,
}

impl From<Acted> for DisputeActionView {
    fn from(acted: Acted) -> Self {
        let a = acted.action;
        DisputeActionView {
            id: DisputeActionId(a.id),
            object: "dispute_action",
            kind: a.kind,
            status: a.status,
            failure_code: a.failure_code,
            failure_message: a.failure_message,
            created_at: a.created_at,
            dispute: acted.dispute,
        }
    }
}

/// The examples of the reference (one story with `crate::views::examples`' payment).
pub mod examples {
    use serde_json::{json, Value};

    pub const DISPUTE: &str = "dp_0193a1f0c4e87d2b9c1a5e6f7a8b9c31";

    pub fn evidence_request() -> Value {
        json!({"evidence": {
            "uncategorized_text": "Refunded in full on 2 May (ref_0193a1f0c4e87d2b9c1a5e6f7a8b9c05)",
            "customer_name": "Ada Lovelace",
        }})
    }

    /// An action of `kind`, succeeded, and the dispute it moved to `status`.
    pub fn action(kind: &str, status: &str) -> Value {
        json!({
            "id": "da_0193a1f0c4e87d2b9c1a5e6f7a8b9c32",
            "object": "dispute_action",
            "kind": kind,
            "status": "succeeded",
            "failure_code": null,
            "failure_message": null,
            "created_at": "2026-11-27T10:00:00Z",
            "dispute": {
                "id": DISPUTE,
                "object": "dispute",
                "payment_id": crate::views::examples::PAYMENT,
                "order_id": crate::views::examples::ORDER,
                "provider": "stripe",
                "provider_dispute_id": "du_1OaBcD2eZvKYlo2C",
                "status": status,
                "stage": "chargeback",
                "amount": 4200,
                "currency": "eur",
                "reason": "fraudulent",
                "provider_reason": "fraudulent",
                "evidence_due_by": "2026-12-04T10:00:00Z",
                "refunded_before": 0,
                "overlap": 0,
                "advice": "",
                "evidence_submitted_at": if kind == "evidence" { json!("2026-11-27T10:00:00Z") } else { Value::Null },
                "opened_at": "2026-11-26T10:00:00Z",
                "updated_at": "2026-11-27T10:00:00Z",
                "closed_at": if status == "lost" { json!("2026-11-27T10:00:00Z") } else { Value::Null },
            },
        })
    }
}

fn problem(err: ActError, dispute_id: DisputeId) -> ApiError {
    match err {
        ActError::Invalid(problems) => ApiError::validation_failed(problems),
        ActError::Idempotency(err) => err.into(),
        ActError::DisputeNotFound => ApiError::NotFound("dispute"),
        ActError::NotAnswerable { status, detail } => ApiError::DisputeNotAnswerable {
            dispute_id,
            status: status.as_str(),
            detail,
        },
        ActError::InProgress { action } => ApiError::DisputeActionInProgress {
            dispute_id,
            action_id: action,
        },
        ActError::Unavailable(err) => err.into(),
        ActError::Database(err) => err.into(),
        ActError::Inconsistent(what) => ApiError::Internal(what),
    }
}

/// Answer a dispute with evidence
///
/// Sends the evidence to the dispute's provider and submits it (docs/guides/disputes.md,
/// "Answering a dispute"): text fields by Stripe's evidence names through Stripe; documents
/// and a `defense_reason_code` through Adyen (what a provider cannot take is `422` before
/// anything is sent). A dispute that awaits an answer (`needs_response`, or
/// `warning_needs_response` for an inquiry) moves to `under_review` (`warning_under_review`).
/// Send an `Idempotency-Key`: the same key and body again answers with the first status,
/// `Idempotent-Replayed: true` and the resource as it is now; the same key with another body is
/// `422 idempotency_key_reused` (docs/guides/idempotency.md, "Idempotency").
#[utoipa::path(post, path = "/v1/disputes/{id}/evidence", tag = "disputes",
    request_body(content = EvidenceInput, example = json!(examples::evidence_request())),
    params(
        ("id" = String, Path, description = "dispute id, `dp_…`", example = json!(examples::DISPUTE)),
        ("Idempotency-Key" = String, Header, description = "1–255 visible ASCII characters"),
    ),
    security(("bearer" = [])),
    responses(
        (status = 200, body = DisputeActionView, description = "the evidence (`succeeded`, or `failed` if the provider refused it) and the dispute as it is now; or replayed with `Idempotent-Replayed: true`", example = json!(examples::action("evidence", "under_review"))),
        (status = 202, body = DisputeActionView, description = "`pending`: the provider's answer told nothing; retry with the same key to send it again under the same provider key"),
        (status = 404, body = crate::http::errors::Problem),
        (status = 409, body = crate::http::errors::Problem, description = "dispute_not_answerable (names `dispute_status`), dispute_action_in_progress (names `action_id`), idempotency_key_in_use, idempotency_key_expired"),
        (status = 422, body = crate::http::errors::Problem, description = "validation_failed (also evidence the provider cannot take), idempotency_key_reused"),
    ))]
pub async fn submit_evidence(
    state: web::Data<AppState>,
    keyed: Keyed<EvidenceInput>,
) -> Result<HttpResponse, ApiError> {
    let input = ActInput {
        dispute_id: keyed.id,
        kind: DisputeActionKind::Evidence,
        evidence: Some(keyed.body),
    };
    answer(&state, keyed.request, input).await
}

/// Accept a dispute
///
/// Gives the disputed money up: Stripe closes the dispute, Adyen accepts it
/// (docs/guides/disputes.md, "Answering a dispute"). The dispute moves to `lost`
/// (`warning_closed` for an inquiry). Takes no body. Send an `Idempotency-Key`, as for every
/// POST.
#[utoipa::path(post, path = "/v1/disputes/{id}/accept", tag = "disputes",
    params(
        ("id" = String, Path, description = "dispute id, `dp_…`", example = json!(examples::DISPUTE)),
        ("Idempotency-Key" = String, Header, description = "1–255 visible ASCII characters"),
    ),
    security(("bearer" = [])),
    responses(
        (status = 200, body = DisputeActionView, description = "the accept (`succeeded`, or `failed` if the provider refused it) and the dispute as it is now; or replayed with `Idempotent-Replayed: true`", example = json!(examples::action("accept", "lost"))),
        (status = 202, body = DisputeActionView, description = "`pending`: the provider's answer told nothing; retry with the same key to send it again under the same provider key"),
        (status = 404, body = crate::http::errors::Problem),
        (status = 409, body = crate::http::errors::Problem, description = "dispute_not_answerable (names `dispute_status`), dispute_action_in_progress (names `action_id`), idempotency_key_in_use, idempotency_key_expired"),
    ))]
pub async fn accept(
    state: web::Data<AppState>,
    keyed: Keyed<AcceptDisputeBody>,
) -> Result<HttpResponse, ApiError> {
    let input = ActInput {
        dispute_id: keyed.id,
        kind: DisputeActionKind::Accept,
        evidence: None,
    };
    answer(&state, keyed.request, input).await
}

async fn answer(
    state: &AppState,
    request: KeyedRequest,
    input: ActInput,
) -> Result<HttpResponse, ApiError> {
    let dispute_id = input.dispute_id;
    let acted = act(&state.context(&request, input))
        .await
        .map_err(|err| problem(err, dispute_id))?;
    let (status, replayed) = (acted.status, acted.replayed);
    Ok(respond(status, &DisputeActionView::from(acted), replayed))
}
