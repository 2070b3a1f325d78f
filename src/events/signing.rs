//! Signing deliveries as Standard Webhooks v1 has it (docs/guides/events.md, "Verifying a delivery"): an
//! endpoint's secret is `whsec_` and the base64 of its key's bytes; a delivery's signature is
//! `v1,` and the base64 of HMAC-SHA256, under the key's bytes (not the secret's text), of
//! `{webhook-id}.{webhook-timestamp}.{body}`. While a rotated secret still signs, the header
//! holds one signature per secret, space-separated.
//!
//! [`verify`] is what a receiver does, kept here so that the tests and support tools check a
//! delivery by the same rules docs/guides/events.md gives merchants.

use std::fmt;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use chrono::{DateTime, Utc};
use hmac::{Hmac, Mac};
use rand::RngCore;
use sha2::Sha256;

/// What every secret starts with.
pub const SECRET_PREFIX: &str = "whsec_";
/// Bytes of a new secret's key: inside the 24 to 64 Standard Webhooks asks for, and as long
/// as HMAC-SHA256's output.
pub const KEY_BYTES: usize = 32;
/// The signature scheme this module writes and reads.
pub const VERSION: &str = "v1";
/// How far a receiver lets `webhook-timestamp` be from its clock (docs/guides/events.md, "Verifying a
/// delivery", step 5).
pub const TOLERANCE: chrono::Duration = chrono::Duration::minutes(5);

/// An endpoint's signing secret. `Debug` does not show it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret {
    text: String,
    key: Vec<u8>,
}

/// Why a text is not a secret of this module's form.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretError {
    #[error("a webhook secret starts with `whsec_`: copy it whole from the endpoint's creation or rotation answer")]
    Prefix,
    #[error("a webhook secret is `whsec_` and standard base64: copy it whole, without spaces or line breaks")]
    Base64,
    #[error("a webhook secret's key is 24 to 64 bytes, this one is {0}: copy it whole")]
    Length(usize),
}

impl Secret {
    /// A new secret from the operating system's randomness (through `rand`'s thread generator,
    /// a CSPRNG seeded from it).
    pub fn generate() -> Secret {
        let mut key = vec![0u8; KEY_BYTES];
        rand::rng().fill_bytes(&mut key);
        Secret {
            text: format!("{SECRET_PREFIX}{}", BASE64.encode(&key)),
            key,
        }
    }

    /// A secret as stored (`webhook_endpoints.secret`) or as a merchant copied it.
    pub fn parse(text: &str) -> Result<Secret, SecretError> {
        let encoded = text
            .strip_prefix(SECRET_PREFIX)
            .ok_or(SecretError::Prefix)?;
        let key = BASE64.decode(encoded).map_err(|_| SecretError::Base64)?;
        if !(24..=64).contains(&key.len()) {
            return Err(SecretError::Length(key.len()));
        }
        Ok(Secret {
            text: text.to_owned(),
            key,
        })
    }

    /// The secret as stored and shown once to the merchant: `whsec_…`.
    pub fn expose(&self) -> &str {
        &self.text
    }

    /// `v1,<base64 signature>` of one delivery under this secret.
    pub fn sign(&self, webhook_id: &str, timestamp: i64, body: &[u8]) -> String {
        format!(
            "{VERSION},{}",
            BASE64.encode(
                self.mac(webhook_id, timestamp, body)
                    .finalize()
                    .into_bytes()
            )
        )
    }

    fn mac(&self, webhook_id: &str, timestamp: i64, body: &[u8]) -> Hmac<Sha256> {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.key).expect("HMAC takes any key");
        mac.update(webhook_id.as_bytes());
        mac.update(b".");
        mac.update(timestamp.to_string().as_bytes());
        mac.update(b".");
        mac.update(body);
        mac
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret([redacted])")
    }
}

/// The secrets an endpoint signs with now: its secret, and the one a rotation replaced until
/// `previous_until` has passed (docs/guides/events.md, "Verifying a delivery").
#[derive(Debug, Clone)]
pub struct SigningSecrets {
    pub current: Secret,
    pub previous: Option<(Secret, DateTime<Utc>)>,
}

impl SigningSecrets {
    /// The `webhook-signature` header of one delivery sent at `now`: the current secret's
    /// signature, then the previous one's while it still signs.
    pub fn header(
        &self,
        webhook_id: &str,
        timestamp: i64,
        body: &[u8],
        now: DateTime<Utc>,
    ) -> String {
        let mut header = self.current.sign(webhook_id, timestamp, body);
        if let Some((previous, until)) = &self.previous {
            if now < *until {
                header.push(' ');
                header.push_str(&previous.sign(webhook_id, timestamp, body));
            }
        }
        header
    }
}

/// Why a delivery does not verify.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    #[error("webhook-timestamp is not Unix seconds")]
    Timestamp,
    #[error("webhook-timestamp is more than 5 minutes from now: a replay, or a clock to fix")]
    OutsideTolerance,
    #[error("no v1 signature in webhook-signature matches under the given secrets")]
    NoMatch,
}

/// Whether a delivery verifies, as docs/guides/events.md "Verifying a delivery" tells a receiver: a `v1`
/// signature of the header matches under one of `secrets`, compared in constant time, and the
/// timestamp is within [`TOLERANCE`] of `now`.
pub fn verify(
    secrets: &[Secret],
    webhook_id: &str,
    webhook_timestamp: &str,
    webhook_signature: &str,
    body: &[u8],
    now: DateTime<Utc>,
) -> Result<(), VerifyError> {
    let timestamp: i64 = webhook_timestamp
        .parse()
        .map_err(|_| VerifyError::Timestamp)?;
    let signed_at = DateTime::from_timestamp(timestamp, 0).ok_or(VerifyError::Timestamp)?;
    if (now - signed_at).abs() > TOLERANCE {
        return Err(VerifyError::OutsideTolerance);
    }
    let signatures: Vec<Vec<u8>> = webhook_signature
        .split(' ')
        .filter_map(|entry| entry.split_once(','))
        .filter(|(version, _)| *version == VERSION)
        .filter_map(|(_, signature)| BASE64.decode(signature).ok())
        .collect();
    let matches = secrets.iter().any(|secret| {
        signatures.iter().any(|signature| {
            secret
                .mac(webhook_id, timestamp, body)
                .verify_slice(signature)
                .is_ok()
        })
    });
    if matches {
        Ok(())
    } else {
        Err(VerifyError::NoMatch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The reference vector of the Standard Webhooks libraries (their test suites'
    // `whsec_MfKQ…` secret, `msg_p5jX…` id and `{"test": 2432232314}` payload).
    const REF_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    const REF_ID: &str = "msg_p5jXN8AQM9LWM0D4loKWxJek";
    const REF_TIMESTAMP: i64 = 1614265330;
    const REF_BODY: &str = r#"{"test": 2432232314}"#;
    const REF_SIGNATURE: &str = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";

    fn at(timestamp: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(timestamp, 0).expect("a time")
    }

    #[test]
    fn signs_the_reference_vector() {
        let secret = Secret::parse(REF_SECRET).expect("the reference secret");
        assert_eq!(
            secret.sign(REF_ID, REF_TIMESTAMP, REF_BODY.as_bytes()),
            REF_SIGNATURE
        );
    }

    #[test]
    fn verifies_the_reference_vector_and_refuses_any_change() {
        let secrets = [Secret::parse(REF_SECRET).expect("the reference secret")];
        let now = at(REF_TIMESTAMP + 10);
        let check = |id: &str, ts: &str, sig: &str, body: &str| {
            verify(&secrets, id, ts, sig, body.as_bytes(), now)
        };
        let ts = REF_TIMESTAMP.to_string();
        assert_eq!(check(REF_ID, &ts, REF_SIGNATURE, REF_BODY), Ok(()));
        // Among other versions and signatures, as a header may carry them.
        let crowded = format!("v2,abc v1,AAAA {REF_SIGNATURE}");
        assert_eq!(check(REF_ID, &ts, &crowded, REF_BODY), Ok(()));
        let no = Err(VerifyError::NoMatch);
        assert_eq!(check("msg_other", &ts, REF_SIGNATURE, REF_BODY), no);
        assert_eq!(check(REF_ID, "1614265331", REF_SIGNATURE, REF_BODY), no);
        assert_eq!(
            check(REF_ID, &ts, REF_SIGNATURE, r#"{"test": 2432232315}"#),
            no
        );
        let v2 = REF_SIGNATURE.replacen("v1", "v2", 1);
        assert_eq!(check(REF_ID, &ts, &v2, REF_BODY), no);
        assert_eq!(
            verify(
                &secrets,
                REF_ID,
                &ts,
                REF_SIGNATURE,
                REF_BODY.as_bytes(),
                at(REF_TIMESTAMP + 301)
            ),
            Err(VerifyError::OutsideTolerance)
        );
        assert_eq!(
            check(REF_ID, "soon", REF_SIGNATURE, REF_BODY),
            Err(VerifyError::Timestamp)
        );
    }

    #[test]
    fn a_new_secret_parses_back_and_is_never_the_same() {
        let a = Secret::generate();
        let b = Secret::generate();
        assert_ne!(a, b);
        assert!(a.expose().starts_with(SECRET_PREFIX));
        assert_eq!(Secret::parse(a.expose()).expect("a secret it made"), a);
        assert_eq!(a.key.len(), KEY_BYTES);
        assert!(!format!("{a:?}").contains(&a.expose()[6..]));
    }

    #[test]
    fn refuses_what_is_not_a_secret() {
        assert_eq!(
            Secret::parse("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"),
            Err(SecretError::Prefix)
        );
        assert_eq!(Secret::parse("whsec_not base64!"), Err(SecretError::Base64));
        assert_eq!(Secret::parse("whsec_c2hvcnQ="), Err(SecretError::Length(5)));
    }

    #[test]
    fn the_previous_secret_signs_beside_the_new_one_until_its_end() {
        let current = Secret::generate();
        let previous = Secret::generate();
        let until = at(2_000);
        let secrets = SigningSecrets {
            current: current.clone(),
            previous: Some((previous.clone(), until)),
        };
        let body = b"{}";
        let both = secrets.header("evt_1", 1_000, body, at(1_999));
        let (first, second) = both.split_once(' ').expect("two signatures");
        assert_eq!(first, current.sign("evt_1", 1_000, body));
        assert_eq!(second, previous.sign("evt_1", 1_000, body));
        // Either secret alone verifies the header.
        for secret in [&current, &previous] {
            let alone = [secret.clone()];
            assert_eq!(
                verify(&alone, "evt_1", "1000", &both, body, at(1_000)),
                Ok(())
            );
        }
        let after = secrets.header("evt_1", 1_000, body, until);
        assert_eq!(after, current.sign("evt_1", 1_000, body));
    }
}
