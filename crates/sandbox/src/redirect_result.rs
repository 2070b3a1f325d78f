//! The Adyen face's `redirectResult`: what the challenge page adds to the shopper's
//! `returnUrl`, and what `POST /v71/payments/details` is given back. Opaque to the merchant,
//! as Adyen's is: the intent's client secret (which the Adyen face never shows), base64url,
//! so only the page that was shown to the shopper could have made it.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;

/// The `redirectResult` of the intent whose client secret is `client_secret`.
pub(super) fn encode(client_secret: &str) -> String {
    URL_SAFE_NO_PAD.encode(client_secret)
}

/// The intent id and client secret a `redirectResult` names; `None` for anything the
/// sandbox did not make.
pub(super) fn decode(redirect_result: &str) -> Option<(String, String)> {
    let bytes = URL_SAFE_NO_PAD.decode(redirect_result).ok()?;
    let client_secret = String::from_utf8(bytes).ok()?;
    let (id, _) = client_secret.split_once("_secret_")?;
    Some((id.to_owned(), client_secret))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_redirect_result_names_its_intent_and_nothing_else_decodes() {
        let secret = "pi_AAAAAAAB0123456789abcdef_secret_xyz";
        let token = encode(secret);
        assert!(!token.contains("pi_"), "opaque: {token}");
        assert_eq!(
            decode(&token),
            Some(("pi_AAAAAAAB0123456789abcdef".into(), secret.into()))
        );
        assert_eq!(decode("not base64!"), None);
        assert_eq!(decode(&encode("pi_without_a_secret")), None);
    }
}
