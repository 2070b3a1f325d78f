//! The keyed operations, each registered once (docs/DESIGN.md, "Adding a keyed operation"):
//! its variant, the word its keys store (`idempotency_keys.operation`, the `key_operation`
//! domain), the route it is asked by (its metrics' and log lines' label) and how long its
//! finished key is kept. Everything else about an operation is derived from this list or
//! checked against it: `ALL`, `as_str`, `parse`, `route`, `ttl`; tests/api/schema_mirrors.rs
//! holds the domain to `ALL`.

use super::words::words;

/// How long a finished key of an operation is kept, by what the operation did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyTtl {
    /// Database-only work, like an order's: its key is freed past `order_ttl`.
    Order,
    /// Work that moves money: kept as long as a payment's key (`payment_ttl`), then retired.
    Payment,
}

/// Declares `Operation` from one line per operation:
/// `Variant => "word", "route", KeyTtl::…;`.
macro_rules! operations {
    ( $( $(#[$vmeta:meta])* $variant:ident => $word:literal, $route:literal, $ttl:expr; )+ ) => {
        words! {
            /// The kinds of keyed work; a key belongs to one and its TTL follows from it.
            pub enum Operation {
                $( $(#[$vmeta])* $variant => $word ),+
            }
        }

        impl Operation {
            /// The route the operation is asked for by: the label of its metrics and log lines.
            pub fn route(self) -> &'static str {
                match self {
                    $( Operation::$variant => $route ),+
                }
            }

            /// How long its finished key is kept (`IdempotencySettings::ttl`).
            pub fn ttl(self) -> KeyTtl {
                match self {
                    $( Operation::$variant => $ttl ),+
                }
            }
        }
    };
}

operations! {
    CreateOrder => "create_order", "/v1/orders", KeyTtl::Order;
    CancelOrder => "cancel_order", "/v1/orders/{id}/cancel", KeyTtl::Order;
    CreatePayment => "create_payment", "/v1/orders/{id}/payments", KeyTtl::Payment;
    /// A new order and its first payment under one key.
    Checkout => "checkout", "/v1/checkout", KeyTtl::Payment;
    CreateRefund => "create_refund", "/v1/payments/{id}/refunds", KeyTtl::Payment;
    CreateWebhookEndpoint => "create_webhook_endpoint", "/v1/webhook_endpoints", KeyTtl::Order;
    RotateWebhookSecret => "rotate_webhook_secret", "/v1/webhook_endpoints/{id}/rotate_secret", KeyTtl::Order;
    CapturePayment => "capture_payment", "/v1/payments/{id}/capture", KeyTtl::Payment;
    CancelPayment => "cancel_payment", "/v1/payments/{id}/cancel", KeyTtl::Payment;
    /// An order's metadata changed (docs/guides/checkout.md, "An order's metadata").
    UpdateOrder => "update_order", "/v1/orders/{id}", KeyTtl::Order;
    /// Evidence answering a dispute, and a dispute accepted (docs/guides/disputes.md,
    /// "Answering a dispute"): kept as a payment's key, since a retry past a freed key would
    /// answer the dispute again (the database refuses it; the key says what it made).
    SubmitDisputeEvidence => "submit_dispute_evidence", "/v1/disputes/{id}/evidence", KeyTtl::Payment;
    AcceptDispute => "accept_dispute", "/v1/disputes/{id}/accept", KeyTtl::Payment;
}

#[cfg(test)]
mod tests {
    use super::Operation;

    /// Over `ALL`, so a new operation is covered without touching this test.
    #[test]
    fn every_operation_reads_back_from_its_word() {
        for op in Operation::ALL {
            assert_eq!(Operation::parse(op.as_str()), Some(op));
        }
        assert_eq!(Operation::parse("refund"), None);
    }

    /// Routes label metrics: two operations on one route would be counted as one.
    #[test]
    fn every_operation_has_a_route_of_its_own() {
        for op in Operation::ALL {
            let same: Vec<_> = Operation::ALL
                .into_iter()
                .filter(|o| o.route() == op.route())
                .collect();
            assert_eq!(same, vec![op]);
        }
    }
}
