//! Robot accounts: the `/robots` API, and the robot's secret as Basic
//! credentials on `/v2/`, the token service and `/api/v2.0`, with exactly the
//! granted actions.

use axum::http::{Method, StatusCode};
use serde_json::{Value, json};

use crate::backend_test;
use crate::harbor::fixtures::{PASSWORD, code, id_from_location, member, message, project, user};
use crate::registry::{digest_of, error_code, image_manifest};
use crate::util::{MASTER_KEY, TestApp};

const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";

fn project_robot(name: &str, project: &str, access: &[(&str, &str)]) -> Value {
    json!({
        "name": name,
        "description": "for CI",
        "level": "project",
        "duration": -1,
        "permissions": [{
            "kind": "project",
            "namespace": project,
            "access": access.iter().map(|(r, a)| json!({"resource": r, "action": a})).collect::<Vec<_>>(),
        }],
    })
}

/// Creates a robot as admin; returns (id, full name, secret).
async fn create(app: &TestApp, body: &Value) -> (i64, String, String) {
    let res = app.post("/api/v2.0/robots").admin().json(body).send().await;
    assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
    let id = id_from_location(&res);
    assert_eq!(
        res.header("location"),
        Some(format!("/api/v2.0/robots/{id}").as_str())
    );
    let body = res.json();
    assert_eq!(body["id"], id);
    (
        id,
        body["name"].as_str().unwrap().to_string(),
        body["secret"].as_str().unwrap().to_string(),
    )
}

/// Pushes `config` and one layer, then a manifest as `name:tag`, with Basic
/// `login`/`secret`; returns the manifest PUT's response.
async fn push_as(
    app: &TestApp,
    login: &str,
    secret: &str,
    name: &str,
    tag: &str,
) -> crate::util::TestResponse {
    let config = br#"{"architecture":"amd64","os":"linux"}"#;
    let layer = format!("layer of {name}:{tag}").into_bytes();
    for blob in [&config[..], &layer[..]] {
        let res = app
            .post(&format!(
                "/v2/{name}/blobs/uploads/?digest={}",
                digest_of(blob)
            ))
            .basic(login, secret)
            .raw("application/octet-stream", blob.to_vec())
            .send()
            .await;
        if res.status != StatusCode::CREATED {
            return res;
        }
    }
    app.request(Method::PUT, &format!("/v2/{name}/manifests/{tag}"))
        .basic(login, secret)
        .raw(OCI_MANIFEST, image_manifest(config, &[&layer]))
        .send()
        .await
}

backend_test!(
    async fn a_project_robot_pushes_and_pulls_and_nothing_more(app) {
        project(&app, None, "other", false).await;
        let (id, name, secret) =
            create(&app, &project_robot("ci", "library", &[("repository", "push"), ("artifact", "read")])).await;
        assert_eq!(name, "robot$library+ci");
        assert!(secret.len() >= 8);

        // The robot as the API shows it: never its secret.
        let res = app.get(&format!("/api/v2.0/robots/{id}")).admin().send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        let robot = res.json();
        assert_eq!(robot["name"], "robot$library+ci");
        assert_eq!(robot["level"], "project");
        assert_eq!(robot["duration"], -1);
        assert_eq!(robot["expires_at"], -1);
        assert_eq!(robot["disable"], false);
        assert_eq!(robot["editable"], true);
        assert_eq!(robot["creator_type"], "local");
        assert_eq!(robot["permissions"][0]["namespace"], "library");
        assert_eq!(robot["permissions"][0]["access"][0]["resource"], "repository");
        assert!(robot.get("secret").is_none(), "{robot}");
        assert!(!res.text().contains(&secret));

        // /v2/: push and pull where granted; delete and other projects refused.
        let res = push_as(&app, &name, &secret, "library/app", "v1").await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        let res = app.get("/v2/library/app/manifests/v1").basic(&name, &secret).header("accept", OCI_MANIFEST).send().await;
        assert_eq!(res.status, StatusCode::OK);
        // Harbor's answer, which docker shows as `unauthorized: unauthorized to access repository ...`.
        let res = app.delete("/v2/library/app/manifests/v1").basic(&name, &secret).send().await;
        assert_eq!(res.status, StatusCode::UNAUTHORIZED, "{}", res.text());
        assert_eq!(error_code(&res), "UNAUTHORIZED");
        assert_eq!(res.json()["errors"][0]["message"], "unauthorized to access repository: library/app, action: delete: unauthorized to access repository: library/app, action: delete");
        let res = push_as(&app, &name, &secret, "other/app", "v1").await;
        assert_eq!(res.status, StatusCode::UNAUTHORIZED, "{}", res.text());
        assert_eq!(res.json()["errors"][0]["message"], "unauthorized to access repository: other/app, action: push: unauthorized to access repository: other/app, action: push");
        let res = app.get("/v2/_catalog").basic(&name, &secret).send().await;
        assert_eq!(res.status, StatusCode::FORBIDDEN);

        // The token service grants the held part of each scope, to the robot's name.
        let res = app
            .get("/service/token?service=harbor-registry&scope=repository:library/app:pull,push,delete&scope=repository:other/app:pull")
            .basic(&name, &secret)
            .send()
            .await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        let token = res.json()["token"].as_str().unwrap().to_string();
        let claims = decode_claims(&token);
        assert_eq!(claims["sub"], "robot$library+ci");
        assert_eq!(claims["access"][0]["actions"], json!(["pull", "push"]));
        assert_eq!(claims["access"][1]["actions"], json!([]));
        let res = app.get("/v2/library/app/tags/list").bearer(&token).send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());

        // /api/v2.0: what the permissions say.
        let res = app.get("/api/v2.0/projects/library").basic(&name, &secret).send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        let res = app.get("/api/v2.0/projects/library/repositories/app/artifacts/v1").basic(&name, &secret).send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        let res = app.delete("/api/v2.0/projects/library/repositories/app/artifacts/v1").basic(&name, &secret).send().await;
        assert_eq!(res.status, StatusCode::FORBIDDEN, "{}", res.text());
        let res = app.get("/api/v2.0/projects/other").basic(&name, &secret).send().await;
        assert_eq!(res.status, StatusCode::FORBIDDEN, "{}", res.text());
        let res = app.get("/api/v2.0/projects").basic(&name, &secret).send().await;
        let projects = res.json();
        let names: Vec<&str> = projects.as_array().unwrap().iter().map(|p| p["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["library"], "its project and public ones");
        let res = app.get("/api/v2.0/users/current").basic(&name, &secret).send().await;
        assert_eq!(res.status, StatusCode::PRECONDITION_FAILED, "{}", res.text());
        let res = app.get("/api/v2.0/users").basic(&name, &secret).send().await;
        assert_eq!(res.status, StatusCode::FORBIDDEN, "{}", res.text());
        let res = app.post("/api/v2.0/projects").basic(&name, &secret).json(&json!({"project_name": "mine"})).send().await;
        assert_eq!(res.status, StatusCode::FORBIDDEN);
        assert_eq!(message(&res), "Only system level robot can create project");

        // Not a user: no generator-rest sign-in, and a wrong secret is a 401.
        // (The generator-rest API wants an e-mail address as the login.)
        let res = app.post(&format!("/auth?access_token={MASTER_KEY}")).basic(&name, &secret).send().await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST, "{}", res.text());
        let res = app.post("/harbor/sign-in").form(&[("principal", &name), ("password", &secret)]).send().await;
        assert!(res.text().contains("Invalid user name or password"), "{}", res.text());
        let res = app.get("/v2/library/app/tags/list").basic(&name, "Wrong-secret-1").send().await;
        assert_eq!(res.status, StatusCode::UNAUTHORIZED);

        // The audit log has the robot's creation, and its push under its name.
        app.state.audit_queue.flush(app.store()).await;
        let res = app.get("/api/v2.0/audit-logs?q=resource_type%3Drobot").admin().send().await;
        assert_eq!(res.json()[0]["resource"], "robot$library+ci");
        assert_eq!(res.json()[0]["operation"], "create");
        assert_eq!(res.json()[0]["username"], "admin");
        // (`q` is decoded twice, as Harbor does: a `+` is sent as `%252B`.)
        let res = app.get("/api/v2.0/audit-logs?q=username%3Drobot$library%252Bci,operation%3Dcreate").admin().send().await;
        assert_eq!(res.json()[0]["resource"], "library/app:v1", "{}", res.text());
    }
);

/// The claims of a JWT, unverified.
fn decode_claims(token: &str) -> Value {
    use base64::Engine;
    let payload = token.split('.').nth(1).unwrap();
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

backend_test!(
    async fn disabled_expired_refreshed_and_deleted_robots(app) {
        let body = project_robot("deploy", "library", &[("repository", "pull")]);
        let (id, name, secret) = create(&app, &body).await;
        let pull = |secret: String| {
            let (app, name) = (&app, name.clone());
            async move {
                app.get("/v2/library/nothing/tags/list").basic(&name, &secret).send().await.status
            }
        };
        // A pull of a missing repository: 404 once signed in.
        assert_eq!(pull(secret.clone()).await, StatusCode::NOT_FOUND);

        // Disabled: 401 everywhere, at once.
        let mut update = body.clone();
        update["name"] = json!(name);
        update["disable"] = json!(true);
        let res = app.put(&format!("/api/v2.0/robots/{id}")).admin().json(&update).send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        assert_eq!(pull(secret.clone()).await, StatusCode::UNAUTHORIZED);
        let res = app.get("/api/v2.0/projects").basic(&name, &secret).send().await;
        assert_eq!(res.status, StatusCode::UNAUTHORIZED);
        // The token service says what Harbor's does (docker: `unauthorized: authentication required`).
        let res = app
            .get("/service/token?service=harbor-registry&scope=repository:library/app:pull")
            .basic(&name, &secret)
            .send()
            .await;
        assert_eq!(res.status, StatusCode::UNAUTHORIZED);
        assert_eq!(error_code(&res), "UNAUTHORIZED");
        assert_eq!(res.json()["errors"][0]["message"], "authentication required");
        update["disable"] = json!(false);
        update["duration"] = json!(7);
        let res = app.put(&format!("/api/v2.0/robots/{id}")).admin().json(&update).send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        let robot = app.get(&format!("/api/v2.0/robots/{id}")).admin().send().await.json();
        assert_eq!(robot["duration"], 7);
        assert!(robot["expires_at"].as_i64().unwrap() > 0);
        assert_eq!(pull(secret.clone()).await, StatusCode::NOT_FOUND);

        // Name and level do not change.
        let mut renamed = update.clone();
        renamed["name"] = json!("robot$library+other");
        let res = app.put(&format!("/api/v2.0/robots/{id}")).admin().json(&renamed).send().await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST, "{}", res.text());

        // Expired: 401 (moved into the past in the store).
        let mut stored = app.store().robots().get(id).await.unwrap().unwrap();
        let expires = stored.expires_at;
        stored.expires_at = 1;
        let change = berth_store::repo::robots::RobotChange { prefix: "robot$", by: "admin" };
        assert!(app.store().robots().update(&stored, &change).await.unwrap());
        let res = app.get("/v2/library/nothing/tags/list").basic(&name, "Never-used-1").send().await;
        assert_eq!(res.status, StatusCode::UNAUTHORIZED);
        let fresh = app.second_instance().await;
        let res = fresh.get("/v2/library/nothing/tags/list").basic(&name, &secret).send().await;
        assert_eq!(res.status, StatusCode::UNAUTHORIZED, "expired");
        stored.expires_at = expires;
        assert!(app.store().robots().update(&stored, &change).await.unwrap());

        // Refreshed: the old secret stops working, the new one works.
        let res = app.request(Method::PATCH, &format!("/api/v2.0/robots/{id}")).admin().json(&json!({})).send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        let renewed = res.json()["secret"].as_str().unwrap().to_string();
        assert_ne!(renewed, secret);
        assert_eq!(pull(secret.clone()).await, StatusCode::UNAUTHORIZED);
        assert_eq!(pull(renewed.clone()).await, StatusCode::NOT_FOUND);
        // A chosen secret must be strong, and is not echoed.
        let res = app.request(Method::PATCH, &format!("/api/v2.0/robots/{id}")).admin().json(&json!({"secret": "weak"})).send().await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST);
        let res = app.request(Method::PATCH, &format!("/api/v2.0/robots/{id}")).admin().json(&json!({"secret": "Chosen-Secret-9"})).send().await;
        assert_eq!(res.status, StatusCode::OK);
        assert_eq!(res.json(), json!({}));
        assert_eq!(pull("Chosen-Secret-9".into()).await, StatusCode::NOT_FOUND);

        // Deleted: gone, and its secret with it.
        let res = app.delete(&format!("/api/v2.0/robots/{id}")).admin().send().await;
        assert_eq!(res.status, StatusCode::OK);
        assert_eq!(pull("Chosen-Secret-9".into()).await, StatusCode::UNAUTHORIZED);
        let res = app.get(&format!("/api/v2.0/robots/{id}")).admin().send().await;
        assert_eq!(res.status, StatusCode::NOT_FOUND);
        let res = app.delete(&format!("/api/v2.0/robots/{id}")).admin().send().await;
        assert_eq!(res.status, StatusCode::NOT_FOUND);
    }
);

backend_test!(
    async fn who_may_manage_robots(app) {
        let p = project(&app, None, "p", false).await;
        for (login, role) in [("pa", 1), ("dev", 2), ("guest", 3)] {
            let uid = user(&app, login).await;
            member(&app, p, uid, role).await;
        }
        user(&app, "outsider").await;
        let body = project_robot("bot", "p", &[("repository", "pull")]);
        let post = |login: &'static str, body: Value| {
            let app = &app;
            async move { app.post("/api/v2.0/robots").basic(login, PASSWORD).json(&body).send().await }
        };
        assert_eq!(app.post("/api/v2.0/robots").json(&body).send().await.status, StatusCode::UNAUTHORIZED);
        assert_eq!(post("dev", body.clone()).await.status, StatusCode::FORBIDDEN);
        assert_eq!(post("outsider", body.clone()).await.status, StatusCode::FORBIDDEN);
        let res = post("pa", body.clone()).await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        let id = id_from_location(&res);
        assert_eq!(res.json()["name"], "robot$p+bot");
        let res = post("pa", body.clone()).await;
        assert_eq!(res.status, StatusCode::CONFLICT, "{}", res.text());

        // System robots are for system administrators.
        let system = json!({
            "name": "sys", "level": "system", "duration": 30,
            "permissions": [{"kind": "project", "namespace": "*", "access": [{"resource": "repository", "action": "pull"}]}],
        });
        assert_eq!(post("pa", system.clone()).await.status, StatusCode::FORBIDDEN);
        let (sys_id, sys_name, sys_secret) = create(&app, &system).await;
        assert_eq!(sys_name, "robot$sys");
        let robot = app.get(&format!("/api/v2.0/robots/{sys_id}")).admin().send().await.json();
        assert_eq!(robot["level"], "system");
        assert_eq!(robot["duration"], 30);
        // Every project, private ones included.
        let res = app.get("/api/v2.0/projects/p").basic(&sys_name, &sys_secret).send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        let res = app.get("/api/v2.0/projects").basic(&sys_name, &sys_secret).send().await;
        assert_eq!(res.header("x-total-count"), Some("2"));

        // Listing: one level at a time.
        let project_list = format!("/api/v2.0/robots?q=Level%3Dproject,ProjectID%3D{p}");
        let res = app.get(&project_list).basic("guest", PASSWORD).send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        assert_eq!(res.header("x-total-count"), Some("1"));
        assert_eq!(res.json()[0]["name"], "robot$p+bot");
        assert_eq!(app.get(&project_list).basic("outsider", PASSWORD).send().await.status, StatusCode::FORBIDDEN);
        let res = app.get("/api/v2.0/robots").admin().send().await;
        assert_eq!(res.header("x-total-count"), Some("1"));
        assert_eq!(res.json()[0]["name"], "robot$sys");
        assert_eq!(app.get("/api/v2.0/robots").basic("pa", PASSWORD).send().await.status, StatusCode::FORBIDDEN);
        let res = app.get("/api/v2.0/robots?q=Level%3Dproject").admin().send().await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST);
        assert_eq!(message(&res), "must with project ID when to query project robots");
        let res = app.get("/api/v2.0/robots?q=Level%3Dglobal").admin().send().await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST);
        let res = app.get(&format!("{project_list},name%3D~bo")).admin().send().await;
        assert_eq!(res.header("x-total-count"), Some("1"));
        let res = app.get(&format!("{project_list},name%3D~zz")).admin().send().await;
        assert_eq!(res.header("x-total-count"), Some("0"));

        // Reading, updating and deleting follow the project's roles.
        assert_eq!(app.get(&format!("/api/v2.0/robots/{id}")).basic("guest", PASSWORD).send().await.status, StatusCode::OK);
        assert_eq!(app.delete(&format!("/api/v2.0/robots/{id}")).basic("dev", PASSWORD).send().await.status, StatusCode::FORBIDDEN);
        assert_eq!(app.get(&format!("/api/v2.0/robots/{sys_id}")).basic("pa", PASSWORD).send().await.status, StatusCode::FORBIDDEN);

        // A robot that may manage robots makes none stronger than itself.
        let (_, manager, manager_secret) = create(
            &app,
            &project_robot("manager", "p", &[("robot", "create"), ("repository", "pull")]),
        )
        .await;
        let res = app
            .post("/api/v2.0/robots")
            .basic(&manager, &manager_secret)
            .json(&project_robot("stronger", "p", &[("repository", "push")]))
            .send()
            .await;
        assert_eq!(res.status, StatusCode::FORBIDDEN, "{}", res.text());
        let res = app
            .post("/api/v2.0/robots")
            .basic(&manager, &manager_secret)
            .json(&project_robot("weaker", "p", &[("repository", "pull")]))
            .send()
            .await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        assert_eq!(res.json()["name"], "robot$p+weaker");
        let created = app.get(&format!("/api/v2.0/robots/{}", id_from_location(&res))).admin().send().await.json();
        assert_eq!(created["creator_type"], "robot");

        // Robots go with their project.
        let res = app.delete(&format!("/api/v2.0/projects/{p}")).admin().send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        assert_eq!(app.get(&format!("/api/v2.0/robots/{id}")).admin().send().await.status, StatusCode::NOT_FOUND);
        let robot = app.get(&format!("/api/v2.0/robots/{sys_id}")).admin().send().await.json();
        assert_eq!(robot["permissions"][0]["namespace"], "*", "an all-projects permission stays");
    }
);

backend_test!(
    async fn bad_robot_requests_change_nothing(app) {
        let cases = [
            (project_robot("CI", "library", &[("repository", "pull")]), StatusCode::BAD_REQUEST, "robot name is not in lower case or contains illegal characters"),
            (project_robot("a+b", "library", &[("repository", "pull")]), StatusCode::BAD_REQUEST, "robot name is not in lower case or contains illegal characters"),
            (json!({"name": "x", "level": "project", "duration": -2, "permissions": [{"kind": "project", "namespace": "library", "access": [{"resource": "repository", "action": "pull"}]}]}), StatusCode::BAD_REQUEST, "bad request error duration input: -2"),
            (json!({"name": "x", "level": "global", "permissions": [{"kind": "project", "namespace": "library", "access": [{"resource": "repository", "action": "pull"}]}]}), StatusCode::BAD_REQUEST, "bad request error level input: global"),
            (json!({"name": "x", "level": "project", "permissions": []}), StatusCode::BAD_REQUEST, "bad request empty permission"),
            (project_robot("x", "library", &[]), StatusCode::BAD_REQUEST, "bad request empty access"),
            (project_robot("x", "library", &[("repository", "fly")]), StatusCode::BAD_REQUEST, "bad request permission: repository:fly"),
            (project_robot("x", "nowhere", &[("repository", "pull")]), StatusCode::NOT_FOUND, ""),
            (json!({"name": "x", "level": "system", "secret": "weak", "permissions": [{"kind": "system", "namespace": "/", "access": [{"resource": "project", "action": "create"}]}]}), StatusCode::BAD_REQUEST, ""),
            (json!({"name": "x", "level": "system", "permissions": [{"kind": "system", "namespace": "library", "access": [{"resource": "project", "action": "create"}]}]}), StatusCode::BAD_REQUEST, "unknown namespace"),
        ];
        for (body, status, expected) in cases {
            let res = app.post("/api/v2.0/robots").admin().json(&body).send().await;
            assert_eq!(res.status, status, "{body}: {}", res.text());
            if !expected.is_empty() {
                assert_eq!(message(&res), expected, "{body}");
            }
            assert!(!code(&res).is_empty());
        }
        let res = app.post("/api/v2.0/robots").admin().raw("application/json", "{").send().await;
        assert!(res.status.is_client_error());
        let res = app.get("/api/v2.0/robots/abc").admin().send().await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST);
        let res = app.get("/api/v2.0/robots?q=Level%3Dproject,ProjectID%3D1").admin().send().await;
        assert_eq!(res.header("x-total-count"), Some("0"), "nothing was made");
        let res = app.get("/api/v2.0/robots").admin().send().await;
        assert_eq!(res.header("x-total-count"), Some("0"));

        // A secret chosen at creation works as given.
        let mut chosen = project_robot("chosen", "library", &[("repository", "pull")]);
        chosen["secret"] = json!("Chosen-Secret-1");
        let (_, name, secret) = create(&app, &chosen).await;
        assert_eq!(secret, "Chosen-Secret-1");
        let res = app.get("/v2/library/none/tags/list").basic(&name, "Chosen-Secret-1").send().await;
        assert_eq!(res.status, StatusCode::NOT_FOUND);
    }
);

backend_test!(
    async fn concurrent_creates_of_one_name_make_one_robot(app) {
        let body = project_robot("racer", "library", &[("repository", "pull")]);
        let attempts = (0..8).map(|_| {
            let (app, body) = (&app, body.clone());
            async move { app.post("/api/v2.0/robots").admin().json(&body).send().await.status }
        });
        let mut statuses = futures_util::future::join_all(attempts).await;
        statuses.sort();
        assert_eq!(statuses[0], StatusCode::CREATED, "{statuses:?}");
        assert!(statuses[1..].iter().all(|s| *s == StatusCode::CONFLICT), "{statuses:?}");
        let res = app.get("/api/v2.0/robots?q=Level%3Dproject,ProjectID%3D1").admin().send().await;
        assert_eq!(res.header("x-total-count"), Some("1"));
        assert_eq!(res.json()[0]["permissions"][0]["access"].as_array().unwrap().len(), 1, "one set of permissions");
    }
);

backend_test!(
    /// No robot acts on a robot that holds more than it does, nor grants what
    /// a deny of its own takes away, nor makes a robot that outlives it.
    async fn a_weak_robot_cannot_act_on_a_stronger_one(app) {
        project(&app, None, "p", false).await;
        let (strong_id, strong, strong_secret) =
            create(&app, &project_robot("strong", "p", &[("*", "*")])).await;
        let (weak_id, weak, weak_secret) = create(
            &app,
            &project_robot(
                "weak",
                "p",
                &[("robot", "read"), ("robot", "update"), ("robot", "delete"), ("robot", "create"), ("repository", "pull")],
            ),
        )
        .await;
        let (puller_id, _, _) = create(&app, &project_robot("puller", "p", &[("repository", "pull")])).await;

        // The stronger robot's secret, its settings and itself are out of reach.
        let res = app
            .request(Method::PATCH, &format!("/api/v2.0/robots/{strong_id}"))
            .basic(&weak, &weak_secret)
            .json(&json!({}))
            .send()
            .await;
        assert_eq!(res.status, StatusCode::FORBIDDEN, "{}", res.text());
        assert!(!res.text().contains("secret\":\""), "no secret leaks: {}", res.text());
        let mut disable = project_robot("strong", "p", &[("*", "*")]);
        disable["name"] = json!(strong);
        disable["disable"] = json!(true);
        let res = app
            .put(&format!("/api/v2.0/robots/{strong_id}"))
            .basic(&weak, &weak_secret)
            .json(&disable)
            .send()
            .await;
        assert_eq!(res.status, StatusCode::FORBIDDEN, "{}", res.text());
        let res = app.delete(&format!("/api/v2.0/robots/{strong_id}")).basic(&weak, &weak_secret).send().await;
        assert_eq!(res.status, StatusCode::FORBIDDEN, "{}", res.text());
        let res = app.get("/api/v2.0/projects/p").basic(&strong, &strong_secret).send().await;
        assert_eq!(res.status, StatusCode::OK, "the strong robot is untouched: {}", res.text());
        // Reading it is allowed (robot:read), and a robot it covers may be refreshed.
        let res = app.get(&format!("/api/v2.0/robots/{strong_id}")).basic(&weak, &weak_secret).send().await;
        assert_eq!(res.status, StatusCode::OK);
        let res = app
            .request(Method::PATCH, &format!("/api/v2.0/robots/{puller_id}"))
            .basic(&weak, &weak_secret)
            .json(&json!({}))
            .send()
            .await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        assert!(res.json()["secret"].as_str().is_some_and(|s| !s.is_empty()));
        let res = app.delete(&format!("/api/v2.0/robots/{puller_id}")).basic(&weak, &weak_secret).send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        // The project's administrator (admin here) still manages both.
        let res = app.delete(&format!("/api/v2.0/robots/{weak_id}")).admin().send().await;
        assert_eq!(res.status, StatusCode::OK);

        // A deny the maker carries is not dropped by a wildcard grant.
        let denied = json!({
            "name": "denied", "level": "project", "duration": 30,
            "permissions": [{"kind": "project", "namespace": "p", "access": [
                {"resource": "*", "action": "*"},
                {"resource": "member", "action": "*", "effect": "deny"},
            ]}],
        });
        let (_, denied_name, denied_secret) = create(&app, &denied).await;
        let as_denied = |body: Value| {
            let (app, name, secret) = (&app, denied_name.clone(), denied_secret.clone());
            async move { app.post("/api/v2.0/robots").basic(&name, &secret).json(&body).send().await }
        };
        let mut child = project_robot("child", "p", &[("*", "*")]);
        child["duration"] = json!(1);
        let res = as_denied(child.clone()).await;
        assert_eq!(res.status, StatusCode::FORBIDDEN, "{}", res.text());
        let mut member_child = project_robot("child", "p", &[("member", "create")]);
        member_child["duration"] = json!(1);
        assert_eq!(as_denied(member_child).await.status, StatusCode::FORBIDDEN);
        // A child that never expires would outlive its 30-day maker.
        let forever = project_robot("child", "p", &[("repository", "push")]);
        let res = as_denied(forever.clone()).await;
        assert_eq!(res.status, StatusCode::FORBIDDEN, "{}", res.text());
        let mut shorter = forever;
        shorter["duration"] = json!(1);
        let res = as_denied(shorter).await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        let child_id = id_from_location(&res);
        // Nor may the maker lengthen its child's life past its own.
        let mut longer = project_robot("child", "p", &[("repository", "push")]);
        longer["name"] = json!("robot$p+child");
        let res = app
            .put(&format!("/api/v2.0/robots/{child_id}"))
            .basic(&denied_name, &denied_secret)
            .json(&longer)
            .send()
            .await;
        assert_eq!(res.status, StatusCode::FORBIDDEN, "{}", res.text());
        let robot = app.get(&format!("/api/v2.0/robots/{child_id}")).admin().send().await.json();
        assert_eq!(robot["duration"], 1);
    }
);
