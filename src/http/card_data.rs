//! payorch never holds card data: any value in a request that looks like a card number
//! refuses the whole request before anything is stored or logged (docs/guides/api.md, "Card data").
//!
//! What looks like a card number: 13–19 digits in a known card brand's number range and
//! length, passing the Luhn check, written with any Unicode decimal digits (full-width,
//! Arabic-Indic, …) and any separators between digit groups (spaces of any kind and count,
//! zero-width characters, dashes, dots, slashes, underscores, line breaks). Letters and other
//! characters end a number. A group of digits is never split: inside a longer run of digits a
//! card-sized window would pass Luhn one time in ten by chance (order numbers, timestamps).
//! Several groups make a card number when none is longer than six digits, as cards are written
//! (4-4-4-4, 4-6-5), or when they are the whole run and no letter touches it: a part of
//! `1-384729104827-1234` that joins the long group to another is an identifier, not a card,
//! and so is `65381607173-13` in the key `1-b65381607173-13`. Invisible characters (zero-width
//! spaces, soft hyphens, …) are read as if they were not there.

use serde_json::Value;
use std::borrow::Cow;

/// What a body walk found that refuses the request; its pointer never holds card data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finding {
    /// A value or a member name that looks like a card number.
    CardNumber { pointer: String },
    /// A NUL character, which no text column can hold.
    Nul { pointer: String },
}

/// How a member name that is itself card data appears in a pointer.
pub const REDACTED: &str = "[redacted]";

/// The first thing in `value` that refuses it: card data or a NUL character, at its JSON
/// pointer (member names that look like card numbers redacted).
pub fn inspect(value: &Value) -> Option<Finding> {
    walk(value, &mut String::new(), true)
}

/// The JSON pointer of the first value that looks like a card number, if any.
pub fn find_card_number(value: &Value) -> Option<String> {
    match walk(value, &mut String::new(), false)? {
        Finding::CardNumber { pointer } | Finding::Nul { pointer } => Some(pointer),
    }
}

/// Depth first, in document order; NUL characters are looked for when `nul` is set.
fn walk(value: &Value, pointer: &mut String, nul: bool) -> Option<Finding> {
    match value {
        Value::String(s) => check_text(s, pointer, nul),
        Value::Number(n) => contains_card_number(&n.to_string()).then(|| Finding::CardNumber {
            pointer: pointer.clone(),
        }),
        Value::Array(items) => items.iter().enumerate().find_map(|(i, item)| {
            let len = pointer.len();
            pointer.push('/');
            pointer.push_str(&i.to_string());
            let found = walk(item, pointer, nul);
            pointer.truncate(len);
            found
        }),
        Value::Object(map) => map.iter().find_map(|(key, item)| {
            let len = pointer.len();
            push_segment(pointer, key);
            let found = check_text(key, pointer, nul).or_else(|| walk(item, pointer, nul));
            pointer.truncate(len);
            found
        }),
        Value::Null | Value::Bool(_) => None,
    }
}

fn check_text(text: &str, pointer: &str, nul: bool) -> Option<Finding> {
    if nul && text.contains('\0') {
        return Some(Finding::Nul {
            pointer: pointer.to_string(),
        });
    }
    contains_card_number(text).then(|| Finding::CardNumber {
        pointer: pointer.to_string(),
    })
}

/// Appends `/key` (escaped as RFC 6901 says), or `/[redacted]` when the name is card data.
fn push_segment(pointer: &mut String, key: &str) {
    pointer.push('/');
    if contains_card_number(key) {
        pointer.push_str(REDACTED);
    } else {
        // A NUL is shown escaped, so the pointer itself can be logged and stored.
        let escaped = key
            .replace('~', "~0")
            .replace('/', "~1")
            .replace('\0', "\\u0000");
        pointer.push_str(&escaped);
    }
}

/// Whether `text` holds something that looks like a card number (see the module's doc).
pub fn contains_card_number(text: &str) -> bool {
    // Fast path: fewer than 13 digits of any kind cannot hold one.
    let bytes = text.as_bytes();
    if bytes.is_ascii() && bytes.iter().filter(|b| b.is_ascii_digit()).count() < 13 {
        return false;
    }
    let text = without_hex_words(text);
    let mut number = Number::default();
    // Whether the last character that was not invisible is a letter or the like (`Other`):
    // digits that follow at once are glued to a word.
    let mut after_word = false;
    for c in text.chars() {
        match classify(c) {
            Class::Digit(d) => {
                number.push_digit(d, after_word);
                after_word = false;
            }
            Class::Invisible => {}
            Class::Separator => {
                number.separate();
                after_word = false;
            }
            Class::Other => {
                if number.holds_card(number.in_group) {
                    return true;
                }
                number.clear();
                after_word = true;
            }
        }
    }
    number.holds_card(false)
}

/// `text` with each hex identifier read as one word: a UUID (`8-4-4-4-12`), or a run of 32
/// or more hex characters (a UUID without its dashes, a hash, a random token), each not part
/// of a longer hex run. Their digit groups are hex, never a card number, yet random ones hold
/// runs that pass the card checks between letters surprisingly often: of random
/// `Idempotency-Key`s, about one UUID in 1,500 (`656202-2791-4080-9` in
/// `bf656202-2791-4080-9a6b-…`) and one 32-hex key in 2,000 were refused (simulations of
/// 2,000,000 and 500,000 keys). A card number glued to hex letters into such a run is the price.
fn without_hex_words(text: &str) -> Cow<'_, str> {
    const UUID_LEN: usize = 36;
    const HEX_WORD: usize = 32;
    let bytes = text.as_bytes();
    let hex_at = |i: usize| bytes.get(i).is_some_and(u8::is_ascii_hexdigit);
    let mut masked: Option<String> = None;
    let (mut copied, mut at) = (0, 0);
    while at < bytes.len() {
        if !hex_at(at) || (at > 0 && hex_at(at - 1)) {
            at += 1;
            continue;
        }
        // `at` starts a run of hex characters.
        let run = bytes[at..]
            .iter()
            .take_while(|b| b.is_ascii_hexdigit())
            .count();
        let uuid = bytes
            .get(at..at + UUID_LEN)
            .is_some_and(|span| is_uuid(span) && !hex_at(at + UUID_LEN));
        let word = if uuid {
            UUID_LEN
        } else if run >= HEX_WORD {
            run
        } else {
            at += run;
            continue;
        };
        // `at` and `at + word` are on char boundaries: the word is ASCII.
        let out = masked.get_or_insert_with(|| String::with_capacity(text.len()));
        out.push_str(&text[copied..at]);
        out.push_str("id");
        at += word;
        copied = at;
    }
    match masked {
        None => Cow::Borrowed(text),
        Some(mut out) => {
            out.push_str(&text[copied..]);
            Cow::Owned(out)
        }
    }
}

fn is_uuid(bytes: &[u8]) -> bool {
    bytes.iter().enumerate().all(|(i, b)| match i {
        8 | 13 | 18 | 23 => *b == b'-',
        _ => b.is_ascii_hexdigit(),
    })
}

/// The longest group of digits in a card number written in groups.
const MAX_GROUP: usize = 6;

/// Digit groups joined by separators, as they are read.
#[derive(Default)]
struct Number {
    digits: Vec<u8>,
    /// Where each group starts in `digits`.
    group_starts: Vec<usize>,
    in_group: bool,
    /// The first digit follows a letter (or the like) at once: `b12345678-12345`.
    glued_start: bool,
}

impl Number {
    /// `after_word`: the character before `d` is a letter or the like.
    fn push_digit(&mut self, d: u8, after_word: bool) {
        if self.digits.is_empty() {
            self.glued_start = after_word;
        }
        if !self.in_group {
            self.group_starts.push(self.digits.len());
            self.in_group = true;
        }
        self.digits.push(d);
    }

    fn separate(&mut self) {
        self.in_group = false;
    }

    fn clear(&mut self) {
        self.digits.clear();
        self.group_starts.clear();
        self.in_group = false;
        self.glued_start = false;
    }

    /// Whether some whole groups in a row make a card number; `glued_end`: a letter (or the
    /// like) follows the last digit at once.
    fn holds_card(&self, glued_end: bool) -> bool {
        if self.digits.len() < 13 {
            return false;
        }
        let ends = self.group_starts[1..]
            .iter()
            .copied()
            .chain(std::iter::once(self.digits.len()));
        let ends: Vec<usize> = ends.collect();
        let groups = ends.len();
        for (first, &start) in self.group_starts.iter().enumerate() {
            let mut longest_group = 0;
            for (last, &end) in ends.iter().enumerate().skip(first) {
                let len = end - start;
                if len > 19 {
                    break;
                }
                longest_group = longest_group.max(end - self.group_starts[last]);
                // Several groups make a card as cards are written (no group over six
                // digits), or when they are the whole run of digits and it stands alone; a
                // part of a run that joins a long group to others is an identifier
                // (`1-384729104827-1234`), and so is a run glued to a word
                // (`1-b65381607173-13`, an Idempotency-Key).
                let alone = !self.glued_start && !glued_end;
                let whole_run = first == 0 && last == groups - 1 && alone;
                let card_shaped = last == first || longest_group <= MAX_GROUP || whole_run;
                if card_shaped && len >= 13 && is_card_number(&self.digits[start..end]) {
                    return true;
                }
            }
        }
        false
    }
}

enum Class {
    Digit(u8),
    /// Shows as nothing: read as if it were not there.
    Invisible,
    Separator,
    Other,
}

/// Soft hyphen, zero-width space and joiners, direction marks, word joiner, invisible
/// operators, BOM, Mongolian vowel separator.
fn is_invisible(c: char) -> bool {
    matches!(
        c,
        '\u{00AD}' | '\u{200B}'..='\u{200F}' | '\u{2060}'..='\u{2064}' | '\u{FEFF}' | '\u{180E}'
    )
}

fn classify(c: char) -> Class {
    if let Some(d) = decimal_digit(c) {
        return Class::Digit(d);
    }
    if is_invisible(c) {
        return Class::Invisible;
    }
    let separator = c.is_whitespace()
        || matches!(
            c,
            '-' | '.' | '/' | '_' | ',' | ':' | ';' | '+' | '*' | '#' | '~' | '|' | '\\' | '\''
                | '(' | ')'
                // dashes, bullets and middle dots
                | '\u{2010}'..='\u{2015}'
                | '\u{2022}'
                | '\u{2027}'
                | '\u{2212}'
                | '\u{2219}'
                | '\u{00B7}'
                | '\u{30FB}'
                | '\u{FE58}'
                | '\u{FE63}'
                // full-width punctuation
                | '\u{FF0C}'..='\u{FF0F}'
                | '\u{FF1A}'
                | '\u{FF1B}'
                | '\u{FF3F}'
        );
    if separator {
        Class::Separator
    } else {
        Class::Other
    }
}

/// The first code point (digit zero) of each run of ten decimal digits in Unicode's Nd
/// category that a person could type or paste: every script's digits and the full-width and
/// mathematical ones.
const DIGIT_ZEROS: [u32; 64] = [
    0x0030, 0x0660, 0x06F0, 0x07C0, 0x0966, 0x09E6, 0x0A66, 0x0AE6, 0x0B66, 0x0BE6, 0x0C66, 0x0CE6,
    0x0D66, 0x0DE6, 0x0E50, 0x0ED0, 0x0F20, 0x1040, 0x1090, 0x17E0, 0x1810, 0x1946, 0x19D0, 0x1A80,
    0x1A90, 0x1B50, 0x1BB0, 0x1C40, 0x1C50, 0xA620, 0xA8D0, 0xA900, 0xA9D0, 0xA9F0, 0xAA50, 0xABF0,
    0xFF10, 0x104A0, 0x10D30, 0x11066, 0x110F0, 0x11136, 0x111D0, 0x112F0, 0x11450, 0x114D0,
    0x11650, 0x116C0, 0x11730, 0x118E0, 0x11950, 0x11C50, 0x11D50, 0x11DA0, 0x16A60, 0x16B50,
    0x1D7CE, 0x1D7D8, 0x1D7E2, 0x1D7EC, 0x1D7F6, 0x1E140, 0x1E2F0, 0x1E950,
];

fn decimal_digit(c: char) -> Option<u8> {
    if c.is_ascii_digit() {
        return Some(c as u8 - b'0');
    }
    if c.is_ascii() {
        return None;
    }
    let code = c as u32;
    DIGIT_ZEROS
        .iter()
        .find(|&&zero| (zero..zero + 10).contains(&code))
        .map(|&zero| (code - zero) as u8)
}

/// A number in a card brand's range and length that passes Luhn.
fn is_card_number(digits: &[u8]) -> bool {
    brand_allows(digits) && luhn_valid(digits)
}

/// The issuer ranges and lengths of the card brands in use (Visa, Mastercard, American
/// Express, Discover, JCB, Diners Club, UnionPay, Maestro, Mir): a run of digits outside them
/// is an order number or a timestamp, not a card.
fn brand_allows(digits: &[u8]) -> bool {
    let prefix = |n: usize| {
        digits[..n.min(digits.len())]
            .iter()
            .fold(0u32, |acc, &d| acc * 10 + u32::from(d))
    };
    let len = digits.len();
    let (p1, p2, p3, p4) = (prefix(1), prefix(2), prefix(3), prefix(4));
    match p1 {
        4 => matches!(len, 13 | 16 | 19),
        2 => (2221..=2720).contains(&p4) && len == 16 || (2200..=2204).contains(&p4) && len >= 16,
        3 => {
            matches!(p2, 34 | 37) && len == 15
                || (3528..=3589).contains(&p4) && len >= 16
                || (matches!(p2, 36 | 38 | 39) || (300..=305).contains(&p3)) && len >= 14
        }
        5 => (51..=55).contains(&p2) && len == 16 || matches!(p2, 50 | 56..=58),
        6 => true,
        _ => false,
    }
}

fn luhn_valid(digits: &[u8]) -> bool {
    let sum: u32 = digits
        .iter()
        .rev()
        .enumerate()
        .map(|(i, &d)| {
            let d = u32::from(d);
            if i % 2 == 1 {
                let doubled = d * 2;
                if doubled > 9 {
                    doubled - 9
                } else {
                    doubled
                }
            } else {
                d
            }
        })
        .sum();
    sum.is_multiple_of(10)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn test_card_numbers_are_found_in_any_grouping() {
        assert!(contains_card_number("4242424242424242"));
        assert!(contains_card_number("4242 4242 4242 4242"));
        assert!(contains_card_number("card: 4242-4242-4242-4242 exp 12/30"));
        assert!(contains_card_number("378282246310005")); // amex, 15 digits
        assert!(contains_card_number("5555555555554444")); // mastercard
        assert!(contains_card_number("6011111111111117")); // discover
        assert!(contains_card_number("3530111333300000")); // jcb
        assert!(contains_card_number("30569309025904")); // diners, 14 digits
    }

    #[test]
    fn separators_and_other_digits_do_not_hide_a_card_number() {
        for disguised in [
            "4242.4242.4242.4242",
            "4242/4242/4242/4242",
            "4242_4242_4242_4242",
            "4242\n4242\n4242\n4242",
            "4242  4242  4242  4242",
            "4242\u{00A0}4242\u{00A0}4242\u{00A0}4242",
            "4242\u{200B}4242\u{200B}4242\u{200B}4242",
            "4\u{200B}2\u{200B}4\u{200B}2424242424242",
            "4-242424242424242",
            "4\u{00AD}242\u{00AD}4242 4242 4242",
            "4242 - 4242 - 4242 - 4242",
            "４２４２４２４２４２４２４２４２",
            "٤٢٤٢٤٢٤٢٤٢٤٢٤٢٤٢",
            "४२४२४२४२४२४२४२४२",
            "𝟒𝟐𝟒𝟐𝟒𝟐𝟒𝟐𝟒𝟐𝟒𝟐𝟒𝟐𝟒𝟐",
            "order 12 card 4242 4242 4242 4242",
            "12 4242424242424242",
            "x4242424242424242x",
        ] {
            assert!(contains_card_number(disguised), "{disguised:?}");
        }
    }

    #[test]
    fn a_uuid_is_never_taken_for_a_card_number_but_does_not_hide_one() {
        // Its first three groups are a Luhn-valid Visa number, ended by a letter.
        let unlucky = "41111111-1111-4115-abcd-0123456789ab";
        assert!(contains_card_number("41111111-1111-4115"));
        assert!(!contains_card_number(unlucky));
        // Random UUIDs once refused: after the `f`, 656202-2791-4080-9 passes the checks.
        for random in [
            "bf656202-2791-4080-9a6b-4d6127fa12d8",
            "3675e503-8471-4981-8124-5c7e1eb332cd",
            "4ef521d4-8623-4405-9794-c353a5bd4ebb",
        ] {
            assert!(!contains_card_number(random), "{random}");
        }
        assert!(!contains_card_number(&unlucky.to_uppercase()));
        assert!(!contains_card_number(&format!("checkout-{unlucky}")));
        assert!(contains_card_number(&format!(
            "{unlucky} 4242 4242 4242 4242"
        )));
        // Not a UUID: one hex digit more, or one group short.
        assert!(contains_card_number(&format!("{unlucky}0")));
        assert!(contains_card_number("41111111-1111-4115-abcd"));
    }

    #[test]
    fn a_long_hex_token_is_never_taken_for_a_card_number_but_does_not_hide_one() {
        // Random keys once refused (`uuid4().hex`, `token_hex(20)`).
        for random in [
            "4895950225784242838dc544c1058e1e",
            "7928dc2ae4434338828673a436036363",
            "BAD3A8B73F30478413362965C9AA023DB72A4C1F",
            "key_bad3a8b73f30478413362965c9aa023db72a4c1f",
        ] {
            assert!(!contains_card_number(random), "{random}");
        }
        assert!(contains_card_number(
            "4895950225784242838dc544c1058e1e 4242-4242-4242-4242"
        ));
        // Shorter than an identifier: a card number between hex letters is still found.
        assert!(contains_card_number("4242424242424242abcdef012345678"));
        assert!(contains_card_number("ab4242424242424242cd"));
    }

    #[test]
    fn ordinary_numbers_pass() {
        for ordinary in [
            "4242424242424241", // fails Luhn
            "order 12345",
            "1000000000000",
            "2026-11-21",
            "2026-11-22T10:11:12Z",
            "20261122101112",
            "1700000000",
            "1700000000123",
            "018f3c2e-7b1a-7c3d-9e4f-0a1b2c3d4e5f",
            "+44 20 7946 0958",
            "(555) 010-4477 ext. 12",
            "order 100000000000017",
            "invoice 2026-000123-0042",
            "42424242424242424242", // 20 digits: another identifier
            "1-384729104827-1234",  // a long group joined to others: an identifier
            "3847291048271-234",
            "ref 1-384729104827-1234-5",
            "ref 77777777777777777",
        ] {
            assert!(!contains_card_number(ordinary), "{ordinary:?}");
        }
    }

    #[test]
    fn a_key_whose_digits_are_glued_to_a_word_is_not_a_card_number() {
        // `<thread>-<12 hex>-<counter>` keys of a load generator: after the `b`,
        // 65381607173-13 passed the card checks as a whole run of digits (in a simulation, 2
        // of 2,000 random prefixes had keys refused, 1,189 of their 12,000,000 keys).
        for key in [
            "1-b65381607173-13",
            "1-b65381607173-21",
            "1-b65381607173-39",
        ] {
            assert!(!contains_card_number(key), "{key}");
        }
        // Standing alone, the same digits are still a card number split in two groups; so
        // are groups of up to six digits, and a single group, glued to a word.
        assert!(contains_card_number("65381607173-13"));
        assert!(contains_card_number("1-b 65381607173-13"));
        assert!(contains_card_number("b4242-4242-4242-4242x"));
        assert!(contains_card_number("b4242424242424242x"));
        // The price: a card number split around a group of seven or more digits and glued
        // to a word is not found.
        assert!(contains_card_number("41111111-1111-4115 x"));
        assert!(!contains_card_number("41111111-1111-4115x"));
    }

    #[test]
    fn pointer_names_the_offending_field() {
        let body = json!({"amount": 100, "metadata": {"note": "pay with 4242424242424242"}});
        assert_eq!(find_card_number(&body).as_deref(), Some("/metadata/note"));
        assert_eq!(
            find_card_number(&json!({"x": [1, 4242424242424242_u64]})).as_deref(),
            Some("/x/1")
        );
        assert_eq!(
            find_card_number(&json!({"amount": 100, "currency": "eur"})),
            None
        );
    }

    #[test]
    fn a_card_number_as_a_member_name_is_never_repeated() {
        let body = json!({"metadata": {"4242424242424242": "x"}});
        assert_eq!(
            inspect(&body),
            Some(Finding::CardNumber {
                pointer: "/metadata/[redacted]".into()
            })
        );
        let nested = json!({"metadata": {"4242 4242 4242 4242": {"k": "a\u{0}b"}}});
        assert_eq!(
            inspect(&nested),
            Some(Finding::CardNumber {
                pointer: "/metadata/[redacted]".into()
            })
        );
    }

    #[test]
    fn a_nul_is_found_in_values_and_names() {
        assert_eq!(
            inspect(&json!({"metadata": {"k": "a\u{0}b"}})),
            Some(Finding::Nul {
                pointer: "/metadata/k".into()
            })
        );
        assert_eq!(
            inspect(&json!({"metadata": {"a\u{0}": "b"}})),
            Some(Finding::Nul {
                pointer: "/metadata/a\\u0000".into()
            })
        );
        assert_eq!(inspect(&json!({"description": "tea"})), None);
    }
}
