//! payorch never holds card data: any value in a request that looks like a card number
//! (13–19 digits, optionally grouped by spaces or dashes, passing the Luhn check) refuses the
//! whole request before anything is stored or logged.

use serde_json::Value;

/// The JSON pointer of the first value that looks like a card number, if any.
pub fn find_card_number(value: &Value) -> Option<String> {
    find_in(value, String::new())
}

fn find_in(value: &Value, pointer: String) -> Option<String> {
    match value {
        Value::String(s) => contains_card_number(s).then_some(pointer),
        Value::Number(n) => contains_card_number(&n.to_string()).then_some(pointer),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .find_map(|(i, item)| find_in(item, format!("{pointer}/{i}"))),
        Value::Object(map) => map.iter().find_map(|(key, item)| {
            let here = format!("{pointer}/{}", key.replace('~', "~0").replace('/', "~1"));
            if contains_card_number(key) {
                return Some(here);
            }
            find_in(item, here)
        }),
        Value::Null | Value::Bool(_) => None,
    }
}

/// Whether `text` holds a run of 13–19 digits (single spaces or dashes allowed between them)
/// with a valid Luhn checksum. Longer runs are other identifiers: windows inside them would
/// pass Luhn one time in ten by chance.
pub fn contains_card_number(text: &str) -> bool {
    let mut digits: Vec<u8> = Vec::new();
    let mut last_was_separator = false;
    for c in text.chars() {
        match c {
            '0'..='9' => {
                digits.push(c as u8 - b'0');
                last_was_separator = false;
            }
            ' ' | '-' if !digits.is_empty() && !last_was_separator => last_was_separator = true,
            _ => {
                if run_has_card(&digits) {
                    return true;
                }
                digits.clear();
                last_was_separator = false;
            }
        }
    }
    run_has_card(&digits)
}

fn run_has_card(digits: &[u8]) -> bool {
    (13..=19).contains(&digits.len()) && luhn_valid(digits)
}

fn luhn_valid(digits: &[u8]) -> bool {
    let sum: u32 = digits
        .iter()
        .rev()
        .enumerate()
        .map(|(i, &d)| {
            let d = d as u32;
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
    }

    #[test]
    fn ordinary_numbers_pass() {
        assert!(!contains_card_number("4242424242424241")); // fails Luhn
        assert!(!contains_card_number("order 12345"));
        assert!(!contains_card_number("1000000000000"));
        assert!(!contains_card_number("2026-11-21"));
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
}
