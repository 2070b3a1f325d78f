//! What a charge that asks for 3-D Secure meets (docs/guides/test-cards.md, "3-D Secure
//! requested"): Stripe's `payment_method_options[card][request_three_d_secure]=any`, Adyen's
//! `authenticationData.attemptAuthentication: "always"`, the step-up retry's request after a
//! decline that asked for authentication.
//!
//! A decline that asked for authentication (`pm_sandbox_decline_authentication_required`, and
//! a mix's draw of that class) is the issuer saying it would approve an authenticated payer:
//! asked with 3-D Secure, it is challenged instead, as `pm_card_threeDSecure2Required` is,
//! and the payer who passes the challenge is charged. Anything else is met as it would be
//! without the request: an ordinary card is approved without a challenge (the frictionless
//! flow, where the issuer trusts what 3-D Secure 2 told it), and a decline for another reason
//! stays that decline, which no authentication cures.

use super::behaviour::Behaviour;
use super::mix::AUTHENTICATION;

/// The behaviour of a charge whose payment method (after its mix's draw) behaves as
/// `behaviour`, 3-D Secure `requested` or not.
pub(crate) fn met(behaviour: Behaviour, requested: bool) -> Behaviour {
    match behaviour {
        Behaviour::Decline(decline)
            if requested && decline.token.is_some_and(|t| AUTHENTICATION.contains(&t)) =>
        {
            Behaviour::ThreeDSecure
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::declines::by_token;
    use crate::mix::{HARD, SOFT};

    #[test]
    fn only_a_decline_asking_for_authentication_becomes_a_challenge_and_only_when_asked() {
        for token in AUTHENTICATION {
            let decline = Behaviour::Decline(by_token(token).expect("a decline"));
            assert_eq!(met(decline, false), decline, "{token}");
            assert_eq!(met(decline, true), Behaviour::ThreeDSecure, "{token}");
        }
        for token in SOFT.iter().chain(HARD) {
            let decline = Behaviour::Decline(by_token(token).expect("a decline"));
            assert_eq!(met(decline, true), decline, "{token}");
        }
        for behaviour in [
            Behaviour::Succeed,
            Behaviour::ThreeDSecure,
            Behaviour::LostResponse,
            Behaviour::ErrorAfter,
        ] {
            assert_eq!(met(behaviour, true), behaviour, "{behaviour:?}");
        }
    }
}
