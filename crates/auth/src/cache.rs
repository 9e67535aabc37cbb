//! A short-lived cache of verified credentials.
//!
//! Docker and Harbor clients send Basic credentials on every request; a slow
//! password hash each time would cap throughput at a few dozen requests per
//! second per core. Entries are keyed by an HMAC of `login \0 password` under a
//! per-process secret, so the cache never holds a password or a fast hash of
//! one. An entry is trusted as it is for a short revalidation window; after
//! that the caller re-reads the user and compares its `auth_version`, so a
//! password change made on another instance takes effect within that window.
//! Changes made on this instance evict the user's entries at once.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

type Key = [u8; 32];

struct Entry<V> {
    value: V,
    verified_at: Instant,
    checked_at: Instant,
}

/// What a lookup found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup<V> {
    /// Verified and checked within the revalidation window: use as is.
    Fresh(V),
    /// Verified within the lifetime, but due for a check against the store.
    Stale(V),
    /// Not cached (or expired): verify the password.
    Miss,
}

/// Timings of a [`CredentialCache`].
#[derive(Debug, Clone, Copy)]
pub struct CacheTimes {
    /// How long a verified password is trusted before it is hashed again.
    pub lifetime: Duration,
    /// How long an entry is used without checking the stored user.
    pub revalidate: Duration,
}

/// The cache; cheap to share behind an `Arc`.
pub struct CredentialCache<V> {
    secret: Vec<u8>,
    times: CacheTimes,
    capacity: usize,
    entries: Mutex<HashMap<Key, Entry<V>>>,
}

impl<V> std::fmt::Debug for CredentialCache<V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CredentialCache")
            .field("times", &self.times)
            .finish_non_exhaustive()
    }
}

impl<V: Clone> CredentialCache<V> {
    /// A cache keyed under `secret`, with `times`, holding at most `capacity` entries.
    pub fn new(secret: Vec<u8>, times: CacheTimes, capacity: usize) -> Self {
        Self {
            secret,
            times,
            capacity,
            entries: Mutex::new(HashMap::new()),
        }
    }

    fn key(&self, login: &str, password: &str) -> Key {
        let mut mac =
            Hmac::<Sha256>::new_from_slice(&self.secret).expect("HMAC takes any key length");
        mac.update(login.as_bytes());
        mac.update(&[0]);
        mac.update(password.as_bytes());
        mac.finalize().into_bytes().into()
    }

    fn entries(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Entry<V>>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What is cached for exactly this login and password.
    pub fn get(&self, login: &str, password: &str) -> Lookup<V> {
        let key = self.key(login, password);
        let mut entries = self.entries();
        let Some(entry) = entries.get(&key) else {
            return Lookup::Miss;
        };
        if entry.verified_at.elapsed() >= self.times.lifetime {
            entries.remove(&key);
            Lookup::Miss
        } else if entry.checked_at.elapsed() < self.times.revalidate {
            Lookup::Fresh(entry.value.clone())
        } else {
            Lookup::Stale(entry.value.clone())
        }
    }

    /// Remembers that this login and password just verified as `value`.
    pub fn put(&self, login: &str, password: &str, value: V) {
        let key = self.key(login, password);
        let mut entries = self.entries();
        if entries.len() >= self.capacity {
            let lifetime = self.times.lifetime;
            entries.retain(|_, e| e.verified_at.elapsed() < lifetime);
            if entries.len() >= self.capacity {
                entries.clear();
            }
        }
        let now = Instant::now();
        entries.insert(
            key,
            Entry {
                value,
                verified_at: now,
                checked_at: now,
            },
        );
    }

    /// Records a successful check of a stale entry against the store.
    pub fn refresh(&self, login: &str, password: &str, value: V) {
        let key = self.key(login, password);
        if let Some(entry) = self.entries().get_mut(&key) {
            entry.value = value;
            entry.checked_at = Instant::now();
        }
    }

    /// Forgets this login and password.
    pub fn remove(&self, login: &str, password: &str) {
        let key = self.key(login, password);
        self.entries().remove(&key);
    }

    /// Forgets every entry whose value matches (a user whose password,
    /// administrator flag or existence changed on this instance).
    pub fn forget(&self, matches: impl Fn(&V) -> bool) {
        self.entries().retain(|_, e| !matches(&e.value));
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
        assert!(cache.entries().len() <= 2);
        assert_eq!(cache.get("u4", "pw"), Lookup::Fresh(4));
    }
}
