//! Ids that carry their place in the store: `pi_` (or `re_`), eight letters that spell the
//! serial number (in base 52), then sixteen random alphanumerics — Stripe's 24 characters
//! after the prefix. From an id alone the store finds the intent or refund, and knows whether
//! it made it and forgot it since (docs/operations/running.md, "The sandbox's memory") or never made it.
//!
//! Letters only, so that a serial never joins a run of random digits (payorch's card-number
//! check looks at digit runs in request targets); 52⁸ is about 5·10¹³ serials.

use rand::distr::{Alphanumeric, SampleString};

const LETTERS: &[u8; 52] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
const SERIAL_LEN: usize = 8;
const RANDOM_LEN: usize = 16;

/// `prefix_` with `serial` and random characters.
pub(super) fn make(prefix: &str, serial: u64) -> String {
    let mut id = String::with_capacity(prefix.len() + 1 + SERIAL_LEN + RANDOM_LEN);
    id.push_str(prefix);
    id.push('_');
    let mut digits = [b'A'; SERIAL_LEN];
    let mut rest = serial;
    for digit in digits.iter_mut().rev() {
        *digit = LETTERS[(rest % 52) as usize];
        rest /= 52;
    }
    id.extend(digits.iter().map(|&b| char::from(b)));
    id.push_str(&Alphanumeric.sample_string(&mut rand::rng(), RANDOM_LEN));
    id
}

/// The serial an id of this shape spells; `None` for any other string.
pub(super) fn serial_of(prefix: &str, id: &str) -> Option<u64> {
    let rest = id.strip_prefix(prefix)?.strip_prefix('_')?;
    if rest.len() != SERIAL_LEN + RANDOM_LEN || !rest.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return None;
    }
    rest.bytes().take(SERIAL_LEN).try_fold(0u64, |serial, b| {
        let digit = LETTERS.iter().position(|&l| l == b)?;
        Some(serial * 52 + digit as u64)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_gives_back_its_serial_and_other_strings_none() {
        for serial in [0, 1, 51, 52, 123_456_789, 52u64.pow(8) - 1] {
            let id = make("pi", serial);
            assert_eq!(id.len(), 27, "{id}");
            assert_eq!(serial_of("pi", &id), Some(serial), "{id}");
            assert_eq!(serial_of("re", &id), None);
        }
        assert_eq!(serial_of("pi", "pi_doesnotexist"), None);
        // A digit among the serial's letters, or a character Stripe ids never hold.
        assert_eq!(serial_of("pi", "pi_AAAAAAA1abcdefghijklmnop"), None);
        assert_eq!(serial_of("pi", "pi_AAAAAAAAabcdefghijklmn-p"), None);
    }
}
