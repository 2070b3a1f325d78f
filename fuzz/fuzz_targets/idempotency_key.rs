//! The `Idempotency-Key` parser takes any header bytes without panicking, and what it accepts
//! is 1–255 visible ASCII characters that parse back to themselves.
#![no_main]

use libfuzzer_sys::fuzz_target;
use payorch::idempotency::IdempotencyKey;

fuzz_target!(|data: &[u8]| {
    if let Ok(key) = IdempotencyKey::parse(Some(data)) {
        let text = key.as_str();
        assert!((1..=255).contains(&text.len()));
        assert!(text.chars().all(|c| c.is_ascii_graphic()));
        if !text.starts_with('"') {
            let again = IdempotencyKey::parse(Some(text.as_bytes())).expect("a key parses again");
            assert_eq!(again.as_str(), text);
        }
    }
});
