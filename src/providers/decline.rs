//! payorch's one vocabulary of declines (docs/guides/declines.md). Stripe says a decline as
//! `code` and `decline_code` (`card_declined` / `insufficient_funds`), Adyen as a refusal
//! number (`12`); a merchant reading either had two vocabularies, and nothing could tell a
//! decline another provider might approve from one no provider will. Each adapter maps what
//! its answer says to a [`DeclineCode`], whose [`FailureClass`] says whether the card may be
//! tried again and where, and keeps the provider's own code beside it.
//!
//! The class is the only thing that may ever decide a retry, so it is conservative by
//! construction: the network's advice (a Mastercard merchant advice code, a raw issuer
//! response, Stripe's `advice_code`) may only make a class stricter, never looser.

use crate::words::words;

words! {
    /// What a failed charge allows next (docs/guides/declines.md, "Classes"). Stored in
    /// `payment_attempts.failure_class`.
    #[derive(serde::Serialize, utoipa::ToSchema)]
    #[serde(rename_all = "snake_case")]
    pub enum FailureClass {
        /// No further attempt with this card for this payment, at any provider.
        Hard => "hard",
        /// Another provider may approve: the decline came from the provider, its acquirer, or
        /// an issuer that gave no reason.
        Soft => "soft",
        /// Only an attempt with 3-D Secure may follow.
        AuthenticationRequired => "authentication_required",
        /// The charge may exist: never retried anywhere. An attempt whose outcome is unknown
        /// is not failed (it stays `pending`), so no failed attempt has this class.
        Unknown => "unknown",
    }
}

impl FailureClass {
    /// How strict a class is: soft < authentication_required < hard < unknown.
    fn strictness(self) -> u8 {
        match self {
            FailureClass::Soft => 0,
            FailureClass::AuthenticationRequired => 1,
            FailureClass::Hard => 2,
            FailureClass::Unknown => 3,
        }
    }

    /// The stricter of two classes.
    pub fn stricter(self, other: FailureClass) -> FailureClass {
        if other.strictness() > self.strictness() {
            other
        } else {
            self
        }
    }
}

words! {
    /// payorch's `failure_code` of a failed charge, the same through both protocols
    /// (docs/guides/declines.md, "Codes"). Refund, capture and cancel failures keep their
    /// own codes: they are not declines.
    #[derive(serde::Serialize, utoipa::ToSchema)]
    #[serde(rename_all = "snake_case")]
    pub enum DeclineCode {
        InvalidNumber => "invalid_number",
        ExpiredCard => "expired_card",
        IncorrectCvc => "incorrect_cvc",
        IncorrectAddress => "incorrect_address",
        LostOrStolenCard => "lost_or_stolen_card",
        RestrictedCard => "restricted_card",
        InvalidAccount => "invalid_account",
        AuthorizationRevoked => "authorization_revoked",
        Fraudulent => "fraudulent",
        CardNotSupported => "card_not_supported",
        InsufficientFunds => "insufficient_funds",
        CardVelocityExceeded => "card_velocity_exceeded",
        InvalidAmount => "invalid_amount",
        DuplicateTransaction => "duplicate_transaction",
        RetryLimitExceeded => "retry_limit_exceeded",
        AuthenticationFailed => "authentication_failed",
        PayerCanceled => "payer_canceled",
        GenericDecline => "generic_decline",
        IssuerUnavailable => "issuer_unavailable",
        ProcessingError => "processing_error",
        AuthenticationError => "authentication_error",
        ProviderRejected => "provider_rejected",
        /// A decline whose raw code payorch does not know: soft, since the tables hold every
        /// code the providers publish and a new one has so far refined a generic decline.
        Declined => "declined",
        AuthenticationRequired => "authentication_required",
        /// payorch's own: the provider proved it never made the charge
        /// ([`crate::providers::NO_RECORD`]).
        ProviderNoRecord => "provider_no_record",
        /// payorch's own: the first send provably never reached the provider, so the payment
        /// failed over (docs/DESIGN.md, "Failover").
        ProviderUnavailable => "provider_unavailable",
        /// A timeout, a 5xx, a connection closed after sending, an unreadable answer: never a
        /// failed attempt's code (the attempt stays pending), named so the call log and the
        /// docs can say it.
        OutcomeUnknown => "outcome_unknown",
    }
}

impl DeclineCode {
    /// The class a code has when no advice makes it stricter.
    pub fn class(self) -> FailureClass {
        use DeclineCode::*;
        match self {
            GenericDecline | IssuerUnavailable | ProcessingError | AuthenticationError
            | ProviderRejected | Declined | ProviderNoRecord | ProviderUnavailable => {
                FailureClass::Soft
            }
            AuthenticationRequired => FailureClass::AuthenticationRequired,
            OutcomeUnknown => FailureClass::Unknown,
            InvalidNumber | ExpiredCard | IncorrectCvc | IncorrectAddress | LostOrStolenCard
            | RestrictedCard | InvalidAccount | AuthorizationRevoked | Fraudulent
            | CardNotSupported | InsufficientFunds | CardVelocityExceeded | InvalidAmount
            | DuplicateTransaction | RetryLimitExceeded | AuthenticationFailed | PayerCanceled => {
                FailureClass::Hard
            }
        }
    }
}

/// What a decline's answer advised beyond its code, as the provider passed it on. Kept raw
/// for the merchant's own retries (a Mastercard "retry after 24 h"); read here only to make
/// the class stricter.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Advice {
    /// Stripe's `advice_code`: `do_not_try_again`, `confirm_card_data`, `try_again_later`.
    pub advice_code: Option<String>,
    /// The Mastercard merchant advice code: Stripe's `network_advice_code`, Adyen's
    /// `additionalData.merchantAdviceCode` (its leading two characters, "03: …" → "03").
    pub network_advice_code: Option<String>,
    /// The issuer's raw response code: Stripe's `network_decline_code`, Adyen's
    /// `additionalData.refusalReasonRaw` (its leading code, "51 : Insufficient funds" → "51").
    pub network_decline_code: Option<String>,
}

/// Raw issuer responses that mean no attempt with these card details can be approved: Visa's
/// categories 1 ("never"), 2 ("not at this time": the same issuer, so not now either) and 3
/// ("not with these details"). These ISO 8583 codes mean the same at Mastercard, and a
/// wrong brand here can only make a class stricter, so the brand is not asked.
const NEVER_AGAIN_RAW: [&str; 26] = [
    "04", "07", "12", "14", "15", "41", "43", "46", "57", "R0", "R1", "R3", // category 1
    "19", "51", "59", "61", "75", "91", "96", "N3", "N4", // category 2
    "54", "55", "N7", "82", // category 3
    "62", // restricted card (Visa category 1 by some acquirers' lists)
];

/// Mastercard merchant advice codes that forbid an immediate retry: 01 new account
/// information, 02 try later, 03 and 21 never, 04 token requirements, 24–30 not before a
/// delay.
const NO_RETRY_MAC: [&str; 12] = [
    "01", "02", "03", "04", "21", "24", "25", "26", "27", "28", "29", "30",
];

impl Advice {
    /// The class this advice asks for at least, if any. Never `Unknown`: advice comes with a
    /// decline, which proves nothing was charged.
    pub fn floor(&self) -> Option<FailureClass> {
        let raw = self.network_decline_code.as_deref().map(leading_code);
        let mac = self.network_advice_code.as_deref().map(leading_code);
        // Mastercard's security decline (83) with "new account information" (01) asks for a
        // retry with authentication, not for new card data.
        if raw.as_deref() == Some("83") && mac.as_deref() == Some("01") {
            return Some(FailureClass::AuthenticationRequired);
        }
        let advised = matches!(
            self.advice_code.as_deref(),
            Some("do_not_try_again" | "confirm_card_data" | "try_again_later")
        );
        let mac_says = mac.as_deref().is_some_and(|m| NO_RETRY_MAC.contains(&m));
        let raw_says = raw.as_deref().is_some_and(|r| NEVER_AGAIN_RAW.contains(&r));
        if advised || mac_says || raw_says {
            return Some(FailureClass::Hard);
        }
        // Visa 1A: additional customer authentication required.
        (raw.as_deref() == Some("1A")).then_some(FailureClass::AuthenticationRequired)
    }

    /// `class`, made stricter by this advice where it says so.
    pub fn applied_to(&self, class: FailureClass) -> FailureClass {
        match self.floor() {
            Some(floor) => class.stricter(floor),
            None => class,
        }
    }
}

/// The leading code of a raw value ("51 : Insufficient funds" → "51", "5" → "05", "03: Do
/// not try again" → "03"), upper-cased: the text after it changes without notice.
pub fn leading_code(raw: &str) -> String {
    let code: String = raw
        .trim()
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric())
        .collect::<String>()
        .to_ascii_uppercase();
    if code.len() == 1 && code.chars().all(|c| c.is_ascii_digit()) {
        format!("0{code}")
    } else {
        code
    }
}

/// A declined charge in payorch's words, with what the provider said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decline {
    pub code: DeclineCode,
    /// The code's class, after the advice.
    pub class: FailureClass,
    /// The provider's own code: Stripe's `code/decline_code` (`card_declined/lost_card`, or
    /// the one present), Adyen's `refusalReasonCode` (`12`) or 422 `errorCode`.
    pub provider_code: String,
    pub advice: Advice,
}

impl Decline {
    /// `code` as the provider said it with `provider_code`, its class made stricter by
    /// `advice`.
    pub fn new(code: DeclineCode, provider_code: impl Into<String>, advice: Advice) -> Self {
        Decline {
            code,
            class: advice.applied_to(code.class()),
            provider_code: provider_code.into(),
            advice,
        }
    }

    /// One of payorch's own codes, where no provider answer named the failure
    /// (`provider_no_record`, `provider_unavailable`): its word stands as the provider's code.
    pub fn own(code: DeclineCode) -> Self {
        Decline::new(code, code.as_str(), Advice::default())
    }

    /// What a failed attempt stores for a failure said with `code` and `decline`
    /// (docs/guides/declines.md, "Declines"): the decline itself; else, for payorch's own codes,
    /// [`Decline::own`]; else (a code no adapter gives a charge) `declined` under that code,
    /// so a failed attempt's code never leaves the vocabulary.
    pub fn stored(code: &str, decline: Option<&Decline>) -> Decline {
        match (decline, DeclineCode::parse(code)) {
            (Some(decline), _) => decline.clone(),
            (None, Some(ours)) => Decline::own(ours),
            (None, None) => Decline::new(DeclineCode::Declined, code, Advice::default()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn advice(advice_code: Option<&str>, mac: Option<&str>, raw: Option<&str>) -> Advice {
        Advice {
            advice_code: advice_code.map(str::to_owned),
            network_advice_code: mac.map(str::to_owned),
            network_decline_code: raw.map(str::to_owned),
        }
    }

    #[test]
    fn every_code_has_its_class_and_only_outcome_unknown_is_unknown() {
        for code in DeclineCode::ALL {
            let unknown = code.class() == FailureClass::Unknown;
            assert_eq!(unknown, code == DeclineCode::OutcomeUnknown, "{code:?}");
        }
        assert_eq!(DeclineCode::ALL.len(), 27);
        assert_eq!(
            DeclineCode::GenericDecline.class(),
            FailureClass::Soft,
            "another provider may approve a decline the issuer gave no reason for"
        );
    }

    #[test]
    fn advice_only_ever_makes_a_class_stricter() {
        let cases = [
            advice(Some("do_not_try_again"), None, None),
            advice(Some("confirm_card_data"), None, None),
            advice(Some("try_again_later"), None, None),
            advice(None, Some("03"), None),
            advice(None, Some("21: Payment cancellation"), None),
            advice(None, Some("24"), None),
            advice(None, None, Some("41")),
            advice(
                None,
                None,
                Some("51 : Insufficient funds/over credit limit"),
            ),
            advice(None, None, Some("7")),
            advice(None, Some("01"), Some("83")),
            advice(None, None, Some("1A")),
            advice(Some("something_new"), Some("99"), Some("05")),
            Advice::default(),
        ];
        for code in DeclineCode::ALL {
            for advice in &cases {
                let class = Decline::new(code, "x", advice.clone()).class;
                assert_eq!(
                    class.stricter(code.class()),
                    class,
                    "{advice:?} loosened {code:?}"
                );
                assert!(
                    class != FailureClass::Unknown || code == DeclineCode::OutcomeUnknown,
                    "advice never makes a decline unknown"
                );
            }
        }
    }

    #[test]
    fn never_retry_advice_makes_a_soft_decline_hard() {
        let generic = |a| Decline::new(DeclineCode::GenericDecline, "card_declined", a).class;
        assert_eq!(generic(Advice::default()), FailureClass::Soft);
        assert_eq!(
            generic(advice(Some("do_not_try_again"), None, None)),
            FailureClass::Hard
        );
        assert_eq!(generic(advice(None, Some("03"), None)), FailureClass::Hard);
        assert_eq!(generic(advice(None, None, Some("R1"))), FailureClass::Hard);
        assert_eq!(generic(advice(None, None, Some("05"))), FailureClass::Soft);
        assert_eq!(generic(advice(None, Some("99"), None)), FailureClass::Soft);
        assert_eq!(
            generic(advice(None, Some("01"), Some("83"))),
            FailureClass::AuthenticationRequired,
            "Mastercard's 83 with MAC 01: retry with authentication"
        );
        assert_eq!(
            generic(advice(None, None, Some("1A"))),
            FailureClass::AuthenticationRequired
        );
        // A hard decline stays hard whatever the advice.
        let funds = Decline::new(
            DeclineCode::InsufficientFunds,
            "12",
            advice(None, Some("01"), Some("83")),
        );
        assert_eq!(funds.class, FailureClass::Hard);
    }

    #[test]
    fn a_raw_code_is_read_by_its_leading_characters() {
        assert_eq!(leading_code("51 : Insufficient funds"), "51");
        assert_eq!(leading_code("5"), "05");
        assert_eq!(leading_code("03: Do not try again"), "03");
        assert_eq!(leading_code("r1"), "R1");
        assert_eq!(leading_code(""), "");
    }

    #[test]
    fn a_class_and_a_code_round_trip_through_their_words() {
        for class in FailureClass::ALL {
            assert_eq!(FailureClass::parse(class.as_str()), Some(class));
        }
        for code in DeclineCode::ALL {
            assert_eq!(DeclineCode::parse(code.as_str()), Some(code));
        }
        assert_eq!(
            DeclineCode::ProviderNoRecord.as_str(),
            crate::providers::NO_RECORD
        );
    }
}
