//! What the store keeps of a repository's listings between requests, under
//! the repository's `listing_version`: triggers change it whenever a listing
//! of the repository may change (an artifact enters or leaves one, moves in
//! its order, gains or loses a tag, or a tag is renamed; migrations 0014 and
//! 0015). An entry serves only the version it was read at, so it is exact;
//! every clone of the store shares it, and another instance's writes move
//! the version in the shared database.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;

/// At most this many entries are kept; past it, all are forgotten.
const ENTRIES: usize = 1024;

/// Values by key, each with the listing version it was read at.
#[derive(Debug)]
pub(crate) struct Versioned<K, V> {
    entries: Mutex<HashMap<K, (i64, V)>>,
}

impl<K, V> Default for Versioned<K, V> {
    fn default() -> Self {
        Self {
            entries: Mutex::new(HashMap::new()),
        }
    }
}

impl<K: Eq + Hash, V> Versioned<K, V> {
    /// `read` of the value kept for `key` at `version`; `None` when there is
    /// none, or it was read at another version.
    pub(crate) fn get<R>(&self, key: &K, version: i64, read: impl FnOnce(&V) -> R) -> Option<R> {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        match entries.get(key) {
            Some((kept, value)) if *kept == version => Some(read(value)),
            _ => None,
        }
    }

    /// Keeps `value` for `key`, as read at `version`.
    pub(crate) fn put(&self, key: K, version: i64, value: V) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if entries.len() >= ENTRIES {
            entries.clear();
        }
        entries.insert(key, (version, value));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_serve_their_key_and_version_only() {
        let kept: Versioned<(i64, String), i64> = Versioned::default();
        let key = |repository, text: &str| (repository, text.to_string());
        assert_eq!(kept.get(&key(1, "7"), 3, |t| *t), None);
        kept.put(key(1, "7"), 3, 40);
        assert_eq!(kept.get(&key(1, "7"), 3, |t| *t), Some(40));
        assert_eq!(kept.get(&key(1, "7"), 4, |t| *t), None);
        assert_eq!(kept.get(&key(1, "8"), 3, |t| *t), None);
        assert_eq!(kept.get(&key(2, "7"), 3, |t| *t), None);
        kept.put(key(1, "7"), 4, 41);
        assert_eq!(kept.get(&key(1, "7"), 3, |t| *t), None);
        assert_eq!(kept.get(&key(1, "7"), 4, |t| *t), Some(41));
    }
}
