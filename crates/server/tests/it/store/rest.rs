//! The store functions behind the generator-rest API: tombstones, single-use
//! password resets, social identities, article listing.

use berth_domain::model::NewUser;
use berth_domain::rest_query::ListQuery;
use berth_store::repo::articles::ArticleFields;

use crate::backend_test;

fn rest_user(email: &str) -> NewUser {
    NewUser {
        username: email.into(),
        email: Some(email.into()),
        realname: Some("Name".into()),
        picture: Some("https://example.com/p.png".into()),
        password_hash: Some(
            "$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHQ$aGFzaGhhc2hoYXNoaGFzaA".into(),
        ),
        keywords: "x".into(),
        ..NewUser::default()
    }
}

fn query(pairs: &[(&str, &str)]) -> ListQuery {
    let pairs: Vec<(String, String)> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    ListQuery::parse(&pairs).unwrap()
}

backend_test!(
    async fn tombstone_scrubs_and_detaches(app) {
        let store = app.store();
        let user = store.users().create(&rest_user("t@example.com")).await.unwrap();
        store.identities().link("github", "77", user.id).await.unwrap();
        store.password_resets().create("hash", user.id, 3600).await.unwrap();
        let article = store
            .articles()
            .create(user.id, &ArticleFields { title: Some("t".into()), ..Default::default() })
            .await
            .unwrap();

        assert!(store.users().tombstone(user.id).await.unwrap());
        assert!(!store.users().tombstone(user.id).await.unwrap(), "only once");
        assert!(store.users().find_by_id(user.id).await.unwrap().is_none());
        assert!(store.users().find_by_email("t@example.com").await.unwrap().is_none());
        assert!(store.identities().find_user_id("github", "77").await.unwrap().is_none());
        assert_eq!(store.password_resets().count_for_user(user.id).await.unwrap(), 0);
        let tomb = store.users().find_many_including_deleted(&[user.id]).await.unwrap();
        assert_eq!(tomb.len(), 1);
        assert_eq!((tomb[0].email.as_deref(), tomb[0].picture.as_deref()), (None, None));
        assert!(tomb[0].password_hash.is_none());
        assert_eq!(tomb[0].realname.as_deref(), Some("Name"));
        assert!(tomb[0].auth_version > user.auth_version);
        assert_eq!(store.articles().find(article.id).await.unwrap().unwrap().user_id, user.id);
        // The e-mail and username are free again.
        store.users().create(&rest_user("t@example.com")).await.unwrap();
    }
);

backend_test!(
    async fn a_reset_is_redeemed_once_even_concurrently(app) {
        let store = app.store();
        let user = store.users().create(&rest_user("r@example.com")).await.unwrap();
        store.password_resets().create("h1", user.id, 3600).await.unwrap();
        store.password_resets().create("h2", user.id, 3600).await.unwrap();
        store.password_resets().create("old", user.id, -1).await.unwrap();
        assert!(store.password_resets().redeem("old", "$argon2id$x").await.unwrap().is_none(), "expired");
        let redeem = |hash: &'static str| {
            let store = store.clone();
            tokio::spawn(async move { store.password_resets().redeem("h1", hash).await.unwrap() })
        };
        let (first, second) = (redeem("$argon2id$new1"), redeem("$argon2id$new2"));
        let winners = [first.await.unwrap(), second.await.unwrap()].into_iter().flatten().count();
        assert_eq!(winners, 1);
        assert_eq!(store.password_resets().count_for_user(user.id).await.unwrap(), 0);
        assert!(store.password_resets().redeem("h2", "$argon2id$x").await.unwrap().is_none(), "all resets went");
        let after = store.users().find_by_id(user.id).await.unwrap().unwrap();
        assert!(after.password_hash.unwrap().starts_with("$argon2id$new"));
        assert_eq!(after.auth_version, user.auth_version + 1);
    }
);

backend_test!(
    async fn rest_lists_filter_sort_and_page(app) {
        let store = app.store();
        let author = store.users().create(&rest_user("w@example.com")).await.unwrap();
        for (title, keywords) in [("b", "beta"), ("a", "alpha"), ("c", "gamma alpha")] {
            let fields = ArticleFields { title: Some(title.into()), content: None, keywords: keywords.into() };
            store.articles().create(author.id, &fields).await.unwrap();
        }
        let titles = |list: Vec<berth_domain::model::Article>| {
            list.into_iter().map(|a| a.title.unwrap()).collect::<Vec<_>>()
        };
        let articles = store.articles();
        assert_eq!(titles(articles.list(&query(&[])).await.unwrap()), ["c", "a", "b"]);
        assert_eq!(titles(articles.list(&query(&[("sort", "title")])).await.unwrap()), ["a", "b", "c"]);
        assert_eq!(titles(articles.list(&query(&[("q", "alpha")])).await.unwrap()), ["c", "a"]);
        assert_eq!(titles(articles.list(&query(&[("q", "ALPHA"), ("sort", "+title")])).await.unwrap()), ["a", "c"]);
        assert_eq!(titles(articles.list(&query(&[("limit", "1"), ("page", "3")])).await.unwrap()), ["b"]);
        assert!(articles.list(&query(&[("page", "4"), ("limit", "1")])).await.unwrap().is_empty());
        assert!(articles.list(&query(&[("q", "x' OR 1=1 --")])).await.unwrap().is_empty(), "q is bound, never spliced");
        let users = store.users().list_rest(&query(&[("sort", "-email")])).await.unwrap();
        assert_eq!(users.iter().map(|u| u.id).collect::<Vec<_>>(), [author.id, 1]);
    }
);
