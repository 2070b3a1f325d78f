//! The payment method a payer chose, as the provider's token (`pm_card_visa`, `pm_…`).
//! payorch never holds card data: a token is all it passes on.

pub const MAX_LEN: usize = 255;

/// A provider payment method token: 1–255 visible ASCII characters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PaymentMethodToken(String);

impl PaymentMethodToken {
    pub fn parse(raw: &str) -> Result<Self, String> {
        if raw.is_empty() || raw.len() > MAX_LEN || !raw.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(format!(
                "must be a payment method token of 1 to {MAX_LEN} visible ASCII characters"
            ));
        }
        Ok(PaymentMethodToken(raw.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_visible_ascii_of_bounded_length() {
        assert!(PaymentMethodToken::parse("pm_card_visa").is_ok());
        assert!(PaymentMethodToken::parse(&"x".repeat(MAX_LEN)).is_ok());
        for bad in ["", "pm card", "pm_\u{e9}", "pm\n"] {
            assert!(PaymentMethodToken::parse(bad).is_err(), "{bad:?}");
        }
        assert!(PaymentMethodToken::parse(&"x".repeat(MAX_LEN + 1)).is_err());
    }
}
