//! Adyen's refusal reasons in words. A refused payment carries `refusalReasonCode`, a number
//! ("2"), and `refusalReason`; the code alone, which payorch keeps as the failure's code, told
//! support nothing ("failed 2"). Each code is named here as Adyen's published list of refusal
//! reasons names it, and a refusal's message starts with that name, so it reads the same
//! whatever text the answer's `refusalReason` holds.

/// Adyen's name for refusal reason `code`, for the codes an online card payment can be
/// refused with. The point-of-sale ones (a PIN, a chip, a contactless fallback) cannot reach
/// payorch, which takes no card present; a code not listed keeps Adyen's own text.
pub(super) fn words(code: &str) -> Option<&'static str> {
    Some(match code {
        "2" => "Refused",
        "3" => "Referral",
        "4" => "Acquirer Error",
        "5" => "Blocked Card",
        "6" => "Expired Card",
        "7" => "Invalid Amount",
        "8" => "Invalid Card Number",
        "9" => "Issuer Unavailable",
        "10" => "Not supported",
        "11" => "3D Not Authenticated",
        "12" => "Not enough balance",
        "14" => "Acquirer Fraud",
        "15" => "Cancelled",
        "16" => "Shopper Cancelled",
        "20" => "FRAUD",
        "21" => "Not Submitted",
        "22" => "FRAUD-CANCELLED",
        "23" => "Transaction Not Permitted",
        "24" => "CVC Declined",
        "25" => "Restricted Card",
        "26" => "Revocation Of Auth",
        "27" => "Declined Non Generic",
        "28" => "Withdrawal amount exceeded",
        "29" => "Withdrawal count exceeded",
        "31" => "Issuer Suspected Fraud",
        "32" => "AVS Declined",
        "38" => "Authentication required",
        "39" => "RReq not received from DS",
        "42" => "3DS Authentication Error",
        "46" => "Transaction blocked by Adyen to prevent excessive retry fees",
        _ => return None,
    })
}

/// A refused payment's failure message: the code's name, then the answer's `refusalReason`
/// when it says something else; either alone when the other is missing.
pub(super) fn message(code: Option<&str>, reason: Option<&str>) -> String {
    let named = code.and_then(words);
    let reason = reason.map(str::trim).filter(|r| !r.is_empty());
    match (named, reason) {
        (Some(named), Some(reason)) if reason.eq_ignore_ascii_case(named) => named.to_owned(),
        (Some(named), Some(reason)) => format!("{named}: {reason}"),
        (Some(named), None) => named.to_owned(),
        (None, Some(reason)) => reason.to_owned(),
        (None, None) => "the payment was refused".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_code_reads_as_adyen_names_it() {
        assert_eq!(words("2"), Some("Refused"));
        assert_eq!(words("24"), Some("CVC Declined"));
        assert_eq!(words("17"), None, "a PIN is never asked online");
        assert_eq!(words("refused"), None);
    }

    #[test]
    fn the_message_names_the_code_and_keeps_what_else_adyen_said() {
        assert_eq!(message(Some("2"), Some("Refused")), "Refused");
        assert_eq!(
            message(Some("12"), Some("not enough balance")),
            "Not enough balance"
        );
        assert_eq!(
            message(Some("2"), Some("Your card was declined.")),
            "Refused: Your card was declined."
        );
        assert_eq!(message(Some("6"), Some(" ")), "Expired Card");
        assert_eq!(message(Some("99"), Some("Something new")), "Something new");
        assert_eq!(message(None, None), "the payment was refused");
    }
}
