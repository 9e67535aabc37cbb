//! Headers every surface shares: `X-Content-Type-Options`, `Cache-Control` on
//! answers that carry a token, and CORS only where the reference has it.

use axum::http::{Method, StatusCode};

use crate::backend_test;
use crate::rest::three_users;
use crate::util::MASTER_KEY;

backend_test!(
    async fn every_surface_answers_nosniff(app) {
        let answers = [
            app.get("/api/v2.0/health").send().await,
            app.get("/api/v2.0/projects/nope").admin().send().await,
            app.get("/v2/").send().await,
            app.get("/v2/library/x/manifests/latest").admin().send().await,
            app.get("/articles").send().await,
            app.post("/users").send().await,
            app.get("/no/such/route").send().await,
        ];
        for res in answers {
            assert_eq!(res.header("x-content-type-options"), Some("nosniff"), "{}", res.status);
        }
    }
);

backend_test!(
    async fn token_answers_are_not_stored(app) {
        three_users(&app).await;
        let res = app.post(&format!("/auth?access_token={MASTER_KEY}")).basic("a@a.com", "123456").send().await;
        assert_eq!(res.status, StatusCode::CREATED);
        assert_eq!(res.header("cache-control"), Some("no-store"));
        // A refused sign-in as well: the route never lets a cache keep anything.
        let res = app.post(&format!("/auth?access_token={MASTER_KEY}")).basic("a@a.com", "bad-pass").send().await;
        assert_eq!(res.status, StatusCode::UNAUTHORIZED);
        assert_eq!(res.header("cache-control"), Some("no-store"));
        for provider in ["github", "google", "facebook"] {
            let res = app.post(&format!("/auth/{provider}")).send().await;
            assert_eq!(res.header("cache-control"), Some("no-store"), "{provider}");
        }

        let res = app.get("/service/token?service=harbor-registry&scope=repository:library/x:pull").admin().send().await;
        assert_eq!(res.status, StatusCode::OK);
        assert!(res.json()["token"].is_string());
        assert_eq!(res.header("cache-control"), Some("no-store"));

        // A password reset's token is shown by GET /password-resets/:token.
        let res = app.get(&format!("/password-resets/{}", "a".repeat(32))).send().await;
        assert_eq!(res.status, StatusCode::NOT_FOUND);
        assert_eq!(res.header("cache-control"), Some("no-store"));

        // Answers without secrets keep their usual caching.
        let res = app.get("/articles").send().await;
        assert_eq!(res.header("cache-control"), None);
        let res = app.get("/api/v2.0/health").send().await;
        assert_eq!(res.header("cache-control"), None);
    }
);

backend_test!(
    async fn cors_only_on_the_rest_routes_and_never_with_credentials(app) {
        let origin = "https://elsewhere.example";
        let res = app.get("/articles").header("origin", origin).send().await;
        assert_eq!(res.header("access-control-allow-origin"), Some("*"));
        assert_eq!(res.header("access-control-allow-credentials"), None);
        let res = app
            .request(Method::OPTIONS, "/auth")
            .header("origin", origin)
            .header("access-control-request-method", "POST")
            .send()
            .await;
        assert_eq!(res.header("access-control-allow-origin"), Some("*"));
        assert_eq!(res.header("access-control-allow-credentials"), None);

        // Harbor and the distribution API: no CORS header at all, simple or preflight.
        for path in ["/api/v2.0/health", "/api/v2.0/projects", "/v2/", "/v2/library/x/tags/list", "/service/token"] {
            let res = app.get(path).header("origin", origin).admin().send().await;
            let cors: Vec<&str> = res
                .headers
                .keys()
                .map(|k| k.as_str())
                .filter(|k| k.starts_with("access-control-"))
                .collect();
            assert!(cors.is_empty(), "{path}: {cors:?}");
            let res = app
                .request(Method::OPTIONS, path)
                .header("origin", origin)
                .header("access-control-request-method", "DELETE")
                .send()
                .await;
            assert_ne!(res.status, StatusCode::NO_CONTENT, "{path}");
            assert_eq!(res.header("access-control-allow-origin"), None, "{path}");
            assert_eq!(res.header("access-control-allow-methods"), None, "{path}");
        }
    }
);
