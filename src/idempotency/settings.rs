//! How keys behave: how long a duplicate waits, the lease of a request in flight, how long
//! a finished key is kept, and the per-minute cap of new keys.

use std::time::Duration;

use super::{KeyTtl, Operation};

#[derive(Debug, Clone)]
pub struct IdempotencySettings {
    /// How long a duplicate waits for the first request to finish before `409`.
    pub wait: Duration,
    /// How long an in-flight multi-step request holds its key; a retry after that takes over.
    pub lease: Duration,
    pub order_ttl: Duration,
    pub payment_ttl: Duration,
    pub max_new_keys_per_minute: i64,
}

impl Default for IdempotencySettings {
    fn default() -> Self {
        IdempotencySettings {
            wait: Duration::from_secs(2),
            lease: Duration::from_secs(30),
            order_ttl: Duration::from_secs(24 * 3600),
            payment_ttl: Duration::from_secs(72 * 3600),
            max_new_keys_per_minute: 6000,
        }
    }
}

impl IdempotencySettings {
    pub fn ttl(&self, operation: Operation) -> Duration {
        match operation.ttl() {
            KeyTtl::Order => self.order_ttl,
            KeyTtl::Payment => self.payment_ttl,
        }
    }
}
