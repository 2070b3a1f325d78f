//! The Adyen face's disputes (`disputes`): Adyen's DisputeService v30, under
//! `/ca/services/DisputeService/v30/` (`X-API-Key`; each request names
//! `merchantAccountCode` and `disputePspReference`), answering a `DisputeServiceResult`:
//!
//! - `retrieveApplicableDefenseReasons`: the defense reasons the sandbox takes
//!   ([`DEFENSE_REASONS`]), each with the document types it asks for;
//! - `supplyDefenseDocument`: documents kept as the dispute's evidence by type, their
//!   content base64 as Adyen's; for an inquiry they are the answer (`INFORMATION_SUPPLIED`,
//!   `warning_under_review`, decided by their content as a defense is);
//! - `defendDispute` (`defenseReasonCode` one of the applicable): the chargeback is under
//!   review (`needs_response` → `under_review`), and decided as the Stripe face decides: a
//!   document whose content is `winning_evidence` wins (`CHARGEBACK_REVERSED`),
//!   `losing_evidence` loses, `--dispute-after-ms` later; other documents stay under review;
//! - `acceptDispute`: the chargeback is `lost` (a `CHARGEBACK` notification with
//!   `disputeStatus` `Accepted`); so is a notification of chargeback, the chargeback then
//!   booked at once (stage `chargeback`, the money taken).
//!
//! What the dispute's state does not allow is `success: false` with Adyen's `errorMessage`,
//! as Adyen answers it (a `200`); nothing moves. An `Idempotency-Key` is honoured as on the
//! Checkout face: a resend gets the first answer.

use std::collections::BTreeMap;

use actix_web::http::StatusCode;
use actix_web::web::{self, Bytes};
use actix_web::{HttpRequest, HttpResponse};
use base64::Engine;
use serde::Deserialize;
use serde_json::{json, Value};

use super::adyen::{begin_keyed, refuse_unauthorized, validation};
use super::answers::stored_json;
use super::disputes::{DisputeEntry, DisputeStatus, Move};
use super::store::{Replay, StoredResponse};
use super::Sandbox;

const BASE: &str = "/ca/services/DisputeService/v30";

/// The defense reasons the sandbox offers for every chargeback, and the document types each
/// takes (a small set of Adyen's).
pub(crate) const DEFENSE_REASONS: [(&str, &[&str]); 2] = [
    (
        "GoodsOrServicesProvided",
        &["DeliveryOrCollectionForm", "TIDorInvoice"],
    ),
    ("SupplyDefenseMaterial", &["DefenseMaterial"]),
];

pub(super) fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route(
        &format!("{BASE}/retrieveApplicableDefenseReasons"),
        web::post().to(defense_reasons),
    )
    .route(
        &format!("{BASE}/supplyDefenseDocument"),
        web::post().to(supply_document),
    )
    .route(&format!("{BASE}/defendDispute"), web::post().to(defend))
    .route(&format!("{BASE}/acceptDispute"), web::post().to(accept));
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct DisputeRequest {
    merchant_account_code: String,
    dispute_psp_reference: String,
    #[serde(default)]
    defense_reason_code: Option<String>,
    #[serde(default)]
    defense_documents: Option<Vec<DefenseDocument>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct DefenseDocument {
    content: String,
    content_type: String,
    defense_document_type_code: String,
}

/// A `DisputeServiceResult`: `success`, and Adyen's `errorMessage` when not.
fn result(error: Option<String>) -> Value {
    match error {
        None => json!({"success": true}),
        Some(message) => json!({"success": false, "errorMessage": message}),
    }
}

/// Reads the request, finds the Adyen face's dispute it names, and runs `act` under the
/// request's key; its answer (`disputeServiceResult` and more) is recorded under the key.
async fn handle(
    sb: &web::Data<Sandbox>,
    req: &HttpRequest,
    body: &Bytes,
    operation: &str,
    act: impl FnOnce(&Sandbox, &DisputeEntry, DisputeRequest) -> Value,
) -> HttpResponse {
    if let Some(refused) = refuse_unauthorized(sb, req) {
        return refused;
    }
    tokio::time::sleep(sb.config.latency()).await;
    let request: DisputeRequest = match serde_json::from_slice(body) {
        Ok(request) => request,
        Err(e) => return validation("702", &format!("Unable to read the request: {e}")),
    };
    if request.merchant_account_code.is_empty() || request.dispute_psp_reference.is_empty() {
        return validation(
            "702",
            "merchantAccountCode and disputePspReference are required",
        );
    }
    let fingerprint = format!("{operation} {}", String::from_utf8_lossy(body));
    let key = match begin_keyed(sb, req, &fingerprint, |replay, _| match replay {
        Replay::Recorded(stored) => answer(&stored),
        // Only recorded answers are made here; past the answers kept, a resend is refused
        // as one whose first answer is gone.
        _ => validation("704", "request already processed"),
    }) {
        Ok(key) => key,
        Err(answer) => return *answer,
    };
    let dispute = sb
        .disputes
        .get(&request.dispute_psp_reference)
        .filter(DisputeEntry::is_adyen)
        .filter(|d| d.merchant_account.as_deref() == Some(&request.merchant_account_code));
    let body = match dispute {
        Some(dispute) => act(sb, &dispute, request),
        None => json!({"disputeServiceResult": result(Some(format!(
            "Could not find dispute {}", request.dispute_psp_reference
        )))}),
    };
    let stored = stored_json(StatusCode::OK, &body);
    if let Some(key) = &key {
        sb.store.finish(key, stored.clone());
    }
    answer(&stored)
}

fn answer(stored: &StoredResponse) -> HttpResponse {
    HttpResponse::build(StatusCode::from_u16(stored.status).unwrap_or(StatusCode::OK))
        .content_type("application/json")
        .body(stored.body.clone())
}

async fn defense_reasons(sb: web::Data<Sandbox>, req: HttpRequest, body: Bytes) -> HttpResponse {
    handle(
        &sb,
        &req,
        &body,
        "retrieveApplicableDefenseReasons",
        |_, dispute, _| {
            let satisfied =
                |types: &[&str]| types.iter().any(|t| dispute.evidence.contains_key(*t));
            let reasons: Vec<Value> = DEFENSE_REASONS
                .iter()
                .map(|(code, types)| {
                    let documents: Vec<Value> = types
                        .iter()
                        .map(|t| {
                            json!({
                                "available": dispute.evidence.contains_key(*t),
                                "defenseDocumentTypeCode": t,
                                "requirementLevel": "Optional",
                            })
                        })
                        .collect();
                    json!({
                        "defenseReasonCode": code,
                        "satisfied": satisfied(types),
                        "defenseDocumentTypes": documents,
                    })
                })
                .collect();
            json!({"defenseReasons": reasons, "disputeServiceResult": result(None)})
        },
    )
    .await
}

async fn supply_document(sb: web::Data<Sandbox>, req: HttpRequest, body: Bytes) -> HttpResponse {
    handle(
        &sb,
        &req,
        &body,
        "supplyDefenseDocument",
        |sb, dispute, request| {
            let documents = request.defense_documents.unwrap_or_default();
            if documents.is_empty() {
                return service_result(Some("defenseDocuments is empty".into()));
            }
            let mut evidence = BTreeMap::new();
            for document in documents {
                let known = DEFENSE_REASONS.iter().any(|(_, types)| {
                    types.contains(&document.defense_document_type_code.as_str())
                });
                if !known || document.content_type.is_empty() {
                    return service_result(Some(format!(
                        "Invalid defense document type {}",
                        document.defense_document_type_code
                    )));
                }
                // Content is base64, as Adyen's; the sandbox keeps what it says.
                let content = base64::engine::general_purpose::STANDARD
                    .decode(document.content.as_bytes())
                    .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
                    .unwrap_or(document.content);
                evidence.insert(document.defense_document_type_code, content);
            }
            // An inquiry is answered by its documents (Adyen's `INFORMATION_SUPPLIED`); a
            // chargeback waits for `defendDispute`.
            let done = if dispute.status == DisputeStatus::WarningNeedsResponse {
                sb.move_dispute(&dispute.id, Move::Submit, evidence)
            } else {
                sb.disputes.add_evidence(&dispute.id, evidence)
            };
            service_result(done.err())
        },
    )
    .await
}

async fn defend(sb: web::Data<Sandbox>, req: HttpRequest, body: Bytes) -> HttpResponse {
    handle(&sb, &req, &body, "defendDispute", |sb, dispute, request| {
        let reason = request.defense_reason_code.unwrap_or_default();
        if !DEFENSE_REASONS.iter().any(|(code, _)| *code == reason) {
            return service_result(Some(format!("Invalid defense reason code {reason:?}")));
        }
        if dispute.status != DisputeStatus::NeedsResponse {
            return service_result(Some(format!(
                "The dispute is {}: it cannot be defended",
                dispute.status.word()
            )));
        }
        let moved = sb.move_dispute(&dispute.id, Move::Submit, BTreeMap::new());
        service_result(moved.err())
    })
    .await
}

async fn accept(sb: web::Data<Sandbox>, req: HttpRequest, body: Bytes) -> HttpResponse {
    handle(&sb, &req, &body, "acceptDispute", |sb, dispute, _| {
        let moved = sb.move_dispute(&dispute.id, Move::Accept, BTreeMap::new());
        service_result(moved.err())
    })
    .await
}

fn service_result(error: Option<String>) -> Value {
    json!({"disputeServiceResult": result(error)})
}
