//! `/articles`: created by users, read by anyone, changed by the author or an admin.

use axum::http::StatusCode;
use berth_domain::rest_query::ListQuery;
use berth_store::Topic;
use serde_json::{Value, json};

use super::{assert_empty_401, assert_empty_404, assert_param_400, three_users, wire_keys};
use crate::backend_test;
use crate::util::{Backend, TestApp};

backend_test!(
    async fn article_lifecycle(app) {
        let (a, b, c) = three_users(&app).await;
        let res = app
            .post("/articles")
            .bearer(&a.token)
            .json(&json!({"title": "test", "content": "test", "user": "999", "extra": 1}))
            .send()
            .await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        assert_eq!(
            wire_keys(&res.text())[0],
            vec!["id", "user", "title", "content", "createdAt", "updatedAt"]
        );
        let created = res.json();
        assert_eq!(created["title"], "test");
        assert_eq!(created["content"], "test");
        assert_eq!(created["user"]["id"], a.id, "the author is the caller");
        assert_eq!(created["user"]["email"], "a@a.com", "POST shows the author's full view");
        let id = created["id"].as_str().unwrap().to_string();
        assert_empty_401(&app.post("/articles").json(&json!({"title": "x"})).send().await);
        let res = app.post("/articles").form(&[("access_token", a.token.as_str()), ("title", "form")]).send().await;
        assert_eq!(res.status, StatusCode::CREATED);
        assert!(res.json().get("content").is_none());

        let res = app.get("/articles").send().await;
        assert_eq!(res.status, StatusCode::OK);
        let list = res.json();
        assert_eq!(list.as_array().unwrap().len(), 2);
        assert_eq!(list[1]["id"], id.as_str());
        assert_eq!(list[1]["user"], json!({"id": a.id, "name": "user", "picture": created["user"]["picture"]}));
        let res = app.get(&format!("/articles/{id}")).send().await;
        assert_eq!(res.json()["id"], id.as_str());
        assert!(res.json()["user"].get("email").is_none(), "GET shows the public view");
        assert_empty_404(&app.get("/articles/123456789098765432123456").send().await);
        assert_empty_404(&app.get("/articles/999999").send().await);
        assert_empty_404(&app.get("/articles/-1").send().await);
        assert_empty_404(&app.put("/articles/%FF").bearer(&a.token).send().await);

        // PUT replaces both fields.
        let res = app.put(&format!("/articles/{id}")).bearer(&a.token).json(&json!({"title": "new"})).send().await;
        assert_eq!(res.status, StatusCode::OK);
        assert_eq!(res.json()["title"], "new");
        assert!(res.json().get("content").is_none(), "an omitted field is removed");
        assert_eq!(res.json()["user"]["email"], "a@a.com");
        let res = app.put(&format!("/articles/{id}")).bearer(&c.token).json(&json!({"title": "t", "content": "c"})).send().await;
        assert_eq!(res.status, StatusCode::OK, "admins may edit");
        assert_eq!(res.json()["user"]["id"], a.id);
        assert_eq!(res.json()["user"]["email"], "a@a.com", "the author's full view, to the admin");
        assert_empty_401(&app.put(&format!("/articles/{id}")).bearer(&b.token).json(&json!({"title": "x"})).send().await);
        assert_empty_401(&app.put(&format!("/articles/{id}")).json(&json!({"title": "x"})).send().await);
        assert_empty_404(&app.put("/articles/999999").bearer(&b.token).json(&json!({"title": "x"})).send().await);
        let res = app.get(&format!("/articles/{id}")).send().await;
        assert_eq!((res.json()["title"].clone(), res.json()["content"].clone()), (json!("t"), json!("c")));

        assert_empty_401(&app.delete(&format!("/articles/{id}")).json(&json!({"access_token": b.token})).send().await);
        assert_empty_401(&app.delete(&format!("/articles/{id}")).send().await);
        assert_empty_404(&app.delete("/articles/999999").bearer(&b.token).send().await);
        let res = app.delete(&format!("/articles/{id}?access_token={}", a.token)).send().await;
        assert_eq!(res.status, StatusCode::NO_CONTENT);
        assert_empty_404(&app.get(&format!("/articles/{id}")).send().await);
    }
);

backend_test!(
    async fn index_articles_queries(app) {
        let (a, b, c) = three_users(&app).await;
        for (token, title, content) in [
            (&a.token, "Hello World", "first post"),
            (&b.token, "Rust tips", "fooBar and user1"),
            (&a.token, "Third", "Olá João"),
        ] {
            let res = app.post("/articles").bearer(token).json(&json!({"title": title, "content": content})).send().await;
            assert_eq!(res.status, StatusCode::CREATED);
        }
        let titles = |v: &Value| -> Vec<String> {
            v.as_array().unwrap().iter().map(|i| i["title"].as_str().unwrap_or("").to_string()).collect()
        };
        let res = app.get("/articles").send().await;
        assert_eq!(titles(&res.json()), ["Third", "Rust tips", "Hello World"], "newest first");
        let res = app.get("/articles?sort=title").send().await;
        assert_eq!(titles(&res.json()), ["Hello World", "Rust tips", "Third"]);
        let res = app.get("/articles?sort=-title&limit=1&page=2").send().await;
        assert_eq!(titles(&res.json()), ["Rust tips"]);
        // q searches normalized title and content (a deviation: the reference finds nothing).
        let res = app.get("/articles?q=hello%20WORLD!").send().await;
        assert_eq!(titles(&res.json()), ["Hello World"]);
        let res = app.get("/articles?q=foo%20bar").send().await;
        assert_eq!(titles(&res.json()), ["Rust tips"]);
        let res = app.get("/articles?q=joao").send().await;
        assert_eq!(titles(&res.json()), ["Third"]);
        let res = app.get("/articles?q=zzz").send().await;
        assert_eq!(res.json(), json!([]));
        let res = app.get("/articles?fields=title").send().await;
        assert!(wire_keys(&res.text()).iter().all(|k| k == &["id", "title"]), "{}", res.text());
        let res = app.get("/articles?fields=-user,-content").send().await;
        assert!(wire_keys(&res.text()).iter().all(|k| k == &["id", "title", "createdAt", "updatedAt"]));
        assert_param_400(&app.get("/articles?limit=101").send().await, "limit");
        assert_param_400(&app.get("/articles?page=1&page=2").send().await, "page");

        // A deleted author's articles stay, with the tombstone's public view.
        let res = app.delete(&format!("/users/{}", b.id)).bearer(&c.token).send().await;
        assert_eq!(res.status, StatusCode::NO_CONTENT);
        let res = app.get("/articles?q=rust").send().await;
        assert_eq!(res.json()[0]["user"], json!({"id": b.id, "name": "user"}));
    }
);

/// The titles and author names of the first page of `GET /articles`.
async fn listed(app: &crate::util::TestApp) -> Vec<(String, String)> {
    let res = app.get("/articles").send().await;
    assert_eq!(res.status, StatusCode::OK);
    res.json()
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["title"].as_str().unwrap().to_string(),
                a["user"]["name"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

backend_test!(
    async fn listed_pages_follow_every_change_at_once(app) {
        let (a, _, c) = three_users(&app).await;
        let pair = |t: &str, n: &str| (t.to_string(), n.to_string());
        assert!(listed(&app).await.is_empty());
        let res = app.post("/articles").bearer(&a.token).json(&json!({"title": "first"})).send().await;
        let id = res.json()["id"].as_str().unwrap().to_string();
        assert_eq!(listed(&app).await, vec![pair("first", "user")]);
        assert_eq!(listed(&app).await, vec![pair("first", "user")], "served again unchanged");

        let res = app.put(&format!("/articles/{id}")).bearer(&a.token).json(&json!({"title": "edited"})).send().await;
        assert_eq!(res.status, StatusCode::OK);
        assert_eq!(listed(&app).await, vec![pair("edited", "user")]);

        let res = app.put(&format!("/users/{}", a.id)).bearer(&a.token).json(&json!({"name": "new name", "picture": "p.png"})).send().await;
        assert_eq!(res.status, StatusCode::OK);
        assert_eq!(listed(&app).await, vec![pair("edited", "new name")], "the author's new name shows");

        let picture = |list: Value| list[0]["user"].get("picture").cloned();
        assert!(picture(app.get("/articles").send().await.json()).is_some());
        let res = app.delete(&format!("/users/{}", a.id)).bearer(&c.token).send().await;
        assert_eq!(res.status, StatusCode::NO_CONTENT);
        assert_eq!(picture(app.get("/articles").send().await.json()), None, "the author's deletion shows");

        let res = app.delete(&format!("/articles/{id}")).bearer(&c.token).send().await;
        assert_eq!(res.status, StatusCode::NO_CONTENT);
        assert!(listed(&app).await.is_empty());
    }
);

/// Another instance sharing a PostgreSQL database changes an article: its
/// notification reaches this instance, which stops serving the kept page.
/// (One process owns a SQLite database; what SQLite guarantees is tested below.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listed_pages_follow_changes_made_by_another_instance_on_postgres() {
    let app = TestApp::new(Backend::Postgres).await;
    let (a, _, _) = three_users(&app).await;
    let res = app
        .post("/articles")
        .bearer(&a.token)
        .json(&json!({"title": "mine"}))
        .send()
        .await;
    let id: i64 = res.json()["id"].as_str().unwrap().parse().unwrap();
    assert_eq!(listed(&app).await.len(), 1);
    let other = berth_store::Store::connect(&app.database_url)
        .await
        .unwrap();
    let fields = berth_store::repo::articles::ArticleFields {
        title: Some("changed elsewhere".into()),
        ..Default::default()
    };
    other.articles().update(id, &fields).await.unwrap().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while listed(&app).await[0].0 != "changed elsewhere" {
        assert!(
            std::time::Instant::now() < deadline,
            "the other instance's change never showed"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    other.close().await;
}

/// On SQLite the page cache works from the first request (no listener to wait
/// for): the page served is the one kept, at the current generation, and a
/// change made through this instance stops it being served at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_sqlite_pages_are_kept_from_the_first_request() {
    let app = TestApp::new(Backend::Sqlite).await;
    let (a, _, _) = three_users(&app).await;
    let res = app
        .post("/articles")
        .bearer(&a.token)
        .json(&json!({"title": "mine"}))
        .send()
        .await;
    let id = res.json()["id"].as_str().unwrap().to_string();
    let served = app.get("/articles").send().await;
    assert_eq!(served.status, StatusCode::OK);
    let generation = || {
        app.store()
            .changes()
            .generation(Topic::Articles)
            .expect("SQLite counters are live")
    };
    let query = ListQuery::parse(&[]).unwrap();
    let pages = &app.state.rest.article_pages;
    let kept = generation();
    assert_eq!(
        pages.get(&query, kept).as_deref(),
        Some(&served.body[..]),
        "the page served is kept"
    );
    assert_eq!(app.get("/articles").send().await.body, served.body);

    let res = app
        .put(&format!("/articles/{id}"))
        .bearer(&a.token)
        .json(&json!({"title": "edited"}))
        .send()
        .await;
    assert_eq!(res.status, StatusCode::OK);
    assert!(generation() > kept, "the write moved the generation");
    assert_eq!(
        pages.get(&query, generation()),
        None,
        "the kept page is not served after the write"
    );
    assert_eq!(listed(&app).await[0].0, "edited");
}
