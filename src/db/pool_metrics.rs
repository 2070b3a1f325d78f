//! The pool's gauges, read from the pool at each scrape. They live beside the pool, as a
//! collector the application registers, so that `telemetry` (the registry and its text)
//! imports nothing of payorch's: the arrow goes from `db` to `telemetry`'s registry, never
//! back (docs/DESIGN.md, "Modules and their dependencies").

use prometheus::core::{Collector, Desc};
use prometheus::proto::MetricFamily;
use prometheus::{Gauge, IntGauge};

use super::pool::DbPool;

/// `payorch_db_pool_*`: open, idle and waiting connections, the largest size allowed, and
/// how long a request arriving now would wait; and the pool's own counts of every wait
/// ([`super::pool::Waits`]).
pub struct PoolGauges {
    pool: DbPool,
    connections: IntGauge,
    idle: IntGauge,
    waiting: IntGauge,
    max: IntGauge,
    expected_wait: Gauge,
}

impl PoolGauges {
    pub fn new(pool: DbPool) -> prometheus::Result<Self> {
        Ok(PoolGauges {
            pool,
            connections: IntGauge::new("db_pool_connections", "Open database connections")?,
            idle: IntGauge::new("db_pool_idle", "Idle database connections")?,
            waiting: IntGauge::new("db_pool_waiting", "Requests waiting for a connection")?,
            max: IntGauge::new("db_pool_max", "Largest pool size allowed")?,
            expected_wait: Gauge::new(
                "db_pool_expected_wait_seconds",
                "How long a request arriving now would wait for a connection; past the \
                 acquire timeout, requests are refused 503 on arrival",
            )?,
        })
    }

    fn int_gauges(&self) -> [&IntGauge; 4] {
        [&self.connections, &self.idle, &self.waiting, &self.max]
    }
}

impl Collector for PoolGauges {
    fn desc(&self) -> Vec<&Desc> {
        let mut descs: Vec<&Desc> = self
            .int_gauges()
            .into_iter()
            .flat_map(|g| g.desc())
            .collect();
        descs.extend(self.expected_wait.desc());
        let waits = self.pool.waits();
        descs.extend(waits.waited.desc());
        descs.extend(waits.timeouts.desc());
        descs
    }

    /// Reads the pool now, so a scrape shows the pool as it is when scraped.
    fn collect(&self) -> Vec<MetricFamily> {
        let status = self.pool.status();
        self.connections.set(status.size as i64);
        self.idle.set(status.available as i64);
        self.waiting.set(status.waiting as i64);
        self.max.set(status.max_size as i64);
        self.expected_wait
            .set(self.pool.expected_wait().as_secs_f64());
        let mut families: Vec<MetricFamily> = self
            .int_gauges()
            .into_iter()
            .flat_map(|g| g.collect())
            .collect();
        families.extend(self.expected_wait.collect());
        let waits = self.pool.waits();
        families.extend(waits.waited.collect());
        families.extend(waits.timeouts.collect());
        families
    }
}
