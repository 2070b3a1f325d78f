//! payorch's evidence as a merchant sends it (docs/guides/disputes.md, "Answering a
//! dispute"), checked field by field, and as `dispute_actions.evidence` keeps it so a resend
//! sends the same request.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{json, Value};

use crate::providers::dispute_actions::{
    DisputeEvidence, EvidenceDocument, EvidenceField, EVIDENCE_MAX_TOTAL_CHARS,
};

/// The content types Adyen takes for a defence document.
pub const DOCUMENT_TYPES: [&str; 3] = ["application/pdf", "image/jpeg", "image/tiff"];

/// The body of `POST /v1/disputes/{id}/evidence`.
#[derive(Debug, Clone, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EvidenceInput {
    /// Text by Stripe's evidence names (`uncategorized_text`, `customer_name`,
    /// `shipping_tracking_number`, …): Stripe only.
    #[serde(default)]
    pub evidence: BTreeMap<String, String>,
    /// Documents, base64: Adyen only.
    #[serde(default)]
    pub documents: Vec<DocumentInput>,
    /// One of the dispute's applicable defence reasons: Adyen only, and required there.
    pub defense_reason_code: Option<String>,
}

/// One document of the evidence.
#[derive(Debug, Clone, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DocumentInput {
    /// Adyen's `defenseDocumentTypeCode` (`DefenseMaterial`, `TIDorInvoice`, …).
    pub document_type: String,
    /// `application/pdf`, `image/jpeg` or `image/tiff`.
    pub content_type: String,
    /// The document, base64.
    pub content: String,
}

/// The evidence, or every field problem at once (JSON pointer, message).
pub fn validate(input: &EvidenceInput) -> Result<DisputeEvidence, Vec<(String, String)>> {
    let mut problems = Vec::new();
    let mut text = Vec::new();
    let mut total = 0;
    for (name, value) in &input.evidence {
        let pointer = format!("/evidence/{name}");
        let Some(field) = EvidenceField::parse(name) else {
            problems.push((
                pointer,
                "not an evidence field (docs/guides/disputes.md)".into(),
            ));
            continue;
        };
        let chars = value.chars().count();
        total += chars;
        if chars == 0 || chars > field.max_chars() {
            problems.push((pointer, format!("1 to {} characters", field.max_chars())));
        }
        text.push((field, value.clone()));
    }
    if total > EVIDENCE_MAX_TOTAL_CHARS {
        problems.push((
            "/evidence".into(),
            format!("at most {EVIDENCE_MAX_TOTAL_CHARS} characters in all"),
        ));
    }
    text.sort_by_key(|(field, _)| EvidenceField::ALL.iter().position(|f| f == field));
    let mut documents = Vec::new();
    for (i, d) in input.documents.iter().enumerate() {
        if d.document_type.trim().is_empty() || d.document_type.len() > 100 {
            problems.push((
                format!("/documents/{i}/document_type"),
                "1 to 100 characters".into(),
            ));
        }
        if !DOCUMENT_TYPES.contains(&d.content_type.as_str()) {
            problems.push((
                format!("/documents/{i}/content_type"),
                format!("one of {}", DOCUMENT_TYPES.join(", ")),
            ));
        }
        if d.content.is_empty() || !is_base64(&d.content) {
            problems.push((format!("/documents/{i}/content"), "base64".into()));
        }
        documents.push(EvidenceDocument {
            document_type: d.document_type.clone(),
            content_type: d.content_type.clone(),
            content_base64: d.content.clone(),
        });
    }
    if let Some(code) = &input.defense_reason_code {
        if code.trim().is_empty() || code.len() > 100 {
            problems.push(("/defense_reason_code".into(), "1 to 100 characters".into()));
        }
    }
    if text.is_empty() && documents.is_empty() {
        problems.push((
            "".into(),
            "no evidence: give text fields (Stripe) or documents (Adyen)".into(),
        ));
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    Ok(DisputeEvidence {
        text,
        documents,
        defense_reason_code: input.defense_reason_code.clone(),
    })
}

fn is_base64(s: &str) -> bool {
    s.len().is_multiple_of(4)
        && s.trim_end_matches('=')
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/')
}

/// As `dispute_actions.evidence` keeps it.
pub fn to_json(evidence: &DisputeEvidence) -> Value {
    let text: serde_json::Map<String, Value> = evidence
        .text
        .iter()
        .map(|(f, v)| (f.as_str().to_owned(), Value::String(v.clone())))
        .collect();
    let documents: Vec<Value> = evidence
        .documents
        .iter()
        .map(|d| json!({"document_type": d.document_type, "content_type": d.content_type, "content": d.content_base64}))
        .collect();
    json!({"evidence": text, "documents": documents, "defense_reason_code": evidence.defense_reason_code})
}

/// Back from what [`to_json`] stored (an accept's `{}` reads as no evidence).
pub fn from_json(stored: &Value) -> DisputeEvidence {
    let text = stored["evidence"]
        .as_object()
        .map(|m| {
            let mut text: Vec<(EvidenceField, String)> = m
                .iter()
                .filter_map(|(k, v)| Some((EvidenceField::parse(k)?, v.as_str()?.to_owned())))
                .collect();
            text.sort_by_key(|(field, _)| EvidenceField::ALL.iter().position(|f| f == field));
            text
        })
        .unwrap_or_default();
    let documents = stored["documents"]
        .as_array()
        .map(|docs| {
            docs.iter()
                .map(|d| EvidenceDocument {
                    document_type: d["document_type"].as_str().unwrap_or_default().to_owned(),
                    content_type: d["content_type"].as_str().unwrap_or_default().to_owned(),
                    content_base64: d["content"].as_str().unwrap_or_default().to_owned(),
                })
                .collect()
        })
        .unwrap_or_default();
    DisputeEvidence {
        text,
        documents,
        defense_reason_code: stored["defense_reason_code"].as_str().map(str::to_owned),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evidence_is_kept_as_it_is_sent_again() {
        let input = EvidenceInput {
            evidence: [
                (
                    "uncategorized_text".to_owned(),
                    "refunded on 1 May".to_owned(),
                ),
                ("customer_name".to_owned(), "Ada".to_owned()),
            ]
            .into(),
            documents: vec![DocumentInput {
                document_type: "DefenseMaterial".into(),
                content_type: "application/pdf".into(),
                content: "JVBERi0xLjQK".into(),
            }],
            defense_reason_code: Some("SupplyDefenseMaterial".into()),
        };
        let evidence = validate(&input).unwrap();
        assert_eq!(evidence.text[0].0, EvidenceField::CustomerName);
        assert_eq!(from_json(&to_json(&evidence)), evidence);
    }

    #[test]
    fn every_problem_is_named_at_once() {
        let input = EvidenceInput {
            evidence: [
                ("explanation".to_owned(), "x".to_owned()),
                ("customer_name".to_owned(), "x".repeat(5_001)),
            ]
            .into(),
            documents: vec![DocumentInput {
                document_type: "".into(),
                content_type: "text/plain".into(),
                content: "not base64!".into(),
            }],
            defense_reason_code: None,
        };
        let pointers: Vec<String> = validate(&input)
            .unwrap_err()
            .into_iter()
            .map(|p| p.0)
            .collect();
        assert_eq!(
            pointers,
            [
                "/evidence/customer_name",
                "/evidence/explanation",
                "/documents/0/document_type",
                "/documents/0/content_type",
                "/documents/0/content",
            ]
        );
        assert_eq!(validate(&EvidenceInput::default()).unwrap_err()[0].0, "");
    }
}
