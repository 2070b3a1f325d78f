//! Whether a declined attempt is tried again, and where (docs/guides/declines.md, "Retries"):
//! one pure function, [`decide`], over what the paying request knows once a provider declined.
//! A retry is a new attempt with its own provider key, made only after a *definite* decline,
//! so nothing can have been charged under the one before: an unknown outcome never reaches
//! here ([`Facts::of`] reads only `ProviderOutcome::Failed` with a decline).
//!
//! Two kinds of retry: after a `soft` decline, the next provider of the route (the merchant's
//! switch, `retries.soft_declines`, must be on); after an `authentication_required` decline,
//! the same provider again with 3-D Secure required (a step-up, which needs a payer present to
//! follow the challenge: a `return_url`). Both count against the merchant's `max_attempts`
//! and the card's cap across payments ([`CardDeclines`]).

use crate::providers::decline::{Decline, FailureClass};
use crate::providers::{ProviderOutcome, ThreeDSecure};
use crate::words::words;

words! {
    /// Why an attempt was made after another of the same request (`payment_attempts.
    /// retry_reason`).
    #[derive(serde::Serialize, utoipa::ToSchema)]
    #[serde(rename_all = "snake_case")]
    pub enum RetryReason {
        /// The provider before was provably not reached: failover (docs/DESIGN.md, "Failover").
        ProviderUnreached => "provider_unreached",
        /// The provider before declined softly: another provider may approve.
        SoftDecline => "soft_decline",
        /// The same provider declined for want of authentication: asked again with 3-D Secure.
        AuthenticationRequired => "authentication_required",
    }
}

words! {
    /// Why a declined attempt was not tried again: a log field and the `reason` label of
    /// `payorch_payment_retries_refused_total`.
    pub enum NoRetry {
        /// The decline's class is `hard`: no provider will approve this card for this payment.
        Hard => "hard_decline",
        /// The network advised never to try again (a Mastercard merchant advice code, a Visa
        /// category 1 response, Stripe's `do_not_try_again`).
        NetworkAdvice => "network_advice",
        /// A class that allows no retry here (`unknown` cannot be on a failed attempt; kept
        /// for a class added later).
        OtherClass => "other_class",
        /// The merchant has not turned on retries of soft declines.
        SwitchOff => "switch_off",
        /// No provider is left after this one on the payment's route.
        NoNextProvider => "no_next_provider",
        /// The request has made the merchant's `max_attempts` already.
        MaxAttempts => "max_attempts",
        /// The card had too many declines at this merchant lately ([`CardDeclines`]).
        CardCap => "card_cap",
        /// An attempt of the request asked the payer for 3-D Secure, and the merchant does not
        /// allow a retry after that.
        AfterThreeDSecure => "after_three_d_secure",
        /// A step-up needs a payer to follow the challenge, and the payment has no
        /// `return_url`.
        NoPayer => "no_payer",
        /// The attempt asked for 3-D Secure already: a second step-up would ask the same.
        SteppedUpAlready => "stepped_up_already",
    }
}

/// What comes after a declined attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retry<'p> {
    /// A new attempt at `provider` (the next of the route), as it was asked before.
    Elsewhere { provider: &'p str },
    /// A new attempt at the same provider with 3-D Secure required.
    StepUp,
}

impl Retry<'_> {
    pub fn reason(self) -> RetryReason {
        match self {
            Retry::Elsewhere { .. } => RetryReason::SoftDecline,
            Retry::StepUp => RetryReason::AuthenticationRequired,
        }
    }
}

/// The merchant's retry settings (its routing's `retries`); without a routing of its own, the
/// defaults: no retry of soft declines, none after 3-D Secure, two attempts at most.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetrySettings {
    pub soft_declines: bool,
    pub after_three_d_secure: bool,
    /// Retries stop once the request has made this many attempts, the first included: 1 to 4
    /// (a failover, which never reached a bank, is not stopped by it).
    pub max_attempts: u8,
}

impl Default for RetrySettings {
    fn default() -> Self {
        RetrySettings {
            soft_declines: false,
            after_three_d_secure: false,
            max_attempts: 2,
        }
    }
}

/// The most attempts a merchant may allow one request: a retry is a new authorisation request
/// the payer's bank sees; four is the route of a primary, two alternatives and a step-up.
pub const MOST_ATTEMPTS: u8 = 4;

/// The card's declines at this merchant (the attempts of its payment method token that a
/// provider declined), the one just answered included.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CardDeclines {
    pub last_day: u32,
    pub last_30_days: u32,
}

/// Declines of one card in 24 hours past which payorch retries no more: Mastercard's limit of
/// 10 declined attempts in 24 hours for most response codes (docs/guides/declines.md,
/// "Retries", gives the sources).
pub const CARD_DECLINES_PER_DAY: u32 = 10;
/// Declines of one card in 30 days past which payorch retries no more: Visa's limit of 15
/// reattempts of a declined card in 30 days.
pub const CARD_DECLINES_PER_30_DAYS: u32 = 15;

impl CardDeclines {
    /// Whether one more attempt would go past a network's limit.
    fn at_cap(self) -> bool {
        self.last_day >= CARD_DECLINES_PER_DAY || self.last_30_days >= CARD_DECLINES_PER_30_DAYS
    }
}

/// What the paying request knows once its attempt was declined.
#[derive(Debug, Clone)]
pub struct Facts<'p> {
    pub decline: Decline,
    pub settings: RetrySettings,
    /// Attempts this request has made, the declined one included.
    pub attempts: u8,
    /// Whether any attempt of this request (the declined one included) asked the payer for
    /// 3-D Secure: it was made with 3-D Secure required, or its provider asked for a challenge.
    pub three_d_secure_tried: bool,
    /// Whether the declined attempt itself was made with 3-D Secure required.
    pub stepped_up: bool,
    /// Whether a payer is there to follow a challenge (the payment has a `return_url`).
    pub payer_present: bool,
    /// The first provider of the payment's route that no attempt of this request has used.
    pub next_provider: Option<&'p str>,
}

impl Facts<'_> {
    /// The decline of a provider's answer, if it is one: only a `Failed` with a decline is
    /// definite. Every other outcome (unknown, pending, unavailable on a resend…) and a failure
    /// without a decline never retries.
    pub fn decline_of(outcome: &ProviderOutcome) -> Option<&Decline> {
        match outcome {
            ProviderOutcome::Failed {
                decline: Some(decline),
                ..
            } => Some(decline),
            _ => None,
        }
    }
}

/// Whether an attempt asked the payer for 3-D Secure: made with it required, or a provider
/// asked for a challenge (its `next_action`, kept once set).
pub fn asked_for_three_d_secure(three_d_secure: ThreeDSecure, challenged: bool) -> bool {
    three_d_secure == ThreeDSecure::Required || challenged
}

/// What follows the declined attempt: a retry, or the reason there is none. The rules that
/// need the database (the request's earlier attempts, the card's declines) come last and can
/// only refuse, so a caller may ask first with what the declined attempt alone tells (one
/// attempt, its own 3-D Secure, `CardDeclines::default()`) and read the rest only when that
/// says retry: a refusal then is the same, reason and all.
pub fn decide<'p>(facts: &Facts<'p>, card: CardDeclines) -> Result<Retry<'p>, NoRetry> {
    let decline = &facts.decline;
    if decline.advice.floor() == Some(FailureClass::Hard) {
        return Err(NoRetry::NetworkAdvice);
    }
    let retry = match decline.class {
        FailureClass::Hard => return Err(NoRetry::Hard),
        FailureClass::Unknown => return Err(NoRetry::OtherClass),
        FailureClass::Soft => {
            if !facts.settings.soft_declines {
                return Err(NoRetry::SwitchOff);
            }
            let provider = facts.next_provider.ok_or(NoRetry::NoNextProvider)?;
            if facts.three_d_secure_tried && !facts.settings.after_three_d_secure {
                return Err(NoRetry::AfterThreeDSecure);
            }
            Retry::Elsewhere { provider }
        }
        // The switch does not gate a step-up: it stays at the same provider.
        FailureClass::AuthenticationRequired => {
            if facts.stepped_up {
                return Err(NoRetry::SteppedUpAlready);
            }
            if !facts.payer_present {
                return Err(NoRetry::NoPayer);
            }
            Retry::StepUp
        }
    };
    if facts.attempts >= facts.settings.max_attempts.min(MOST_ATTEMPTS) {
        return Err(NoRetry::MaxAttempts);
    }
    if card.at_cap() {
        return Err(NoRetry::CardCap);
    }
    Ok(retry)
}

#[cfg(test)]
mod tests;
