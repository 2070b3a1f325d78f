//! Typed ids: UUIDv7 inside, shown with a type prefix (`mer_…`) everywhere outside.

use std::fmt;
use std::str::FromStr;

use uuid::Uuid;

macro_rules! prefixed_id {
    ($(#[$doc:meta])* $name:ident, $prefix:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(pub Uuid);

        impl $name {
            pub const PREFIX: &'static str = $prefix;

            /// A new time-ordered id, so that newer rows sort after older ones in indexes.
            pub fn new() -> Self {
                $name(Uuid::now_v7())
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self::new()
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}_{}", $prefix, self.0.simple())
            }
        }

        impl FromStr for $name {
            type Err = InvalidId;

            fn from_str(s: &str) -> Result<Self, InvalidId> {
                s.strip_prefix(concat!($prefix, "_"))
                    .and_then(|rest| Uuid::try_parse(rest).ok())
                    .map($name)
                    .ok_or(InvalidId { expected: $prefix })
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
                s.parse().map_err(serde::de::Error::custom)
            }
        }

        impl utoipa::PartialSchema for $name {
            fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
                utoipa::openapi::ObjectBuilder::new()
                    .schema_type(utoipa::openapi::schema::Type::String)
                    .pattern(Some(concat!("^", $prefix, "_[0-9a-f]{32}$")))
                    .into()
            }
        }

        impl utoipa::ToSchema for $name {}
    };
}

/// An id that does not have the expected prefix or is not a UUID.
#[derive(Debug, Clone, thiserror::Error)]
#[error("not a valid id: expected `{expected}_` followed by 32 hex digits")]
pub struct InvalidId {
    pub expected: &'static str,
}

prefixed_id!(
    /// A merchant.
    MerchantId,
    "mer"
);
prefixed_id!(
    /// An order: what the payer buys.
    OrderId,
    "ord"
);
prefixed_id!(
    /// A payment attempt: one try to charge.
    PaymentId,
    "pay"
);
prefixed_id!(
    /// A refund: money given back from a succeeded payment attempt.
    RefundId,
    "re"
);

prefixed_id!(
    /// A capture or a void of a payment's hold: one provider call under its own key.
    HoldOperationId,
    "hop"
);

prefixed_id!(
    /// A provider's approval of a payment payorch had failed, and its undo.
    LateApprovalId,
    "la"
);

prefixed_id!(
    /// A payer's dispute of a payment with its bank: an inquiry or a chargeback.
    DisputeId,
    "dp"
);

prefixed_id!(
    /// Evidence sent for a dispute, or its accept (docs/guides/disputes.md, "Answering a
    /// dispute").
    DisputeActionId,
    "da"
);

prefixed_id!(
    /// A provider's webhook as payorch recorded it (support's view of what came in).
    ProviderWebhookId,
    "whk"
);
prefixed_id!(
    /// A merchant event: a change told to the merchant (`GET /v1/events`, deliveries).
    EventId,
    "evt"
);
prefixed_id!(
    /// A merchant's webhook endpoint: where its events are delivered.
    EndpointId,
    "we"
);
prefixed_id!(
    /// An API key (merchant or support); never the secret itself.
    ApiKeyId,
    "key"
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_and_parse_round_trip() {
        let id = MerchantId::new();
        let shown = id.to_string();
        assert!(shown.starts_with("mer_"));
        assert_eq!(shown.len(), 4 + 32);
        assert_eq!(shown.parse::<MerchantId>().unwrap(), id);
    }

    #[test]
    fn parse_rejects_another_prefix_or_garbage() {
        let id = MerchantId::new();
        let other = format!("key_{}", id.0.simple());
        assert!(other.parse::<MerchantId>().is_err());
        assert!("mer_nothex".parse::<MerchantId>().is_err());
        assert!(id.0.to_string().parse::<MerchantId>().is_err());
    }
}
