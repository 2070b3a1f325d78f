//! Keys this replica has seen finished, remembered so that a replay skips the claim statement
//! and only reads its resource as it is now.
//!
//! A finished key never changes: its operation, fingerprint, status and resource are fixed
//! once it is completed, and it is deleted only after it expires. So a remembered key is
//! answered exactly as the database would answer it until its `expires_at`, after which it is
//! forgotten and the claim statement judges it again. Keys in flight are never remembered.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::{Fingerprint, KeyedRequest};
use crate::bounded_map::BoundedMap;
use crate::ids::MerchantId;

/// Past this many keys the map is emptied and starts again: a bound on memory, not a cache
/// policy worth more (a forgotten key costs one claim statement).
const CAPACITY: usize = 20_000;

/// What a finished key answers.
#[derive(Debug, Clone)]
pub struct Finished {
    pub operation: &'static str,
    pub fingerprint: Fingerprint,
    pub status: u16,
    pub resource_id: Uuid,
    pub expires_at: DateTime<Utc>,
}

pub struct RecentKeys {
    entries: BoundedMap<(MerchantId, String), Finished>,
}

impl Default for RecentKeys {
    fn default() -> Self {
        RecentKeys {
            entries: BoundedMap::new(CAPACITY),
        }
    }
}

impl RecentKeys {
    /// The finished key of `request`, if remembered and not expired.
    pub fn get(&self, request: &KeyedRequest) -> Option<Finished> {
        self.entries
            .get(&(request.merchant_id, request.key.as_str().to_owned()))
            .filter(|finished| finished.expires_at > Utc::now())
    }

    pub fn remember(&self, request: &KeyedRequest, finished: Finished) {
        self.entries.insert(
            (request.merchant_id, request.key.as_str().to_owned()),
            finished,
        );
    }
}
