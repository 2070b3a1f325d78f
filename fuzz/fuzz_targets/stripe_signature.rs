//! The `Stripe-Signature` parser and verifier take any header and body without panicking,
//! and a header made by our own signer always verifies.
#![no_main]

use chrono::{TimeZone, Utc};
use libfuzzer_sys::fuzz_target;
use payorch::providers::signature::{header_value, parse_header, verify};

const SECRET: &str = "whsec_fuzz";

fuzz_target!(|data: &[u8]| {
    // The first line is the header, the rest the body.
    let split = data.iter().position(|&b| b == b'\n').unwrap_or(data.len());
    let (head, body) = data.split_at(split);
    let Ok(header) = std::str::from_utf8(head) else {
        return;
    };
    let now = Utc.timestamp_opt(1_700_000_000, 0).unwrap();
    let tolerance = std::time::Duration::from_secs(300);
    if let Ok(parsed) = parse_header(header) {
        let _ = verify(body, header, &[SECRET.to_string()], now, tolerance);
        // What we sign for the same body and time verifies, whatever the body is.
        let ours = header_value(&[SECRET], parsed.timestamp, body);
        let at_signing = Utc.timestamp_opt(parsed.timestamp, 0).single();
        if let Some(at) = at_signing {
            assert!(verify(body, &ours, &[SECRET.to_string()], at, tolerance).is_ok());
        }
    } else {
        assert!(verify(body, header, &[SECRET.to_string()], now, tolerance).is_err());
    }
});
