//! Short-lived caches that keep slow hashes and store reads off the hot path.
//!
//! [`TimedCache`] is the mechanism: an entry is trusted as it is for a short
//! revalidation window, then reported stale so the caller re-checks it against
//! the store, and forgotten after its lifetime. Changes made on this instance
//! evict entries at once; changes made by another instance sharing the database
//! are seen within the revalidation window.
//!
//! [`CredentialCache`] keys it by verified credentials. Docker and Harbor
//! clients send Basic credentials on every request; a slow password hash each
//! time would cap throughput at a few dozen requests per second per core.
//! Entries are keyed by an HMAC of `login \0 password` under a per-process
//! secret, so the cache never holds a password or a fast hash of one.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

struct Entry<V> {
    value: V,
    stored_at: Instant,
    checked_at: Instant,
}

/// What a lookup found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup<V> {
    /// Stored and checked within the revalidation window: use as is.
    Fresh(V),
    /// Stored within the lifetime, but due for a check against the store.
    Stale(V),
    /// Not cached (or expired).
    Miss,
}

/// Timings of a cache.
#[derive(Debug, Clone, Copy)]
pub struct CacheTimes {
    /// How long an entry is kept at all (for credentials: how long a verified
    /// password is trusted before it is hashed again).
    pub lifetime: Duration,
    /// How long an entry is used without checking the store.
    pub revalidate: Duration,
}

/// A bounded map whose entries go stale, then expire; cheap to share behind an `Arc`.
pub struct TimedCache<K, V> {
    times: CacheTimes,
    capacity: usize,
    /// Nanoseconds this cache's clock runs ahead of the monotonic clock: zero
    /// unless a test moved it on ([`TimedCache::advance_clock`]).
    ahead_nanos: AtomicU64,
    entries: Mutex<HashMap<K, Entry<V>>>,
}

impl<K, V> std::fmt::Debug for TimedCache<K, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TimedCache")
            .field("times", &self.times)
            .finish_non_exhaustive()
    }
}

impl<K: Hash + Eq, V: Clone> TimedCache<K, V> {
    /// A cache with `times`, holding at most `capacity` entries.
    pub fn new(times: CacheTimes, capacity: usize) -> Self {
        Self {
            times,
            capacity,
            ahead_nanos: AtomicU64::new(0),
            entries: Mutex::new(HashMap::new()),
        }
    }

    /// The windows this cache was built with.
    pub fn times(&self) -> CacheTimes {
        self.times
    }

    /// Moves this cache's clock on by `by`: entries age as if that much time
    /// had passed, so tests can cross a revalidation window or a lifetime
    /// without sleeping. Nothing else moves the clock.
    pub fn advance_clock(&self, by: Duration) {
        let nanos = u64::try_from(by.as_nanos()).unwrap_or(u64::MAX);
        self.ahead_nanos.fetch_add(nanos, Ordering::Relaxed);
    }

    /// The cache's clock: the monotonic clock plus what tests advanced it by.
    fn now(&self) -> Instant {
        Instant::now() + Duration::from_nanos(self.ahead_nanos.load(Ordering::Relaxed))
    }

    fn entries(&self) -> std::sync::MutexGuard<'_, HashMap<K, Entry<V>>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What is cached under `key`.
    pub fn get(&self, key: &K) -> Lookup<V> {
        let mut entries = self.entries();
        let Some(entry) = entries.get(key) else {
            return Lookup::Miss;
        };
        let now = self.now();
        if now - entry.stored_at >= self.times.lifetime {
            entries.remove(key);
            Lookup::Miss
        } else if now - entry.checked_at < self.times.revalidate {
            Lookup::Fresh(entry.value.clone())
        } else {
            Lookup::Stale(entry.value.clone())
        }
    }

    /// Stores `value` under `key`, as just checked.
    pub fn put(&self, key: K, value: V) {
        let mut entries = self.entries();
        let now = self.now();
        if entries.len() >= self.capacity {
            let lifetime = self.times.lifetime;
            entries.retain(|_, e| now - e.stored_at < lifetime);
            if entries.len() >= self.capacity {
                entries.clear();
            }
        }
        entries.insert(
            key,
            Entry {
                value,
                stored_at: now,
                checked_at: now,
            },
        );
    }

    /// Records a successful check of a stale entry against the store; its
    /// lifetime still counts from when it was stored.
    pub fn refresh(&self, key: &K, value: V) {
        let now = self.now();
        if let Some(entry) = self.entries().get_mut(key) {
            entry.value = value;
            entry.checked_at = now;
        }
    }

    /// Forgets `key`.
    pub fn remove(&self, key: &K) {
        self.entries().remove(key);
    }

    /// Forgets every entry whose value matches.
    pub fn forget(&self, matches: impl Fn(&V) -> bool) {
        self.entries().retain(|_, e| !matches(&e.value));
    }
}

/// Verified credentials: a [`TimedCache`] keyed by an HMAC of login and password.
pub struct CredentialCache<V> {
    secret: Vec<u8>,
    inner: TimedCache<[u8; 32], V>,
}

impl<V> std::fmt::Debug for CredentialCache<V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CredentialCache")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl<V: Clone> CredentialCache<V> {
    /// A cache keyed under `secret`, with `times`, holding at most `capacity` entries.
    pub fn new(secret: Vec<u8>, times: CacheTimes, capacity: usize) -> Self {
        Self {
            secret,
            inner: TimedCache::new(times, capacity),
        }
    }

    fn key(&self, login: &str, password: &str) -> [u8; 32] {
        let mut mac =
            Hmac::<Sha256>::new_from_slice(&self.secret).expect("HMAC takes any key length");
        mac.update(login.as_bytes());
        mac.update(&[0]);
        mac.update(password.as_bytes());
        mac.finalize().into_bytes().into()
    }

    /// What is cached for exactly this login and password.
    pub fn get(&self, login: &str, password: &str) -> Lookup<V> {
        self.inner.get(&self.key(login, password))
    }

    /// Remembers that this login and password just verified as `value`.
    pub fn put(&self, login: &str, password: &str, value: V) {
        self.inner.put(self.key(login, password), value);
    }

    /// Records a successful check of a stale entry against the store.
    pub fn refresh(&self, login: &str, password: &str, value: V) {
        self.inner.refresh(&self.key(login, password), value);
    }

    /// Forgets this login and password.
    pub fn remove(&self, login: &str, password: &str) {
        self.inner.remove(&self.key(login, password));
    }

    /// Forgets every entry whose value matches (a user who changed on this instance).
    pub fn forget(&self, matches: impl Fn(&V) -> bool) {
        self.inner.forget(matches);
    }

    /// The windows this cache was built with.
    pub fn times(&self) -> CacheTimes {
        self.inner.times()
    }

    /// Moves this cache's clock on by `by` (see [`TimedCache::advance_clock`]).
    pub fn advance_clock(&self, by: Duration) {
        self.inner.advance_clock(by);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache(lifetime_ms: u64, revalidate_ms: u64, capacity: usize) -> CredentialCache<i64> {
        let times = CacheTimes {
            lifetime: Duration::from_millis(lifetime_ms),
            revalidate: Duration::from_millis(revalidate_ms),
        };
        CredentialCache::new(b"k".to_vec(), times, capacity)
    }

    #[test]
    fn hit_only_for_the_same_login_and_password() {
        let cache = cache(60_000, 60_000, 10);
        cache.put("alice", "pw", 2);
        assert_eq!(cache.get("alice", "pw"), Lookup::Fresh(2));
        assert_eq!(cache.get("alice", "pw2"), Lookup::Miss);
        assert_eq!(cache.get("alic", "epw"), Lookup::Miss);
        cache.forget(|id| *id == 2);
        assert_eq!(cache.get("alice", "pw"), Lookup::Miss);
    }

    #[test]
    fn entries_go_stale_then_expire() {
        let cache = cache(60_000, 0, 10);
        cache.put("alice", "pw", 2);
        assert_eq!(cache.get("alice", "pw"), Lookup::Stale(2));
        let expired = self::cache(0, 0, 10);
        expired.put("alice", "pw", 2);
        assert_eq!(expired.get("alice", "pw"), Lookup::Miss);
    }

    #[test]
    fn the_clock_moves_entries_across_their_windows() {
        let cache = cache(60_000, 2_000, 10);
        cache.put("alice", "pw", 2);
        cache.advance_clock(Duration::from_millis(1_000));
        assert_eq!(cache.get("alice", "pw"), Lookup::Fresh(2));
        cache.advance_clock(Duration::from_millis(1_000));
        assert_eq!(
            cache.get("alice", "pw"),
            Lookup::Stale(2),
            "revalidation window over"
        );
        cache.refresh("alice", "pw", 3);
        assert_eq!(
            cache.get("alice", "pw"),
            Lookup::Fresh(3),
            "checked again just now"
        );
        cache.advance_clock(Duration::from_millis(2_000));
        assert_eq!(cache.get("alice", "pw"), Lookup::Stale(3));
        cache.refresh("alice", "pw", 3);
        cache.advance_clock(Duration::from_millis(56_000));
        assert_eq!(
            cache.get("alice", "pw"),
            Lookup::Miss,
            "the lifetime counts from when the entry was stored, not from its last check"
        );
        assert_eq!(cache.times().revalidate, Duration::from_millis(2_000));
    }

    #[test]
    fn a_full_cache_drops_expired_entries_first() {
        let cache = cache(60_000, 60_000, 2);
        cache.put("old", "pw", 1);
        cache.advance_clock(Duration::from_secs(60));
        cache.put("new", "pw", 2);
        cache.put("newer", "pw", 3);
        assert_eq!(
            cache.get("new", "pw"),
            Lookup::Fresh(2),
            "only the expired entry made room"
        );
        assert_eq!(cache.get("newer", "pw"), Lookup::Fresh(3));
        assert_eq!(cache.get("old", "pw"), Lookup::Miss);
    }

    #[test]
    fn refresh_and_remove() {
        let cache = cache(60_000, 0, 10);
        cache.put("alice", "pw", 2);
        cache.refresh("alice", "pw", 3);
        assert_eq!(cache.get("alice", "pw"), Lookup::Stale(3));
        cache.remove("alice", "pw");
        assert_eq!(cache.get("alice", "pw"), Lookup::Miss);
    }

    #[test]
    fn capacity_is_bounded() {
        let cache = cache(60_000, 60_000, 2);
        for i in 0..5 {
            cache.put(&format!("u{i}"), "pw", i);
        }
        assert!(cache.inner.entries().len() <= 2);
        assert_eq!(cache.get("u4", "pw"), Lookup::Fresh(4));
    }

    #[test]
    fn timed_cache_by_plain_key() {
        let times = CacheTimes {
            lifetime: Duration::from_secs(60),
            revalidate: Duration::from_secs(60),
        };
        let cache: TimedCache<i64, &str> = TimedCache::new(times, 10);
        cache.put(7, "seven");
        assert_eq!(cache.get(&7), Lookup::Fresh("seven"));
        assert_eq!(cache.get(&8), Lookup::Miss);
        cache.forget(|v| *v == "seven");
        assert_eq!(cache.get(&7), Lookup::Miss);
    }
}
