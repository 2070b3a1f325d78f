//! Who a presented secret belongs to, remembered in process for a short while, so that an
//! authenticated request costs no database round trip. Only live keys are remembered (by
//! the SHA-256 of the secret, never the secret): a new key works at once, and a revoked key
//! stops working at most `ttl` after `revoked_at` is set (README, "Authentication").

use std::time::{Duration, Instant};

use super::{Caller, SecretHash};
use crate::bounded_map::BoundedMap;

/// More live keys than this in the cache and the stale ones go; past it all of them.
const CAPACITY: usize = 10_000;

pub struct CallerCache {
    ttl: Duration,
    entries: BoundedMap<SecretHash, (Caller, Instant)>,
}

impl CallerCache {
    /// `ttl` zero remembers nothing: every request asks the database.
    pub fn new(ttl: Duration) -> Self {
        CallerCache {
            ttl,
            entries: BoundedMap::new(CAPACITY),
        }
    }

    /// The caller of `hash`, if it was looked up less than `ttl` ago.
    pub fn get(&self, hash: &SecretHash) -> Option<Caller> {
        self.entries
            .get(hash)
            .filter(|(_, at)| at.elapsed() < self.ttl)
            .map(|(caller, _)| caller)
    }

    /// Remembers a live key just looked up.
    pub fn put(&self, hash: SecretHash, caller: Caller) {
        if self.ttl.is_zero() {
            return;
        }
        self.entries
            .insert_keeping(hash, (caller, Instant::now()), |(_, at)| {
                at.elapsed() < self.ttl
            });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{ApiKeyId, MerchantId};

    fn caller() -> Caller {
        Caller::Merchant {
            merchant_id: MerchantId::new(),
            key_id: ApiKeyId::new(),
        }
    }

    #[test]
    fn remembers_for_the_ttl_only() {
        let cache = CallerCache::new(Duration::from_millis(50));
        let who = caller();
        cache.put([1; 32], who);
        assert_eq!(cache.get(&[1; 32]), Some(who));
        assert_eq!(cache.get(&[2; 32]), None);
        std::thread::sleep(Duration::from_millis(60));
        assert_eq!(cache.get(&[1; 32]), None);
    }

    #[test]
    fn a_zero_ttl_remembers_nothing() {
        let cache = CallerCache::new(Duration::ZERO);
        cache.put([1; 32], caller());
        assert_eq!(cache.get(&[1; 32]), None);
    }
}
