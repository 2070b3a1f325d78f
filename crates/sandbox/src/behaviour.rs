//! What each test `payment_method` does (docs/DESIGN.md, "The provider protocol").

use super::declines::{by_token, Decline};

/// The behaviour of one payment method token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Behaviour {
    /// `pm_card_visa`, `pm_card_mastercard`.
    Succeed,
    /// `pm_card_chargeDeclined*` and the other tokens of `declines::DECLINES`: Stripe's 402
    /// `card_error`, Adyen's `Refused`, as that row says.
    Decline(&'static Decline),
    /// `pm_sandbox_processing`: `processing`, succeeded after `--processing-ms`.
    Processing,
    /// `pm_sandbox_slow`: succeeded after `--slow-ms`.
    Slow,
    /// `pm_sandbox_lost_response`: charges, then never answers; the answer is recorded under
    /// the key, so a resend with it gets the charge.
    LostResponse,
    /// `pm_sandbox_dropped_response`: charges and records the answer under the key, then
    /// closes the connection without an answer; a resend with the key gets the charge.
    DroppedResponse,
    /// `pm_sandbox_refused`: refused before anything was done, as a provider refuses a
    /// request it did not process (`403`); nothing recorded under the key.
    Refused,
    /// `pm_sandbox_late_approval`: answers a soft decline (Stripe `card_declined` /
    /// `generic_decline`, Adyen `Refused`) but books the charge as approved (captured, or
    /// held for a manual capture), and tells so by webhook after `--late-approval-ms`: the
    /// provider that changes its mind after payorch moved on.
    LateApproval,
    /// `pm_sandbox_mix` and `pm_sandbox_mix_NN`: drawn from the face's mix (`mix`), at its
    /// approval rate or at NN %.
    Mixed(Option<u8>),
    /// `pm_sandbox_error_before`: 500, nothing charged; on the Stripe face the key replays
    /// the 500.
    ErrorBefore,
    /// `pm_sandbox_error_after`: charges, then 500; on the Stripe face the key replays the
    /// 500 (Stripe saves a key's first result, a 500 included), on the Adyen face the payment.
    ErrorAfter,
    /// `pm_card_threeDSecure2Required` (Stripe's own test card): `requires_action` until the
    /// customer passes or fails the challenge page (`challenge`).
    ThreeDSecure,
    /// `pm_sandbox_capture_*`: authorises (and captures) as `pm_card_visa`, but the first
    /// capture or cancel of the payment meets this fault.
    ModificationFault(ModificationFault),
}

/// What goes wrong with the first capture or cancel of a payment made with a
/// `pm_sandbox_capture_*` token, as `pm_sandbox_*` does with a charge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModificationFault {
    /// `pm_sandbox_capture_error_before`: 500, nothing done; on the Stripe face the key
    /// replays the 500.
    ErrorBefore,
    /// `pm_sandbox_capture_error_after`: done, then 500; on the Stripe face the key replays the
    /// 500, on the Adyen face the `201 received`.
    ErrorAfter,
    /// `pm_sandbox_capture_lost_response`: done and its answer recorded under the key, then
    /// never answered.
    LostResponse,
}

impl Behaviour {
    /// `None` for a token the sandbox does not know (Stripe: `resource_missing`).
    pub fn for_payment_method(token: &str) -> Option<Self> {
        Some(match token {
            "pm_card_visa" | "pm_card_mastercard" => Self::Succeed,
            // Charged as a visa, then disputed (`dispute_control`).
            token if super::dispute_scripts::script(token).is_some() => Self::Succeed,
            "pm_sandbox_processing" => Self::Processing,
            "pm_sandbox_slow" => Self::Slow,
            "pm_sandbox_lost_response" => Self::LostResponse,
            "pm_sandbox_error_before" => Self::ErrorBefore,
            "pm_sandbox_dropped_response" => Self::DroppedResponse,
            "pm_sandbox_refused" => Self::Refused,
            "pm_sandbox_late_approval" => Self::LateApproval,
            "pm_sandbox_error_after" => Self::ErrorAfter,
            "pm_card_threeDSecure2Required" => Self::ThreeDSecure,
            "pm_sandbox_capture_error_before" => {
                Self::ModificationFault(ModificationFault::ErrorBefore)
            }
            "pm_sandbox_capture_error_after" => {
                Self::ModificationFault(ModificationFault::ErrorAfter)
            }
            "pm_sandbox_capture_lost_response" => {
                Self::ModificationFault(ModificationFault::LostResponse)
            }
            // Stripe's declining test methods, and the sandbox's own for the answers
            // Stripe has no test card for.
            _ => {
                return by_token(token)
                    .map(Self::Decline)
                    .or_else(|| mixed_token(token).map(Self::Mixed))
            }
        })
    }

    /// The fault the first capture or cancel of a payment made with `token` meets.
    pub fn modification_fault(token: &str) -> Option<ModificationFault> {
        match Self::for_payment_method(token) {
            Some(Self::ModificationFault(fault)) => Some(fault),
            _ => None,
        }
    }
}

/// `pm_sandbox_mix` (the face's approval rate) and `pm_sandbox_mix_NN` (NN %, 0–100), each
/// with an optional `.NAME` after it: a card of its own that draws the same way, so a run can
/// pay with many cards (payorch caps the retries of one card across payments).
pub(crate) fn mixed_token(token: &str) -> Option<Option<u8>> {
    let token = token.split_once('.').map_or(token, |(token, _card)| token);
    let rest = token.strip_prefix("pm_sandbox_mix")?;
    if rest.is_empty() {
        return Some(None);
    }
    let digits = rest.strip_prefix('_')?;
    let percent: u8 = digits
        .bytes()
        .all(|b| b.is_ascii_digit())
        .then(|| digits.parse().ok())??;
    (percent <= 100).then_some(Some(percent))
}
