//! Disputes as the API shows them (docs/guides/disputes.md, "The disputes API"): `GET
//! /v1/disputes` and `GET /v1/disputes/{id}`; and a merchant's answer to a dispute
//! (docs/guides/disputes.md, "Answering a dispute"): `POST /v1/disputes/{id}/evidence` and
//! `POST /v1/disputes/{id}/accept`, keyed like every POST, each action sent to the provider
//! under its own provider key.

use actix_web::{web, HttpResponse};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::accounts::Caller;
use crate::http::errors::{ApiError, FieldError};
use crate::http::events::{id, instant, limit, Problems, DEFAULT_LIMIT};
use crate::http::keyed::{respond, Keyed, KeyedBody, PathId};
use crate::http::AppState;
use crate::idempotency::{KeyedRequest, Operation};
use crate::ids::{DisputeActionId, DisputeId, MerchantId, PaymentId};
use crate::payments::disputes::keyed::act::{act, ActError, ActInput, Acted};
use crate::payments::disputes::keyed::evidence_json::EvidenceInput;
use crate::payments::disputes::keyed::DisputeActionKind;
use crate::payments::disputes::DisputeView;
use crate::payments::disputes::{self, DisputeFilter, DisputeStatus, Page};

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

    // The dispute itself is with the payment's examples, which show it in needs-a-human.
    pub use crate::views::examples::{dispute, dispute_after, DISPUTE};

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
            "created_at": "2026-11-29T10:00:00Z",
            "dispute": dispute_after(kind, status),
        })
    }

    /// A page of `GET /v1/disputes`.
    pub fn dispute_page() -> Value {
        json!({"object": "list", "data": [dispute()], "has_more": false})
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

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct DisputeListParams {
    /// One status: disputes in it now.
    #[param(value_type = Option<DisputeStatus>)]
    status: Option<String>,
    /// The disputed payment's disputes only.
    #[param(value_type = Option<String>, pattern = "^pay_[0-9a-f]{32}$")]
    payment_id: Option<String>,
    /// The provider the payment was made at (`stripe`, `adyen`, …).
    provider: Option<String>,
    /// Opened at or after: RFC 3339 (`2026-11-24T10:00:00Z`) or Unix seconds.
    created_gte: Option<String>,
    /// Opened at or before: RFC 3339 or Unix seconds.
    created_lte: Option<String>,
    /// Support keys only (a merchant key may give only its own): one merchant's disputes.
    #[param(value_type = Option<String>, pattern = "^mer_[0-9a-f]{32}$")]
    merchant_id: Option<String>,
    /// 1–100, default 10.
    #[param(value_type = Option<i64>, minimum = 1, maximum = 100, default = 10)]
    limit: Option<String>,
    /// The last dispute id of the previous page (`dp_…`): this page holds those opened
    /// before it.
    #[param(value_type = Option<String>, pattern = "^dp_[0-9a-f]{32}$")]
    starting_after: Option<String>,
}

/// A page of disputes, newest first.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct DisputePage {
    /// Always `list`.
    object: &'static str,
    data: Vec<DisputeView>,
    /// Another page exists: ask again with `starting_after` set to the last id here.
    has_more: bool,
}

fn status(raw: &str) -> Result<DisputeStatus, String> {
    DisputeStatus::parse(raw).ok_or_else(|| {
        let words: Vec<&str> = DisputeStatus::ALL.iter().map(|s| s.as_str()).collect();
        format!("must be one of {}", words.join(", "))
    })
}

fn provider(raw: &str) -> Result<String, String> {
    if crate::providers::registry::is_valid_name(raw) {
        Ok(raw.to_owned())
    } else {
        Err("must be a provider name: 1 to 32 of a-z, 0-9, '-' and '_'".into())
    }
}

/// List disputes
///
/// The caller's disputes (a support key: every merchant's, or one by `merchant_id`), newest
/// first, filtered by status, payment, provider and when they were opened, paginated with
/// `starting_after` while `has_more` is true (docs/guides/disputes.md, "The disputes API").
#[utoipa::path(get, path = "/v1/disputes", tag = "disputes",
    params(DisputeListParams),
    security(("bearer" = [])),
    responses(
        (status = 200, body = DisputePage, description = "the caller's disputes (a support key: every merchant's), newest first", example = json!(examples::dispute_page())),
        (status = 400, body = crate::http::errors::Problem, description = "invalid_request: an unknown parameter, or one given twice"),
        (status = 422, body = crate::http::errors::Problem, description = "validation_failed: each bad parameter named in `errors`"),
    ))]
pub async fn list(
    caller: Caller,
    state: web::Data<AppState>,
    params: web::Query<DisputeListParams>,
) -> Result<HttpResponse, ApiError> {
    let p = params.into_inner();
    let mut problems = Problems::default();
    let filter = DisputeFilter {
        status: problems.check("status", p.status.as_deref(), status),
        payment_id: problems.check("payment_id", p.payment_id.as_deref(), id::<PaymentId>),
        provider: problems.check("provider", p.provider.as_deref(), provider),
        created_gte: problems.check("created_gte", p.created_gte.as_deref(), instant),
        created_lte: problems.check("created_lte", p.created_lte.as_deref(), instant),
    };
    let merchant = problems.check("merchant_id", p.merchant_id.as_deref(), id::<MerchantId>);
    let limit = problems
        .check("limit", p.limit.as_deref(), limit)
        .unwrap_or(DEFAULT_LIMIT);
    // The id is the cursor (a UUIDv7, time-ordered): another merchant's only says where to
    // start, and shows nothing of it.
    let starting_after = problems.check(
        "starting_after",
        p.starting_after.as_deref(),
        id::<DisputeId>,
    );
    if let (Some(from), Some(to)) = (filter.created_gte, filter.created_lte) {
        if to < from {
            problems.0.push(FieldError::new(
                "created_lte",
                "is before created_gte: no dispute can be in that window",
            ));
        }
    }
    let scope = match (caller.scope(), merchant) {
        (Some(own), Some(asked)) if own != asked => {
            problems.0.push(FieldError::new(
                "merchant_id",
                "a merchant key lists its own disputes only: leave merchant_id out",
            ));
            None
        }
        (Some(own), _) => Some(own),
        (None, asked) => asked,
    };
    if !problems.0.is_empty() {
        return Err(ApiError::ValidationFailed(problems.0));
    }
    let mut conn = state.pool.get().await?;
    // One more than asked tells whether another page exists.
    let page = Page {
        starting_after,
        limit: limit + 1,
    };
    let mut found = disputes::list(&mut conn, scope, &filter, page).await?;
    let has_more = found.len() as i64 > limit;
    found.truncate(limit as usize);
    Ok(HttpResponse::Ok().json(DisputePage {
        object: "list",
        data: found,
        has_more,
    }))
}

/// Retrieve a dispute
///
/// The dispute's status and stage, what it takes back, its reason, when evidence is due, what
/// refunds had returned before it (`refunded_before`, `overlap`) and what to do now
/// (`advice`). Its payment's `GET /v1/payments/{id}` lists it too.
#[utoipa::path(get, path = "/v1/disputes/{id}", tag = "disputes",
    params(("id" = String, Path, description = "dispute id, `dp_…`", example = json!(examples::DISPUTE))),
    security(("bearer" = [])),
    responses(
        (status = 200, body = DisputeView, example = json!(examples::dispute())),
        (status = 404, body = crate::http::errors::Problem, description = "unknown, or another merchant's"),
    ))]
pub async fn get(
    caller: Caller,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = DisputeId::from_path(&path)?;
    let mut conn = state.pool.get().await?;
    let dispute = disputes::find(&mut conn, caller.scope(), id)
        .await?
        .ok_or(ApiError::NotFound("dispute"))?;
    Ok(HttpResponse::Ok().json(dispute))
}
