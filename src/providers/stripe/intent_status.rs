//! A PaymentIntent's status, the word Stripe's answers and events carry.

use std::fmt;

/// A PaymentIntent's status, as Stripe names it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum IntentStatus {
    RequiresPaymentMethod,
    RequiresConfirmation,
    RequiresAction,
    Processing,
    RequiresCapture,
    Canceled,
    Succeeded,
    /// A status this code does not know; kept verbatim.
    Other(String),
}

impl IntentStatus {
    pub fn parse(s: &str) -> Self {
        match s {
            "requires_payment_method" => Self::RequiresPaymentMethod,
            "requires_confirmation" => Self::RequiresConfirmation,
            "requires_action" => Self::RequiresAction,
            "processing" => Self::Processing,
            "requires_capture" => Self::RequiresCapture,
            "canceled" => Self::Canceled,
            "succeeded" => Self::Succeeded,
            other => Self::Other(other.to_owned()),
        }
    }

    pub fn as_str(&self) -> &str {
        match self {
            Self::RequiresPaymentMethod => "requires_payment_method",
            Self::RequiresConfirmation => "requires_confirmation",
            Self::RequiresAction => "requires_action",
            Self::Processing => "processing",
            Self::RequiresCapture => "requires_capture",
            Self::Canceled => "canceled",
            Self::Succeeded => "succeeded",
            Self::Other(s) => s,
        }
    }
}

impl fmt::Display for IntentStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
