//! Which of the sandbox's faces a charge or a refund was made through, as its metadata marks
//! it: the ledger names it, and each face finds only its own.

use std::collections::BTreeMap;

/// The metadata mark of an intent (or a refund) made through the Adyen face.
pub(super) const PROTOCOL: &str = "sandbox_protocol";

/// Whether the metadata of an intent or a refund marks it as made through the Adyen face.
pub(super) fn is_marked_adyen(metadata: &BTreeMap<String, String>) -> bool {
    metadata.get(PROTOCOL).map(String::as_str) == Some("adyen")
}

/// The protocol a ledger entry (a charge or a refund, by its metadata) came through.
pub(super) fn protocol_of(metadata: &BTreeMap<String, String>) -> &'static str {
    if is_marked_adyen(metadata) {
        "adyen"
    } else {
        "stripe"
    }
}
