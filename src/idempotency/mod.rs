//! Idempotency-Key handling for every state-changing request: key parsing, the canonical
//! fingerprint, the one-statement claim and the statements it falls back on, the completion
//! of a key by whoever finished its work, the per-merchant quota of new keys and the reaper
//! of expired keys.

pub mod claim;
pub mod fingerprint;
pub mod in_flight;
pub mod key;
pub mod origin;
pub mod quota;
pub mod reaper;
pub mod recent;
pub mod request;
pub mod settings;
pub mod takeover;

use std::sync::Arc;
use std::time::Duration;

use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, IntGauge, Opts};

pub use claim::{claim, ClaimParams, Keyed, KeyedWork, RecordAs};
pub use fingerprint::{fingerprint, Fingerprint};
pub use in_flight::{InFlightKey, KeyState, RecoveryPoint, ResourceType};
pub use key::{IdempotencyKey, KeyError};
pub use quota::NewKeyQuota;
pub use recent::RecentKeys;
pub use request::{ExpiredKey, IdempotencyError, KeyedRequest, Recorded, StoredKey};
pub use settings::IdempotencySettings;

/// Everything a claim needs besides the database: the settings, the quota of new keys (shared
/// with its sync worker), the finished keys this replica remembers, and the metrics.
pub struct Keys {
    pub settings: IdempotencySettings,
    pub metrics: Arc<IdempotencyMetrics>,
    pub quota: Arc<NewKeyQuota>,
    pub recent: RecentKeys,
}

/// The kinds of keyed work; a key belongs to one and its TTL follows from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    CreateOrder,
    CancelOrder,
    CreatePayment,
    Checkout,
    CreateRefund,
    CreateWebhookEndpoint,
    RotateWebhookSecret,
    CapturePayment,
    CancelPayment,
}

impl Operation {
    /// Every operation, for the tests that hold the `key_operation` domain to it.
    pub const ALL: [Operation; 9] = [
        Operation::CreateOrder,
        Operation::CancelOrder,
        Operation::CreatePayment,
        Operation::Checkout,
        Operation::CreateRefund,
        Operation::CreateWebhookEndpoint,
        Operation::RotateWebhookSecret,
        Operation::CapturePayment,
        Operation::CancelPayment,
    ];

    /// The route the operation is asked for by: the label of its metrics and log lines.
    pub fn route(self) -> &'static str {
        match self {
            Operation::CreateOrder => "/v1/orders",
            Operation::CancelOrder => "/v1/orders/{id}/cancel",
            Operation::CreatePayment => "/v1/orders/{id}/payments",
            Operation::Checkout => "/v1/checkout",
            Operation::CreateRefund => "/v1/payments/{id}/refunds",
            Operation::CreateWebhookEndpoint => "/v1/webhook_endpoints",
            Operation::RotateWebhookSecret => "/v1/webhook_endpoints/{id}/rotate_secret",
            Operation::CapturePayment => "/v1/payments/{id}/capture",
            Operation::CancelPayment => "/v1/payments/{id}/cancel",
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Operation::CreateOrder => "create_order",
            Operation::CancelOrder => "cancel_order",
            Operation::CreatePayment => "create_payment",
            Operation::Checkout => "checkout",
            Operation::CreateRefund => "create_refund",
            Operation::CreateWebhookEndpoint => "create_webhook_endpoint",
            Operation::RotateWebhookSecret => "rotate_webhook_secret",
            Operation::CapturePayment => "capture_payment",
            Operation::CancelPayment => "cancel_payment",
        }
    }
}

/// Idempotency outcomes by route (`created`, `replayed`, `in_use`, `reused_mismatch`,
/// `expired`, `taken_over`, `rate_limited`, and `declined`: the work refused and nothing was
/// recorded), the time spent claiming a key, and the size of the key table.
pub struct IdempotencyMetrics {
    outcomes: IntCounterVec,
    wait: HistogramVec,
    pub keys: IntGauge,
    pub reaped: prometheus::IntCounter,
    pub retired: prometheus::IntCounter,
}

impl IdempotencyMetrics {
    pub fn new() -> prometheus::Result<Self> {
        Ok(IdempotencyMetrics {
            outcomes: IntCounterVec::new(
                Opts::new("idempotency_requests_total", "Keyed requests by route and outcome"),
                &["route", "outcome"],
            )?,
            wait: HistogramVec::new(
                HistogramOpts::new(
                    "idempotency_claim_seconds",
                    "Time to claim a key, including waiting for an in-flight duplicate",
                )
                .buckets(vec![
                    0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0,
                ]),
                &["outcome"],
            )?,
            keys: IntGauge::new("idempotency_keys", "Idempotency keys stored (estimate)")?,
            reaped: prometheus::IntCounter::new(
                "idempotency_keys_reaped_total",
                "Expired idempotency keys deleted",
            )?,
            retired: prometheus::IntCounter::new(
                "idempotency_keys_retired_total",
                "Keys of payments and refunds past their TTL, kept to answer 409 idempotency_key_expired",
            )?,
        })
    }

    pub fn register(
        &self,
        registry: &crate::telemetry::metrics::Metrics,
    ) -> prometheus::Result<()> {
        registry.register(Box::new(self.outcomes.clone()))?;
        registry.register(Box::new(self.wait.clone()))?;
        registry.register(Box::new(self.keys.clone()))?;
        registry.register(Box::new(self.reaped.clone()))?;
        registry.register(Box::new(self.retired.clone()))
    }

    pub fn observe(&self, operation: Operation, outcome: &str, waited: Duration) {
        self.outcomes
            .with_label_values(&[operation.route(), outcome])
            .inc();
        self.wait
            .with_label_values(&[outcome])
            .observe(waited.as_secs_f64());
    }
}

#[cfg(test)]
mod tests {
    use super::Operation;

    /// Nothing parses an operation back (a key's row is read by its resource), so the
    /// round trip is through `ALL`: each word names one operation.
    #[test]
    fn every_operation_has_a_word_of_its_own() {
        for op in Operation::ALL {
            let back = Operation::ALL
                .into_iter()
                .filter(|o| o.as_str() == op.as_str());
            assert_eq!(back.collect::<Vec<_>>(), vec![op]);
        }
    }
}
