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
    /// Attempts one request may make, the first included: 1 to 4.
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
    /// The provider after the declined attempt's on the payment's route.
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
mod tests {
    use super::*;
    use crate::providers::decline::{Advice, DeclineCode};

    fn declined(code: DeclineCode) -> Decline {
        Decline::new(code, "raw", Advice::default())
    }

    /// A soft decline at the first of two providers, the switch on, nothing else in the way.
    fn soft() -> Facts<'static> {
        Facts {
            decline: declined(DeclineCode::GenericDecline),
            settings: RetrySettings {
                soft_declines: true,
                ..RetrySettings::default()
            },
            attempts: 1,
            three_d_secure_tried: false,
            stepped_up: false,
            payer_present: false,
            next_provider: Some("second"),
        }
    }

    fn authentication() -> Facts<'static> {
        Facts {
            decline: declined(DeclineCode::AuthenticationRequired),
            payer_present: true,
            ..soft()
        }
    }

    fn none() -> CardDeclines {
        CardDeclines::default()
    }

    #[test]
    fn a_soft_decline_moves_to_the_next_provider() {
        assert_eq!(soft().decline.class, FailureClass::Soft);
        assert_eq!(
            decide(&soft(), none()),
            Ok(Retry::Elsewhere { provider: "second" })
        );
        assert_eq!(
            Retry::Elsewhere { provider: "x" }.reason(),
            RetryReason::SoftDecline
        );
    }

    #[test]
    fn a_soft_decline_stays_when_the_switch_is_off() {
        let facts = Facts {
            settings: RetrySettings::default(),
            ..soft()
        };
        assert_eq!(decide(&facts, none()), Err(NoRetry::SwitchOff));
    }

    #[test]
    fn a_soft_decline_at_the_last_provider_stays() {
        let facts = Facts {
            next_provider: None,
            ..soft()
        };
        assert_eq!(decide(&facts, none()), Err(NoRetry::NoNextProvider));
    }

    #[test]
    fn a_hard_decline_never_retries() {
        for code in [
            DeclineCode::LostOrStolenCard,
            DeclineCode::InvalidNumber,
            DeclineCode::InsufficientFunds,
        ] {
            let facts = Facts {
                decline: declined(code),
                ..soft()
            };
            assert_eq!(decide(&facts, none()), Err(NoRetry::Hard), "{code:?}");
        }
    }

    #[test]
    fn a_network_never_again_advice_never_retries() {
        // Made hard by the advice already; the advice is a reason of its own all the same.
        let advice = Advice {
            network_advice_code: Some("03".into()),
            ..Advice::default()
        };
        let facts = Facts {
            decline: Decline::new(DeclineCode::GenericDecline, "05", advice),
            ..soft()
        };
        assert_eq!(decide(&facts, none()), Err(NoRetry::NetworkAdvice));
        // Even were the class soft (a decline built by hand): the advice alone refuses.
        let mut decline = facts.decline.clone();
        decline.class = FailureClass::Soft;
        let facts = Facts { decline, ..soft() };
        assert_eq!(decide(&facts, none()), Err(NoRetry::NetworkAdvice));
    }

    #[test]
    fn an_unknown_class_never_retries() {
        let mut decline = declined(DeclineCode::GenericDecline);
        decline.class = FailureClass::Unknown;
        let facts = Facts { decline, ..soft() };
        assert_eq!(decide(&facts, none()), Err(NoRetry::OtherClass));
    }

    #[test]
    fn only_a_failed_answer_with_a_decline_is_definite() {
        let failed = |decline| ProviderOutcome::Failed {
            code: "generic_decline".into(),
            message: "no".into(),
            provider_id: None,
            decline,
        };
        let decline = declined(DeclineCode::GenericDecline);
        assert_eq!(
            Facts::decline_of(&failed(Some(decline.clone()))),
            Some(&decline)
        );
        assert_eq!(Facts::decline_of(&failed(None)), None);
        for outcome in [
            ProviderOutcome::Unknown {
                reason: "timeout".into(),
            },
            ProviderOutcome::Pending { provider_id: None },
            ProviderOutcome::Unavailable {
                reason: "refused".into(),
            },
            ProviderOutcome::NotFound,
            ProviderOutcome::Succeeded {
                provider_id: "pi_1".into(),
            },
        ] {
            assert_eq!(Facts::decline_of(&outcome), None, "{outcome:?}");
        }
    }

    #[test]
    fn max_attempts_ends_the_chain() {
        let facts = Facts {
            attempts: 2,
            ..soft()
        };
        assert_eq!(decide(&facts, none()), Err(NoRetry::MaxAttempts));
        let facts = Facts {
            settings: RetrySettings {
                max_attempts: 3,
                ..facts.settings
            },
            ..facts
        };
        assert!(decide(&facts, none()).is_ok());
        // One attempt allowed: never a retry, of either kind.
        let one = RetrySettings {
            max_attempts: 1,
            ..soft().settings
        };
        for facts in [soft(), authentication()] {
            let facts = Facts {
                settings: one,
                ..facts
            };
            assert_eq!(decide(&facts, none()), Err(NoRetry::MaxAttempts));
        }
        // A stored value past the most allowed is held to it.
        let facts = Facts {
            attempts: MOST_ATTEMPTS,
            settings: RetrySettings {
                max_attempts: 9,
                ..soft().settings
            },
            ..soft()
        };
        assert_eq!(decide(&facts, none()), Err(NoRetry::MaxAttempts));
    }

    #[test]
    fn the_card_cap_refuses_at_ten_a_day_or_fifteen_a_month() {
        let cap = |last_day, last_30_days| CardDeclines {
            last_day,
            last_30_days,
        };
        assert!(decide(&soft(), cap(9, 14)).is_ok());
        assert_eq!(decide(&soft(), cap(10, 10)), Err(NoRetry::CardCap));
        assert_eq!(decide(&soft(), cap(1, 15)), Err(NoRetry::CardCap));
        assert_eq!(
            decide(&authentication(), cap(10, 10)),
            Err(NoRetry::CardCap)
        );
    }

    #[test]
    fn no_retry_elsewhere_after_three_d_secure_unless_allowed() {
        let facts = Facts {
            three_d_secure_tried: true,
            ..soft()
        };
        assert_eq!(decide(&facts, none()), Err(NoRetry::AfterThreeDSecure));
        let facts = Facts {
            settings: RetrySettings {
                after_three_d_secure: true,
                ..facts.settings
            },
            ..facts
        };
        assert_eq!(
            decide(&facts, none()),
            Ok(Retry::Elsewhere { provider: "second" })
        );
        assert!(asked_for_three_d_secure(ThreeDSecure::Required, false));
        assert!(asked_for_three_d_secure(ThreeDSecure::Automatic, true));
        assert!(!asked_for_three_d_secure(ThreeDSecure::Automatic, false));
    }

    #[test]
    fn a_decline_asking_for_authentication_steps_up_at_the_same_provider() {
        assert_eq!(decide(&authentication(), none()), Ok(Retry::StepUp));
        assert_eq!(Retry::StepUp.reason(), RetryReason::AuthenticationRequired);
        // The switch is for other providers; a step-up stays at this one.
        let facts = Facts {
            settings: RetrySettings::default(),
            next_provider: None,
            ..authentication()
        };
        assert_eq!(decide(&facts, none()), Ok(Retry::StepUp));
    }

    #[test]
    fn a_step_up_needs_a_payer_and_happens_once() {
        let facts = Facts {
            payer_present: false,
            ..authentication()
        };
        assert_eq!(decide(&facts, none()), Err(NoRetry::NoPayer));
        let facts = Facts {
            stepped_up: true,
            ..authentication()
        };
        assert_eq!(decide(&facts, none()), Err(NoRetry::SteppedUpAlready));
    }

    /// What `cascade` relies on to read nothing for a decline it refuses anyway: a refusal on
    /// what the declined attempt alone tells is the refusal, reason and all, whatever the
    /// database would add.
    #[test]
    fn a_refusal_before_the_database_is_read_stands() {
        let codes = [
            DeclineCode::GenericDecline,
            DeclineCode::LostOrStolenCard,
            DeclineCode::AuthenticationRequired,
        ];
        for code in codes {
            for bits in 0u32..32 {
                let on = |bit: u32| bits & (1 << bit) != 0;
                let settings = RetrySettings {
                    soft_declines: on(0),
                    after_three_d_secure: on(1),
                    max_attempts: 2,
                };
                let alone = Facts {
                    decline: declined(code),
                    settings,
                    attempts: 1,
                    three_d_secure_tried: on(2),
                    stepped_up: on(2),
                    payer_present: on(3),
                    next_provider: on(4).then_some("second"),
                };
                let first = decide(&alone, none());
                for (attempts, tried, card) in [(1, false, 0), (2, true, 0), (1, true, 12)] {
                    let read = Facts {
                        attempts,
                        three_d_secure_tried: alone.three_d_secure_tried || tried,
                        ..alone.clone()
                    };
                    let card = CardDeclines {
                        last_day: card,
                        last_30_days: card,
                    };
                    if let Err(why) = first {
                        assert_eq!(decide(&read, card), Err(why), "{code:?} {bits:b}");
                    }
                }
            }
        }
    }

    #[test]
    fn the_defaults_retry_no_soft_decline_in_two_attempts() {
        let d = RetrySettings::default();
        assert!(!d.soft_declines && !d.after_three_d_secure);
        assert_eq!(d.max_attempts, 2);
    }
}
