//! Money as payorch accepts it: a positive integer amount in minor units, at most 10^12, and
//! a lowercase ISO 4217 code from a real currency table.

use std::collections::HashMap;
use std::fmt;
use std::sync::OnceLock;

use serde::de::{Deserializer, Visitor};
use serde::{Deserialize, Serialize};

pub const MAX_AMOUNT: i64 = 1_000_000_000_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Amount(i64);

impl Amount {
    /// An amount from an `i64`, or from a JSON number as a body gave it ([`MinorUnits`]).
    pub fn parse(minor_units: impl Into<MinorUnits>) -> Result<Self, String> {
        match minor_units.into().0 {
            Some(units) if (1..=MAX_AMOUNT).contains(&units) => Ok(Amount(units)),
            _ => Err(format!(
                "must be a whole number of minor units from 1 to {MAX_AMOUNT}"
            )),
        }
    }

    pub fn get(self) -> i64 {
        self.0
    }
}

/// An amount as a JSON body gives it: any JSON number, for [`Amount::parse`] to judge.
///
/// A number with no fraction is that whole number however it is written (`23295`, `23295.0`,
/// `2.3295e4`), as JSON Schema's `integer`, which the API's document gives every amount,
/// admits them all. A number with a fraction, or past what an `i64` holds, is kept as no whole
/// number, so that it is refused naming its field (`422 validation_failed`) instead of failing
/// the whole body (`400`). Numbers are read as doubles, as most JSON readers do, so a fraction
/// below a double's precision is gone before this sees it; every amount payorch takes (at most
/// 10^12) is exact in a double.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MinorUnits(Option<i64>);

impl From<i64> for MinorUnits {
    fn from(units: i64) -> Self {
        MinorUnits(Some(units))
    }
}

impl MinorUnits {
    fn from_f64(value: f64) -> Self {
        // -2^63 and 2^63 are exact doubles: every whole double in between fits an i64.
        const END: f64 = 9_223_372_036_854_775_808.0;
        let whole = value.fract() == 0.0 && (-END..END).contains(&value);
        MinorUnits(whole.then_some(value as i64))
    }
}

impl<'de> Deserialize<'de> for MinorUnits {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Number;

        impl Visitor<'_> for Number {
            type Value = MinorUnits;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a number of minor units")
            }

            fn visit_i64<E>(self, v: i64) -> Result<MinorUnits, E> {
                Ok(MinorUnits(Some(v)))
            }

            fn visit_u64<E>(self, v: u64) -> Result<MinorUnits, E> {
                Ok(MinorUnits(i64::try_from(v).ok()))
            }

            fn visit_f64<E>(self, v: f64) -> Result<MinorUnits, E> {
                Ok(MinorUnits::from_f64(v))
            }
        }

        deserializer.deserialize_any(Number)
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

    fn units(json: &str) -> MinorUnits {
        serde_json::from_str(json).expect("a JSON number")
    }

    #[test]
    fn a_json_number_without_a_fraction_is_a_whole_amount_however_written() {
        for written in ["23295", "23295.0", "2.3295e4", "232950e-1"] {
            assert_eq!(
                Amount::parse(units(written)),
                Ok(Amount(23295)),
                "{written}"
            );
        }
        assert_eq!(units("1e12"), MinorUnits::from(MAX_AMOUNT));
        for refused in [
            "23295.5",
            "0.5",
            "1e-3",
            "1e13",
            "1e300",
            "-0.0",
            "18446744073709551615",
        ] {
            assert!(Amount::parse(units(refused)).is_err(), "{refused}");
        }
        // Past an i64: no whole number, not a wrapped or saturated one.
        assert_eq!(units("9223372036854775808"), MinorUnits(None));
        assert_eq!(units("9.3e18"), MinorUnits(None));
        assert_eq!(units("-9223372036854775808"), MinorUnits::from(i64::MIN));
        assert!(serde_json::from_str::<MinorUnits>(r#""5""#).is_err());
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
