//! Stripe-Signature webhook signing and verification (docs/DESIGN.md, "Webhooks").
//!
//! `Stripe-Signature: t=<unix>,v1=<hex>[,v1=<hex>…]` where each `v1` is
//! HMAC-SHA256 of `"{t}.{raw body}"` under a webhook secret. Any one matching `v1`
//! under any configured secret suffices, so secrets can be rotated without downtime.

use std::time::Duration;

use chrono::{DateTime, Utc};
use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::webhook_error::WebhookError;

type HmacSha256 = Hmac<Sha256>;

/// The name of the header Stripe signs webhooks with.
pub const HEADER: &str = "Stripe-Signature";

/// Stripe's default tolerance between the signed timestamp and now.
pub const DEFAULT_TOLERANCE: Duration = Duration::from_secs(300);

/// The longest header taken. Stripe sends a timestamp and one `v1` per live secret (two while
/// one is rolled, with perhaps a `v0`): a few hundred bytes. Anything longer is refused before
/// any MAC is computed, so an unauthenticated request cannot buy CPU by the kilobyte.
pub const MAX_HEADER_BYTES: usize = 1024;

/// The most `v1` candidates taken from one header.
pub const MAX_CANDIDATES: usize = 8;

fn mac_for(secret: &str, timestamp: i64, payload: &[u8]) -> HmacSha256 {
    // HMAC accepts keys of any length, so this cannot fail.
    let mut mac = HmacSha256::new_from_slice(secret.as_bytes())
        .unwrap_or_else(|_| unreachable!("HMAC takes keys of any length"));
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(payload);
    mac
}

/// The hex `v1` signature of `payload` at `timestamp` under `secret`.
pub fn sign(secret: &str, timestamp: i64, payload: &[u8]) -> String {
    hex::encode(mac_for(secret, timestamp, payload).finalize().into_bytes())
}

/// A complete `Stripe-Signature` header value, one `v1` per secret (Stripe sends
/// several while a secret is being rolled).
pub fn header_value(secrets: &[&str], timestamp: i64, payload: &[u8]) -> String {
    let mut value = format!("t={timestamp}");
    for secret in secrets {
        value.push_str(",v1=");
        value.push_str(&sign(secret, timestamp, payload));
    }
    value
}

/// The parts of a `Stripe-Signature` header that matter: one timestamp and every `v1`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedHeader {
    pub timestamp: i64,
    pub v1: Vec<String>,
}

/// Parse a header; unknown schemes (`v0`, future ones) are ignored as Stripe's libraries do.
/// A header longer than [`MAX_HEADER_BYTES`] or with more than [`MAX_CANDIDATES`] `v1`s is
/// refused.
pub fn parse_header(header: &str) -> Result<ParsedHeader, WebhookError> {
    if header.len() > MAX_HEADER_BYTES {
        return Err(WebhookError::MalformedHeader(format!(
            "{} bytes, more than the {MAX_HEADER_BYTES} a Stripe signature needs",
            header.len()
        )));
    }
    let mut timestamp = None;
    let mut v1 = Vec::new();
    for item in header.split(',') {
        let Some((key, value)) = item.trim().split_once('=') else {
            return Err(WebhookError::MalformedHeader(format!(
                "item without '=': {item:?}"
            )));
        };
        match key {
            "t" => {
                if timestamp.is_some() {
                    return Err(WebhookError::MalformedHeader("more than one t".into()));
                }
                let t = value.parse::<i64>().map_err(|_| {
                    WebhookError::MalformedHeader(format!("t is not an integer: {value:?}"))
                })?;
                timestamp = Some(t);
            }
            "v1" => v1.push(value.to_owned()),
            _ => {}
        }
    }
    if v1.len() > MAX_CANDIDATES {
        return Err(WebhookError::MalformedHeader(format!(
            "{} v1 signatures, more than {MAX_CANDIDATES}",
            v1.len()
        )));
    }
    let timestamp =
        timestamp.ok_or_else(|| WebhookError::MalformedHeader("no timestamp (t=)".into()))?;
    Ok(ParsedHeader { timestamp, v1 })
}

/// Verify `header` for `payload` against any of `secrets`, and that its timestamp is
/// within `tolerance` of `now` (either side). The signature is checked first so a
/// forged header learns nothing about the clock.
pub fn verify<S: AsRef<str>>(
    payload: &[u8],
    header: &str,
    secrets: &[S],
    now: DateTime<Utc>,
    tolerance: Duration,
) -> Result<i64, WebhookError> {
    let parsed = parse_header(header)?;
    // A candidate that is not the hex of a SHA-256 MAC cannot match; skip it rather than fail
    // the header.
    let candidates: Vec<Vec<u8>> = parsed
        .v1
        .iter()
        .filter_map(|candidate| hex::decode(candidate).ok())
        .filter(|bytes| bytes.len() == 32)
        .collect();
    // One MAC over the body per secret, whatever the number of candidates; each comparison
    // in constant time (`CtOutput`'s equality).
    let matched = secrets.iter().any(|secret| {
        let expected = mac_for(secret.as_ref(), parsed.timestamp, payload).finalize();
        candidates.iter().any(|bytes| {
            expected
                == hmac::digest::CtOutput::new(
                    *hmac::digest::generic_array::GenericArray::from_slice(bytes),
                )
        })
    });
    if !matched {
        return Err(WebhookError::NoMatchingSignature);
    }
    let age = now.timestamp().abs_diff(parsed.timestamp);
    if age > tolerance.as_secs() {
        return Err(WebhookError::TimestampOutsideTolerance {
            timestamp: parsed.timestamp,
            tolerance_secs: tolerance.as_secs(),
        });
    }
    Ok(parsed.timestamp)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    const BODY: &[u8] = br#"{"id":"evt_1","object":"event"}"#;

    fn at(t: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(t, 0).single().expect("valid timestamp")
    }

    #[test]
    fn a_long_header_or_many_candidates_is_refused_before_any_mac() {
        let many = format!("t=1700000000{}", ",v1=00".repeat(MAX_CANDIDATES + 1));
        assert!(matches!(
            parse_header(&many),
            Err(WebhookError::MalformedHeader(_))
        ));
        let long = format!("t=1700000000,v0={}", "a".repeat(MAX_HEADER_BYTES));
        assert!(matches!(
            parse_header(&long),
            Err(WebhookError::MalformedHeader(_))
        ));
        // Stripe's own while a secret is rolled: two v1s and a v0.
        let rolled = format!(
            "{},v0={}",
            header_value(&["whsec_a", "whsec_b"], 1_700_000_000, BODY),
            "0".repeat(64)
        );
        let secrets = vec!["whsec_b".to_owned()];
        assert_eq!(
            verify(
                BODY,
                &rolled,
                &secrets,
                at(1_700_000_000),
                DEFAULT_TOLERANCE
            ),
            Ok(1_700_000_000)
        );
    }

    #[test]
    fn signed_header_verifies_under_its_secret() {
        let header = header_value(&["whsec_a"], 1_700_000_000, BODY);
        let secrets = vec!["whsec_a".to_owned()];
        assert_eq!(
            verify(
                BODY,
                &header,
                &secrets,
                at(1_700_000_010),
                DEFAULT_TOLERANCE
            ),
            Ok(1_700_000_000)
        );
    }

    #[test]
    fn any_configured_secret_and_any_v1_suffice_for_rotation() {
        let header = header_value(&["whsec_old", "whsec_new"], 1_700_000_000, BODY);
        let only_new = vec!["whsec_other".to_owned(), "whsec_new".to_owned()];
        assert!(verify(
            BODY,
            &header,
            &only_new,
            at(1_700_000_000),
            DEFAULT_TOLERANCE
        )
        .is_ok());
    }

    #[test]
    fn tampered_body_or_wrong_secret_is_rejected() {
        let header = header_value(&["whsec_a"], 1_700_000_000, BODY);
        let secrets = vec!["whsec_a".to_owned()];
        assert_eq!(
            verify(
                b"{}",
                &header,
                &secrets,
                at(1_700_000_000),
                DEFAULT_TOLERANCE
            ),
            Err(WebhookError::NoMatchingSignature)
        );
        let wrong = vec!["whsec_b".to_owned()];
        assert_eq!(
            verify(BODY, &header, &wrong, at(1_700_000_000), DEFAULT_TOLERANCE),
            Err(WebhookError::NoMatchingSignature)
        );
    }

    #[test]
    fn timestamps_beyond_tolerance_either_side_are_rejected() {
        let header = header_value(&["whsec_a"], 1_700_000_000, BODY);
        let secrets = vec!["whsec_a".to_owned()];
        for now in [1_700_000_301, 1_699_999_699] {
            assert!(matches!(
                verify(BODY, &header, &secrets, at(now), DEFAULT_TOLERANCE),
                Err(WebhookError::TimestampOutsideTolerance { .. })
            ));
        }
        assert!(verify(
            BODY,
            &header,
            &secrets,
            at(1_700_000_300),
            DEFAULT_TOLERANCE
        )
        .is_ok());
    }

    #[test]
    fn malformed_headers_are_named_as_such() {
        for header in ["", "v1=abc", "t=abc,v1=00", "t=1,t=2,v1=00", "garbage"] {
            assert!(
                matches!(parse_header(header), Err(WebhookError::MalformedHeader(_))),
                "{header:?}"
            );
        }
        let secrets = vec!["whsec_a".to_owned()];
        assert_eq!(
            verify(BODY, "t=1,v1=zz,v0=00", &secrets, at(1), DEFAULT_TOLERANCE),
            Err(WebhookError::NoMatchingSignature)
        );
    }
}
