//! Rendered response bodies kept per query, each tagged with the generation of
//! the data it was built from (`berth_store::Changes`).
//!
//! A body is served only while its data's generation is unchanged, so a write
//! made on this instance is seen by the very next read, and one made by
//! another instance as soon as its notification arrives. Callers read the
//! generation *before* they query, so a write that races the query leaves an
//! entry that is already stale.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;

struct Pages<K> {
    /// The newest generation stored; entries of older ones are gone.
    generation: u64,
    bytes: usize,
    bodies: HashMap<K, Bytes>,
}

/// A bounded map from query to rendered body.
pub struct PageCache<K> {
    max_bytes: usize,
    pages: Mutex<Pages<K>>,
    hits: AtomicU64,
    misses: AtomicU64,
}

impl<K> std::fmt::Debug for PageCache<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PageCache")
            .field("max_bytes", &self.max_bytes)
            .finish_non_exhaustive()
    }
}

impl<K: Hash + Eq> PageCache<K> {
    /// A cache holding at most `max_bytes` of bodies.
    pub fn new(max_bytes: usize) -> Self {
        Self {
            max_bytes,
            pages: Mutex::new(Pages {
                generation: 0,
                bytes: 0,
                bodies: HashMap::new(),
            }),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    fn pages(&self) -> std::sync::MutexGuard<'_, Pages<K>> {
        self.pages.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The body stored for `key`, if it was built at `generation`.
    pub fn get(&self, key: &K, generation: u64) -> Option<Bytes> {
        let found = {
            let pages = self.pages();
            (pages.generation == generation)
                .then(|| pages.bodies.get(key).cloned())
                .flatten()
        };
        let counter = if found.is_some() {
            &self.hits
        } else {
            &self.misses
        };
        counter.fetch_add(1, Ordering::Relaxed);
        found
    }

    /// Look-ups so far that found a body, and those that did not.
    pub fn counts(&self) -> (u64, u64) {
        (
            self.hits.load(Ordering::Relaxed),
            self.misses.load(Ordering::Relaxed),
        )
    }

    /// Stores the body of `key`, built from data read at `generation`. Storing
    /// at a newer generation drops everything older; a body for an older
    /// generation than the newest stored is not kept.
    pub fn put(&self, key: K, generation: u64, body: Bytes) {
        let mut pages = self.pages();
        if generation < pages.generation || body.len() > self.max_bytes {
            return;
        }
        if generation > pages.generation || pages.bytes + body.len() > self.max_bytes {
            pages.bodies.clear();
            pages.bytes = 0;
            pages.generation = generation;
        }
        pages.bytes += body.len();
        if let Some(old) = pages.bodies.insert(key, body) {
            pages.bytes -= old.len();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn served_only_at_the_generation_it_was_built_at() {
        let cache = PageCache::new(1024);
        cache.put("a", 1, Bytes::from_static(b"one"));
        assert_eq!(cache.get(&"a", 1).as_deref(), Some(&b"one"[..]));
        assert_eq!(cache.get(&"a", 2), None);
        assert_eq!(cache.get(&"b", 1), None);
        cache.put("b", 2, Bytes::from_static(b"two"));
        assert_eq!(
            cache.get(&"a", 1),
            None,
            "a newer generation drops older bodies"
        );
        cache.put("a", 1, Bytes::from_static(b"late"));
        assert_eq!(
            cache.get(&"a", 1),
            None,
            "an older generation is not stored"
        );
        assert_eq!(cache.get(&"b", 2).as_deref(), Some(&b"two"[..]));
    }

    #[test]
    fn bounded_by_bytes() {
        let cache = PageCache::new(8);
        cache.put(1, 0, Bytes::from_static(b"12345"));
        cache.put(2, 0, Bytes::from_static(b"12345"));
        assert_eq!(
            cache.get(&1, 0),
            None,
            "full: the older bodies were dropped"
        );
        assert!(cache.get(&2, 0).is_some());
        cache.put(3, 0, Bytes::from_static(b"123456789"));
        assert_eq!(cache.get(&3, 0), None, "larger than the whole cache");
        cache.put(2, 0, Bytes::from_static(b"123"));
        assert_eq!(cache.pages().bytes, 3, "a replaced body no longer counts");
    }
}
