//! Money as payorch accepts it: a positive integer amount in minor units, at most 10^12, and
//! a lowercase ISO 4217 code from a real currency table.

use std::collections::HashMap;
use std::sync::OnceLock;

use serde::Serialize;

pub const MAX_AMOUNT: i64 = 1_000_000_000_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Amount(i64);

impl Amount {
    pub fn parse(minor_units: i64) -> Result<Self, String> {
        if (1..=MAX_AMOUNT).contains(&minor_units) {
            Ok(Amount(minor_units))
        } else {
            Err(format!(
                "must be a whole number of minor units from 1 to {MAX_AMOUNT}"
            ))
        }
    }

    pub fn get(self) -> i64 {
        self.0
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Currency(String);

/// code → minor-unit exponent, from `fixtures/iso4217.tsv`.
fn table() -> &'static HashMap<&'static str, u8> {
    static TABLE: OnceLock<HashMap<&'static str, u8>> = OnceLock::new();
    TABLE.get_or_init(|| {
        include_str!("../../fixtures/iso4217.tsv")
            .lines()
            .filter(|line| !line.starts_with('#') && !line.trim().is_empty())
            .filter_map(|line| {
                let (code, exponent) = line.split_once('\t')?;
                Some((code.trim(), exponent.trim().parse().ok()?))
            })
            .collect()
    })
}

impl Currency {
    /// Every code payorch accepts (lowercase), sorted: for the API's documentation.
    pub fn all_codes() -> Vec<&'static str> {
        let mut codes: Vec<&'static str> = table().keys().copied().collect();
        codes.sort_unstable();
        codes
    }

    /// Accepts any case (`USD`, `usd`); stores lowercase, as Stripe does.
    pub fn parse(code: &str) -> Result<Self, String> {
        let lower = code.to_ascii_lowercase();
        if table().contains_key(lower.as_str()) {
            Ok(Currency(lower))
        } else {
            Err(format!("`{code}` is not an ISO 4217 currency code"))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Digits after the decimal point (2 for eur, 0 for jpy, 3 for kwd).
    pub fn exponent(&self) -> u8 {
        table().get(self.0.as_str()).copied().unwrap_or(2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amounts_are_positive_and_bounded() {
        assert!(Amount::parse(0).is_err());
        assert!(Amount::parse(-5).is_err());
        assert!(Amount::parse(MAX_AMOUNT + 1).is_err());
        assert_eq!(Amount::parse(MAX_AMOUNT).unwrap().get(), MAX_AMOUNT);
    }

    #[test]
    fn currencies_come_from_the_table() {
        assert_eq!(Currency::parse("EUR").unwrap().as_str(), "eur");
        assert_eq!(Currency::parse("jpy").unwrap().exponent(), 0);
        assert_eq!(Currency::parse("kwd").unwrap().exponent(), 3);
        assert!(Currency::parse("xyz").is_err());
        assert!(Currency::parse("eu").is_err());
        assert!(table().len() > 150);
    }
}
