//! Prometheus metrics, one registry per application (no globals, so tests stay independent).
//! Every part of payorch registers its own collectors here; the HTTP layer serves the text.

use std::time::Instant;

use prometheus::{
    Encoder, Gauge, HistogramOpts, HistogramVec, IntCounterVec, IntGauge, Opts, Registry,
    TextEncoder,
};

use crate::db::DbPool;

pub struct Metrics {
    registry: Registry,
    http_requests: IntCounterVec,
    http_duration: HistogramVec,
    pool_connections: IntGauge,
    pool_idle: IntGauge,
    pool_waiting: IntGauge,
    pool_max: IntGauge,
    pool_expected_wait: Gauge,
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
        let gauge = |name: &str, help: &str| IntGauge::new(name, help);
        let metrics = Metrics {
            http_requests,
            http_duration,
            pool_connections: gauge("db_pool_connections", "Open database connections")?,
            pool_idle: gauge("db_pool_idle", "Idle database connections")?,
            pool_waiting: gauge("db_pool_waiting", "Requests waiting for a connection")?,
            pool_max: gauge("db_pool_max", "Largest pool size allowed")?,
            pool_expected_wait: Gauge::new(
                "db_pool_expected_wait_seconds",
                "How long a request arriving now would wait for a connection; past the \
                 acquire timeout, requests are refused 503 on arrival",
            )?,
            registry,
        };
        metrics.register(Box::new(metrics.http_requests.clone()))?;
        metrics.register(Box::new(metrics.http_duration.clone()))?;
        for g in [
            &metrics.pool_connections,
            &metrics.pool_idle,
            &metrics.pool_waiting,
            &metrics.pool_max,
        ] {
            metrics.register(Box::new(g.clone()))?;
        }
        metrics.register(Box::new(metrics.pool_expected_wait.clone()))?;
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

    /// The text exposition, with the pool gauges read at this moment.
    pub fn render(&self, pool: &DbPool) -> String {
        let status = pool.status();
        self.pool_connections.set(status.size as i64);
        self.pool_idle.set(status.available as i64);
        self.pool_waiting.set(status.waiting as i64);
        self.pool_max.set(status.max_size as i64);
        self.pool_expected_wait
            .set(pool.expected_wait().as_secs_f64());
        let mut out = Vec::new();
        let encoder = TextEncoder::new();
        if let Err(err) = encoder.encode(&self.registry.gather(), &mut out) {
            tracing::error!(error = %err, "metrics encoding failed");
        }
        String::from_utf8_lossy(&out).into_owned()
    }
}
