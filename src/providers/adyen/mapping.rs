//! How Adyen's answers map to a [`ProviderOutcome`] (docs/DESIGN.md, "The provider
//! protocol").
//!
//! The rule of thumb, as for Stripe: only an answer that proves nothing was charged (or
//! refunded) is `Failed`; anything that leaves doubt is `Unknown`, so the caller asks again
//! with the same key. Lookups are stricter still: Adyen's Checkout API has no payment
//! lookup, so any answer to one other than a 2xx says nothing, never `NotFound`.

use super::wire::{PaymentList, PaymentResponse, RefundList, RefundResponse, ServiceError};
use crate::providers::ProviderOutcome;

/// Which call an answer belongs to: a refused create proves nothing happened, a refused
/// lookup proves nothing at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    Create,
    Retrieve,
    FindByReference,
    CreateRefund,
    RetrieveRefund,
    FindRefund,
}

/// The outcome a payment response stands for.
pub fn outcome_for_payment(payment: &PaymentResponse) -> ProviderOutcome {
    let provider_id = payment.psp_reference.clone();
    match payment.result_code.as_str() {
        "Authorised" => match provider_id {
            Some(provider_id) => ProviderOutcome::Succeeded { provider_id },
            // Money moved, but we cannot name the charge: ask again rather than guess.
            None => unknown("Authorised without a pspReference".into()),
        },
        "Refused" => ProviderOutcome::Failed {
            code: payment
                .refusal_reason_code
                .clone()
                .unwrap_or_else(|| "refused".to_owned()),
            message: payment
                .refusal_reason
                .clone()
                .unwrap_or_else(|| "the payment was refused".to_owned()),
            provider_id,
        },
        "Cancelled" => ProviderOutcome::Failed {
            code: payment
                .refusal_reason_code
                .clone()
                .unwrap_or_else(|| "cancelled".to_owned()),
            message: payment
                .refusal_reason
                .clone()
                .unwrap_or_else(|| "the payment was cancelled".to_owned()),
            provider_id,
        },
        // Adyen's "Error": the payment hit an error during processing; whether the card was
        // charged is not said.
        "Error" => unknown(format!(
            "resultCode Error: {}",
            payment
                .refusal_reason
                .as_deref()
                .unwrap_or("no reason given")
        )),
        // Pending, Received, and any action asked of the shopper (RedirectShopper,
        // ChallengeShopper, IdentifyShopper, PresentToShopper, …) or a code we do not know:
        // Adyen holds the payment, the outcome is not final.
        _ => ProviderOutcome::Pending { provider_id },
    }
}

/// The outcome a refund response stands for: only `failed` proves nothing went back;
/// `received` and `pending` (and statuses we do not know) are not final.
pub fn outcome_for_refund(refund: &RefundResponse) -> ProviderOutcome {
    let provider_id = refund.psp_reference.clone();
    match refund.status.as_str() {
        "succeeded" => match provider_id {
            Some(provider_id) => ProviderOutcome::Succeeded { provider_id },
            None => unknown("refund succeeded without a pspReference".into()),
        },
        "failed" => ProviderOutcome::Failed {
            code: "refund_failed".to_owned(),
            message: "the provider says the refund failed".to_owned(),
            provider_id,
        },
        _ => ProviderOutcome::Pending { provider_id },
    }
}

/// Map one HTTP answer (status and body) to an outcome.
pub fn outcome_for_response(call: Call, status: u16, body: &[u8]) -> ProviderOutcome {
    let creates = matches!(call, Call::Create | Call::CreateRefund);
    match status {
        200..=299 => outcome_for_success(call, body),
        // Against Adyen itself these lookup paths do not exist: a 404 (or anything else)
        // must never read as "no charge".
        _ if !creates => unknown(format!("HTTP {status} to a lookup: {}", summary(body))),
        422 => match parse_error(body) {
            // The key already holds another request, or one in flight: the first may act.
            Some(e) if is_idempotency_error(&e) => unknown(format!(
                "HTTP 422 idempotency error {}: {}",
                e.error_code.as_deref().unwrap_or("?"),
                e.message.as_deref().unwrap_or_default()
            )),
            // Adyen validated the request and refused it: nothing was processed.
            Some(e) => ProviderOutcome::Failed {
                code: e.error_code.unwrap_or_else(|| "http_422".to_owned()),
                message: e
                    .message
                    .unwrap_or_else(|| "the provider refused the request".to_owned()),
                provider_id: None,
            },
            None => ProviderOutcome::Failed {
                code: "http_422".to_owned(),
                message: summary(body),
                provider_id: None,
            },
        },
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
        // A request under this key is in flight, or the key holds another request.
        409 => unknown(format!(
            "HTTP 409 (idempotency key in use): {}",
            summary(body)
        )),
        429 => unknown(format!("HTTP 429 (rate limited): {}", summary(body))),
        _ => unknown(format!("HTTP {status}: {}", summary(body))),
    }
}

fn outcome_for_success(call: Call, body: &[u8]) -> ProviderOutcome {
    match call {
        Call::Create | Call::Retrieve => match serde_json::from_slice::<PaymentResponse>(body) {
            Ok(payment) => outcome_for_payment(&payment),
            Err(e) => unknown(format!("2xx with an unreadable payment response: {e}")),
        },
        Call::FindByReference => match serde_json::from_slice::<PaymentList>(body) {
            Ok(list) => outcome_for_search(&list.data),
            Err(e) => unknown(format!("2xx with an unreadable payment list: {e}")),
        },
        Call::CreateRefund | Call::RetrieveRefund => {
            match serde_json::from_slice::<RefundResponse>(body) {
                Ok(refund) => outcome_for_refund(&refund),
                Err(e) => unknown(format!("2xx with an unreadable refund response: {e}")),
            }
        }
        // A list is read by the caller, who knows which refund it looks for.
        Call::FindRefund => unknown("a refund list read without the refund it is for".into()),
    }
}

/// A 2xx answer to a refund search: the refund whose `reference` is `refund_id`, or
/// `NotFound` when the list holds none. An entry without a reference could be ours, so a
/// list of only such entries leaves doubt.
pub(crate) fn refund_in_list(body: &[u8], refund_id: &str) -> ProviderOutcome {
    let list = match serde_json::from_slice::<RefundList>(body) {
        Ok(list) => list,
        Err(e) => return unknown(format!("2xx with an unreadable refund list: {e}")),
    };
    if let Some(refund) = list
        .data
        .iter()
        .find(|r| r.reference.as_deref() == Some(refund_id))
    {
        return outcome_for_refund(refund);
    }
    if list.data.iter().any(|r| r.reference.is_none()) {
        return unknown("a refund list whose entries name no reference".into());
    }
    ProviderOutcome::NotFound
}

/// One attempt has one reference and one idempotency key, so at most one payment should
/// match. Should there be more, an authorised one wins (money moved), then a pending one,
/// then one that leaves doubt, then a failed one; among equals the first listed.
fn outcome_for_search(data: &[PaymentResponse]) -> ProviderOutcome {
    let rank = |o: &ProviderOutcome| match o {
        ProviderOutcome::Succeeded { .. } => 4,
        ProviderOutcome::Pending { .. } => 3,
        ProviderOutcome::Unknown { .. } | ProviderOutcome::Unavailable { .. } => 2,
        ProviderOutcome::Failed { .. } | ProviderOutcome::NotFound => 1,
    };
    let mut best: Option<ProviderOutcome> = None;
    for outcome in data.iter().map(outcome_for_payment) {
        if best.as_ref().is_none_or(|b| rank(&outcome) > rank(b)) {
            best = Some(outcome);
        }
    }
    best.unwrap_or(ProviderOutcome::NotFound)
}

/// Adyen answers a resend under a key it holds for another (or an unfinished) request
/// with error code 704; a proxy or a later API version may only say so in words.
fn is_idempotency_error(e: &ServiceError) -> bool {
    let mentions = |text: &Option<String>| {
        text.as_deref()
            .is_some_and(|t| t.to_ascii_lowercase().contains("idempoten"))
    };
    e.error_code.as_deref() == Some("704") || mentions(&e.error_type) || mentions(&e.message)
}

fn parse_error(body: &[u8]) -> Option<ServiceError> {
    serde_json::from_slice(body).ok()
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

    fn payment(result_code: &str, psp: &str) -> PaymentResponse {
        PaymentResponse {
            result_code: result_code.into(),
            psp_reference: Some(psp.into()),
            merchant_reference: None,
            refusal_reason: None,
            refusal_reason_code: None,
            amount: None,
        }
    }

    #[test]
    fn search_prefers_authorised_then_pending_and_reports_none_as_not_found() {
        assert_eq!(outcome_for_search(&[]), ProviderOutcome::NotFound);
        let data = [
            payment("Refused", "P1"),
            payment("Received", "P2"),
            payment("Authorised", "P3"),
        ];
        assert_eq!(
            outcome_for_search(&data),
            ProviderOutcome::Succeeded {
                provider_id: "P3".into()
            }
        );
        let data = [payment("Refused", "P1"), payment("Pending", "P2")];
        assert_eq!(
            outcome_for_search(&data),
            ProviderOutcome::Pending {
                provider_id: Some("P2".into())
            }
        );
    }

    #[test]
    fn a_search_with_a_refusal_and_an_error_leaves_doubt() {
        let data = [payment("Refused", "P1"), payment("Error", "P2")];
        assert!(matches!(
            outcome_for_search(&data),
            ProviderOutcome::Unknown { .. }
        ));
    }

    #[test]
    fn an_idempotency_error_is_unknown_even_as_a_422() {
        let body = br#"{"status":422,"errorCode":"704","message":"request already processed or in progress","errorType":"validation"}"#;
        assert!(matches!(
            outcome_for_response(Call::Create, 422, body),
            ProviderOutcome::Unknown { .. }
        ));
    }
}
