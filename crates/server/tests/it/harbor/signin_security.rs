//! Throttling of failed sign-ins on the registry surfaces: Harbor Basic on
//! `/api/v2.0`, Basic on `/v2/` and on the token service `/service/token`;
//! client addresses behind trusted proxies.

use std::time::Duration;

use axum::http::StatusCode;
use berth::signin::{SignInSettings, ThrottleLimits};
use serde_json::json;

use crate::backend_test;
use crate::util::{
    ADMIN_PASSWORD, BERTH_BIN, Backend, ServedBerth, TestApp, TestResponse, database_url,
};

/// Three failures per (account, address), generous elsewhere.
fn three_per_pair() -> SignInSettings {
    SignInSettings {
        limits: ThrottleLimits {
            account_address: 3,
            address: 100,
            account: 100,
            window: Duration::from_secs(900),
        },
        ..SignInSettings::default()
    }
}

/// Asserts a 429 whose `Retry-After` is within the 15-minute window.
#[track_caller]
fn assert_retry_after(res: &TestResponse) {
    assert_eq!(res.status, StatusCode::TOO_MANY_REQUESTS, "{}", res.text());
    let wait: u64 = res
        .header("retry-after")
        .expect("Retry-After")
        .parse()
        .expect("seconds");
    assert!((1..=900).contains(&wait), "{wait}");
}

async fn current(app: &TestApp, peer: &str, password: &str) -> TestResponse {
    app.get("/api/v2.0/users/current")
        .peer(peer)
        .basic("alice", password)
        .send()
        .await
}

backend_test!(
    async fn harbor_basic_is_throttled_per_account_and_address(app) {
        let app = app.with_signin(three_per_pair());
        app.create_user("alice", "Alice-pass-1").await;
        for _ in 0..3 {
            let res = current(&app, "192.0.2.1", "wrong").await;
            assert_eq!(res.status, StatusCode::UNAUTHORIZED);
        }
        let res = current(&app, "192.0.2.1", "wrong").await;
        assert_retry_after(&res);
        assert_eq!(
            res.json(),
            json!({"errors": [{
                "code": "TOO_MANY_REQUEST",
                "message": "too many failed sign-in attempts; try again later"
            }]})
        );
        // Even the right password: a throttled client learns nothing.
        assert_retry_after(&current(&app, "192.0.2.1", "Alice-pass-1").await);
        // The owner, elsewhere, is not locked out; other accounts from the
        // throttled address are not either.
        let res = current(&app, "198.51.100.7", "Alice-pass-1").await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        let res = app
            .get("/api/v2.0/users/current")
            .peer("192.0.2.1")
            .admin()
            .send()
            .await;
        assert_eq!(res.status, StatusCode::OK);
        // The window ends.
        app.state.signin.throttle.advance_clock(Duration::from_secs(900));
        assert_eq!(current(&app, "192.0.2.1", "Alice-pass-1").await.status, StatusCode::OK);
    }
);

backend_test!(
    async fn a_throttled_sign_in_computes_no_hash(app) {
        let app = app.with_signin(three_per_pair());
        app.create_user("alice", "Alice-pass-1").await;
        for _ in 0..3 {
            assert_eq!(current(&app, "192.0.2.1", "wrong").await.status, StatusCode::UNAUTHORIZED);
        }
        // Every hash slot taken: no password can be hashed until they are given back.
        let slots = berth::identity::hash_slots();
        let held = slots
            .acquire_many(u32::try_from(slots.available_permits()).unwrap())
            .await
            .unwrap();
        let pending = {
            let app = app.app.clone();
            tokio::spawn(async move {
                use tower::ServiceExt;
                let request = axum::http::Request::get("/api/v2.0/users/current")
                    .header("authorization", "Basic YWxpY2U6d3Jvbmc=") // alice:wrong
                    .extension(axum::extract::ConnectInfo(std::net::SocketAddr::from((
                        [203, 0, 113, 9],
                        1,
                    ))))
                    .body(axum::body::Body::empty())
                    .unwrap();
                app.oneshot(request).await.unwrap().status()
            })
        };
        // The throttled attempt is answered while no hash can run.
        assert_retry_after(&current(&app, "192.0.2.1", "wrong").await);
        assert_retry_after(&current(&app, "192.0.2.1", "Alice-pass-1").await);
        assert!(!pending.is_finished(), "an unthrottled attempt waits for a hash slot");
        drop(held);
        assert_eq!(pending.await.unwrap(), StatusCode::UNAUTHORIZED);
    }
);

backend_test!(
    async fn an_address_is_throttled_across_accounts(app) {
        let app = app.with_signin(SignInSettings {
            limits: "address=4".parse().unwrap(),
            ..SignInSettings::default()
        });
        for login in ["u1", "u2", "u3", "u4"] {
            let res = app
                .get("/api/v2.0/users/current")
                .peer("192.0.2.1")
                .basic(login, "wrong")
                .send()
                .await;
            assert_eq!(res.status, StatusCode::UNAUTHORIZED);
        }
        let res = app
            .get("/api/v2.0/users/current")
            .peer("192.0.2.1")
            .admin()
            .send()
            .await;
        assert_retry_after(&res);
        let res = app
            .get("/api/v2.0/users/current")
            .peer("192.0.2.2")
            .admin()
            .send()
            .await;
        assert_eq!(res.status, StatusCode::OK);
    }
);

backend_test!(
    async fn registry_basic_and_token_service_are_throttled(app) {
        let app = app.with_signin(three_per_pair());
        app.create_user("alice", "Alice-pass-1").await;
        for _ in 0..3 {
            let res = app.get("/v2/").peer("192.0.2.1").basic("alice", "wrong").send().await;
            assert_eq!(res.status, StatusCode::UNAUTHORIZED);
        }
        let res = app.get("/v2/").peer("192.0.2.1").basic("alice", "wrong").send().await;
        assert_retry_after(&res);
        let body = res.json();
        assert_eq!(body["errors"][0]["code"], "TOOMANYREQUESTS");
        assert_eq!(res.header("docker-distribution-api-version"), Some("registry/2.0"));
        // The token service counts on the same keys.
        let token = |peer: &'static str, password: &'static str| {
            app.get("/service/token?service=harbor-registry&scope=repository:library/x:pull")
                .peer(peer)
                .basic("alice", password)
                .send()
        };
        let res = token("192.0.2.1", "Alice-pass-1").await;
        assert_retry_after(&res);
        assert_eq!(res.json()["errors"][0]["code"], "TOOMANYREQUESTS");
        let res = token("198.51.100.7", "Alice-pass-1").await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        let res = app.get("/v2/").peer("198.51.100.7").basic("alice", "Alice-pass-1").send().await;
        assert_eq!(res.status, StatusCode::OK);
        // Failures at the token service count too.
        for _ in 0..3 {
            assert_eq!(token("198.51.100.8", "wrong").await.status, StatusCode::UNAUTHORIZED);
        }
        assert_retry_after(&token("198.51.100.8", "wrong").await);
        assert_retry_after(&app.get("/v2/").peer("198.51.100.8").basic("alice", "x").send().await);
    }
);

async fn attempt(app: &TestApp, forwarded: &str, password: &str) -> TestResponse {
    app.get("/api/v2.0/users/current")
        .peer("10.0.0.5")
        .header("x-forwarded-for", forwarded)
        .basic("alice", password)
        .send()
        .await
}

backend_test!(
    async fn forwarded_for_names_the_client_only_behind_trusted_proxies(app) {
        app.create_user("alice", "Alice-pass-1").await;
        // Trusting no proxy (the default): the header is ignored, every
        // attempt comes from the peer, whatever it claims.
        let direct = app.with_signin(three_per_pair());
        for hop in ["1.1.1.1", "2.2.2.2", "3.3.3.3"] {
            assert_eq!(attempt(&direct, hop, "wrong").await.status, StatusCode::UNAUTHORIZED);
        }
        assert_retry_after(&attempt(&direct, "4.4.4.4", "Alice-pass-1").await);

        let proxied = direct.with_signin(SignInSettings {
            trusted_proxies: "10.0.0.0/8".parse().unwrap(),
            ..three_per_pair()
        });
        for _ in 0..3 {
            let res = attempt(&proxied, "192.0.2.1", "wrong").await;
            assert_eq!(res.status, StatusCode::UNAUTHORIZED);
        }
        // Hops the client adds in front change nothing: the rightmost
        // untrusted hop is the client.
        assert_retry_after(&attempt(&proxied, "203.0.113.1, 192.0.2.1", "Alice-pass-1").await);
        let res = attempt(&proxied, "192.0.2.1, 198.51.100.7, 10.0.0.9", "Alice-pass-1").await;
        assert_eq!(res.status, StatusCode::OK, "another client behind the same proxy");
    }
);

/// `berth serve` on a real socket: the peer address reaches the throttle, and
/// `X-Forwarded-For` counts only from a trusted proxy (here the loopback peer).
async fn served_throttle(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let url = database_url(backend, dir.path()).await;
    let server = ServedBerth::start(|_port| {
        let mut command = std::process::Command::new(BERTH_BIN);
        command
            .arg("--data-dir")
            .arg(dir.path())
            .args(["--signin-throttle", "account-address=2"])
            .env("DATABASE_URL", &url)
            .env("HARBOR_ADMIN_PASSWORD", ADMIN_PASSWORD)
            .env("BERTH_TRUSTED_PROXIES", "127.0.0.1,::1");
        command
    })
    .await;
    let client = reqwest::Client::new();
    let current = |forwarded: Option<&str>, password: &str| {
        let mut request = client
            .get(server.url("/api/v2.0/users/current"))
            .basic_auth("admin", Some(password));
        if let Some(forwarded) = forwarded {
            request = request.header("x-forwarded-for", forwarded);
        }
        request.send()
    };
    for _ in 0..2 {
        let res = current(Some("192.0.2.1"), "wrong").await.unwrap();
        assert_eq!(res.status(), reqwest::StatusCode::UNAUTHORIZED);
    }
    let res = current(Some("192.0.2.1"), ADMIN_PASSWORD).await.unwrap();
    assert_eq!(res.status(), reqwest::StatusCode::TOO_MANY_REQUESTS);
    assert!(res.headers().get("retry-after").is_some());
    let res = current(Some("192.0.2.2"), ADMIN_PASSWORD).await.unwrap();
    assert_eq!(
        res.status(),
        reqwest::StatusCode::OK,
        "another client behind the proxy"
    );
    // Without the header the client is the peer itself, which has not failed.
    let res = current(None, ADMIN_PASSWORD).await.unwrap();
    assert_eq!(res.status(), reqwest::StatusCode::OK);
    server.stop();
}

mod served_server_throttles_by_peer_and_forwarded_for {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sqlite() {
        served_throttle(Backend::Sqlite).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres() {
        served_throttle(Backend::Postgres).await;
    }
}
