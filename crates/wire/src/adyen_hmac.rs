//! How Adyen signs a notification item: `additionalData.hmacSignature` is base64(HMAC-SHA256)
//! of
//! `pspReference:originalReference:merchantAccountCode:merchantReference:value:currency:eventCode:success`
//! under a hex-encoded key, missing fields as empty strings. The sandbox signs with this and
//! payorch verifies with it (payorch's `providers::adyen::notification`).

use std::fmt;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::adyen::NotificationRequestItem;

type HmacSha256 = Hmac<Sha256>;

/// The notification item's field that carries its signature, inside `additionalData`.
pub const SIGNATURE_FIELD: &str = "hmacSignature";

/// A decoded HMAC key. Its `Debug` never shows the bytes, so a provider holding keys can
/// be logged safely.
#[derive(Clone, PartialEq, Eq)]
pub struct HmacKey(Vec<u8>);

impl HmacKey {
    /// The key from its hex form (as Adyen's Customer Area shows it); `None` if it is empty
    /// or not hex.
    pub fn from_hex(hex_key: &str) -> Option<Self> {
        hex::decode(hex_key.trim())
            .ok()
            .filter(|bytes| !bytes.is_empty())
            .map(HmacKey)
    }

    fn mac(&self, item: &NotificationRequestItem) -> HmacSha256 {
        let mut mac = HmacSha256::new_from_slice(&self.0)
            .unwrap_or_else(|_| unreachable!("HMAC takes keys of any length"));
        mac.update(signing_string(item).as_bytes());
        mac
    }

    /// The base64 signature of `item` under this key.
    pub fn sign(&self, item: &NotificationRequestItem) -> String {
        BASE64.encode(self.mac(item).finalize().into_bytes())
    }

    /// Whether `signature` (base64) is `item`'s signature under this key, compared in
    /// constant time.
    pub fn verifies(&self, item: &NotificationRequestItem, signature: &[u8]) -> bool {
        self.mac(item).verify_slice(signature).is_ok()
    }
}

impl fmt::Debug for HmacKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("HmacKey([redacted])")
    }
}

/// The text Adyen signs for a notification item.
pub fn signing_string(item: &NotificationRequestItem) -> String {
    let amount = item.amount.clone().unwrap_or_default();
    [
        item.psp_reference.as_str(),
        item.original_reference.as_str(),
        item.merchant_account_code.as_str(),
        item.merchant_reference.as_str(),
        &amount.value.map(|v| v.to_string()).unwrap_or_default(),
        amount.currency.as_deref().unwrap_or_default(),
        item.event_code.as_str(),
        item.success.as_str(),
    ]
    .join(":")
}

/// The base64 `hmacSignature` of a notification item (the object under
/// `NotificationRequestItem`) under a hex-encoded key; `None` if the key is not hex or the
/// item is not a notification item. The sandbox signs its notifications with this.
pub fn sign_item(item: &serde_json::Value, hex_key: &str) -> Option<String> {
    let key = HmacKey::from_hex(hex_key)?;
    let item = serde_json::from_value::<NotificationRequestItem>(item.clone()).ok()?;
    Some(key.sign(&item))
}
