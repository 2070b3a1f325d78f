//! Delivery metrics (docs/guides/events.md, "Answering, and retries"): every attempt by how it ended, every
//! delivery that reached its end, and every endpoint the worker disabled.

use prometheus::{IntCounterVec, Opts};

use crate::telemetry::metrics::Metrics;

pub struct DeliveryMetrics {
    attempts: IntCounterVec,
    finished: IntCounterVec,
    disabled: IntCounterVec,
}

/// How an attempt ended, as counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttemptOutcome {
    /// Sent, and answered `2xx`.
    Succeeded,
    /// Answered otherwise, not at all, or not sent (a refused address, an event or secret
    /// that could not be read).
    Failed,
}

impl AttemptOutcome {
    fn as_str(self) -> &'static str {
        match self {
            AttemptOutcome::Succeeded => "succeeded",
            AttemptOutcome::Failed => "failed",
        }
    }
}

impl DeliveryMetrics {
    pub fn new() -> prometheus::Result<Self> {
        let metrics = DeliveryMetrics {
            attempts: IntCounterVec::new(
                Opts::new(
                    "event_delivery_attempts_total",
                    "Attempts to deliver an event to a webhook endpoint, by outcome \
                     (succeeded: answered 2xx; failed: anything else, not sent included)",
                ),
                &["outcome"],
            )?,
            finished: IntCounterVec::new(
                Opts::new(
                    "event_deliveries_finished_total",
                    "Deliveries that reached their end, by state (succeeded, failed: given \
                     up after the whole schedule, canceled: the endpoint was disabled or \
                     deleted)",
                ),
                &["state"],
            )?,
            disabled: IntCounterVec::new(
                Opts::new(
                    "webhook_endpoints_disabled_total",
                    "Webhook endpoints the delivery worker disabled, by reason (gone: \
                     answered 410, failing: every delivery failed for 3 days)",
                ),
                &["reason"],
            )?,
        };
        // Every series served from the start, at 0: a counter's first series appears at 1,
        // which `increase()` reads as no increase, so the first endpoint disabled after a
        // start would raise no alert (ops/prometheus/alerts.yml). Only once a scrape has read
        // the 0: an endpoint disabled before a replica's first scrape still goes unseen.
        for outcome in [AttemptOutcome::Succeeded, AttemptOutcome::Failed] {
            metrics.attempts.with_label_values(&[outcome.as_str()]);
        }
        for state in ["succeeded", "failed", "canceled"] {
            metrics.finished.with_label_values(&[state]);
        }
        for reason in ["gone", "failing"] {
            metrics.disabled.with_label_values(&[reason]);
        }
        Ok(metrics)
    }

    pub fn register(&self, registry: &Metrics) -> prometheus::Result<()> {
        registry.register(Box::new(self.attempts.clone()))?;
        registry.register(Box::new(self.finished.clone()))?;
        registry.register(Box::new(self.disabled.clone()))
    }

    pub fn attempt(&self, outcome: AttemptOutcome) {
        self.attempts.with_label_values(&[outcome.as_str()]).inc();
    }

    /// `state`: `succeeded`, `failed` or `canceled`.
    pub fn finished(&self, state: &str, count: u64) {
        self.finished.with_label_values(&[state]).inc_by(count);
    }

    /// `reason`: `gone` or `failing`.
    pub fn disabled(&self, reason: &str) {
        self.disabled.with_label_values(&[reason]).inc();
    }
}
