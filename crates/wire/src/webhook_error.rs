//! Why a webhook is refused: one error for the signature schemes here and for payorch's
//! verification of a delivery.

/// Why a webhook was refused. Any of these → `400`, nothing stored.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum WebhookError {
    #[error("missing signature header")]
    MissingHeader,
    #[error("malformed signature header: {0}")]
    MalformedHeader(String),
    #[error("signature timestamp {timestamp} is outside the tolerance of {tolerance_secs} s")]
    TimestampOutsideTolerance { timestamp: i64, tolerance_secs: u64 },
    #[error("no signature matches any webhook secret")]
    NoMatchingSignature,
    /// An Adyen notification item without `additionalData.hmacSignature` (its pspReference).
    #[error("notification item {0:?} carries no hmacSignature")]
    UnsignedItem(String),
    #[error("event body is not a valid event: {0}")]
    BadJson(String),
}
