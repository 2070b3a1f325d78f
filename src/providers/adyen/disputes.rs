//! A dispute answered or accepted through Adyen's Disputes API v30 (docs/guides/disputes.md,
//! "Answering a dispute"; fixtures/contracts/adyen/DisputeService-v30.json): JSON,
//! `X-API-Key`, the account as `merchantAccountCode` and the dispute as
//! `disputePspReference`. Evidence is `supplyDefenseDocument` (the documents, base64) then
//! `defendDispute` (the defence reason); accepting is `acceptDispute`.
//!
//! Each request carries its own `Idempotency-Key`, derived from the action's provider key
//! (`<key>:documents`, `<key>:defend`, the accept's the key itself): the two requests of one
//! answer differ, and one key must never carry two requests. A resend of the action resends
//! both under the same keys. What an answer means follows docs/DESIGN.md, "The provider
//! protocol": `disputeServiceResult.success` true is done; false, or a `400`/`422` with
//! Adyen's error (not an idempotency one), is a refusal that did nothing; anything else
//! (`401`/`403`, `409`, `429`, `5xx`, a lost or unread answer) is unknown.

use reqwest::{header, Method, Url};

use super::AdyenProvider;
use crate::providers::dispute_actions::{
    AcceptDisputeRequest, DisputeEvidence, DisputeEvidenceRequest, DISPUTE_ACTION_REFUSED,
    EVIDENCE_NOT_SUPPORTED,
};
use crate::providers::http_call;
use crate::providers::{ProviderCall, ProviderOutcome};

/// The path of the Disputes API under its host (its server URL's): Adyen serves it on
/// another host than Checkout (`ca-test.adyen.com`), the sandbox on its own.
pub const DISPUTES_PATH: [&str; 4] = ["ca", "services", "DisputeService", "v30"];

/// The Disputes API's base on `host`: `host` + [`DISPUTES_PATH`].
pub fn disputes_url(host: &Url) -> Url {
    http_call::join(host, &DISPUTES_PATH)
}

/// Why Adyen cannot take `evidence` as payorch sends it, if it cannot: its Disputes API takes
/// documents and a defence reason, and has no field for text.
pub fn evidence_refusal(evidence: &DisputeEvidence) -> Option<String> {
    if !evidence.text.is_empty() {
        return Some(
            "Adyen's Disputes API takes documents, not text fields: send the text as a \
             document (a PDF) with a defense_reason_code"
                .to_owned(),
        );
    }
    if evidence.defense_reason_code.is_none() {
        return Some(
            "Adyen defends a dispute for a reason: give defense_reason_code (one of the \
             dispute's applicable defence reasons)"
                .to_owned(),
        );
    }
    None
}

/// `supplyDefenseDocument`'s body.
pub fn supply_body(req: &DisputeEvidenceRequest, merchant_account: &str) -> serde_json::Value {
    let documents: Vec<serde_json::Value> = req
        .evidence
        .documents
        .iter()
        .map(|d| {
            serde_json::json!({
                "content": d.content_base64,
                "contentType": d.content_type,
                "defenseDocumentTypeCode": d.document_type,
            })
        })
        .collect();
    serde_json::json!({
        "defenseDocuments": documents,
        "disputePspReference": req.provider_dispute_id,
        "merchantAccountCode": merchant_account,
    })
}

/// `defendDispute`'s body.
pub fn defend_body(req: &DisputeEvidenceRequest, merchant_account: &str) -> serde_json::Value {
    serde_json::json!({
        "defenseReasonCode": req.evidence.defense_reason_code.clone().unwrap_or_default(),
        "disputePspReference": req.provider_dispute_id,
        "merchantAccountCode": merchant_account,
    })
}

/// `acceptDispute`'s body.
pub fn accept_body(req: &AcceptDisputeRequest, merchant_account: &str) -> serde_json::Value {
    serde_json::json!({
        "disputePspReference": req.provider_dispute_id,
        "merchantAccountCode": merchant_account,
    })
}

impl AdyenProvider {
    pub(super) async fn submit_evidence(&self, req: &DisputeEvidenceRequest) -> ProviderCall {
        if let Some(reason) = evidence_refusal(&req.evidence) {
            return ProviderCall::unsent(ProviderOutcome::Failed {
                code: EVIDENCE_NOT_SUPPORTED.to_owned(),
                message: reason,
                provider_id: None,
                decline: None,
            });
        }
        let mut latency = std::time::Duration::ZERO;
        let supplied_any = !req.evidence.documents.is_empty();
        if supplied_any {
            let supplied = self
                .dispute_call(
                    "supplyDefenseDocument",
                    &format!("{}:documents", req.idempotency_key),
                    &supply_body(req, &self.merchant_account),
                )
                .await;
            latency += supplied.latency;
            // Defend only on documents Adyen took: a refusal or an unknown ends the answer
            // here, and a resend asks both again under the same keys.
            if !matches!(supplied.outcome, ProviderOutcome::Succeeded { .. }) {
                return supplied;
            }
        }
        let mut defended = self
            .dispute_call(
                "defendDispute",
                &format!("{}:defend", req.idempotency_key),
                &defend_body(req, &self.merchant_account),
            )
            .await;
        defended.latency += latency;
        if supplied_any {
            defended.outcome = after_documents(defended.outcome);
        }
        defended
    }

    pub(super) async fn accept(&self, req: &AcceptDisputeRequest) -> ProviderCall {
        self.dispute_call(
            "acceptDispute",
            &req.idempotency_key,
            &accept_body(req, &self.merchant_account),
        )
        .await
    }

    async fn dispute_call(
        &self,
        operation: &'static str,
        idempotency_key: &str,
        body: &serde_json::Value,
    ) -> ProviderCall {
        let url = http_call::join(&self.disputes_url, &[operation]);
        let dispute = body["disputePspReference"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let request = self
            .client
            .request(Method::POST, url)
            .header("X-API-Key", self.api_key.expose())
            .header(header::ACCEPT, "application/json")
            .header("Idempotency-Key", idempotency_key)
            .json(body);
        self.client
            .send("adyen", operation, request, move |status, body| {
                outcome_for_dispute_answer(&dispute, status, body)
            })
            .await
    }
}

/// What `defendDispute`'s outcome means once Adyen took the documents: a refusal did not
/// undo them (the action's message says so, as the merchant may defend again with them), and
/// a defence that never left is no proof that nothing reached Adyen (the documents did).
pub fn after_documents(defended: ProviderOutcome) -> ProviderOutcome {
    match defended {
        ProviderOutcome::Failed {
            code,
            message,
            provider_id,
            decline,
        } => ProviderOutcome::Failed {
            code,
            message: format!(
                "{message} (Adyen refused the defence; it keeps the documents supplied with it)"
            ),
            provider_id,
            decline,
        },
        ProviderOutcome::Unavailable { reason } => ProviderOutcome::Unknown {
            reason: format!("the documents were supplied, the defence never left: {reason}"),
        },
        other => other,
    }
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Answer {
    dispute_service_result: ServiceResult,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct ServiceResult {
    success: bool,
    error_message: Option<String>,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct ServiceError {
    error_code: Option<String>,
    message: Option<String>,
}

/// What Adyen's answer to one Disputes API request says was done to dispute `dispute`.
pub fn outcome_for_dispute_answer(dispute: &str, status: u16, body: &[u8]) -> ProviderOutcome {
    let unknown = |why: &str| ProviderOutcome::Unknown {
        reason: format!(
            "HTTP {status} {why}: {}",
            String::from_utf8_lossy(body)
                .chars()
                .take(200)
                .collect::<String>()
        ),
    };
    let refused = |message: String, code: Option<String>| ProviderOutcome::Failed {
        code: code.unwrap_or_else(|| DISPUTE_ACTION_REFUSED.to_owned()),
        message,
        provider_id: None,
        decline: None,
    };
    match status {
        200..=299 => match serde_json::from_slice::<Answer>(body) {
            Ok(a) if a.dispute_service_result.success => ProviderOutcome::Succeeded {
                provider_id: dispute.to_owned(),
            },
            Ok(a) => refused(
                a.dispute_service_result
                    .error_message
                    .unwrap_or_else(|| "Adyen refused the request".to_owned()),
                None,
            ),
            Err(_) => unknown("with an unreadable answer"),
        },
        400 | 422 => match serde_json::from_slice::<ServiceError>(body) {
            // The key holds another request, or one in flight (Adyen's 704): it may act.
            Ok(e) if e.error_code.as_deref() == Some("704") => unknown("idempotency error"),
            Ok(e) if e.error_code.is_some() || e.message.is_some() => refused(
                e.message
                    .unwrap_or_else(|| "Adyen refused the request".to_owned()),
                e.error_code,
            ),
            _ => unknown("without Adyen's error"),
        },
        _ => unknown("(the outcome is not known)"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::dispute_actions::{EvidenceDocument, EvidenceField};

    fn documents() -> DisputeEvidence {
        DisputeEvidence {
            documents: vec![EvidenceDocument {
                document_type: "DefenseMaterial".into(),
                content_type: "application/pdf".into(),
                content_base64: "JVBERi0=".into(),
            }],
            defense_reason_code: Some("SupplyDefenseMaterial".into()),
            ..DisputeEvidence::default()
        }
    }

    #[test]
    fn text_and_a_missing_reason_are_refused_before_sending() {
        assert_eq!(evidence_refusal(&documents()), None);
        let mut with_text = documents();
        with_text
            .text
            .push((EvidenceField::UncategorizedText, "refunded".into()));
        assert!(evidence_refusal(&with_text).unwrap().contains("documents"));
        let mut no_reason = documents();
        no_reason.defense_reason_code = None;
        assert!(evidence_refusal(&no_reason)
            .unwrap()
            .contains("defense_reason_code"));
    }

    #[test]
    fn a_defence_after_documents_says_they_were_kept_and_is_never_unavailable() {
        let refused = after_documents(ProviderOutcome::Failed {
            code: DISPUTE_ACTION_REFUSED.into(),
            message: "Invalid defense reason code".into(),
            provider_id: None,
            decline: None,
        });
        assert!(matches!(
            refused,
            ProviderOutcome::Failed { ref message, .. } if message.contains("keeps the documents")
        ));
        assert!(matches!(
            after_documents(ProviderOutcome::Unavailable {
                reason: "connect error".into()
            }),
            ProviderOutcome::Unknown { .. }
        ));
    }

    #[test]
    fn the_disputes_api_sits_under_its_own_path() {
        let host = Url::parse("https://ca-test.adyen.com").unwrap();
        assert_eq!(
            disputes_url(&host).as_str(),
            "https://ca-test.adyen.com/ca/services/DisputeService/v30"
        );
    }

    #[test]
    fn answers_map_as_the_provider_protocol_says() {
        assert_eq!(
            outcome_for_dispute_answer("DZ1", 200, br#"{"disputeServiceResult":{"success":true}}"#),
            ProviderOutcome::Succeeded {
                provider_id: "DZ1".into()
            }
        );
        assert!(matches!(
            outcome_for_dispute_answer(
                "DZ1",
                200,
                br#"{"disputeServiceResult":{"success":false,"errorMessage":"Dispute is not defendable"}}"#
            ),
            ProviderOutcome::Failed { ref message, .. } if message == "Dispute is not defendable"
        ));
        assert!(matches!(
            outcome_for_dispute_answer(
                "DZ1",
                422,
                br#"{"status":422,"errorCode":"000","message":"Dispute not found","errorType":"validation"}"#
            ),
            ProviderOutcome::Failed { ref code, .. } if code == "000"
        ));
        let idempotency = br#"{"status":422,"errorCode":"704","message":"request already processed or in progress","errorType":"validation"}"#;
        for (status, body) in [
            (200, &b"{}"[..]),
            (200, b"[accepted]"),
            (422, idempotency),
            (400, b"<html>"),
            (401, b""),
            (403, b""),
            (409, b""),
            (429, b""),
            (
                500,
                br#"{"status":500,"errorCode":"905","message":"internal","errorType":"internal"}"#,
            ),
            (503, b""),
        ] {
            assert!(
                matches!(
                    outcome_for_dispute_answer("DZ1", status, body),
                    ProviderOutcome::Unknown { .. }
                ),
                "{status} {}",
                String::from_utf8_lossy(body)
            );
        }
    }
}
