//! How Stripe's answers map to a [`ProviderOutcome`] (docs/DESIGN.md, "The provider
//! protocol").
//!
//! The rule of thumb: only an answer that proves nothing was charged is `Failed`;
//! anything that leaves doubt is `Unknown`, so the caller asks again with the same key.

use super::wire::{ErrorBody, PaymentIntent, Refund, SearchResult};
use super::IntentStatus;
use crate::providers::ProviderOutcome;

/// The outcome a PaymentIntent status stands for.
pub fn outcome_for_status(
    status: &IntentStatus,
    provider_id: &str,
    failure_code: Option<&str>,
    failure_message: Option<&str>,
) -> ProviderOutcome {
    let provider_id = provider_id.to_owned();
    match status {
        IntentStatus::Succeeded => ProviderOutcome::Succeeded { provider_id },
        IntentStatus::RequiresPaymentMethod | IntentStatus::Canceled => ProviderOutcome::Failed {
            // With no last_payment_error the status itself is the most precise code we have.
            code: failure_code.unwrap_or(status.as_str()).to_owned(),
            message: failure_message
                .unwrap_or("the payment intent did not succeed")
                .to_owned(),
            provider_id: Some(provider_id),
        },
        // processing, requires_action, requires_capture, requires_confirmation and statuses
        // we do not know: the provider holds the charge, the outcome is not final.
        _ => ProviderOutcome::Pending {
            provider_id: Some(provider_id),
        },
    }
}

/// The outcome of a PaymentIntent object.
pub fn outcome_for_intent(intent: &PaymentIntent) -> ProviderOutcome {
    let error = intent.last_payment_error.as_ref();
    outcome_for_status(
        &IntentStatus::parse(&intent.status),
        &intent.id,
        error.and_then(|e| e.code.as_deref()),
        error.and_then(|e| e.message.as_deref()),
    )
}

/// Which call an answer belongs to; a 404 means different things to each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    Create,
    Retrieve,
    Search,
    CreateRefund,
    RetrieveRefund,
    ListRefunds,
}

/// A 2xx answer to `GET /v1/refunds?payment_intent=…`: the refund whose metadata names
/// `refund_id` (Stripe lists the charge's refunds, newest first), or `NotFound`.
pub(crate) fn refund_in_list(body: &[u8], refund_id: &str) -> ProviderOutcome {
    #[derive(serde::Deserialize)]
    struct RefundList {
        data: Vec<Refund>,
    }
    match serde_json::from_slice::<RefundList>(body) {
        Ok(list) => list
            .data
            .iter()
            .find(|r| r.metadata.get("refund_id").map(String::as_str) == Some(refund_id))
            .map(outcome_for_refund)
            .unwrap_or(ProviderOutcome::NotFound),
        Err(e) => unknown(format!("2xx with an unreadable refund list: {e}")),
    }
}

/// The outcome a Refund object stands for: only `failed` or `canceled` proves nothing went
/// back; `pending` and `requires_action` are not final.
pub(crate) fn outcome_for_refund(refund: &Refund) -> ProviderOutcome {
    let provider_id = refund.id.clone();
    match refund.status.as_str() {
        "succeeded" => ProviderOutcome::Succeeded { provider_id },
        "failed" | "canceled" => ProviderOutcome::Failed {
            code: refund
                .failure_reason
                .clone()
                .unwrap_or_else(|| format!("refund_{}", refund.status)),
            message: format!("the provider says the refund {}", refund.status),
            provider_id: Some(provider_id),
        },
        _ => ProviderOutcome::Pending {
            provider_id: Some(provider_id),
        },
    }
}

/// Map one HTTP answer (status and body) to an outcome.
pub fn outcome_for_response(call: Call, status: u16, body: &[u8]) -> ProviderOutcome {
    match status {
        200..=299 => outcome_for_success(call, body),
        // Definitive decline: the card was refused, nothing charged.
        402 => failed_from_error(status, body),
        // Stripe's "a request with this key is in flight": the first may still charge.
        409 => unknown(format!(
            "HTTP 409 (idempotency key in use): {}",
            summary(body)
        )),
        429 => unknown(format!("HTTP 429 (rate limited): {}", summary(body))),
        // Credentials or permissions: the provider refused *this* request before processing
        // it, for a reason of our configuration, not the payer's. For a charge's first send
        // that is the explicit "not processed" that lets a payment fail over (docs/DESIGN.md,
        // "Failover"); for a resend it proves nothing about an earlier send, which the flow
        // and the reconciler read as unknown. A lookup or a refund so answered stays unknown.
        401 | 403 if matches!(call, Call::Create) => ProviderOutcome::Unavailable {
            reason: format!(
                "HTTP {status} (not authorised, not processed): {}",
                summary(body)
            ),
        },
        401 | 403 => unknown(format!("HTTP {status} (not authorised): {}", summary(body))),
        408 => unknown(format!("HTTP 408 (request timeout): {}", summary(body))),
        404 if matches!(call, Call::Retrieve | Call::RetrieveRefund)
            && is_resource_missing(body) =>
        {
            ProviderOutcome::NotFound
        }
        // A 404 on create or search means a wrong URL, not a missing charge.
        404 => unknown(format!("HTTP 404: {}", summary(body))),
        400..=499 => match parse_error(body) {
            // The key already holds a different request's result; which one we cannot see.
            Some(e) if e.error.kind == "idempotency_error" => unknown(format!(
                "HTTP {status} idempotency_error: {}",
                e.error.message.unwrap_or_default()
            )),
            // A refused create (a decline's siblings; for a refund, more than is left or a
            // charge that cannot be refunded) did nothing.
            _ if matches!(call, Call::Create | Call::CreateRefund) => {
                failed_from_error(status, body)
            }
            // A refused lookup says nothing about the charge.
            _ => unknown(format!("HTTP {status}: {}", summary(body))),
        },
        _ => unknown(format!("HTTP {status}: {}", summary(body))),
    }
}

fn outcome_for_success(call: Call, body: &[u8]) -> ProviderOutcome {
    match call {
        Call::Create | Call::Retrieve => match serde_json::from_slice::<PaymentIntent>(body) {
            Ok(intent) => outcome_for_intent(&intent),
            Err(e) => unknown(format!("2xx with an unreadable payment intent: {e}")),
        },
        Call::Search => match serde_json::from_slice::<SearchResult>(body) {
            Ok(result) => outcome_for_search(&result.data),
            Err(e) => unknown(format!("2xx with an unreadable search result: {e}")),
        },
        // A list is read by the caller, who knows which refund it looks for.
        Call::ListRefunds => unknown("a refund list read without the refund it is for".into()),
        Call::CreateRefund | Call::RetrieveRefund => match serde_json::from_slice::<Refund>(body) {
            Ok(refund) => outcome_for_refund(&refund),
            Err(e) => unknown(format!("2xx with an unreadable refund: {e}")),
        },
    }
}

/// One attempt has one idempotency key, so at most one intent should match. Should there
/// be more, a succeeded one wins (money moved), then a pending one, then the newest.
fn outcome_for_search(data: &[PaymentIntent]) -> ProviderOutcome {
    let outcomes: Vec<(i64, ProviderOutcome)> = data
        .iter()
        .map(|intent| (intent.created, outcome_for_intent(intent)))
        .collect();
    let rank = |o: &ProviderOutcome| match o {
        ProviderOutcome::Succeeded { .. } => 3,
        ProviderOutcome::Pending { .. } => 2,
        _ => 1,
    };
    outcomes
        .into_iter()
        .max_by_key(|(created, outcome)| (rank(outcome), *created))
        .map(|(_, outcome)| outcome)
        .unwrap_or(ProviderOutcome::NotFound)
}

fn failed_from_error(status: u16, body: &[u8]) -> ProviderOutcome {
    match parse_error(body) {
        Some(ErrorBody { error }) => ProviderOutcome::Failed {
            code: error
                .code
                .or_else(|| error.decline_code.clone())
                .unwrap_or_else(|| error.kind.clone()),
            message: error
                .message
                .unwrap_or_else(|| format!("HTTP {status} {}", error.kind)),
            provider_id: error.payment_intent.map(|pi| pi.id),
        },
        None => ProviderOutcome::Failed {
            code: format!("http_{status}"),
            message: summary(body),
            provider_id: None,
        },
    }
}

fn parse_error(body: &[u8]) -> Option<ErrorBody> {
    serde_json::from_slice(body).ok()
}

fn is_resource_missing(body: &[u8]) -> bool {
    parse_error(body).is_some_and(|e| e.error.code.as_deref() == Some("resource_missing"))
}

fn unknown(reason: String) -> ProviderOutcome {
    ProviderOutcome::Unknown { reason }
}

/// A short, log-safe excerpt of a body.
fn summary(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let mut out: String = text.chars().take(200).collect();
    if text.chars().count() > 200 {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn search_prefers_a_succeeded_intent_and_reports_none_as_not_found() {
        let intent = |id: &str, status: &str, created| PaymentIntent {
            id: id.into(),
            object: "payment_intent".into(),
            amount: 100,
            amount_received: 0,
            currency: "eur".into(),
            status: status.into(),
            payment_method: None,
            metadata: Default::default(),
            last_payment_error: None,
            latest_charge: None,
            description: None,
            capture_method: "automatic".into(),
            confirmation_method: "automatic".into(),
            created,
            livemode: false,
            client_secret: None,
            payment_method_types: vec!["card".into()],
            amount_capturable: 0,
            next_action: None,
            canceled_at: None,
            cancellation_reason: None,
        };
        assert_eq!(outcome_for_search(&[]), ProviderOutcome::NotFound);
        let data = [
            intent("pi_new", "requires_payment_method", 2),
            intent("pi_old", "succeeded", 1),
        ];
        assert_eq!(
            outcome_for_search(&data),
            ProviderOutcome::Succeeded {
                provider_id: "pi_old".into()
            }
        );
    }
}
