//! Which data changed: generation counters that in-memory caches compare against.
//!
//! Every store function that writes data of a [`Topic`] bumps its generation
//! here, in this process, once the write is done. A cache remembers the
//! generation it read under and throws the entry away when the generation has
//! moved on, so a read that follows a write on this instance never sees the
//! old data.
//!
//! Other instances write to a shared PostgreSQL database too. There, triggers
//! (migration `0003_change_notifications`) send a notification on channel
//! [`CHANNEL`] when a topic's tables change, and a listener task bumps the
//! generation here when one arrives. While that listener is not connected, a
//! change elsewhere could go unheard, so [`Changes::generation`] answers
//! `None` and callers must not cache. With SQLite this process owns the
//! database, and the in-process bumps are the whole story.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use sqlx::postgres::PgListener;

/// The PostgreSQL notification channel of the change triggers.
pub const CHANNEL: &str = "berth_changes";

/// A family of data that caches are built from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Topic {
    /// Articles, and the author fields their views show (a user's name,
    /// picture and deletion).
    Articles,
    /// What a manifest GET reads: projects and their metadata, repositories,
    /// artifacts, tags, index references, and who holds which role in a
    /// project (members, user groups' members). Bumped here by the server
    /// after every request that changes something (and by background writers
    /// and group syncs at sign-in), and by the triggers of migrations 0018
    /// and 0019 on PostgreSQL.
    Registry,
}

impl Topic {
    const ALL: [Topic; 2] = [Topic::Articles, Topic::Registry];

    /// The payload of this topic's notifications.
    fn payload(self) -> &'static str {
        match self {
            Topic::Articles => "articles",
            Topic::Registry => "registry",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

#[derive(Debug, Default)]
struct Shared {
    generations: [AtomicU64; Topic::ALL.len()],
    /// Whether changes made elsewhere are heard (always, on SQLite).
    live: AtomicBool,
}

impl Shared {
    fn bump(&self, topic: Topic) {
        self.generations[topic.index()].fetch_add(1, Ordering::AcqRel);
    }

    fn bump_all(&self) {
        for topic in Topic::ALL {
            self.bump(topic);
        }
    }
}

/// The generation counters of one store; shared by its clones.
#[derive(Debug)]
pub struct Changes {
    shared: Arc<Shared>,
    listener: Option<tokio::task::JoinHandle<()>>,
}

impl Changes {
    /// Counters for a database only this process writes (SQLite).
    pub(crate) fn local() -> Self {
        let shared = Arc::new(Shared::default());
        shared.live.store(true, Ordering::Release);
        Self {
            shared,
            listener: None,
        }
    }

    /// Counters for a shared PostgreSQL database at `url`, kept up to date by
    /// a listener task that lives as long as these counters.
    pub(crate) fn listening(url: String) -> Self {
        let shared = Arc::new(Shared::default());
        let listener = tokio::spawn(listen(url, shared.clone()));
        Self {
            shared,
            listener: Some(listener),
        }
    }

    /// The current generation of `topic`, or `None` while changes made by other
    /// instances could go unheard (then nothing may be cached).
    pub fn generation(&self, topic: Topic) -> Option<u64> {
        if !self.shared.live.load(Ordering::Acquire) {
            return None;
        }
        Some(self.shared.generations[topic.index()].load(Ordering::Acquire))
    }

    /// Records that data of `topic` just changed (after the change committed).
    pub fn bump(&self, topic: Topic) {
        self.shared.bump(topic);
    }

    /// Stops listening; from now on nothing may be cached.
    pub(crate) fn stop(&self) {
        if let Some(listener) = &self.listener {
            listener.abort();
        }
        self.shared.live.store(false, Ordering::Release);
    }
}

impl Drop for Changes {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Listens on [`CHANNEL`] for good, reconnecting after a second when the
/// connection fails. Every (re)connection bumps every topic: whatever was
/// cached before it may have missed a change.
async fn listen(url: String, shared: Arc<Shared>) {
    loop {
        if let Ok(mut listener) = PgListener::connect(&url).await
            && listener.listen(CHANNEL).await.is_ok()
        {
            shared.bump_all();
            shared.live.store(true, Ordering::Release);
            while let Ok(Some(notification)) = listener.try_recv().await {
                match Topic::ALL
                    .into_iter()
                    .find(|t| t.payload() == notification.payload())
                {
                    Some(topic) => shared.bump(topic),
                    None => shared.bump_all(),
                }
            }
            shared.live.store(false, Ordering::Release);
            shared.bump_all();
            tracing::warn!("lost the change notification connection; caches off until it is back");
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bumps_move_only_their_topic_and_local_counters_are_live() {
        let changes = Changes::local();
        let before = changes.generation(Topic::Articles).unwrap();
        changes.bump(Topic::Articles);
        assert_eq!(changes.generation(Topic::Articles), Some(before + 1));
        changes.stop();
        assert_eq!(changes.generation(Topic::Articles), None);
    }
}
