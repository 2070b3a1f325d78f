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

/// Raw issuer responses after which the issuer will never approve this card: Visa's category
/// 1, where every re-attempt is charged (04, 07, 12, 14, 15, 41, 43, 46, 57, R0, R1, R3). These
/// ISO 8583 codes mean the same at Mastercard, and a wrong brand here can only make a class
/// stricter, so the brand is not asked. Visa's categories 2 ("not at this time": 91 issuer
/// unavailable, 96 system malfunction, 51 funds) and 3 ("not with these details") are left
/// out on purpose: a technical or passing answer must not make a soft decline hard (Stripe's
/// `issuer_not_available` stays soft; so must Adyen's 9 with raw 91), and the declines they
/// describe are already hard by their own code where that is right (`insufficient_funds`,
/// `expired_card`, `incorrect_cvc`). Codes the acquirers' lists disagree on (03, 62, 78, 93)
/// are not here either.
const NEVER_AGAIN_RAW: [&str; 12] = [
    "04", "07", "12", "14", "15", "41", "43", "46", "57", "R0", "R1", "R3",
];

/// Mastercard merchant advice codes that forbid an immediate retry: 01 new account
/// information, 02 try later, 03 and 21 never, 04 token requirements, 24–30 not before a
/// delay.
const NO_RETRY_MAC: [&str; 12] = [
    "01", "02", "03", "04", "21", "24", "25", "26", "27", "28", "29", "30",
];

impl Advice {
    /// The class this advice asks for at least, if any: the strictest any of its signals asks
    /// for (soft < authentication_required < hard), so no signal hides another. Never
    /// `Unknown`: advice comes with a decline, which proves nothing was charged.
    pub fn floor(&self) -> Option<FailureClass> {
        let raw = self.network_decline_code.as_deref().map(leading_code);
        let mac = self.network_advice_code.as_deref().map(leading_code);
        let (raw, mac) = (raw.as_deref(), mac.as_deref());
        let advised = self.advice_code.as_deref().map(|advice| match advice {
            "do_not_try_again" | "confirm_card_data" | "try_again_later" => {
                Some(FailureClass::Hard)
            }
            _ => None,
        });
        let mac_says = mac.map(|mac| match (raw, mac) {
            // Mastercard's security decline (83) with "new account information" (01) asks for
            // a retry with authentication, not for new card data.
            (Some("83"), "01") => Some(FailureClass::AuthenticationRequired),
            (_, mac) if NO_RETRY_MAC.contains(&mac) => Some(FailureClass::Hard),
            _ => None,
        });
        let raw_says = raw.map(|raw| match raw {
            raw if NEVER_AGAIN_RAW.contains(&raw) => Some(FailureClass::Hard),
            // Visa 1A: additional customer authentication required.
            "1A" => Some(FailureClass::AuthenticationRequired),
            _ => None,
        });
        [advised, mac_says, raw_says]
            .into_iter()
            .flatten()
            .flatten()
            .reduce(FailureClass::stricter)
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
    /// the one present), Adyen's `refusalReasonCode` (`12`) or 422 `errorCode`. `None` for
    /// payorch's own codes, which no provider answer named.
    pub provider_code: Option<String>,
    pub advice: Advice,
}

impl DeclineCode {
    /// payorch's own codes (`provider_no_record`, `provider_unavailable`): failures payorch
    /// establishes itself, without a provider's answer naming them.
    pub fn is_own(self) -> bool {
        matches!(
            self,
            DeclineCode::ProviderNoRecord | DeclineCode::ProviderUnavailable
        )
    }
}

impl Decline {
    /// `code` as the provider said it with `provider_code`, its class made stricter by
    /// `advice`.
    pub fn new(code: DeclineCode, provider_code: impl Into<String>, advice: Advice) -> Self {
        Decline {
            code,
            class: advice.applied_to(code.class()),
            provider_code: Some(provider_code.into()),
            advice,
        }
    }

    /// One of payorch's own codes (`provider_no_record`, `provider_unavailable`), or a word
    /// of the vocabulary no provider's answer came with: no provider's code beside it.
    pub fn own(code: DeclineCode) -> Self {
        Decline {
            code,
            class: code.class(),
            provider_code: None,
            advice: Advice::default(),
        }
    }

    /// What a failed attempt stores for a failure said with `code` and `decline`
    /// (docs/guides/declines.md, "Codes"): the decline itself; else, for payorch's own codes,
    /// [`Decline::own`]. Anything else is a failed attempt no adapter mapped: a path that
    /// fails an attempt without a decline. A code outside the vocabulary is stored as
    /// `declined` (soft) under `code`, so a failed attempt's code never leaves the vocabulary;
    /// either way it is logged as a warning, so the path is noticed (and one outside the
    /// vocabulary is counted as `declined` by `payorch_payment_declines_total`).
    pub fn stored(code: &str, decline: Option<&Decline>) -> Decline {
        let (stored, mapped) = Decline::resolved(code, decline);
        if !mapped {
            tracing::warn!(
                code,
                "a failed attempt recorded without a decline: the path that failed it did not \
                 map the provider's answer to the vocabulary"
            );
        }
        stored
    }

    /// [`Decline::stored`] without its warning (for counting what is stored and warned of
    /// once), and whether the failure came mapped.
    pub fn resolved(code: &str, decline: Option<&Decline>) -> (Decline, bool) {
        match (decline, DeclineCode::parse(code)) {
            (Some(decline), _) => (decline.clone(), true),
            // A word of the vocabulary with no decline: its class, but no provider's code.
            (None, Some(ours)) => (Decline::own(ours), ours.is_own()),
            (None, None) => (
                Decline::new(DeclineCode::Declined, code, Advice::default()),
                false,
            ),
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

    #[test]
    fn a_technical_raw_answer_leaves_a_soft_decline_soft() {
        // Visa 91 (issuer unavailable), 96 (system malfunction) and the other "not at this
        // time" answers say nothing about the card.
        for raw in ["91", "96", "19", "51", "61", "N3", "54", "62", "03"] {
            let d = Decline::new(
                DeclineCode::IssuerUnavailable,
                "9",
                advice(None, None, Some(raw)),
            );
            assert_eq!(d.class, FailureClass::Soft, "raw {raw}");
        }
        for raw in NEVER_AGAIN_RAW {
            let d = Decline::new(
                DeclineCode::IssuerUnavailable,
                "9",
                advice(None, None, Some(raw)),
            );
            assert_eq!(d.class, FailureClass::Hard, "raw {raw}");
        }
    }

    #[test]
    fn the_strictest_signal_decides_whatever_comes_first() {
        let generic = |a| Decline::new(DeclineCode::GenericDecline, "card_declined", a).class;
        // 83 with MAC 01 alone asks for authentication; beside a never-retry advice it is hard.
        for advice_code in ["do_not_try_again", "confirm_card_data", "try_again_later"] {
            assert_eq!(
                generic(advice(Some(advice_code), Some("01"), Some("83"))),
                FailureClass::Hard,
                "{advice_code} with 83 and MAC 01"
            );
        }
        assert_eq!(
            generic(advice(None, Some("03"), Some("1A"))),
            FailureClass::Hard
        );
        assert_eq!(
            generic(advice(None, Some("01"), Some("41"))),
            FailureClass::Hard,
            "a lost card with MAC 01"
        );
        assert_eq!(
            generic(advice(Some("something_new"), Some("01"), Some("83"))),
            FailureClass::AuthenticationRequired
        );
    }

    #[test]
    fn a_stored_failure_keeps_the_vocabulary_and_says_when_it_came_unmapped() {
        let (own, mapped) = Decline::resolved(crate::providers::NO_RECORD, None);
        assert!(mapped);
        assert_eq!(
            (own.code, own.class, own.provider_code),
            (DeclineCode::ProviderNoRecord, FailureClass::Soft, None)
        );
        let (forgotten, mapped) = Decline::resolved("capture_failed", None);
        assert!(!mapped, "a failure no adapter mapped is told");
        assert_eq!(
            (forgotten.code, forgotten.class),
            (DeclineCode::Declined, FailureClass::Soft)
        );
        assert_eq!(forgotten.provider_code.as_deref(), Some("capture_failed"));
        let (word, mapped) = Decline::resolved("insufficient_funds", None);
        assert!(!mapped);
        assert_eq!(
            (word.code, word.class),
            (DeclineCode::InsufficientFunds, FailureClass::Hard)
        );
        let decline = Decline::new(DeclineCode::GenericDecline, "2", Advice::default());
        assert_eq!(
            Decline::resolved("x", Some(&decline)),
            (decline.clone(), true)
        );
        assert_eq!(Decline::stored("x", Some(&decline)), decline);
    }
}
