//! Upstream registries (`/registries`, `/replication/adapters`) against real
//! peers (Debian's docker-registry, a served Berth), and proxy-cache projects:
//! created with a `registry_id`, refusing pushes, keeping their registry.

use std::process::Command;

use axum::http::{Method, StatusCode};
use serde_json::{Value, json};

use crate::backend_test;
use crate::harbor::fixtures::{PASSWORD, code, id_from_location, message, user};
use crate::registry::{digest_of, error_code, image_manifest};
use crate::util::{
    ADMIN_PASSWORD, BERTH_BIN, DockerRegistry, PeerOptions, RefusedPort, ServedBerth, TestApp,
    TestResponse,
};

/// The user and password of the peers behind htpasswd auth.
const PEER_USER: &str = "puller";
const PEER_PASSWORD: &str = "Up5tream-secret";

fn with_auth() -> PeerOptions {
    PeerOptions {
        basic_auth: Some((PEER_USER.into(), PEER_PASSWORD.into())),
        tls: false,
    }
}

/// Creates a registry as admin; returns its id.
async fn create(app: &TestApp, body: &Value) -> i64 {
    let res = app
        .post("/api/v2.0/registries")
        .admin()
        .json(body)
        .send()
        .await;
    assert_eq!(res.status, StatusCode::CREATED, "{body}: {}", res.text());
    let id = id_from_location(&res);
    assert_eq!(
        res.header("location"),
        Some(format!("/api/v2.0/registries/{id}").as_str())
    );
    assert!(res.body.is_empty());
    id
}

async fn get(app: &TestApp, id: i64) -> Value {
    let res = app
        .get(&format!("/api/v2.0/registries/{id}"))
        .admin()
        .send()
        .await;
    assert_eq!(res.status, StatusCode::OK, "{}", res.text());
    res.json()
}

async fn list(app: &TestApp, query: &str) -> TestResponse {
    let res = app
        .get(&format!("/api/v2.0/registries{query}"))
        .admin()
        .send()
        .await;
    assert_eq!(res.status, StatusCode::OK, "{query}: {}", res.text());
    res
}

fn names(res: &TestResponse) -> Vec<String> {
    res.json()
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap().to_string())
        .collect()
}

async fn ping(app: &TestApp, body: &Value) -> TestResponse {
    app.post("/api/v2.0/registries/ping")
        .admin()
        .json(body)
        .send()
        .await
}

/// The `access_secret` column of registry `id`, exactly as stored.
async fn stored_secret(app: &TestApp, id: i64) -> String {
    let pool = sqlx::AnyPool::connect(&app.database_url)
        .await
        .expect("connect");
    let stored: String = sqlx::query_scalar("SELECT access_secret FROM registries WHERE id = $1")
        .bind(id)
        .fetch_one(&pool)
        .await
        .unwrap();
    pool.close().await;
    stored
}

backend_test!(
    async fn registries_are_created_listed_updated_and_deleted(app) {
        let peer = DockerRegistry::start(with_auth()).await;
        let res = app.get("/api/v2.0/replication/adapters").admin().send().await;
        assert_eq!(res.status, StatusCode::OK);
        assert_eq!(res.json(), json!(["docker-hub", "docker-registry", "harbor"]));

        let id = create(&app, &json!({
            "name": "upstream",
            "url": format!("{}/", peer.url()),
            "type": "docker-registry",
            "description": "the peer",
            "credential": {"access_key": PEER_USER, "access_secret": PEER_PASSWORD},
        }))
        .await;
        let registry = get(&app, id).await;
        assert_eq!(registry["id"], id);
        assert_eq!(registry["name"], "upstream");
        assert_eq!(registry["url"], peer.url(), "normalized without the slash");
        assert_eq!(registry["type"], "docker-registry");
        assert_eq!(registry["description"], "the peer");
        assert_eq!(registry["status"], "healthy");
        assert_eq!(
            registry["credential"],
            json!({"type": "basic", "access_key": PEER_USER, "access_secret": "*****"})
        );
        assert!(registry.get("insecure").is_none(), "false is omitted: {registry}");
        assert!(registry.get("ca_certificate").is_none(), "{registry}");
        assert_eq!(registry["creation_time"].as_str().unwrap().len(), 24);
        assert_eq!(registry["update_time"], registry["creation_time"]);

        // The secret is sealed at rest and opens again for requests upstream.
        let stored = stored_secret(&app, id).await;
        assert!(stored.starts_with("enc:v1:"), "{stored}");
        assert!(!stored.contains(PEER_PASSWORD));
        assert_eq!(
            app.store().registries().access_secret(id).await.unwrap().as_deref(),
            Some(PEER_PASSWORD)
        );

        // A registry without a credential: anonymous access is enough to be reachable.
        let other = create(&app, &json!({"name": "Other", "url": peer.url(), "type": "docker-registry"})).await;
        let registry = get(&app, other).await;
        assert_eq!(registry["credential"], json!({}));
        assert_eq!(stored_secret(&app, other).await, "");

        // Listing: q (fuzzy, case-insensitive), the deprecated `name`, sort, paging.
        let res = list(&app, "").await;
        assert_eq!(names(&res), ["upstream", "Other"]);
        assert_eq!(res.header("x-total-count"), Some("2"));
        assert!(!res.text().contains(PEER_PASSWORD));
        assert_eq!(names(&list(&app, "?q=name%3D~oth").await), ["Other"]);
        assert_eq!(names(&list(&app, "?q=name%3Dupstream").await), ["upstream"]);
        assert_eq!(names(&list(&app, "?name=UPS").await), ["upstream"]);
        assert_eq!(names(&list(&app, "?sort=-id").await), ["Other", "upstream"]);
        assert_eq!(names(&list(&app, "?q=type%3Dharbor").await), Vec::<String>::new());
        let res = list(&app, "?page=1&page_size=1").await;
        assert_eq!(names(&res), ["upstream"]);
        assert_eq!(res.header("x-total-count"), Some("2"));
        assert_eq!(
            res.header("link"),
            Some("</api/v2.0/registries?page=2&page_size=1>; rel=\"next\"")
        );

        // Update: partial; the stored secret stays, and is what a ping by id uses.
        let res = app.put(&format!("/api/v2.0/registries/{id}")).admin()
            .json(&json!({"description": "renamed peer", "name": "upstream-1"})).send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        let registry = get(&app, id).await;
        assert_eq!(registry["name"], "upstream-1");
        assert_eq!(registry["description"], "renamed peer");
        assert_eq!(registry["credential"]["access_secret"], "*****");
        assert_eq!(registry["url"], peer.url());
        let res = ping(&app, &json!({"id": id})).await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());

        // A new URL without a new secret drops the secret (as Harbor), so the
        // peer refuses the access key alone and nothing changes.
        let elsewhere = peer.url().replace("127.0.0.1", "localhost");
        let res = app.put(&format!("/api/v2.0/registries/{id}")).admin()
            .json(&json!({"url": elsewhere})).send().await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST, "{}", res.text());
        assert!(message(&res).starts_with("the registry is unhealthy"), "{}", message(&res));
        assert_eq!(get(&app, id).await["url"], peer.url());
        assert_eq!(app.store().registries().access_secret(id).await.unwrap().as_deref(), Some(PEER_PASSWORD));
        // With the secret given again, it moves.
        let res = app.put(&format!("/api/v2.0/registries/{id}")).admin()
            .json(&json!({"url": elsewhere, "access_secret": PEER_PASSWORD})).send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        assert_eq!(get(&app, id).await["url"], elsewhere);
        // Dropping the access key drops the credential and its secret.
        let res = app.put(&format!("/api/v2.0/registries/{id}")).admin()
            .json(&json!({"access_key": ""})).send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        assert_eq!(get(&app, id).await["credential"], json!({}));
        assert_eq!(stored_secret(&app, id).await, "");

        // Invalid input changes nothing.
        let before = get(&app, id).await;
        let cases: Vec<(Value, StatusCode, &str)> = vec![
            (json!({"url": peer.url(), "type": "docker-registry"}), StatusCode::BAD_REQUEST, "name cannot be empty"),
            (json!({"name": "x".repeat(65), "url": peer.url(), "type": "docker-registry"}), StatusCode::BAD_REQUEST, "the max length of name is 64"),
            (json!({"name": "n", "url": "", "type": "docker-registry"}), StatusCode::BAD_REQUEST, "empty string"),
            (json!({"name": "n", "url": "ftp://127.0.0.1", "type": "docker-registry"}), StatusCode::BAD_REQUEST, "invalid HTTP scheme: ftp"),
            (json!({"name": "n", "url": "http://", "type": "docker-registry"}), StatusCode::BAD_REQUEST, "invalid URL"),
            (json!({"name": "n", "url": peer.url(), "type": "quay"}), StatusCode::BAD_REQUEST, "unsupported registry type \"quay\""),
            (json!({"name": "n", "url": peer.url()}), StatusCode::BAD_REQUEST, "unsupported registry type \"\""),
            (json!({"name": "n", "url": peer.url(), "type": "harbor", "credential": {"type": "oauth", "access_key": "k", "access_secret": "s"}}), StatusCode::BAD_REQUEST, "unsupported credential type"),
            (json!({"name": "n", "url": peer.url(), "type": "harbor", "ca_certificate": "not a certificate"}), StatusCode::BAD_REQUEST, "invalid CA certificate"),
            (json!({"name": "n", "url": peer.url(), "type": "docker-registry", "credential": {"access_key": PEER_USER, "access_secret": "wrong"}}), StatusCode::BAD_REQUEST, "the registry is unhealthy"),
            (json!({"name": "Other", "url": peer.url(), "type": "docker-registry"}), StatusCode::CONFLICT, "registry Other already exists"),
            (json!({"name": 5}), StatusCode::BAD_REQUEST, "parsing the request body failed"),
        ];
        for (body, status, expected) in cases {
            let res = app.post("/api/v2.0/registries").admin().json(&body).send().await;
            assert_eq!(res.status, status, "{body}: {}", res.text());
            assert!(message(&res).contains(expected), "{body}: {}", message(&res));
        }
        let res = app.post("/api/v2.0/registries").admin().raw("text/plain", "{}").send().await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST);
        let updates: Vec<(Value, StatusCode, &str)> = vec![
            (json!({"name": "Other"}), StatusCode::CONFLICT, "registry Other already exists"),
            (json!({"name": ""}), StatusCode::BAD_REQUEST, "name cannot be empty"),
            (json!({"url": "ftp://x"}), StatusCode::BAD_REQUEST, "invalid HTTP scheme: ftp"),
            (json!({"ca_certificate": "junk"}), StatusCode::BAD_REQUEST, "invalid CA certificate"),
            (json!({"access_key": "k", "credential_type": "oauth"}), StatusCode::BAD_REQUEST, "unsupported credential type"),
        ];
        for (body, status, expected) in updates {
            let res = app.put(&format!("/api/v2.0/registries/{id}")).admin().json(&body).send().await;
            assert_eq!(res.status, status, "{body}: {}", res.text());
            assert!(message(&res).contains(expected), "{body}: {}", message(&res));
        }
        assert_eq!(get(&app, id).await, before);
        assert_eq!(list(&app, "").await.header("x-total-count"), Some("2"));

        // Missing and malformed ids.
        let res = app.get("/api/v2.0/registries/999").admin().send().await;
        assert_eq!(res.status, StatusCode::NOT_FOUND);
        assert_eq!(res.json(), json!({"errors": [{"code": "NOT_FOUND", "message": "registry 999 not found"}]}));
        let res = app.get("/api/v2.0/registries/abc").admin().send().await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST);
        let res = app.put("/api/v2.0/registries/999").admin().json(&json!({"description": "x"})).send().await;
        assert_eq!(res.status, StatusCode::NOT_FOUND);

        // Delete.
        let res = app.delete(&format!("/api/v2.0/registries/{other}")).admin().send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        let res = app.get(&format!("/api/v2.0/registries/{other}")).admin().send().await;
        assert_eq!(res.status, StatusCode::NOT_FOUND);
        let res = app.delete(&format!("/api/v2.0/registries/{other}")).admin().send().await;
        assert_eq!(res.status, StatusCode::NOT_FOUND);
        assert_eq!(names(&list(&app, "").await), ["upstream-1"]);

        // Every change is in the audit log, under the administrator's name.
        app.state.audit_queue.flush(app.store()).await;
        let res = app.get("/api/v2.0/audit-logs?q=resource_type%3Dregistry").admin().send().await;
        let logs = res.json();
        let operations: Vec<&str> = logs.as_array().unwrap().iter()
            .map(|l| l["operation"].as_str().unwrap()).collect();
        assert_eq!(operations.iter().filter(|o| **o == "create").count(), 2, "{}", res.text());
        assert_eq!(operations.iter().filter(|o| **o == "update").count(), 3, "{}", res.text());
        assert_eq!(operations.iter().filter(|o| **o == "delete").count(), 1, "{}", res.text());
        assert!(!res.text().contains(PEER_PASSWORD));
    }
);

backend_test!(
    async fn only_system_administrators_manage_registries(app) {
        let peer = DockerRegistry::start(PeerOptions::default()).await;
        let id = create(&app, &json!({"name": "up", "url": peer.url(), "type": "docker-registry"})).await;
        user(&app, "alice").await;
        let body = json!({"name": "mine", "url": peer.url(), "type": "docker-registry"});
        let requests = [
            (Method::GET, "/api/v2.0/registries".to_string(), None),
            (Method::POST, "/api/v2.0/registries".to_string(), Some(body.clone())),
            (Method::GET, format!("/api/v2.0/registries/{id}"), None),
            (Method::PUT, format!("/api/v2.0/registries/{id}"), Some(json!({"description": "x"}))),
            (Method::DELETE, format!("/api/v2.0/registries/{id}"), None),
            (Method::POST, "/api/v2.0/registries/ping".to_string(), Some(json!({"id": id}))),
            (Method::GET, "/api/v2.0/replication/adapters".to_string(), None),
        ];
        for (method, path, body) in requests {
            for login in [None, Some("alice")] {
                let mut request = app.request(method.clone(), &path);
                if let Some(body) = &body {
                    request = request.json(body);
                }
                if let Some(login) = login {
                    request = request.basic(login, PASSWORD);
                }
                let res = request.send().await;
                let expected = match login {
                    None => StatusCode::UNAUTHORIZED,
                    Some(_) => StatusCode::FORBIDDEN,
                };
                assert_eq!(res.status, expected, "{method} {path} as {login:?}: {}", res.text());
            }
        }
        let registries = list(&app, "").await;
        assert_eq!(names(&registries), ["up"]);
        assert_eq!(get(&app, id).await["description"], Value::Null);
    }
);

backend_test!(
    async fn ping_tells_reachable_registries_and_accepted_credentials(app) {
        let peer = DockerRegistry::start(with_auth()).await;
        let url = peer.url();
        // Without a credential, a registry asking for one is reachable.
        let res = ping(&app, &json!({"type": "docker-registry", "url": url})).await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        assert!(res.body.is_empty());
        // With one, it must be accepted (a Basic challenge).
        let res = ping(&app, &json!({"type": "docker-registry", "url": url, "access_key": PEER_USER, "access_secret": PEER_PASSWORD})).await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        let res = ping(&app, &json!({"type": "docker-registry", "url": url, "access_key": PEER_USER, "access_secret": "wrong"})).await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST, "{}", res.text());
        assert_eq!(code(&res), "BAD_REQUEST");
        assert!(message(&res).starts_with("the registry is unhealthy"), "{}", message(&res));
        assert!(!res.text().contains("wrong"), "the secret is not echoed: {}", res.text());

        // Nothing listens on a closed port.
        let closed = RefusedPort::new();
        let res = ping(&app, &json!({"type": "docker-registry", "url": format!("http://127.0.0.1:{}", closed.port())})).await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST, "{}", res.text());
        assert!(message(&res).starts_with("the registry is unhealthy"), "{}", message(&res));

        // What a ping needs.
        let res = ping(&app, &json!({"url": url})).await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST);
        assert_eq!(message(&res), "type or url cannot be empty");
        let res = ping(&app, &json!({"type": "docker-registry"})).await;
        assert_eq!(message(&res), "type or url cannot be empty");
        let res = ping(&app, &json!({"type": "quay", "url": url})).await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST);
        let res = ping(&app, &json!({"type": "docker-registry", "url": "ftp://x"})).await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST);
        let res = ping(&app, &json!({"id": 999})).await;
        assert_eq!(res.status, StatusCode::NOT_FOUND);

        // A stored registry is pinged with its own URL and secret: a URL given
        // beside its id is ignored, so its secret goes nowhere else.
        let id = create(&app, &json!({"name": "up", "url": url, "type": "docker-registry", "credential": {"access_key": PEER_USER, "access_secret": PEER_PASSWORD}})).await;
        let res = ping(&app, &json!({"id": id, "url": format!("http://127.0.0.1:{}", closed.port())})).await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        // Its credential can be tried with another secret.
        let res = ping(&app, &json!({"id": id, "access_secret": "wrong"})).await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST, "{}", res.text());
    }
);

/// `berth serve` on SQLite in `dir`, reachable at its own port (so its
/// registry challenge names a token service that answers).
pub(crate) async fn served_berth(dir: &std::path::Path) -> ServedBerth {
    let database = format!("sqlite://{}?mode=rwc", dir.join("berth.db").display());
    ServedBerth::start(|port| {
        let mut command = Command::new(BERTH_BIN);
        command
            .arg("--data-dir")
            .arg(dir)
            .env("DATABASE_URL", &database)
            .env("HARBOR_ADMIN_PASSWORD", ADMIN_PASSWORD)
            .env("EXTERNAL_URL", format!("http://127.0.0.1:{port}"))
            .env_remove("BLOB_STORE");
        command
    })
    .await
}

backend_test!(
    async fn ping_follows_a_bearer_challenge_to_the_token_service(app) {
        let dir = tempfile::tempdir().unwrap();
        let upstream = served_berth(dir.path()).await;
        let url = upstream.url("");
        let with = |secret: &str| json!({"type": "harbor", "url": url, "access_key": "admin", "access_secret": secret});
        let res = ping(&app, &with(ADMIN_PASSWORD)).await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        let res = ping(&app, &with("Wrong-password-1")).await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST, "{}", res.text());
        assert!(message(&res).contains("refused the credential"), "{}", message(&res));
        let id = create(&app, &json!({"name": "berth", "url": url, "type": "harbor", "credential": {"access_key": "admin", "access_secret": ADMIN_PASSWORD}})).await;
        assert_eq!(get(&app, id).await["type"], "harbor");
        let res = ping(&app, &json!({"id": id})).await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
    }
);

backend_test!(
    async fn tls_registries_are_checked_against_their_ca_or_not_at_all(app) {
        let peer = DockerRegistry::start(PeerOptions { basic_auth: None, tls: true }).await;
        let url = peer.url();
        assert!(url.starts_with("https://"));
        // Its CA is not among the platform's roots.
        let res = ping(&app, &json!({"type": "docker-registry", "url": url})).await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST, "{}", res.text());
        assert!(message(&res).starts_with("the registry is unhealthy"), "{}", message(&res));
        let res = ping(&app, &json!({"type": "docker-registry", "url": url, "insecure": true})).await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        let res = ping(&app, &json!({"type": "docker-registry", "url": url, "ca_certificate": peer.ca_pem})).await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());

        let id = create(&app, &json!({"name": "tls", "url": url, "type": "docker-registry", "ca_certificate": peer.ca_pem})).await;
        let registry = get(&app, id).await;
        assert_eq!(registry["ca_certificate"], peer.ca_pem.as_str());
        assert!(registry.get("insecure").is_none());
        let res = ping(&app, &json!({"id": id})).await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        let insecure = create(&app, &json!({"name": "tls-insecure", "url": url, "type": "docker-registry", "insecure": true})).await;
        assert_eq!(get(&app, insecure).await["insecure"], true);
        let res = app.post("/api/v2.0/registries").admin()
            .json(&json!({"name": "tls-unchecked", "url": url, "type": "docker-registry"})).send().await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST, "{}", res.text());
    }
);

backend_test!(
    async fn proxy_cache_projects_keep_their_registry_and_refuse_pushes(app) {
        let peer = DockerRegistry::start(PeerOptions::default()).await;
        let id = create(&app, &json!({"name": "hub", "url": peer.url(), "type": "docker-registry"})).await;

        // Creation: an existing registry of a supported type, by an administrator.
        let cases: Vec<(Value, &str)> = vec![
            (json!({"project_name": "cache", "registry_id": 0}), "bad request: 0 is invalid value of registry_id"),
            (json!({"project_name": "cache", "registry_id": -3}), "invalid value of registry_id"),
            (json!({"project_name": "cache", "registry_id": 999}), "bad request: registry 999 not found"),
        ];
        for (body, expected) in cases {
            let res = app.post("/api/v2.0/projects").admin().json(&body).send().await;
            assert_eq!(res.status, StatusCode::BAD_REQUEST, "{body}: {}", res.text());
            assert!(message(&res).contains(expected), "{body}: {}", message(&res));
        }
        user(&app, "alice").await;
        let res = app.post("/api/v2.0/projects").basic("alice", PASSWORD)
            .json(&json!({"project_name": "cache", "registry_id": id})).send().await;
        assert_eq!(res.status, StatusCode::FORBIDDEN);
        assert_eq!(message(&res), "Only system admin can create proxy cache project");
        let res = app.get("/api/v2.0/projects/cache").admin().send().await;
        assert_eq!(res.status, StatusCode::NOT_FOUND);

        let res = app.post("/api/v2.0/projects").admin().json(&json!({
            "project_name": "cache",
            "registry_id": id,
            "metadata": {"public": "true", "proxy_speed_kb": "100", "enable_content_trust": "true"},
        })).send().await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        let project_id = id_from_location(&res);
        let project = app.get("/api/v2.0/projects/cache").admin().send().await.json();
        assert_eq!(project["registry_id"], id);
        assert_eq!(project["metadata"]["proxy_speed_kb"], "100", "{project}");
        assert!(project["metadata"].get("enable_content_trust").is_none(), "{project}");
        let library = app.get("/api/v2.0/projects/library").admin().send().await.json();
        assert!(library.get("registry_id").is_none());
        let listed = app.get(&format!("/api/v2.0/projects?q=registry_id%3D{id}")).admin().send().await.json();
        assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
        assert_eq!(listed[0]["name"], "cache");
        let summary = app.get("/api/v2.0/projects/cache/summary").admin().send().await.json();
        assert_eq!(summary["registry"]["id"], id, "{summary}");
        assert_eq!(summary["registry"]["name"], "hub");
        assert_eq!(summary["registry"]["url"], peer.url());
        assert!(summary["registry"].get("credential").is_none(), "{summary}");
        let summary = app.get("/api/v2.0/projects/library/summary").admin().send().await.json();
        assert!(summary.get("registry").is_none());

        // The registry cannot go while the project uses it.
        let res = app.delete(&format!("/api/v2.0/registries/{id}")).admin().send().await;
        assert_eq!(res.status, StatusCode::PRECONDITION_FAILED, "{}", res.text());
        assert_eq!(code(&res), "PRECONDITION");
        assert_eq!(message(&res), format!("the registry {id} is referenced by proxy cache project, cannot delete it"));
        get(&app, id).await;

        // Pushes are refused: a blob upload, a monolithic blob, a manifest, a copy.
        let denied = "can not push artifact to a proxy project: cache";
        let res = app.post("/v2/cache/app/blobs/uploads/").admin().send().await;
        assert_eq!(res.status, StatusCode::FORBIDDEN, "{}", res.text());
        assert_eq!(error_code(&res), "DENIED");
        assert_eq!(res.json()["errors"][0]["message"], denied);
        let config = br#"{"architecture":"amd64","os":"linux"}"#;
        let res = app.post(&format!("/v2/cache/app/blobs/uploads/?digest={}", digest_of(config)))
            .admin().raw("application/octet-stream", config.to_vec()).send().await;
        assert_eq!(res.status, StatusCode::FORBIDDEN, "{}", res.text());
        let res = app.request(Method::PUT, "/v2/cache/app/manifests/v1").admin()
            .raw("application/vnd.oci.image.manifest.v1+json", image_manifest(config, &[])).send().await;
        assert_eq!(res.status, StatusCode::FORBIDDEN, "{}", res.text());
        assert_eq!(error_code(&res), "DENIED");
        assert_eq!(res.json()["errors"][0]["message"], denied);
        crate::registry::push_image(&app, "library/app", "v1", &[&b"layer"[..]]).await;
        let res = app.post("/api/v2.0/projects/cache/repositories/app/artifacts?from=library/app:v1").admin().send().await;
        assert_eq!(res.status, StatusCode::METHOD_NOT_ALLOWED, "{}", res.text());
        assert_eq!(message(&res), "the operation isn't supported for a proxy cache project");
        let res = app.get("/api/v2.0/projects/cache/repositories").admin().send().await;
        assert_eq!(res.json(), json!([]));

        // What upstream does not have is not found (pulls through are in registry/proxy_cache.rs).
        let res = app.get("/v2/cache/app/manifests/v1").send().await;
        assert_eq!(res.status, StatusCode::NOT_FOUND, "{}", res.text());
        let res = app.get("/v2/cache/app/tags/list").admin().send().await;
        assert_eq!(res.status, StatusCode::NOT_FOUND, "{}", res.text());

        // Once the project is gone, so may the registry be.
        let res = app.delete(&format!("/api/v2.0/projects/{project_id}")).admin().send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        let res = app.delete(&format!("/api/v2.0/registries/{id}")).admin().send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
    }
);
