//! Adyen's refusals in payorch's vocabulary (docs/guides/declines.md, "Through the Adyen
//! protocol"). A refused payment names its reason by number (`refusalReasonCode`,
//! https://docs.adyen.com/development-resources/refusal-reasons); a failed `AUTHORISATION`
//! notification only by name, which [`refusal::words`] turns back into the number; a `422`
//! by `errorCode`.

use std::collections::BTreeMap;

use super::refusal;
use crate::providers::decline::{leading_code, Advice, Decline, DeclineCode};

/// `refusalReasonCode` → payorch's code. Any other code, or none, is
/// [`DeclineCode::Declined`]. The point-of-sale codes (a PIN, a chip) say the card cannot
/// be taken this way online.
pub const BY_REFUSAL: &[(&str, DeclineCode)] = {
    use DeclineCode::*;
    &[
        ("2", GenericDecline),
        ("3", GenericDecline),
        ("27", GenericDecline),
        ("4", ProcessingError),
        ("21", ProcessingError),
        ("9", IssuerUnavailable),
        ("39", AuthenticationError),
        ("42", AuthenticationError),
        ("38", AuthenticationRequired),
        ("11", AuthenticationFailed),
        ("5", RestrictedCard),
        ("25", RestrictedCard),
        ("6", ExpiredCard),
        ("7", InvalidAmount),
        ("8", InvalidNumber),
        ("10", CardNotSupported),
        ("23", CardNotSupported),
        ("17", CardNotSupported),
        ("18", CardNotSupported),
        ("19", CardNotSupported),
        ("33", CardNotSupported),
        ("34", CardNotSupported),
        ("35", CardNotSupported),
        ("36", CardNotSupported),
        ("37", CardNotSupported),
        ("40", CardNotSupported),
        ("41", CardNotSupported),
        ("43", CardNotSupported),
        ("44", CardNotSupported),
        ("45", CardNotSupported),
        ("12", InsufficientFunds),
        ("14", Fraudulent),
        ("20", Fraudulent),
        ("22", Fraudulent),
        ("31", Fraudulent),
        ("15", PayerCanceled),
        ("16", PayerCanceled),
        ("24", IncorrectCvc),
        ("26", AuthorizationRevoked),
        ("28", CardVelocityExceeded),
        ("29", CardVelocityExceeded),
        ("32", IncorrectAddress),
        ("46", RetryLimitExceeded),
    ]
};

/// `additionalData.inferredRefusalReason` → payorch's code: Adyen's more precise reading of a
/// generic refusal, which replaces the refusal's own only where the refusal is one Adyen
/// reads further ([`INFERRED_FROM`]). Its other values keep the refusal's.
pub const BY_INFERRED: &[(&str, DeclineCode)] = {
    use DeclineCode::*;
    &[
        ("3D Secure Mandated", AuthenticationRequired),
        ("Closed Account", InvalidAccount),
        ("Card Updated", InvalidAccount),
        ("CVC Mandated", IncorrectCvc),
    ]
};

/// The refusals an inferred reason may replace: the generic ones (`2` Refused, `3` Referral,
/// `27` Declined Non Generic, and a refusal payorch does not know), and those Adyen names as
/// the ones it infers from and relabels `10` Not supported when it does (`10`, `23` Transaction
/// Not Permitted, `25` Restricted Card: https://docs.adyen.com/development-resources/refusal-reasons).
/// Any other refusal is the issuer's own reason and stands: `12` Not enough balance stays
/// `insufficient_funds`, hard, whatever is inferred.
const INFERRED_FROM: &[&str] = &["2", "3", "27", "10", "23", "25"];

/// `additionalData.refusalReasonRaw`'s leading code → payorch's code, where the issuer's raw
/// answer says more than Adyen's refusal: Adyen has no refusal for a lost or stolen card and
/// answers it `5` Blocked Card (or a generic refusal), while Stripe names it `lost_card` or
/// `stolen_card`. It replaces the refusal's code, never the inferred reason's.
pub const BY_RAW: &[(&str, DeclineCode)] = {
    use DeclineCode::*;
    &[
        ("04", LostOrStolenCard),
        ("07", LostOrStolenCard),
        ("41", LostOrStolenCard),
        ("43", LostOrStolenCard),
    ]
};

/// The `422` `errorCode` that is a decline of the card itself (Invalid card number); any
/// other `422` is [`DeclineCode::ProviderRejected`].
pub const INVALID_CARD_NUMBER: &str = "101";

/// A refused payment in payorch's words, from its `refusalReasonCode` and `additionalData`
/// (`inferredRefusalReason`, `merchantAdviceCode`, `refusalReasonRaw`). The provider's code
/// is the refusal code, or `refused` when the answer has none.
pub fn decline(
    refusal_code: Option<&str>,
    additional: &BTreeMap<String, serde_json::Value>,
) -> Decline {
    let text = |field: &str| additional.get(field)?.as_str().map(str::trim);
    let by_refusal = refusal_code
        .and_then(|code| lookup(BY_REFUSAL, code.trim()))
        .unwrap_or(DeclineCode::Declined);
    let raw = text("refusalReasonRaw")
        .or(text("refusalCodeRaw"))
        .map(leading_code)
        .filter(|c| !c.is_empty());
    let refined = refusal_code.is_none_or(|code| {
        let code = code.trim();
        INFERRED_FROM.contains(&code) || lookup(BY_REFUSAL, code).is_none()
    });
    let ours = text("inferredRefusalReason")
        .filter(|_| refined)
        .and_then(|inferred| lookup(BY_INFERRED, inferred))
        .or_else(|| lookup(BY_RAW, raw.as_deref()?))
        .unwrap_or(by_refusal);
    let advice = Advice {
        advice_code: None,
        network_advice_code: text("merchantAdviceCode")
            .map(leading_code)
            .filter(|c| !c.is_empty()),
        network_decline_code: raw,
    };
    let provider_code = refusal_code
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .unwrap_or("refused");
    Decline::new(ours, provider_code, advice)
}

/// A refusal told only by a failed `AUTHORISATION` notification, whose `reason` names the
/// refusal ("Not enough balance") without its number: the name is read back to the number
/// Adyen's list gives it. A name the list does not hold is [`DeclineCode::Declined`], under
/// the provider's code `refused`.
pub fn decline_by_reason(
    reason: &str,
    additional: &BTreeMap<String, serde_json::Value>,
) -> Decline {
    // Adyen's text may carry more after the name ("Refused: …"): the name decides.
    let name = reason.split(':').next().unwrap_or_default().trim();
    let code = BY_REFUSAL
        .iter()
        .map(|(code, _)| *code)
        .find(|code| refusal::words(code).is_some_and(|w| w.eq_ignore_ascii_case(name)));
    decline(code, additional)
}

/// A `422` in payorch's words: `errorCode` 101 is the card's number, anything else Adyen's
/// validation or configuration refusing the request before any network saw it.
pub fn rejected(error_code: Option<&str>) -> Decline {
    let code = if error_code == Some(INVALID_CARD_NUMBER) {
        DeclineCode::InvalidNumber
    } else {
        DeclineCode::ProviderRejected
    };
    Decline::new(code, error_code.unwrap_or("http_422"), Advice::default())
}

fn lookup(table: &[(&str, DeclineCode)], raw: &str) -> Option<DeclineCode> {
    table.iter().find(|(r, _)| *r == raw).map(|(_, c)| *c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::decline::FailureClass;

    fn data(pairs: &[(&str, &str)]) -> BTreeMap<String, serde_json::Value> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), serde_json::Value::from(*v)))
            .collect()
    }

    #[test]
    fn every_refusal_row_decides_with_its_class() {
        for (raw, ours) in BY_REFUSAL {
            let d = decline(Some(raw), &BTreeMap::new());
            assert_eq!((d.code, d.class), (*ours, ours.class()), "{raw}");
            assert_eq!(d.provider_code.as_deref(), Some(*raw));
        }
        let missing = decline(None, &BTreeMap::new());
        assert_eq!(
            (
                missing.code,
                missing.class,
                missing.provider_code.as_deref()
            ),
            (DeclineCode::Declined, FailureClass::Soft, Some("refused"))
        );
        assert_eq!(
            decline(Some("99"), &BTreeMap::new()).code,
            DeclineCode::Declined
        );
    }

    #[test]
    fn every_named_refusal_reads_back_from_a_notification() {
        for (raw, ours) in BY_REFUSAL {
            let Some(name) = refusal::words(raw) else {
                continue;
            };
            let d = decline_by_reason(name, &BTreeMap::new());
            assert_eq!(
                (d.code, d.provider_code.as_deref()),
                (*ours, Some(*raw)),
                "{name}"
            );
            let said =
                decline_by_reason(&format!("{}: more", name.to_lowercase()), &BTreeMap::new());
            assert_eq!(said.code, *ours, "{name}");
        }
        let unknown = decline_by_reason("Something new", &BTreeMap::new());
        assert_eq!(unknown.code, DeclineCode::Declined);
        assert_eq!(unknown.provider_code.as_deref(), Some("refused"));
    }

    #[test]
    fn a_raw_lost_or_stolen_answer_names_the_card_as_stripe_does() {
        for (raw, ours) in BY_RAW {
            let d = decline(
                Some("5"),
                &data(&[("refusalReasonRaw", &format!("{raw} : x"))]),
            );
            assert_eq!((d.code, d.class), (*ours, FailureClass::Hard), "{raw}");
            assert_eq!(d.provider_code.as_deref(), Some("5"));
        }
        let blocked = decline(Some("5"), &data(&[("refusalReasonRaw", "62 : Restricted")]));
        assert_eq!(blocked.code, DeclineCode::RestrictedCard);
    }

    #[test]
    fn an_inferred_reason_refines_a_generic_refusal() {
        for (inferred, ours) in BY_INFERRED {
            for refusal in INFERRED_FROM.iter().chain([&"99"]) {
                let d = decline(Some(refusal), &data(&[("inferredRefusalReason", inferred)]));
                assert_eq!(
                    (d.code, d.class),
                    (*ours, ours.class()),
                    "{inferred} on {refusal}"
                );
            }
        }
        let d = decline(
            Some("2"),
            &data(&[("inferredRefusalReason", "3D Secure Mandated")]),
        );
        assert_eq!(
            (d.code, d.class),
            (
                DeclineCode::AuthenticationRequired,
                FailureClass::AuthenticationRequired
            )
        );
        let kept = decline(
            Some("2"),
            &data(&[("inferredRefusalReason", "Low Authrate Bin")]),
        );
        assert_eq!(kept.code, DeclineCode::GenericDecline);
    }

    #[test]
    fn an_inferred_reason_never_replaces_the_issuers_own_reason() {
        for (inferred, _) in BY_INFERRED {
            let d = decline(Some("12"), &data(&[("inferredRefusalReason", inferred)]));
            assert_eq!(
                (d.code, d.class),
                (DeclineCode::InsufficientFunds, FailureClass::Hard),
                "{inferred}"
            );
        }
        let fraud = decline(
            Some("31"),
            &data(&[("inferredRefusalReason", "3D Secure Mandated")]),
        );
        assert_eq!(
            (fraud.code, fraud.class),
            (DeclineCode::Fraudulent, FailureClass::Hard)
        );
    }

    #[test]
    fn an_unavailable_issuer_with_a_technical_raw_answer_stays_soft() {
        for raw in [
            "91 : Issuer or switch inoperative",
            "96 : System malfunction",
        ] {
            let d = decline(Some("9"), &data(&[("refusalReasonRaw", raw)]));
            assert_eq!(
                (d.code, d.class),
                (DeclineCode::IssuerUnavailable, FailureClass::Soft),
                "{raw}"
            );
        }
    }

    #[test]
    fn the_raw_response_and_the_merchant_advice_make_a_refusal_stricter() {
        let refused = |pairs: &[(&str, &str)]| decline(Some("2"), &data(pairs)).class;
        assert_eq!(refused(&[]), FailureClass::Soft);
        assert_eq!(
            refused(&[("merchantAdviceCode", "03: Do not try again")]),
            FailureClass::Hard
        );
        assert_eq!(
            refused(&[("refusalReasonRaw", "41 : Lost card")]),
            FailureClass::Hard
        );
        assert_eq!(
            refused(&[("refusalReasonRaw", "05 : Do not honor")]),
            FailureClass::Soft
        );
        assert_eq!(
            refused(&[
                ("refusalReasonRaw", "83"),
                (
                    "merchantAdviceCode",
                    "01: New account information available"
                )
            ]),
            FailureClass::AuthenticationRequired
        );
    }

    #[test]
    fn a_422_declines_only_an_invalid_card_number() {
        let number = rejected(Some("101"));
        assert_eq!(
            (number.code, number.class),
            (DeclineCode::InvalidNumber, FailureClass::Hard)
        );
        let other = rejected(Some("702"));
        assert_eq!(
            (other.code, other.class),
            (DeclineCode::ProviderRejected, FailureClass::Soft)
        );
        assert_eq!(other.provider_code.as_deref(), Some("702"));
        assert_eq!(rejected(None).provider_code.as_deref(), Some("http_422"));
    }
}
