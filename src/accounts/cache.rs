//! Who a presented secret belongs to, remembered in process for a short while, so that an
//! authenticated request costs no database round trip. Only live keys are remembered (by
//! the SHA-256 of the secret, never the secret), each with its `expires_at`: a new key works
//! at once, an expired one stops at its expiry, and a revoked one as soon as this replica's
//! poll of `api_keys` ([`super::sync`]) evicts it — within a second; `ttl` bounds it if the
//! poll cannot reach the database (docs/guides/idempotency.md, "Authentication").
//!
//! Shared by handle: the HTTP workers read it, the poll evicts from it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};

use super::last_used::KeyUses;
use super::{Caller, LiveKey, SecretHash};
use crate::bounded_map::BoundedMap;
use crate::ids::ApiKeyId;

/// More live keys than this in the cache and the stale ones go; past it all of them.
const CAPACITY: usize = 10_000;

/// What [`CallerCache::recall`] knows of a secret.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recalled {
    /// Looked up less than the ttl ago, and not expired: the caller, with no lookup.
    Fresh(Caller),
    /// A live key when last looked up, neither evicted by the key poll nor failed since: to
    /// be looked up again, and not held up by the failed-authentication limits meanwhile.
    Stale,
    Unknown,
}

#[derive(Clone)]
pub struct CallerCache {
    inner: Arc<Inner>,
}

struct Inner {
    ttl: Duration,
    entries: BoundedMap<SecretHash, Entry>,
    uses: KeyUses,
}

#[derive(Clone, Copy)]
struct Entry {
    caller: Caller,
    expires_at: Option<DateTime<Utc>>,
    at: Instant,
}

impl Entry {
    fn fresh(&self, ttl: Duration) -> bool {
        self.at.elapsed() < ttl && self.expires_at.is_none_or(|end| Utc::now() < end)
    }
}

impl CallerCache {
    /// `ttl` zero remembers nothing: every request asks the database.
    pub fn new(ttl: Duration) -> Self {
        CallerCache {
            inner: Arc::new(Inner {
                ttl,
                entries: BoundedMap::new(CAPACITY),
                uses: KeyUses::default(),
            }),
        }
    }

    /// The caller of `hash`, if it was looked up less than `ttl` ago and has not expired since.
    pub fn get(&self, hash: &SecretHash) -> Option<Caller> {
        match self.recall(hash) {
            Recalled::Fresh(caller) => Some(caller),
            Recalled::Stale | Recalled::Unknown => None,
        }
    }

    /// What this replica remembers of `hash`: a caller to answer with, a key that was live
    /// when last looked up and has not been evicted since (to be looked up again), or nothing.
    pub fn recall(&self, hash: &SecretHash) -> Recalled {
        let ttl = self.inner.ttl;
        match self.inner.entries.get(hash) {
            Some(entry) if entry.fresh(ttl) => Recalled::Fresh(entry.caller),
            Some(_) => Recalled::Stale,
            None => Recalled::Unknown,
        }
    }

    /// Remembers a live key just looked up.
    pub fn put(&self, hash: SecretHash, key: LiveKey) {
        let ttl = self.inner.ttl;
        if ttl.is_zero() {
            return;
        }
        let entry = Entry {
            caller: key.caller,
            expires_at: key.expires_at,
            at: Instant::now(),
        };
        self.inner
            .entries
            .insert_keeping(hash, entry, |entry| entry.fresh(ttl));
    }

    /// Forgets `hash`: its key was revoked, or its expiry changed.
    pub fn evict(&self, hash: &SecretHash) {
        self.inner.entries.remove(hash);
    }

    /// Notes that `key` was just used, for its `last_used_at` (written off the request path).
    pub fn note_use(&self, key: ApiKeyId) {
        self.inner.uses.note(key);
    }

    pub(super) fn uses(&self) -> &KeyUses {
        &self.inner.uses
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{ApiKeyId, MerchantId};

    fn key(expires_at: Option<DateTime<Utc>>) -> LiveKey {
        LiveKey {
            caller: Caller::Merchant {
                merchant_id: MerchantId::new(),
                key_id: ApiKeyId::new(),
            },
            expires_at,
        }
    }

    #[test]
    fn remembers_for_the_ttl_only() {
        let cache = CallerCache::new(Duration::from_millis(50));
        let who = key(None);
        cache.put([1; 32], who);
        assert_eq!(cache.get(&[1; 32]), Some(who.caller));
        assert_eq!(cache.get(&[2; 32]), None);
        std::thread::sleep(Duration::from_millis(60));
        assert_eq!(cache.get(&[1; 32]), None);
    }

    #[test]
    fn a_zero_ttl_remembers_nothing() {
        let cache = CallerCache::new(Duration::ZERO);
        cache.put([1; 32], key(None));
        assert_eq!(cache.get(&[1; 32]), None);
    }

    #[test]
    fn an_expired_key_is_not_answered_from_the_cache() {
        let cache = CallerCache::new(Duration::from_secs(60));
        cache.put(
            [1; 32],
            key(Some(Utc::now() - chrono::Duration::seconds(1))),
        );
        cache.put([2; 32], key(Some(Utc::now() + chrono::Duration::hours(1))));
        assert_eq!(cache.get(&[1; 32]), None);
        assert!(cache.get(&[2; 32]).is_some());
    }

    #[test]
    fn a_key_past_the_ttl_or_its_expiry_is_remembered_as_stale_until_evicted() {
        let cache = CallerCache::new(Duration::from_millis(50));
        let who = key(None);
        cache.put([1; 32], who);
        cache.put(
            [2; 32],
            key(Some(Utc::now() - chrono::Duration::seconds(1))),
        );
        assert_eq!(cache.recall(&[1; 32]), Recalled::Fresh(who.caller));
        assert_eq!(cache.recall(&[2; 32]), Recalled::Stale);
        assert_eq!(cache.recall(&[3; 32]), Recalled::Unknown);
        std::thread::sleep(Duration::from_millis(60));
        assert_eq!(cache.recall(&[1; 32]), Recalled::Stale);
        cache.evict(&[1; 32]);
        assert_eq!(cache.recall(&[1; 32]), Recalled::Unknown);
    }

    #[test]
    fn an_evicted_key_is_asked_again() {
        let cache = CallerCache::new(Duration::from_secs(60));
        cache.put([1; 32], key(None));
        cache.evict(&[1; 32]);
        assert_eq!(cache.get(&[1; 32]), None);
    }
}
