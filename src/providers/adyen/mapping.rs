//! How Adyen's answers map to a [`ProviderOutcome`] (docs/DESIGN.md, "The provider
//! protocol").
//!
//! The rule of thumb, as for Stripe: only an answer that proves nothing was charged (or
//! refunded) is `Failed`; anything that leaves doubt is `Unknown`, so the caller asks again
//! with the same key. Adyen's Checkout API has no lookup at all, so no answer here is ever
//! `NotFound`.

use reqwest::Url;

use super::declines;
use super::refusal;
use super::wire::{
    Action, ModificationResponse, PaymentAction, PaymentResponse, RefundResponse, ServiceError,
};
use crate::providers::{CaptureMethod, NextAction, ProviderOutcome};

/// Which call an answer belongs to: a refused create (or capture, or cancel) proves nothing
/// happened, a refused lookup proves nothing at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    /// A payment, and how it is captured: only the create knows.
    Create(CaptureMethod),
    CreateRefund,
    Capture,
    Cancel,
    /// `POST /payments/details`: the payer is back from a redirect.
    Details,
}

/// The result codes that ask something of the shopper, which payorch can pass on only as a
/// redirect.
const SHOPPER_ACTIONS: [&str; 3] = ["RedirectShopper", "IdentifyShopper", "ChallengeShopper"];

/// The outcome a payment response stands for, with the response's `action`, if any.
///
/// Adyen answers `Authorised` whether it captures automatically after or holds the money for
/// a capture: `capture` says which, when the call knows it (a create). Without it (a lookup,
/// a payer's return) the answer is `Authorized`, and the attempt's capture method decides
/// what it means.
pub fn outcome_for_payment(
    payment: &PaymentResponse,
    action: Option<&Action>,
    capture: Option<CaptureMethod>,
) -> ProviderOutcome {
    let provider_id = payment.psp_reference.clone();
    match payment.result_code.as_str() {
        "Authorised" => match (provider_id, capture) {
            (Some(provider_id), Some(CaptureMethod::Automatic)) => {
                ProviderOutcome::Succeeded { provider_id }
            }
            // Adyen names no end to the hold: it depends on the card scheme.
            (Some(provider_id), _) => ProviderOutcome::Authorized {
                provider_id,
                expires_at: None,
            },
            // Money moved, but we cannot name the charge: ask again rather than guess.
            (None, _) => unknown("Authorised without a pspReference".into()),
        },
        "Refused" => {
            let decline = declines::decline(
                payment.refusal_reason_code.as_deref(),
                &payment.additional_data,
            );
            ProviderOutcome::Failed {
                code: decline.code.as_str().to_owned(),
                message: refusal::message(
                    payment.refusal_reason_code.as_deref(),
                    payment.refusal_reason.as_deref(),
                ),
                provider_id,
                decline: Some(decline),
            }
        }
        "Cancelled" => ProviderOutcome::Canceled { provider_id },
        // Adyen's "Error": the payment hit an error during processing; whether the card was
        // charged is not said.
        "Error" => unknown(format!(
            "resultCode Error: {}",
            payment
                .refusal_reason
                .as_deref()
                .unwrap_or("no reason given")
        )),
        // Adyen names the payment of a redirect only in the answer to its details, so the
        // provider id is often absent here.
        code if SHOPPER_ACTIONS.contains(&code) => match action.and_then(redirect_of) {
            Some(next_action) => ProviderOutcome::RequiresAction {
                provider_id,
                next_action,
            },
            None => ProviderOutcome::Pending { provider_id },
        },
        // Pending, Received, an action payorch cannot pass on (PresentToShopper, a native
        // 3-D Secure 2 action, a redirect to POST a form to) or a code we do not know: Adyen
        // holds the payment, the outcome is not final.
        _ => ProviderOutcome::Pending { provider_id },
    }
}

/// A GET redirect to an http(s) URL: what a browser can be sent to. A POST redirect would
/// need a form payorch does not render.
fn redirect_of(action: &Action) -> Option<NextAction> {
    let gets = action
        .method
        .as_deref()
        .is_none_or(|m| m.eq_ignore_ascii_case("GET"));
    if action.kind != "redirect" || !gets {
        return None;
    }
    let url = action.url.as_deref()?;
    Url::parse(url)
        .ok()
        .filter(|u| matches!(u.scheme(), "https" | "http"))?;
    Some(NextAction {
        url: url.to_owned(),
        return_url: None,
    })
}

/// The answer to a capture or cancel Adyen took (`received`): the outcome comes as a
/// notification, so it is pending, under the payment's reference when the answer names it.
pub fn outcome_for_modification(modification: &ModificationResponse) -> ProviderOutcome {
    ProviderOutcome::Pending {
        provider_id: modification.payment_psp_reference.clone(),
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
            decline: None,
        },
        _ => ProviderOutcome::Pending { provider_id },
    }
}

/// Map one HTTP answer (status and body) to an outcome.
pub fn outcome_for_response(call: Call, status: u16, body: &[u8]) -> ProviderOutcome {
    let acts = matches!(
        call,
        Call::Create(_) | Call::CreateRefund | Call::Capture | Call::Cancel
    );
    match status {
        200..=299 => outcome_for_success(call, body),
        // A refused details call says nothing of the payment: it was made before it.
        _ if !acts => unknown(format!("HTTP {status} to details: {}", summary(body))),
        422 => match parse_error(body) {
            // The key already holds another request, or one in flight: the first may act.
            Some(e) if is_idempotency_error(&e) => unknown(format!(
                "HTTP 422 idempotency error {}: {}",
                e.error_code.as_deref().unwrap_or("?"),
                e.message.as_deref().unwrap_or_default()
            )),
            // Adyen validated the request and refused it: nothing was processed (no payment,
            // refund, capture or cancel).
            // A refused charge is a decline in payorch's words; a refund, capture or cancel
            // keeps Adyen's errorCode.
            Some(e) => {
                let decline = matches!(call, Call::Create(_))
                    .then(|| declines::rejected(e.error_code.as_deref()));
                ProviderOutcome::Failed {
                    code: match &decline {
                        Some(decline) => decline.code.as_str().to_owned(),
                        None => e.error_code.unwrap_or_else(|| "http_422".to_owned()),
                    },
                    message: e
                        .message
                        .unwrap_or_else(|| "the provider refused the request".to_owned()),
                    provider_id: None,
                    decline,
                }
            }
            // Not Adyen's ServiceError: payorch cannot read what was decided.
            None => unknown(format!(
                "HTTP 422 without a readable error: {}",
                summary(body)
            )),
        },
        // Credentials or permissions: the provider refused *this* request before processing
        // it, for a reason of our configuration, not the payer's. For a charge's first send
        // that is the explicit "not processed" that lets a payment fail over (docs/DESIGN.md,
        // "Failover"); for a resend it proves nothing about an earlier send, which the flow
        // and the reconciler read as unknown. A lookup or a refund so answered stays unknown.
        401 | 403 if matches!(call, Call::Create(_)) => ProviderOutcome::Unavailable {
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
        Call::Create(capture) => payment_in(body, Some(capture)),
        Call::Details => payment_in(body, None),
        Call::Capture | Call::Cancel => {
            match serde_json::from_slice::<ModificationResponse>(body) {
                Ok(modification) => outcome_for_modification(&modification),
                Err(e) => unknown(format!("2xx with an unreadable modification response: {e}")),
            }
        }
        Call::CreateRefund => match serde_json::from_slice::<RefundResponse>(body) {
            Ok(refund) => outcome_for_refund(&refund),
            Err(e) => unknown(format!("2xx with an unreadable refund response: {e}")),
        },
    }
}

/// A 2xx payment response, with its `action`: an action that does not read is no action.
fn payment_in(body: &[u8], capture: Option<CaptureMethod>) -> ProviderOutcome {
    match serde_json::from_slice::<PaymentResponse>(body) {
        Ok(payment) => {
            let action = serde_json::from_slice::<PaymentAction>(body)
                .ok()
                .and_then(|a| a.action);
            outcome_for_payment(&payment, action.as_ref(), capture)
        }
        Err(e) => unknown(format!("2xx with an unreadable payment response: {e}")),
    }
}

/// The answer to `/payments/details` for attempt `attempt_id`: what it says, if its
/// `merchantReference` is the attempt's; else unknown, so that an answer about another
/// payment (the browser chose the `redirectResult`) never moves this one.
pub(crate) fn details_for(attempt_id: &str, status: u16, body: &[u8]) -> ProviderOutcome {
    let outcome = outcome_for_response(Call::Details, status, body);
    if !(200..=299).contains(&status) {
        return outcome;
    }
    let reference = serde_json::from_slice::<PaymentResponse>(body)
        .ok()
        .and_then(|payment| payment.merchant_reference);
    match reference.as_deref() {
        Some(reference) if reference == attempt_id => outcome,
        Some(other) => unknown(format!(
            "the details answer is about merchantReference {other}, not this attempt: not applied"
        )),
        None => unknown("the details answer names no merchantReference: not applied".into()),
    }
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
            additional_data: Default::default(),
        }
    }

    fn details(result_code: &str, reference: Option<&str>) -> Vec<u8> {
        let mut answer = payment(result_code, "P1");
        answer.merchant_reference = reference.map(str::to_owned);
        serde_json::to_vec(&answer).unwrap()
    }

    #[test]
    fn details_count_only_when_they_name_the_attempt() {
        assert_eq!(
            details_for("pay_1", 200, &details("Authorised", Some("pay_1"))),
            ProviderOutcome::Authorized {
                provider_id: "P1".into(),
                expires_at: None,
            }
        );
        for other in [Some("pay_2"), None] {
            assert!(
                matches!(
                    details_for("pay_1", 200, &details("Authorised", other)),
                    ProviderOutcome::Unknown { .. }
                ),
                "{other:?}"
            );
        }
    }

    #[test]
    fn an_unreadable_refusal_is_unknown_not_a_failure() {
        assert!(matches!(
            outcome_for_response(
                Call::Create(CaptureMethod::Automatic),
                422,
                b"<html>busy</html>"
            ),
            ProviderOutcome::Unknown { .. }
        ));
    }

    #[test]
    fn an_idempotency_error_is_unknown_even_as_a_422() {
        let body = br#"{"status":422,"errorCode":"704","message":"request already processed or in progress","errorType":"validation"}"#;
        assert!(matches!(
            outcome_for_response(Call::Create(CaptureMethod::Automatic), 422, body),
            ProviderOutcome::Unknown { .. }
        ));
    }
}
