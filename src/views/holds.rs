//! A capture or void of a payment's hold, as the API shows it (docs/guides/captures.md, "Authorize now,
//! capture later").

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::Payment;
use crate::ids::{HoldOperationId, PaymentId};
use crate::payments::holds::HoldOperation;
use crate::payments::status::AttemptStatus;

/// One capture or void.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct HoldOperationView {
    id: HoldOperationId,
    /// `capture` or `void`.
    object: &'static str,
    payment_id: PaymentId,
    /// `created` or `pending` while the provider's answer is not known (payorch asks again
    /// under the same key), `succeeded` once done, `failed` if the provider refused it (the
    /// hold is then as it was).
    status: AttemptStatus,
    /// For a capture: what it takes; the rest of the hold is released.
    amount: Option<i64>,
    currency: String,
    /// For a void: `voided`, `challenge_abandoned` or `authorization_expired`.
    reason: Option<String>,
    /// Sent with every resend of this operation, so the provider never does it twice.
    provider_idempotency_key: String,
    failure_code: Option<String>,
    failure_message: Option<String>,
    /// `api`, `support` or `reconciler`: who asked for it.
    source: String,
    created_at: DateTime<Utc>,
    finished_at: Option<DateTime<Utc>>,
}

impl From<HoldOperation> for HoldOperationView {
    fn from(o: HoldOperation) -> Self {
        HoldOperationView {
            id: o.id,
            object: o.kind.as_str(),
            payment_id: o.payment_id,
            status: o.status,
            amount: o.amount,
            currency: o.currency,
            reason: o.reason,
            provider_idempotency_key: o.provider_idempotency_key,
            failure_code: o.failure_code,
            failure_message: o.failure_message,
            source: o.source,
            created_at: o.created_at,
            finished_at: o.finished_at,
        }
    }
}

/// The answer to a capture or void: the operation, and its payment as it is now.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct OperatedView {
    operation: HoldOperationView,
    payment: Payment,
}

impl From<crate::payments::holds::Operated> for OperatedView {
    fn from(o: crate::payments::holds::Operated) -> Self {
        OperatedView {
            operation: o.operation.into(),
            payment: o.payment.into(),
        }
    }
}
