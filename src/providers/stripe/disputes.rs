//! A dispute answered or accepted through Stripe (docs/guides/disputes.md, "Answering a
//! dispute"): `POST /v1/disputes/{du}` with the evidence's text as `evidence[…]` and
//! `submit=true`, and `POST /v1/disputes/{du}/close`, each under the action's own provider
//! key. What an answer means follows docs/DESIGN.md, "The provider protocol": only an answer
//! that proves nothing was done is failed; a timeout, a lost answer, `5xx`, `409`, `429`,
//! `408`, `401`/`403`, an idempotency error or anything unread is unknown.

use reqwest::Method;

use super::{StripeProvider, API_VERSION};
use crate::providers::dispute_actions::{
    AcceptDisputeRequest, DisputeEvidence, DisputeEvidenceRequest, DISPUTE_ACTION_REFUSED,
    EVIDENCE_NOT_SUPPORTED,
};
use crate::providers::{ProviderCall, ProviderOutcome};

/// Why Stripe cannot take `evidence` as payorch sends it, if it cannot: its documents are
/// files uploaded through Stripe's Files API first, which payorch does not do, and a defence
/// reason code is Adyen's.
pub fn evidence_refusal(evidence: &DisputeEvidence) -> Option<String> {
    if !evidence.documents.is_empty() {
        return Some(
            "Stripe takes documents only as files uploaded through its Files API, which \
             payorch does not use: send the evidence as text fields, or upload the documents \
             in Stripe's Dashboard"
                .to_owned(),
        );
    }
    if evidence.defense_reason_code.is_some() {
        return Some("defense_reason_code is Adyen's: Stripe takes none".to_owned());
    }
    if evidence.text.is_empty() {
        return Some("no evidence: give at least one text field".to_owned());
    }
    None
}

/// The form body of an evidence submission, in a fixed order (the same on every resend).
pub fn evidence_form(evidence: &DisputeEvidence) -> Vec<(String, String)> {
    let mut form: Vec<(String, String)> = evidence
        .text
        .iter()
        .map(|(field, value)| (format!("evidence[{}]", field.as_str()), value.clone()))
        .collect();
    form.push(("submit".to_owned(), "true".to_owned()));
    form
}

impl StripeProvider {
    pub(super) async fn submit_evidence(&self, req: &DisputeEvidenceRequest) -> ProviderCall {
        if let Some(reason) = evidence_refusal(&req.evidence) {
            return ProviderCall::unsent(not_supported(reason));
        }
        let request = self
            .client
            .request(
                Method::POST,
                self.url(&["v1", "disputes", &req.provider_dispute_id]),
            )
            .header("Idempotency-Key", &req.idempotency_key)
            .form(&evidence_form(&req.evidence));
        self.dispute_call("submit_dispute_evidence", request).await
    }

    pub(super) async fn close_dispute(&self, req: &AcceptDisputeRequest) -> ProviderCall {
        let no_parameters: [(&str, &str); 0] = [];
        let request = self
            .client
            .request(
                Method::POST,
                self.url(&["v1", "disputes", &req.provider_dispute_id, "close"]),
            )
            .header("Idempotency-Key", &req.idempotency_key)
            .form(&no_parameters);
        self.dispute_call("accept_dispute", request).await
    }

    async fn dispute_call(
        &self,
        what: &'static str,
        request: reqwest::RequestBuilder,
    ) -> ProviderCall {
        let request = request
            .bearer_auth(self.secret.expose())
            .header("Stripe-Version", API_VERSION);
        self.client
            .send("stripe", what, request, outcome_for_dispute_answer)
            .await
    }
}

fn not_supported(message: String) -> ProviderOutcome {
    ProviderOutcome::Failed {
        code: EVIDENCE_NOT_SUPPORTED.to_owned(),
        message,
        provider_id: None,
        decline: None,
    }
}

#[derive(serde::Deserialize)]
struct Dispute {
    id: String,
    object: String,
}

#[derive(serde::Deserialize)]
struct ErrorBody {
    error: StripeError,
}

#[derive(serde::Deserialize)]
struct StripeError {
    #[serde(rename = "type")]
    kind: String,
    code: Option<String>,
    message: Option<String>,
}

/// What Stripe's answer to an evidence submission or a close says was done. A dispute object
/// back: done (`Succeeded`, the dispute's id). A refusal in Stripe's error object (a closed
/// dispute, evidence past its due date, an unknown dispute): nothing was done (`Failed`,
/// Stripe's code kept). Anything else, unknown.
pub fn outcome_for_dispute_answer(status: u16, body: &[u8]) -> ProviderOutcome {
    let unknown = |why: &str| ProviderOutcome::Unknown {
        reason: format!("HTTP {status} {why}: {}", summary(body)),
    };
    match status {
        200..=299 => match serde_json::from_slice::<Dispute>(body) {
            Ok(d) if d.object == "dispute" => ProviderOutcome::Succeeded { provider_id: d.id },
            _ => unknown("with an unreadable dispute"),
        },
        408 | 409 | 429 => unknown("(the request may still be acted on)"),
        401 | 403 => unknown("(not authorised)"),
        400..=499 => match serde_json::from_slice::<ErrorBody>(body) {
            // The key already holds another request's result, which payorch cannot see.
            Ok(e) if e.error.kind == "idempotency_error" => unknown("idempotency_error"),
            // A 404 that is not Stripe's "no such dispute" is a wrong URL, not an answer.
            Ok(e) if status == 404 && e.error.code.as_deref() != Some("resource_missing") => {
                unknown("(not a missing dispute)")
            }
            Ok(e) => ProviderOutcome::Failed {
                code: e
                    .error
                    .code
                    .unwrap_or_else(|| DISPUTE_ACTION_REFUSED.to_owned()),
                message: e
                    .error
                    .message
                    .unwrap_or_else(|| "Stripe refused the request".to_owned()),
                provider_id: None,
                decline: None,
            },
            Err(_) => unknown("without Stripe's error object"),
        },
        _ => unknown("(the outcome is not known)"),
    }
}

fn summary(body: &[u8]) -> String {
    String::from_utf8_lossy(body).chars().take(200).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::dispute_actions::{EvidenceDocument, EvidenceField};

    fn text() -> DisputeEvidence {
        DisputeEvidence {
            text: vec![
                (EvidenceField::CustomerName, "Ada".into()),
                (EvidenceField::UncategorizedText, "refunded on 1 May".into()),
            ],
            ..DisputeEvidence::default()
        }
    }

    #[test]
    fn the_form_names_stripes_evidence_fields_and_submits() {
        let form = evidence_form(&text());
        assert_eq!(
            form,
            vec![
                ("evidence[customer_name]".to_owned(), "Ada".to_owned()),
                (
                    "evidence[uncategorized_text]".to_owned(),
                    "refunded on 1 May".to_owned()
                ),
                ("submit".to_owned(), "true".to_owned()),
            ]
        );
    }

    #[test]
    fn documents_and_an_adyen_reason_are_refused_before_sending() {
        assert_eq!(evidence_refusal(&text()), None);
        let mut with_document = text();
        with_document.documents.push(EvidenceDocument {
            document_type: "DefenseMaterial".into(),
            content_type: "application/pdf".into(),
            content_base64: "JVBERi0=".into(),
        });
        assert!(evidence_refusal(&with_document)
            .unwrap()
            .contains("Files API"));
        let mut with_reason = text();
        with_reason.defense_reason_code = Some("SupplyDefenseMaterial".into());
        assert!(evidence_refusal(&with_reason).is_some());
        assert!(evidence_refusal(&DisputeEvidence::default()).is_some());
    }

    #[test]
    fn answers_map_as_the_provider_protocol_says() {
        let dispute = br#"{"id":"du_1","object":"dispute","status":"under_review"}"#;
        assert_eq!(
            outcome_for_dispute_answer(200, dispute),
            ProviderOutcome::Succeeded {
                provider_id: "du_1".into()
            }
        );
        let closed = br#"{"error":{"type":"invalid_request_error","message":"This dispute is already closed"}}"#;
        assert!(matches!(
            outcome_for_dispute_answer(400, closed),
            ProviderOutcome::Failed { ref code, .. } if code == DISPUTE_ACTION_REFUSED
        ));
        let missing = br#"{"error":{"type":"invalid_request_error","code":"resource_missing","message":"No such dispute"}}"#;
        assert!(matches!(
            outcome_for_dispute_answer(404, missing),
            ProviderOutcome::Failed { ref code, .. } if code == "resource_missing"
        ));
        let idempotency = br#"{"error":{"type":"idempotency_error","message":"Keys for idempotent requests can only be used with the same parameters"}}"#;
        for (status, body) in [
            (200, &b"{}"[..]),
            (200, b"not json"),
            (400, idempotency),
            (400, b"<html>"),
            (404, br#"{"error":{"type":"invalid_request_error","message":"Unrecognized request URL"}}"#),
            (401, closed),
            (403, closed),
            (408, closed),
            (409, closed),
            (429, closed),
            (500, closed),
            (502, b""),
            (503, b""),
        ] {
            assert!(
                matches!(outcome_for_dispute_answer(status, body), ProviderOutcome::Unknown { .. }),
                "{status} {}",
                String::from_utf8_lossy(body)
            );
        }
    }
}
