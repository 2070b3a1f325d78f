//! What payorch asks a provider to do about a dispute: answer it with evidence, or accept it
//! (docs/guides/disputes.md, "Answering a dispute"). One vocabulary for both adapters; each
//! says what its provider cannot take (Stripe's documents need its Files API, which payorch
//! does not use; Adyen's Disputes API takes documents and a defence reason, no text), so a
//! merchant learns it from a `422` before anything is sent.

use crate::words::words;

words! {
    /// The text fields of payorch's evidence: Stripe's own evidence names (documented and
    /// well known, as the dispute statuses are), the text ones only.
    pub enum EvidenceField {
        AccessActivityLog => "access_activity_log",
        BillingAddress => "billing_address",
        CancellationPolicyDisclosure => "cancellation_policy_disclosure",
        CancellationRebuttal => "cancellation_rebuttal",
        CustomerEmailAddress => "customer_email_address",
        CustomerName => "customer_name",
        CustomerPurchaseIp => "customer_purchase_ip",
        DuplicateChargeExplanation => "duplicate_charge_explanation",
        DuplicateChargeId => "duplicate_charge_id",
        ProductDescription => "product_description",
        RefundPolicyDisclosure => "refund_policy_disclosure",
        RefundRefusalExplanation => "refund_refusal_explanation",
        ServiceDate => "service_date",
        ShippingAddress => "shipping_address",
        ShippingCarrier => "shipping_carrier",
        ShippingDate => "shipping_date",
        ShippingTrackingNumber => "shipping_tracking_number",
        UncategorizedText => "uncategorized_text",
    }
}

impl EvidenceField {
    /// The longest value Stripe takes for the field (its `dispute_evidence_params`): the
    /// free texts 20,000 characters, the rest 5,000.
    pub fn max_chars(self) -> usize {
        match self {
            EvidenceField::AccessActivityLog
            | EvidenceField::CancellationPolicyDisclosure
            | EvidenceField::CancellationRebuttal
            | EvidenceField::DuplicateChargeExplanation
            | EvidenceField::ProductDescription
            | EvidenceField::RefundPolicyDisclosure
            | EvidenceField::RefundRefusalExplanation
            | EvidenceField::UncategorizedText => 20_000,
            _ => 5_000,
        }
    }
}

/// Stripe's limit on all evidence text of a dispute together.
pub const EVIDENCE_MAX_TOTAL_CHARS: usize = 150_000;

/// One document of the evidence, as Adyen's `DefenseDocument` takes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvidenceDocument {
    /// Adyen's `defenseDocumentTypeCode` (`DefenseMaterial`, `TIDorInvoice`, …).
    pub document_type: String,
    /// `application/pdf`, `image/jpeg` or `image/tiff`.
    pub content_type: String,
    /// The document, base64 (standard alphabet), as the merchant sent it.
    pub content_base64: String,
}

/// payorch's evidence: text by field (in [`EvidenceField::ALL`]'s order, each at most once),
/// documents, and Adyen's defence reason.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DisputeEvidence {
    pub text: Vec<(EvidenceField, String)>,
    pub documents: Vec<EvidenceDocument>,
    /// Adyen's `defenseReasonCode` (one of the dispute's applicable reasons); Stripe has none.
    pub defense_reason_code: Option<String>,
}

/// Evidence submitted for a dispute under the action's own provider key, the same request on
/// every resend. Stripe submits it at once (`submit=true`): there is no staging in payorch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DisputeEvidenceRequest {
    /// Stripe's `du_…`; Adyen's dispute `pspReference`.
    pub provider_dispute_id: String,
    pub idempotency_key: String,
    /// payorch's dispute id (`dp_…`) and its merchant, for the logs.
    pub dispute_id: String,
    pub merchant_id: String,
    pub evidence: DisputeEvidence,
}

/// A dispute accepted (Stripe: closed): the merchant gives the money up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AcceptDisputeRequest {
    pub provider_dispute_id: String,
    pub idempotency_key: String,
    pub dispute_id: String,
    pub merchant_id: String,
}

/// The failure code of an action the adapter refused to send: the provider cannot take
/// this evidence (its message says why and what to send instead).
pub const EVIDENCE_NOT_SUPPORTED: &str = "evidence_not_supported";

/// The failure code of an action the provider refused: nothing was done to the dispute.
pub const DISPUTE_ACTION_REFUSED: &str = "dispute_action_refused";

#[cfg(test)]
mod tests {
    use super::EvidenceField;

    #[test]
    fn every_evidence_field_reads_back_as_itself() {
        for f in EvidenceField::ALL {
            assert_eq!(EvidenceField::parse(f.as_str()), Some(f));
        }
    }
}
