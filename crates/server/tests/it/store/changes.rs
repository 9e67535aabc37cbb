//! Change counters: every write of a topic moves its generation, here at once
//! and, on PostgreSQL, in every other store on the same database.

use std::time::{Duration, Instant};

use berth_store::repo::articles::ArticleFields;
use berth_store::{Store, Topic};

use crate::backend_test;
use crate::util::{Backend, TestApp};

/// Waits until `store` hears changes made elsewhere, then returns its generation.
async fn live_generation(store: &Store) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if let Some(generation) = store.changes().generation(Topic::Articles) {
            return generation;
        }
        assert!(Instant::now() < deadline, "the store never went live");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

backend_test!(
    async fn writes_move_the_generation_of_their_topic(app) {
        let store = app.store();
        let user = app.create_user("writer", "pw-123456").await;
        let mut seen = live_generation(store).await;
        let mut moved = |store: &Store| {
            let now = store.changes().generation(Topic::Articles).unwrap();
            let moved = now > seen;
            seen = now;
            moved
        };
        let fields = ArticleFields { title: Some("t".into()), ..Default::default() };
        let article = store.articles().create(user, &fields).await.unwrap();
        assert!(moved(store), "create");
        store.articles().update(article.id, &fields).await.unwrap();
        assert!(moved(store), "update");
        store.users().update_profile(user, Some("n"), None, "").await.unwrap();
        assert!(moved(store), "the author's profile");
        store.users().update_harbor_profile(user, "w@example.com", "real", "", "").await.unwrap();
        assert!(moved(store), "the author's Harbor profile");
        store.articles().delete(article.id).await.unwrap();
        assert!(moved(store), "delete");
        store.users().tombstone(user).await.unwrap();
        assert!(moved(store), "the author's deletion");
    }
);

/// On PostgreSQL other instances write to the same database: their changes
/// reach this store through the notification listener. (SQLite has no other
/// instance; what it guarantees is tested below.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_instances_writes_are_heard_on_postgres() {
    let app = TestApp::new(Backend::Postgres).await;
    let user = app.create_user("writer", "pw-123456").await;
    let before = live_generation(app.store()).await;
    let other = Store::connect(&app.database_url).await.unwrap();
    let fields = ArticleFields {
        title: Some("t".into()),
        ..Default::default()
    };
    other.articles().create(user, &fields).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while app
        .store()
        .changes()
        .generation(Topic::Articles)
        .is_none_or(|g| g <= before)
    {
        assert!(Instant::now() < deadline, "the notification never arrived");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    other.close().await;
    app.store().close().await;
    assert_eq!(
        app.store().changes().generation(Topic::Articles),
        None,
        "a closed store caches nothing"
    );
}

/// A SQLite database has one writer, this process, and every part of it
/// writes through a clone of one store: the counters are live from the
/// start (there is no listener to wait for), a write through any clone moves
/// them for all at once, and closing turns caching off.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sqlite_store_is_live_at_once_and_shared_by_its_clones() {
    let app = TestApp::new(Backend::Sqlite).await;
    let store = app.store();
    let before = store
        .changes()
        .generation(Topic::Articles)
        .expect("a SQLite store caches from the start");
    let user = app.create_user("writer", "pw-123456").await;
    let clone = store.clone();
    let fields = ArticleFields {
        title: Some("t".into()),
        ..Default::default()
    };
    clone.articles().create(user, &fields).await.unwrap();
    let after = store.changes().generation(Topic::Articles).unwrap();
    assert!(
        after > before,
        "a write through a clone moves the original's generation"
    );
    assert_eq!(clone.changes().generation(Topic::Articles), Some(after));
    clone.close().await;
    assert_eq!(
        store.changes().generation(Topic::Articles),
        None,
        "a closed store caches nothing, through any clone"
    );
}
