//! A settlement finding, as support sees it (docs/operations/reconciliation.md, "The
//! findings"): a difference between a provider's record of money moved and payorch's, with
//! what it was found from.

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::ids::{MerchantId, PaymentId, RefundId};
use crate::payments::settlement::store::OpenFinding;

/// One finding no human has closed yet.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct SettlementFindingView {
    #[schema(value_type = String, format = Uuid)]
    id: uuid::Uuid,
    /// Always `settlement_finding`.
    object: &'static str,
    provider: String,
    /// `unknown_charge`, `captured_twice`, `amount_mismatch`, `charge_not_booked`,
    /// `refund_not_booked`, `unknown_refund` or `unexplained_dispute`.
    kind: String,
    /// What it is about, one open finding each: the provider's payment id, or a refund's.
    subject: String,
    provider_payment_id: Option<String>,
    /// payorch's merchant, payment and refund, when payorch has them (a charge it never
    /// made has none).
    merchant_id: Option<MerchantId>,
    payment_id: Option<PaymentId>,
    refund_id: Option<RefundId>,
    /// Minor units: what payorch's books say should have moved, and what the provider
    /// booked; `null` where one side has nothing.
    expected: Option<i64>,
    found: Option<i64>,
    currency: Option<String>,
    /// The provider's entries and payorch's rows the finding was made from.
    #[schema(value_type = Object)]
    evidence: serde_json::Value,
    found_at: DateTime<Utc>,
}

impl From<OpenFinding> for SettlementFindingView {
    fn from(f: OpenFinding) -> Self {
        SettlementFindingView {
            id: f.id,
            object: "settlement_finding",
            provider: f.provider,
            kind: f.kind,
            subject: f.subject,
            provider_payment_id: f.provider_payment_id,
            merchant_id: f.merchant_id.map(MerchantId),
            payment_id: f.attempt_id.map(PaymentId),
            refund_id: f.refund_id.map(RefundId),
            expected: f.expected,
            found: f.found,
            currency: f.currency,
            evidence: f.evidence,
            found_at: f.found_at,
        }
    }
}
