//! A map of what this replica remembers to save a database read (live API keys, finished
//! Idempotency-Keys, final attempts), bounded in size: when full it makes room by forgetting,
//! which costs only the reads it would have saved.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;

pub struct BoundedMap<K, V> {
    capacity: usize,
    entries: Mutex<HashMap<K, V>>,
}

impl<K: Eq + Hash, V: Clone> BoundedMap<K, V> {
    pub fn new(capacity: usize) -> Self {
        BoundedMap {
            capacity,
            entries: Mutex::new(HashMap::new()),
        }
    }

    /// A copy of the value remembered for `key`.
    pub fn get<Q>(&self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
        Q: Eq + Hash + ?Sized,
    {
        self.lock().get(key).cloned()
    }

    /// Remembers `value`; when full, first forgets everything.
    pub fn insert(&self, key: K, value: V) {
        self.insert_keeping(key, value, |_| false);
    }

    /// Remembers `value`; when full, first forgets the entries `keep` does not want, and if
    /// that is not enough, everything.
    pub fn insert_keeping(&self, key: K, value: V, keep: impl Fn(&V) -> bool) {
        let mut entries = self.lock();
        if entries.len() >= self.capacity {
            entries.retain(|_, value| keep(value));
            if entries.len() >= self.capacity {
                entries.clear();
            }
        }
        entries.insert(key, value);
    }

    /// Reads and changes the value of `key` under one lock, so that no other change falls
    /// between the read and the write (a rate limiter's check-and-take). `change` sees the
    /// value remembered, if any, and says what to remember instead (`None`: leave it as it
    /// is) and what to return. When full, room is made as [`insert_keeping`](Self::insert_keeping)
    /// makes it.
    pub fn update_keeping<R>(
        &self,
        key: K,
        change: impl FnOnce(Option<&V>) -> (Option<V>, R),
        keep: impl Fn(&V) -> bool,
    ) -> R {
        let mut entries = self.lock();
        let (value, answer) = change(entries.get(&key));
        if let Some(value) = value {
            if entries.len() >= self.capacity && !entries.contains_key(&key) {
                entries.retain(|_, value| keep(value));
                if entries.len() >= self.capacity {
                    entries.clear();
                }
            }
            entries.insert(key, value);
        }
        answer
    }

    /// Forgets `key`.
    pub fn remove<Q>(&self, key: &Q)
    where
        K: Borrow<Q>,
        Q: Eq + Hash + ?Sized,
    {
        self.lock().remove(key);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<K, V>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_update_reads_and_writes_one_value_and_makes_room_like_an_insert() {
        let map = BoundedMap::new(2);
        let seen = map.update_keeping(1, |old| (Some(10), old.copied()), |_| true);
        assert_eq!(seen, None);
        let seen = map.update_keeping(1, |old| (None, old.copied()), |_| true);
        assert_eq!((seen, map.get(&1)), (Some(10), Some(10)), "None leaves it");
        map.insert(2, 20);
        map.update_keeping(3, |_| (Some(30), ()), |v| *v == 20);
        assert_eq!(
            (map.get(&1), map.get(&2), map.get(&3)),
            (None, Some(20), Some(30))
        );
    }

    #[test]
    fn a_full_map_forgets_what_it_need_not_keep_then_everything() {
        let map = BoundedMap::new(2);
        map.insert(1, 10);
        map.insert(2, 20);
        map.insert_keeping(3, 30, |v| *v == 20);
        assert_eq!(
            (map.get(&1), map.get(&2), map.get(&3)),
            (None, Some(20), Some(30))
        );
        map.insert(4, 40);
        assert_eq!(
            (map.get(&2), map.get(&3), map.get(&4)),
            (None, None, Some(40))
        );
    }
}
