//! Free text a merchant gives payorch to keep: one form per text (NFC), and nothing that makes
//! two texts look alike while they differ or hides what a text says (docs/guides/api.md, "Text fields").

use unicode_normalization::{is_nfc_quick, IsNormalized, UnicodeNormalization};

/// `text` in Unicode's composed form (NFC); borrowed work only when it is not already.
pub fn nfc(text: &str) -> String {
    match is_nfc_quick(text.chars()) {
        IsNormalized::Yes => text.to_owned(),
        _ => text.nfc().collect(),
    }
}

/// Why `reference` cannot identify an order, if it cannot: only spaces, or characters that
/// change how it reads without showing (see [`unclear_text`]). Line breaks are not allowed
/// either: a reference is one line.
pub fn unclear_reference(reference: &str) -> Option<&'static str> {
    if reference.chars().all(char::is_whitespace) {
        return Some("must not be only spaces");
    }
    if reference
        .chars()
        .any(|c| c == '\n' || c == '\r' || c == '\t')
    {
        return Some("must be one line, without tabs");
    }
    unclear_text(reference)
}

/// Why `text` cannot be kept as it is, if it cannot: control characters (but for line breaks
/// and tabs), byte-order marks, or bidirectional overrides and isolates, which make a text
/// display otherwise than it reads.
pub fn unclear_text(text: &str) -> Option<&'static str> {
    for c in text.chars() {
        match c {
            '\n' | '\r' | '\t' => {}
            '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' => {
                return Some("must not contain bidirectional overrides or isolates (U+202A–U+202E, U+2066–U+2069)")
            }
            '\u{FEFF}' => return Some("must not contain a byte-order mark (U+FEFF)"),
            c if c.is_control() => return Some("must not contain control characters"),
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn composed_and_decomposed_forms_are_one_text() {
        assert_eq!(nfc("Cafe\u{0301}"), nfc("Caf\u{00E9}"));
        assert_eq!(nfc("plain"), "plain");
    }

    #[test]
    fn references_that_hide_what_they_say_are_refused() {
        for bad in [
            "   ",
            "\u{3000}",
            "ref\u{202E}fer",
            "\u{2066}ref\u{2069}",
            "\u{FEFF}ref",
            "ref\u{0007}",
            "two\nlines",
        ] {
            assert!(unclear_reference(bad).is_some(), "{bad:?}");
        }
        for good in ["ORDER-2026-0042", "commande n° 12", "注文 42", "a b"] {
            assert_eq!(unclear_reference(good), None, "{good:?}");
        }
        assert_eq!(unclear_text("a description\nwith two lines"), None);
    }
}
