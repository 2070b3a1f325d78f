//! Secrets kept at rest sealed under a master key (docs/PRODUCTION.md, section 5): what
//! payorch must be able to read back in clear (a webhook endpoint's signing secret, which
//! signs every delivery), as opposed to what it only compares (API keys, kept as hashes).
//!
//! A sealed value is AES-256-GCM with a fresh random 96-bit nonce per value, its associated
//! data naming the row it belongs to (so a value copied to another row does not open), and
//! the id of the master key that sealed it, so keys can rotate: several keys are configured
//! at once, the first seals, every one opens, and `payorch secrets reencrypt` rewrites every
//! stored value under the first, after which the others can be dropped. Its stored form:
//!
//! ```text
//! v1:<key id>:<base64 nonce>:<base64 ciphertext and tag>
//! ```
//!
//! The database checks that shape (the `…_secrets_at_rest_and_webhook_retention`
//! migration), so no code can write a clear value by mistake.

pub mod sources;

use std::fmt;
use std::sync::Arc;

use aes_gcm::aead::{Aead, Payload};
use aes_gcm::{Aes256Gcm, Key, KeyInit, Nonce};
use base64::engine::general_purpose::{STANDARD as BASE64, STANDARD_NO_PAD as BASE64_NO_PAD};
use base64::Engine;
use rand::RngCore;

/// The version of the stored form this module writes and reads.
pub const SEALED_VERSION: &str = "v1";
/// Bytes of a master key (AES-256).
pub const MASTER_KEY_BYTES: usize = 32;
const NONCE_BYTES: usize = 12;

/// One master key: its id and its cipher. `Debug` shows the id only.
struct MasterKey {
    id: String,
    cipher: Aes256Gcm,
}

/// The configured master keys, the first of which seals. Never empty. `Debug` shows the
/// ids only.
#[derive(Clone)]
pub struct MasterKeys(Arc<Vec<MasterKey>>);

/// Why configured master keys are refused: each says what to write instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MasterKeyError {
    #[error("no master key given: write one as `<id>:<base64 of 32 random bytes>`, e.g. `k1:` followed by the output of `head -c 32 /dev/urandom | base64`")]
    Empty,
    #[error("master key {0}: write it as `<id>:<base64 of 32 bytes>`, the id 1 to 32 of A-Z a-z 0-9 _ -")]
    Shape(usize),
    #[error("master key `{0}` is not standard base64 of 32 bytes: make one with `head -c 32 /dev/urandom | base64`")]
    Bytes(String),
    #[error("master key id `{0}` is given twice: each key needs its own id")]
    DuplicateId(String),
}

/// Why a stored value does not open.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OpenError {
    #[error("the stored value is not sealed (`v1:<key id>:<nonce>:<ciphertext>`); run `payorch secrets reencrypt` with the master key")]
    NotSealed,
    #[error("the stored value was sealed under master key `{0}`, which is not configured: add it to the master keys (docs/PRODUCTION.md, section 5)")]
    UnknownKey(String),
    #[error("the stored value does not open under master key `{0}`: a different key under that id, or a value moved from another row")]
    Refused(String),
}

impl MasterKeys {
    /// Keys as configured: `<id>:<base64>` each, separated by commas or line breaks; the
    /// first seals.
    pub fn parse(text: &str) -> Result<MasterKeys, MasterKeyError> {
        let mut keys: Vec<MasterKey> = Vec::new();
        let entries = text
            .split([',', '\n'])
            .map(str::trim)
            .filter(|entry| !entry.is_empty());
        for (position, entry) in entries.enumerate() {
            let (id, encoded) = entry
                .split_once(':')
                .ok_or(MasterKeyError::Shape(position + 1))?;
            if !is_key_id(id) {
                return Err(MasterKeyError::Shape(position + 1));
            }
            let bytes = BASE64
                .decode(encoded)
                .ok()
                .filter(|bytes| bytes.len() == MASTER_KEY_BYTES)
                .ok_or_else(|| MasterKeyError::Bytes(id.to_owned()))?;
            if keys.iter().any(|key| key.id == id) {
                return Err(MasterKeyError::DuplicateId(id.to_owned()));
            }
            keys.push(MasterKey {
                id: id.to_owned(),
                cipher: Aes256Gcm::new(Key::<Aes256Gcm>::from_slice(&bytes)),
            });
        }
        if keys.is_empty() {
            return Err(MasterKeyError::Empty);
        }
        Ok(MasterKeys(Arc::new(keys)))
    }

    /// A new key from the operating system's randomness, under `id`: the keys, and their
    /// configured text (`<id>:<base64>`) to keep.
    pub fn generate(id: &str) -> (MasterKeys, String) {
        let mut bytes = [0u8; MASTER_KEY_BYTES];
        rand::rng().fill_bytes(&mut bytes);
        let text = format!("{id}:{}", BASE64.encode(bytes));
        let keys = MasterKeys::parse(&text).expect("a generated key parses");
        (keys, text)
    }

    /// The id of the key that seals.
    pub fn sealing_id(&self) -> &str {
        &self.0[0].id
    }

    /// `plain` sealed under the first key, bound to `context` (the row it is stored in).
    pub fn seal(&self, plain: &str, context: &str) -> String {
        let key = &self.0[0];
        let mut nonce = [0u8; NONCE_BYTES];
        rand::rng().fill_bytes(&mut nonce);
        let sealed = key
            .cipher
            .encrypt(
                Nonce::from_slice(&nonce),
                Payload {
                    msg: plain.as_bytes(),
                    aad: context.as_bytes(),
                },
            )
            .expect("AES-GCM seals any value this small");
        format!(
            "{SEALED_VERSION}:{}:{}:{}",
            key.id,
            BASE64_NO_PAD.encode(nonce),
            BASE64_NO_PAD.encode(sealed)
        )
    }

    /// The clear value of `stored`, sealed for `context` under any configured key.
    pub fn open(&self, stored: &str, context: &str) -> Result<String, OpenError> {
        let (id, nonce, sealed) = split_sealed(stored).ok_or(OpenError::NotSealed)?;
        let key = self
            .0
            .iter()
            .find(|key| key.id == id)
            .ok_or_else(|| OpenError::UnknownKey(id.to_owned()))?;
        let refused = || OpenError::Refused(id.to_owned());
        let plain = key
            .cipher
            .decrypt(
                Nonce::from_slice(&nonce),
                Payload {
                    msg: &sealed,
                    aad: context.as_bytes(),
                },
            )
            .map_err(|_| refused())?;
        String::from_utf8(plain).map_err(|_| refused())
    }

    /// Whether `stored` is sealed under the key that seals now (nothing to rewrite).
    pub fn is_current(&self, stored: &str) -> bool {
        split_sealed(stored).is_some_and(|(id, _, _)| id == self.sealing_id())
    }
}

/// `v1:<id>:<nonce>:<ciphertext>` taken apart: the key id, the nonce and the ciphertext.
fn split_sealed(stored: &str) -> Option<(&str, [u8; NONCE_BYTES], Vec<u8>)> {
    let mut parts = stored.splitn(4, ':');
    let (version, id, nonce, sealed) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    if version != SEALED_VERSION || !is_key_id(id) {
        return None;
    }
    let nonce: [u8; NONCE_BYTES] = BASE64_NO_PAD.decode(nonce).ok()?.try_into().ok()?;
    let sealed = BASE64_NO_PAD.decode(sealed).ok()?;
    Some((id, nonce, sealed))
}

/// A key id: 1 to 32 of `A-Z a-z 0-9 _ -` (the database's CHECK says the same).
fn is_key_id(id: &str) -> bool {
    (1..=32).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

impl fmt::Debug for MasterKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("MasterKeys")
            .field(&self.0.iter().map(|key| key.id.as_str()).collect::<Vec<_>>())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONTEXT: &str = "webhook_endpoints.secret:m:e";

    fn key(id: &str) -> String {
        MasterKeys::generate(id).1
    }

    #[test]
    fn a_sealed_value_opens_under_its_key_and_context_only() {
        let (keys, _) = MasterKeys::generate("k1");
        let sealed = keys.seal("whsec_abc", CONTEXT);
        assert!(sealed.starts_with("v1:k1:"), "{sealed}");
        assert!(!sealed.contains("whsec_abc"));
        assert_eq!(keys.open(&sealed, CONTEXT).as_deref(), Ok("whsec_abc"));
        // A fresh nonce each time: the same value never seals the same.
        assert_ne!(keys.seal("whsec_abc", CONTEXT), sealed);
        assert_eq!(
            keys.open(&sealed, "webhook_endpoints.secret:m:other"),
            Err(OpenError::Refused("k1".into()))
        );
        assert_eq!(keys.open("whsec_abc", CONTEXT), Err(OpenError::NotSealed));
        // Another key under the same id does not open it.
        let (impostor, _) = MasterKeys::generate("k1");
        assert_eq!(
            impostor.open(&sealed, CONTEXT),
            Err(OpenError::Refused("k1".into()))
        );
    }

    #[test]
    fn the_first_key_seals_and_every_key_opens() {
        let (old, old_text) = MasterKeys::generate("old");
        let sealed_before = old.seal("whsec_before", CONTEXT);
        let both = MasterKeys::parse(&format!("{},\n{old_text}", key("new"))).expect("two keys");
        assert_eq!(both.sealing_id(), "new");
        assert_eq!(
            both.open(&sealed_before, CONTEXT).as_deref(),
            Ok("whsec_before")
        );
        assert!(!both.is_current(&sealed_before));
        let resealed = both.seal("whsec_before", CONTEXT);
        assert!(both.is_current(&resealed));
        assert_eq!(
            old.open(&resealed, CONTEXT),
            Err(OpenError::UnknownKey("new".into()))
        );
    }

    #[test]
    fn refuses_keys_that_are_not_of_the_form() {
        assert_eq!(MasterKeys::parse(" ,\n").err(), Some(MasterKeyError::Empty));
        assert_eq!(
            MasterKeys::parse("no-colon").err(),
            Some(MasterKeyError::Shape(1))
        );
        assert_eq!(
            MasterKeys::parse(&format!("{},bad id:AAAA", key("a"))).err(),
            Some(MasterKeyError::Shape(2))
        );
        assert_eq!(
            MasterKeys::parse("short:c2hvcnQ=").err(),
            Some(MasterKeyError::Bytes("short".into()))
        );
        let twice = format!("{},{}", key("same"), key("same"));
        assert_eq!(
            MasterKeys::parse(&twice).err(),
            Some(MasterKeyError::DuplicateId("same".into()))
        );
    }

    #[test]
    fn debug_shows_the_ids_and_never_a_key() {
        let text = key("shown-id");
        let keys = MasterKeys::parse(&text).expect("a key");
        let shown = format!("{keys:?}");
        assert!(shown.contains("shown-id"), "{shown}");
        let encoded = text.split_once(':').expect("id:key").1;
        assert!(!shown.contains(encoded), "{shown}");
    }
}
