//! Prometheus metrics, one registry per application (no globals, so tests stay independent).
//! Every part of payorch registers its own collectors here (the pool's gauges too,
//! `db::pool_metrics`, so that this module imports nothing of payorch's); the HTTP layer
//! serves the text.

use std::time::Instant;

use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounterVec, Opts, Registry, TextEncoder,
};

pub struct Metrics {
    registry: Registry,
    http_requests: IntCounterVec,
    http_duration: HistogramVec,
}

impl Metrics {
    pub fn new() -> Result<Self, prometheus::Error> {
        let registry = Registry::new_custom(Some("payorch".into()), None)?;
        let http_requests = IntCounterVec::new(
            Opts::new("http_requests_total", "HTTP requests by route and status"),
            &["method", "route", "status"],
        )?;
        let http_duration = HistogramVec::new(
            HistogramOpts::new("http_request_duration_seconds", "HTTP request latency").buckets(
                vec![
                    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
                ],
            ),
            &["method", "route"],
        )?;
        let metrics = Metrics {
            http_requests,
            http_duration,
            registry,
        };
        metrics.register(Box::new(metrics.http_requests.clone()))?;
        metrics.register(Box::new(metrics.http_duration.clone()))?;
        Ok(metrics)
    }

    /// Adds a collector of another part of payorch to the same registry.
    pub fn register(
        &self,
        collector: Box<dyn prometheus::core::Collector>,
    ) -> prometheus::Result<()> {
        self.registry.register(collector)
    }

    /// Counts one answered request.
    pub fn observe(&self, method: &str, route: &str, status: u16, started: Instant) {
        self.http_requests
            .with_label_values(&[method, route, &status.to_string()])
            .inc();
        self.http_duration
            .with_label_values(&[method, route])
            .observe(started.elapsed().as_secs_f64());
    }

    /// The text exposition; collectors that read a state (the pool's gauges) read it now.
    pub fn render(&self) -> String {
        let mut out = Vec::new();
        let encoder = TextEncoder::new();
        if let Err(err) = encoder.encode(&self.registry.gather(), &mut out) {
            tracing::error!(error = %err, "metrics encoding failed");
        }
        String::from_utf8_lossy(&out).into_owned()
    }
}
