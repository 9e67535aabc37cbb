//! Change counters: every write of a topic moves its generation, here at once
//! and, on PostgreSQL, in every other store on the same database.

use std::time::{Duration, Instant};

use berth_store::repo::articles::ArticleFields;
use berth_store::{Store, Topic};

use crate::backend_test;
use crate::util::Backend;

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
        store.articles().delete(article.id).await.unwrap();
        assert!(moved(store), "delete");
        store.users().tombstone(user).await.unwrap();
        assert!(moved(store), "the author's deletion");
    }
);

backend_test!(
    async fn another_instances_writes_are_heard_on_postgres(app) {
        if app.backend == Backend::Sqlite {
            // One process owns a SQLite database: there is no other instance.
            return;
        }
        let user = app.create_user("writer", "pw-123456").await;
        let before = live_generation(app.store()).await;
        let other = Store::connect(&app.database_url).await.unwrap();
        let fields = ArticleFields { title: Some("t".into()), ..Default::default() };
        other.articles().create(user, &fields).await.unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        while app.store().changes().generation(Topic::Articles).is_none_or(|g| g <= before) {
            assert!(Instant::now() < deadline, "the notification never arrived");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        other.close().await;
        app.store().close().await;
        assert_eq!(app.store().changes().generation(Topic::Articles), None, "a closed store caches nothing");
    }
);
