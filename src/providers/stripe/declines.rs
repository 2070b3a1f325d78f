//! Stripe's decline codes in payorch's vocabulary (docs/guides/declines.md, "Through the
//! Stripe protocol"). Stripe names an issuer's decline `card_declined` in `code` and the
//! reason in `decline_code`, so `decline_code` decides when present; `code` decides the
//! declines Stripe tells there alone (`expired_card`, `processing_error`, a failed 3-D
//! Secure challenge's `payment_intent_authentication_failure`).

use crate::providers::decline::{Advice, Decline, DeclineCode};

/// `decline_code` → payorch's code (https://docs.stripe.com/declines/codes). Any other
/// decline code is what `code` says by [`BY_CODE`] (but `card_declined`), else
/// [`DeclineCode::Declined`].
pub const BY_DECLINE_CODE: &[(&str, DeclineCode)] = {
    use DeclineCode::*;
    &[
        ("authentication_required", AuthenticationRequired),
        ("authentication_not_handled", AuthenticationRequired),
        (
            "mobile_device_authentication_required",
            AuthenticationRequired,
        ),
        ("approve_with_id", GenericDecline),
        ("call_issuer", GenericDecline),
        ("do_not_honor", GenericDecline),
        ("generic_decline", GenericDecline),
        ("no_action_taken", GenericDecline),
        ("try_again_later", GenericDecline),
        // Hard all the same: the code is the advice (read as `advice_code`).
        ("do_not_try_again", GenericDecline),
        ("issuer_not_available", IssuerUnavailable),
        ("processing_error", ProcessingError),
        ("reenter_transaction", ProcessingError),
        ("card_not_supported", CardNotSupported),
        ("currency_not_supported", CardNotSupported),
        ("not_permitted", CardNotSupported),
        ("service_not_allowed", CardNotSupported),
        ("transaction_not_allowed", CardNotSupported),
        ("testmode_decline", CardNotSupported),
        ("incorrect_pin", CardNotSupported),
        ("invalid_pin", CardNotSupported),
        ("offline_pin_required", CardNotSupported),
        ("online_or_offline_pin_required", CardNotSupported),
        ("pin_try_exceeded", CardNotSupported),
        ("card_velocity_exceeded", CardVelocityExceeded),
        ("withdrawal_count_limit_exceeded", CardVelocityExceeded),
        ("duplicate_transaction", DuplicateTransaction),
        ("expired_card", ExpiredCard),
        ("invalid_expiry_month", ExpiredCard),
        ("invalid_expiry_year", ExpiredCard),
        ("fraudulent", Fraudulent),
        ("merchant_blacklist", Fraudulent),
        ("security_violation", Fraudulent),
        ("incorrect_address", IncorrectAddress),
        ("incorrect_zip", IncorrectAddress),
        ("incorrect_cvc", IncorrectCvc),
        ("invalid_cvc", IncorrectCvc),
        ("incorrect_number", InvalidNumber),
        ("invalid_number", InvalidNumber),
        ("insufficient_funds", InsufficientFunds),
        ("invalid_account", InvalidAccount),
        ("new_account_information_available", InvalidAccount),
        ("invalid_amount", InvalidAmount),
        ("lost_card", LostOrStolenCard),
        ("stolen_card", LostOrStolenCard),
        ("pickup_card", LostOrStolenCard),
        ("restricted_card", RestrictedCard),
        ("revocation_of_authorization", AuthorizationRevoked),
        ("revocation_of_all_authorizations", AuthorizationRevoked),
        ("stop_payment_order", AuthorizationRevoked),
    ]
};

/// `code` → payorch's code, when the error has no `decline_code`. Any other code of an
/// `invalid_request_error` (and any `parameter_…`) is [`DeclineCode::ProviderRejected`]: Stripe
/// refused the request before any network saw it; any other code is
/// [`DeclineCode::Declined`].
pub const BY_CODE: &[(&str, DeclineCode)] = {
    use DeclineCode::*;
    &[
        ("card_declined", GenericDecline),
        ("expired_card", ExpiredCard),
        ("invalid_expiry_month", ExpiredCard),
        ("invalid_expiry_year", ExpiredCard),
        ("incorrect_cvc", IncorrectCvc),
        ("invalid_cvc", IncorrectCvc),
        ("incorrect_number", InvalidNumber),
        ("invalid_number", InvalidNumber),
        ("incorrect_zip", IncorrectAddress),
        ("incorrect_address", IncorrectAddress),
        ("postal_code_invalid", IncorrectAddress),
        ("invalid_card_type", CardNotSupported),
        ("insufficient_funds", InsufficientFunds),
        ("processing_error", ProcessingError),
        ("authentication_required", AuthenticationRequired),
        (
            "payment_intent_authentication_failure",
            AuthenticationFailed,
        ),
        ("card_decline_rate_limit_exceeded", RetryLimitExceeded),
        ("payment_method_provider_decline", GenericDecline),
        ("payment_intent_payment_attempt_failed", GenericDecline),
        ("payment_method_provider_timeout", IssuerUnavailable),
        ("amount_too_large", ProviderRejected),
        ("amount_too_small", ProviderRejected),
        ("invalid_charge_amount", ProviderRejected),
        ("payment_method_unactivated", ProviderRejected),
        ("testmode_charges_only", ProviderRejected),
        ("resource_missing", ProviderRejected),
    ]
};

/// A Stripe decline in payorch's words, from what the error says: its `type` (`kind`),
/// `code`, `decline_code` and advice (`advice_code`, `network_advice_code`,
/// `network_decline_code`). The provider's code is `code/decline_code`, or the one present,
/// or the type when neither is.
pub fn decline(
    kind: &str,
    code: Option<&str>,
    decline_code: Option<&str>,
    mut advice: Advice,
) -> Decline {
    let lookup = |table: &[(&str, DeclineCode)], raw: &str| {
        table.iter().find(|(r, _)| *r == raw).map(|(_, c)| *c)
    };
    // Stripe moved this code's guidance into `advice_code`; an older answer says it here.
    if decline_code == Some("do_not_try_again") && advice.advice_code.is_none() {
        advice.advice_code = Some("do_not_try_again".to_owned());
    }
    let rejected = kind == "invalid_request_error";
    let ours = match (decline_code, code) {
        // A decline code the table lacks does not hide what `code` says (`incorrect_cvc`);
        // `card_declined` says only "see decline_code", so a new one stays `declined`, counted
        // and logged for the table to grow.
        (Some(declined), code) => lookup(BY_DECLINE_CODE, declined)
            .or_else(|| {
                code.filter(|code| *code != "card_declined")
                    .and_then(|code| lookup(BY_CODE, code))
            })
            .unwrap_or(DeclineCode::Declined),
        (None, Some(code)) => {
            lookup(BY_CODE, code).unwrap_or(if rejected || code.starts_with("parameter_") {
                DeclineCode::ProviderRejected
            } else {
                DeclineCode::Declined
            })
        }
        (None, None) if rejected => DeclineCode::ProviderRejected,
        (None, None) => DeclineCode::Declined,
    };
    let provider_code = match (code, decline_code) {
        (Some(code), Some(declined)) => format!("{code}/{declined}"),
        (Some(one), None) | (None, Some(one)) => one.to_owned(),
        (None, None) => kind.to_owned(),
    };
    Decline::new(ours, provider_code, advice)
}

/// The advice fields of an error object (an error answer's `error`, or an intent's
/// `last_payment_error`), read from its JSON: each is optional, and an answer without them
/// declines by its codes alone.
pub fn advice_of(error: &serde_json::Value) -> Advice {
    let text = |field: &str| error.get(field)?.as_str().map(str::to_owned);
    Advice {
        advice_code: text("advice_code"),
        network_advice_code: text("network_advice_code"),
        network_decline_code: text("network_decline_code"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::decline::FailureClass;

    fn card(code: &str, declined: Option<&str>) -> Decline {
        decline("card_error", Some(code), declined, Advice::default())
    }

    #[test]
    fn every_decline_code_row_decides_through_card_declined() {
        for (raw, ours) in BY_DECLINE_CODE {
            let d = card("card_declined", Some(raw));
            assert_eq!(d.code, *ours, "{raw}");
            assert_eq!(d.provider_code, Some(format!("card_declined/{raw}")));
            let expected = if *raw == "do_not_try_again" {
                FailureClass::Hard
            } else {
                ours.class()
            };
            assert_eq!(d.class, expected, "{raw}");
        }
    }

    #[test]
    fn every_code_row_decides_without_a_decline_code() {
        for (raw, ours) in BY_CODE {
            let d = card(raw, None);
            assert_eq!((d.code, d.class), (*ours, ours.class()), "{raw}");
            assert_eq!(d.provider_code.as_deref(), Some(*raw));
        }
    }

    #[test]
    fn what_the_tables_do_not_know_is_declined_soft_or_rejected() {
        let d = card("card_declined", Some("something_new"));
        assert_eq!(
            (d.code, d.class),
            (DeclineCode::Declined, FailureClass::Soft)
        );
        assert_eq!(card("brand_new", None).code, DeclineCode::Declined);
        let rejected = |code| decline("invalid_request_error", code, None, Advice::default());
        assert_eq!(
            rejected(Some("parameter_missing")).code,
            DeclineCode::ProviderRejected
        );
        assert_eq!(
            rejected(Some("whatever")).code,
            DeclineCode::ProviderRejected
        );
        assert_eq!(
            rejected(None).provider_code.as_deref(),
            Some("invalid_request_error")
        );
        assert_eq!(
            decline("card_error", None, None, Advice::default()).code,
            DeclineCode::Declined
        );
    }

    #[test]
    fn an_unknown_decline_code_does_not_hide_a_known_code() {
        let d = card("incorrect_cvc", Some("something_new"));
        assert_eq!(
            (d.code, d.class),
            (DeclineCode::IncorrectCvc, FailureClass::Hard)
        );
        assert_eq!(
            d.provider_code.as_deref(),
            Some("incorrect_cvc/something_new")
        );
        let d = card("card_declined", Some("something_new"));
        assert_eq!(
            (d.code, d.class),
            (DeclineCode::Declined, FailureClass::Soft),
            "card_declined names no reason of its own"
        );
    }

    #[test]
    fn a_technical_network_code_leaves_issuer_not_available_soft() {
        let advice = Advice {
            network_decline_code: Some("91".to_owned()),
            ..Advice::default()
        };
        let d = decline(
            "card_error",
            Some("card_declined"),
            Some("issuer_not_available"),
            advice,
        );
        assert_eq!(
            (d.code, d.class),
            (DeclineCode::IssuerUnavailable, FailureClass::Soft)
        );
    }

    #[test]
    fn the_advice_fields_make_a_generic_decline_hard() {
        let body = serde_json::json!({
            "type": "card_error", "code": "card_declined", "decline_code": "generic_decline",
            "advice_code": "do_not_try_again", "network_advice_code": "03",
            "network_decline_code": "05",
        });
        let advice = advice_of(&body);
        assert_eq!(advice.advice_code.as_deref(), Some("do_not_try_again"));
        assert_eq!(advice.network_advice_code.as_deref(), Some("03"));
        let d = decline(
            "card_error",
            Some("card_declined"),
            Some("generic_decline"),
            advice,
        );
        assert_eq!(
            (d.code, d.class),
            (DeclineCode::GenericDecline, FailureClass::Hard)
        );
        let plain = card("card_declined", Some("generic_decline"));
        assert_eq!(plain.class, FailureClass::Soft);
        assert_eq!(
            card("card_declined", Some("do_not_try_again"))
                .advice
                .advice_code
                .as_deref(),
            Some("do_not_try_again")
        );
    }
}
