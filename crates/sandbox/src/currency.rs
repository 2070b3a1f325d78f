//! ISO 4217: the currencies both providers take. Adyen wants "the three-character ISO
//! currency code" of an amount and refuses any other with error `138`, "Unsupported currency
//! specified"; Stripe's currency is "three-letter ISO currency code, in lowercase" and an
//! unknown one is refused. The codes are the repository's list, `fixtures/iso4217.tsv`, the
//! one payorch itself takes currencies from, embedded when the sandbox is built.

use std::collections::HashSet;
use std::sync::LazyLock;

/// Every code, lowercase.
static CODES: LazyLock<HashSet<&'static str>> = LazyLock::new(|| {
    include_str!("../../../fixtures/iso4217.tsv")
        .lines()
        .filter(|line| !line.starts_with('#') && !line.trim().is_empty())
        .filter_map(|line| line.split('\t').next())
        .map(str::trim)
        .collect()
});

/// Whether `code`, in any case, is an ISO 4217 currency code.
pub(super) fn is_iso4217(code: &str) -> bool {
    code.len() == 3 && CODES.contains(code.to_ascii_lowercase().as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn real_codes_pass_in_any_case_and_nothing_else_does() {
        for code in ["eur", "EUR", "usd", "JPY", "chf", "clf"] {
            assert!(is_iso4217(code), "{code}");
        }
        for code in ["EURO", "xyz", "EU", "", "€", "e u"] {
            assert!(!is_iso4217(code), "{code}");
        }
        assert!(CODES.len() > 150, "{}", CODES.len());
    }
}
