//! The declines the sandbox answers, each in both providers' words (docs/guides/test-cards.md,
//! "Test payment methods"). payorch's decline vocabulary (docs/guides/declines.md) promises
//! the same `failure_code` and class whichever protocol a decline came through; the sandbox
//! can only prove that if one decline is one row here, told by the Stripe face as Stripe
//! tells it and by the Adyen face as Adyen tells it, not two tables that drift apart.
//!
//! The Stripe face sends what Stripe's API at the pinned version (2023-08-16,
//! fixtures/contracts/stripe) has: `type`, `code`, `decline_code`, `message`. Its
//! `advice_code`, `network_advice_code` and `network_decline_code` came with later versions
//! and are not in that document's `error` or `last_payment_error`, so the face never sends
//! them. The Adyen face sends `refusalReasonCode` with Adyen's name for it as
//! `refusalReason` (the names of Adyen's refusal reasons page), and in `additionalData` the
//! acquirer's raw answer (`refusalReasonRaw`, "NN : text") and a Mastercard
//! `merchantAdviceCode` where a row has one. A raw code is given only where it says no more
//! than the Stripe words do: a Visa "not now" raw code (91, 96) would make Adyen's answer
//! stricter than Stripe's for the same card, which is not a difference between the
//! providers but between what each face was given to say.

use payorch_wire::stripe::LastPaymentError;

/// One decline: what a test payment method is answered, through either face.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decline {
    /// The test payment method that meets it (`payment_method` on the Stripe face,
    /// `paymentMethod.storedPaymentMethodId` on the Adyen face); `None` for a decline no
    /// token asks for (a failed 3-D Secure challenge).
    pub token: Option<&'static str>,
    /// Stripe's error `type`.
    pub kind: &'static str,
    /// Stripe's error `code`.
    pub code: &'static str,
    /// Stripe's `decline_code`, when Stripe gives one.
    pub decline_code: Option<&'static str>,
    /// Stripe's `message`.
    pub message: &'static str,
    /// What the Adyen face answers instead.
    pub adyen: AdyenRefusal,
}

/// A refusal in Adyen's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdyenRefusal {
    /// `refusalReasonCode`.
    pub code: &'static str,
    /// `refusalReason`: Adyen's name for the code, also a failed `AUTHORISATION`
    /// notification's `reason`.
    pub reason: &'static str,
    /// `additionalData.refusalReasonRaw`: the issuer's or scheme's code and text.
    pub raw: Option<&'static str>,
    /// `additionalData.merchantAdviceCode`: a Mastercard issuer's advice ("03: …").
    pub merchant_advice: Option<&'static str>,
    /// `paymentMethod` of the notification (`visa`, `mc`): a merchant advice code is
    /// Mastercard's.
    pub brand: &'static str,
}

const DECLINED: &str = "Your card was declined.";

/// Every decline a token asks for. The tokens are Stripe's own test PaymentMethods (Stripe's
/// docs, "Testing", https://docs.stripe.com/testing#declined-payments), but for the
/// `pm_sandbox_decline_*`, for answers Stripe has no test card for.
pub const DECLINES: &[Decline] = &[
    Decline {
        token: Some("pm_card_chargeDeclined"),
        kind: "card_error",
        code: "card_declined",
        decline_code: Some("generic_decline"),
        message: DECLINED,
        adyen: AdyenRefusal {
            code: "2",
            reason: "Refused",
            raw: Some("05 : Do not honor"),
            merchant_advice: None,
            brand: "visa",
        },
    },
    Decline {
        token: Some("pm_card_chargeDeclinedInsufficientFunds"),
        kind: "card_error",
        code: "card_declined",
        decline_code: Some("insufficient_funds"),
        message: "Your card has insufficient funds.",
        adyen: AdyenRefusal {
            code: "12",
            reason: "Not enough balance",
            raw: Some("51 : Insufficient funds/over credit limit"),
            merchant_advice: None,
            brand: "visa",
        },
    },
    Decline {
        token: Some("pm_card_chargeDeclinedLostCard"),
        kind: "card_error",
        code: "card_declined",
        decline_code: Some("lost_card"),
        message: DECLINED,
        // Adyen has no refusal reason of its own for a lost card: the issuer's raw 41
        // says it, under "Blocked Card".
        adyen: AdyenRefusal {
            code: "5",
            reason: "Blocked Card",
            raw: Some("41 : Lost card, pick up"),
            merchant_advice: None,
            brand: "visa",
        },
    },
    Decline {
        token: Some("pm_card_chargeDeclinedStolenCard"),
        kind: "card_error",
        code: "card_declined",
        decline_code: Some("stolen_card"),
        message: DECLINED,
        adyen: AdyenRefusal {
            code: "5",
            reason: "Blocked Card",
            raw: Some("43 : Stolen card, pick up"),
            merchant_advice: None,
            brand: "visa",
        },
    },
    Decline {
        token: Some("pm_card_chargeDeclinedExpiredCard"),
        kind: "card_error",
        code: "expired_card",
        decline_code: Some("expired_card"),
        message: "Your card has expired.",
        adyen: AdyenRefusal {
            code: "6",
            reason: "Expired Card",
            raw: Some("54 : Expired card"),
            merchant_advice: None,
            brand: "visa",
        },
    },
    Decline {
        token: Some("pm_card_chargeDeclinedIncorrectCvc"),
        kind: "card_error",
        code: "incorrect_cvc",
        decline_code: Some("incorrect_cvc"),
        message: "Your card's security code is incorrect.",
        adyen: AdyenRefusal {
            code: "24",
            reason: "CVC Declined",
            raw: Some("N7 : Decline for CVV2 failure"),
            merchant_advice: None,
            brand: "visa",
        },
    },
    Decline {
        token: Some("pm_card_chargeDeclinedProcessingError"),
        kind: "card_error",
        code: "processing_error",
        decline_code: Some("processing_error"),
        message: "An error occurred while processing your card. Try again in a little bit.",
        // The acquirer's own error: no issuer answered, so no raw code.
        adyen: AdyenRefusal {
            code: "4",
            reason: "Acquirer Error",
            raw: None,
            merchant_advice: None,
            brand: "visa",
        },
    },
    Decline {
        token: Some("pm_card_chargeDeclinedFraudulent"),
        kind: "card_error",
        code: "card_declined",
        decline_code: Some("fraudulent"),
        message: DECLINED,
        // The provider's risk checks refused it before any issuer: Adyen's FRAUD.
        adyen: AdyenRefusal {
            code: "20",
            reason: "FRAUD",
            raw: None,
            merchant_advice: None,
            brand: "visa",
        },
    },
    Decline {
        token: Some("pm_card_visa_chargeDeclinedVelocityLimitExceeded"),
        kind: "card_error",
        code: "card_declined",
        decline_code: Some("card_velocity_exceeded"),
        message: "Your card was declined for making repeated attempts too frequently or \
                  exceeding its amount limit.",
        adyen: AdyenRefusal {
            code: "29",
            reason: "Withdrawal count exceeded",
            raw: Some("65 : Exceeds withdrawal count limit"),
            merchant_advice: None,
            brand: "visa",
        },
    },
    Decline {
        token: Some("pm_sandbox_decline_issuer_unavailable"),
        kind: "card_error",
        code: "card_declined",
        decline_code: Some("issuer_not_available"),
        message: DECLINED,
        adyen: AdyenRefusal {
            code: "9",
            reason: "Issuer Unavailable",
            raw: None,
            merchant_advice: None,
            brand: "visa",
        },
    },
    Decline {
        token: Some("pm_sandbox_decline_do_not_try_again"),
        kind: "card_error",
        code: "card_declined",
        // Stripe's word for the issuer's "never again" at the pinned version; later
        // versions say it in `advice_code` instead.
        decline_code: Some("do_not_try_again"),
        message: DECLINED,
        // A Mastercard issuer's "do not honor" with its advice never to try again.
        adyen: AdyenRefusal {
            code: "2",
            reason: "Refused",
            raw: Some("05 : Do not honor"),
            merchant_advice: Some("03: Do not try again"),
            brand: "mc",
        },
    },
    Decline {
        token: Some("pm_sandbox_decline_authentication_required"),
        kind: "card_error",
        code: "card_declined",
        // The issuer wants the payer authenticated (a charge without 3-D Secure that it
        // would approve with it): Stripe's decline code, Adyen's 38. Stripe's own test card
        // for it asks for a challenge on every charge instead, which `pm_card_threeDSecure2Required`
        // already is.
        decline_code: Some("authentication_required"),
        message: "Your card was declined. This transaction requires authentication.",
        adyen: AdyenRefusal {
            code: "38",
            reason: "Authentication required",
            raw: None,
            merchant_advice: None,
            brand: "visa",
        },
    },
];

/// What a payer who failed (or abandoned) the 3-D Secure challenge leaves: Stripe's
/// `payment_intent_authentication_failure` (an `invalid_request_error`, with no
/// `decline_code`), Adyen's `11`.
pub const AUTHENTICATION_FAILED: Decline = Decline {
    token: None,
    kind: "invalid_request_error",
    code: "payment_intent_authentication_failure",
    decline_code: None,
    message: "The provided PaymentMethod has failed authentication. You can provide \
              payment_method_data or a new PaymentMethod to attempt to fulfill this \
              PaymentIntent again.",
    adyen: AdyenRefusal {
        code: "11",
        reason: "3D Not Authenticated",
        raw: None,
        merchant_advice: None,
        brand: "visa",
    },
};

impl Decline {
    /// The Stripe face's `last_payment_error` for it (and, through `answers::intent_answer`,
    /// its 402's `error`).
    pub fn last_payment_error(&self) -> LastPaymentError {
        LastPaymentError {
            kind: self.kind.into(),
            code: Some(self.code.into()),
            decline_code: self.decline_code.map(Into::into),
            message: Some(self.message.into()),
        }
    }
}

/// The decline test payment method `token` meets, if it is one.
pub(crate) fn by_token(token: &str) -> Option<&'static Decline> {
    DECLINES.iter().find(|d| d.token == Some(token))
}

/// The decline Stripe's words (`code`, `decline_code`) on an intent name: how the Adyen face,
/// which keeps its payments as the Stripe face's intents, finds what to answer.
pub(crate) fn by_stripe(
    code: Option<&str>,
    decline_code: Option<&str>,
) -> Option<&'static Decline> {
    DECLINES
        .iter()
        .chain(std::iter::once(&AUTHENTICATION_FAILED))
        .find(|d| d.code == code.unwrap_or_default() && d.decline_code == decline_code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_decline_is_found_by_its_token_and_by_its_stripe_words() {
        for decline in DECLINES.iter().chain([&AUTHENTICATION_FAILED]) {
            if let Some(token) = decline.token {
                assert_eq!(by_token(token), Some(decline), "{token}");
            }
            assert_eq!(
                by_stripe(Some(decline.code), decline.decline_code),
                Some(decline),
                "{decline:?}: two declines say the same in Stripe's words, so the Adyen \
                 face could not tell them apart"
            );
        }
        assert_eq!(by_token("pm_card_visa"), None);
        assert_eq!(by_stripe(Some("card_declined"), None), None);
    }

    #[test]
    fn a_raw_code_reads_as_adyen_writes_it_and_advice_is_mastercards() {
        for decline in DECLINES {
            if let Some(raw) = decline.adyen.raw {
                let (code, text) = raw.split_once(" : ").expect("NN : text");
                assert!(code.len() == 2 && !text.is_empty(), "{raw}");
            }
            if let Some(advice) = decline.adyen.merchant_advice {
                assert!(
                    advice.as_bytes()[..2].iter().all(u8::is_ascii_digit),
                    "{advice}"
                );
                assert_eq!(decline.adyen.brand, "mc", "{advice}");
            }
            assert!(
                decline.token.is_some_and(
                    |t| t.starts_with("pm_card_") || t.starts_with("pm_sandbox_decline_")
                ),
                "{decline:?}"
            );
        }
    }
}
