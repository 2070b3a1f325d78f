//! The canonical JSON behind request fingerprints: any JSON value has one canonical text,
//! which is valid JSON of the same value, and canonical again when read back.
#![no_main]

use libfuzzer_sys::fuzz_target;
use payorch::idempotency::fingerprint::{canonical_json, fingerprint};

fuzz_target!(|data: &[u8]| {
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(data) else {
        return;
    };
    let canonical = canonical_json(&value);
    let back: serde_json::Value =
        serde_json::from_str(&canonical).expect("canonical JSON is JSON");
    assert_eq!(back, value, "the same value");
    assert_eq!(canonical_json(&back), canonical, "canonical once and for all");
    assert_eq!(
        fingerprint("POST", "/v1/orders", Some(&value)),
        fingerprint("POST", "/v1/orders", Some(&back))
    );
});
