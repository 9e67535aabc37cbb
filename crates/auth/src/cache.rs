//! A short-lived cache of verified credentials.
//!
//! Docker and Harbor clients send Basic credentials on every request; a slow
//! password hash each time would cap throughput at a few dozen requests per
//! second per core. Entries are keyed by an HMAC of `login \0 password` under a
//! per-process secret, so the cache never holds a password or a fast hash of
//! one. Each entry remembers the user's `auth_version`; callers compare it with
//! the stored user on every hit, so a password change anywhere invalidates it.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

type Key = [u8; 32];

/// What a cache hit tells: who the credentials belonged to, as of which version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CachedCredential {
    /// The user the credentials verified as.
    pub user_id: i64,
    /// The user's `auth_version` when they were verified.
    pub auth_version: i64,
}

/// The cache; cheap to share behind an `Arc`.
pub struct CredentialCache {
    secret: Vec<u8>,
    ttl: Duration,
    capacity: usize,
    entries: Mutex<HashMap<Key, (CachedCredential, Instant)>>,
}

impl std::fmt::Debug for CredentialCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CredentialCache")
            .field("ttl", &self.ttl)
            .finish_non_exhaustive()
    }
}

impl CredentialCache {
    /// A cache keyed under `secret`, entries living `ttl`, at most `capacity` of them.
    pub fn new(secret: Vec<u8>, ttl: Duration, capacity: usize) -> Self {
        Self {
            secret,
            ttl,
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

    /// The credential verified earlier for exactly this login and password, if still fresh.
    pub fn get(&self, login: &str, password: &str) -> Option<CachedCredential> {
        let key = self.key(login, password);
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        match entries.get(&key) {
            Some((hit, at)) if at.elapsed() < self.ttl => Some(*hit),
            Some(_) => {
                entries.remove(&key);
                None
            }
            None => None,
        }
    }

    /// Remembers that this login and password verified as `credential`.
    pub fn put(&self, login: &str, password: &str, credential: CachedCredential) {
        let key = self.key(login, password);
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if entries.len() >= self.capacity {
            let ttl = self.ttl;
            entries.retain(|_, (_, at)| at.elapsed() < ttl);
            if entries.len() >= self.capacity {
                entries.clear();
            }
        }
        entries.insert(key, (credential, Instant::now()));
    }

    /// Forgets this login and password (a stale hit).
    pub fn remove(&self, login: &str, password: &str) {
        let key = self.key(login, password);
        self.entries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&key);
    }

    /// Forgets every entry of a user (after a password change on this instance).
    pub fn forget_user(&self, user_id: i64) {
        self.entries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|_, (c, _)| c.user_id != user_id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cred(user_id: i64) -> CachedCredential {
        CachedCredential {
            user_id,
            auth_version: 1,
        }
    }

    #[test]
    fn hit_only_for_the_same_login_and_password() {
        let cache = CredentialCache::new(b"k".to_vec(), Duration::from_secs(60), 10);
        cache.put("alice", "pw", cred(2));
        assert_eq!(cache.get("alice", "pw"), Some(cred(2)));
        assert_eq!(cache.get("alice", "pw2"), None);
        assert_eq!(cache.get("alic", "epw"), None);
        cache.forget_user(2);
        assert_eq!(cache.get("alice", "pw"), None);
    }

    #[test]
    fn entries_expire() {
        let cache = CredentialCache::new(b"k".to_vec(), Duration::from_millis(0), 10);
        cache.put("alice", "pw", cred(2));
        assert_eq!(cache.get("alice", "pw"), None);
    }

    #[test]
    fn capacity_is_bounded() {
        let cache = CredentialCache::new(b"k".to_vec(), Duration::from_secs(60), 2);
        for i in 0..5 {
            cache.put(&format!("u{i}"), "pw", cred(i));
        }
        assert!(cache.entries.lock().unwrap().len() <= 2);
        assert_eq!(cache.get("u4", "pw"), Some(cred(4)));
    }
}
