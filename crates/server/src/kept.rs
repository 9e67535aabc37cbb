//! Values read from the store under a generation of its [`Changes`], kept
//! until that generation moves on.
//!
//! A reader takes the generation *before* its query and keeps the answer
//! under it: a change that races the query moves the generation past the one
//! the entry is kept under, so an entry is never served after a change it may
//! not show. While the store cannot hear other instances' changes
//! ([`Changes::generation`] is `None`), nothing is kept or served.
//!
//! [`Changes`]: berth_store::Changes
//! [`Changes::generation`]: berth_store::Changes::generation

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Mutex, MutexGuard};

/// At most `capacity` values by key, each with the generation it was read at.
#[derive(Debug)]
pub struct Kept<K, V> {
    entries: Mutex<HashMap<K, (u64, V)>>,
    capacity: usize,
}

impl<K: Eq + Hash, V: Clone> Kept<K, V> {
    /// An empty store of at most `capacity` values; past it, all are forgotten.
    pub fn new(capacity: usize) -> Self {
        Self {
            entries: Mutex::new(HashMap::new()),
            capacity,
        }
    }

    /// The value kept for `key` if it was read at `generation`.
    pub fn get(&self, generation: Option<u64>, key: &K) -> Option<V> {
        let generation = generation?;
        match self.entries().get(key) {
            Some((kept, value)) if *kept == generation => Some(value.clone()),
            _ => None,
        }
    }

    /// Keeps `value`, read at `generation`, for `key`.
    pub fn keep(&self, generation: Option<u64>, key: K, value: V) {
        let Some(generation) = generation else {
            return;
        };
        let mut entries = self.entries();
        if entries.len() >= self.capacity {
            entries.clear();
        }
        entries.insert(key, (generation, value));
    }

    fn entries(&self) -> MutexGuard<'_, HashMap<K, (u64, V)>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_served_only_at_the_generation_they_were_read_at() {
        let kept = Kept::new(2);
        kept.keep(Some(1), "a", 10);
        assert_eq!(kept.get(Some(1), &"a"), Some(10));
        assert_eq!(kept.get(Some(2), &"a"), None, "the generation moved on");
        assert_eq!(kept.get(None, &"a"), None, "changes elsewhere go unheard");
        kept.keep(None, "b", 20);
        assert_eq!(kept.get(None, &"b"), None);
        kept.keep(Some(2), "b", 20);
        kept.keep(Some(2), "c", 30);
        assert_eq!(
            kept.get(Some(2), &"a"),
            None,
            "full: everything was forgotten"
        );
        assert_eq!(kept.get(Some(2), &"c"), Some(30));
    }
}
