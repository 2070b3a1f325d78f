//! Idempotency-Key handling for every state-changing request: key parsing, the canonical
//! fingerprint, the one-statement claim and the statements it falls back on, the completion
//! of a key by whoever finished its work, the per-merchant quota of new keys and the reaper
//! of expired keys.

pub mod claim;
pub mod fingerprint;
pub mod in_flight;
pub mod key;
pub mod operation;
pub mod origin;
pub mod quota;
pub mod reaper;
pub mod recent;
pub mod request;
pub mod settings;
pub mod takeover;
pub use crate::words;

use std::sync::Arc;
use std::time::Duration;

use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, IntGauge, Opts};

pub use claim::{claim, ClaimParams, Keyed, KeyedWork, RecordAs};
pub use fingerprint::{fingerprint, Fingerprint};
pub use in_flight::{InFlightKey, KeyState, RecoveryPoint, ResourceType};
pub use key::{IdempotencyKey, KeyError};
pub use operation::{KeyTtl, Operation};
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
