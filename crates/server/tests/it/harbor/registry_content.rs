//! Repositories, artifacts, tags and labels of the management API over content
//! pushed through `/v2/`.

use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::backend_test;
use crate::registry::{descriptor, digest_of, push_blob, push_image, put_manifest};
use crate::util::TestApp;

const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";

fn names(body: &Value) -> Vec<String> {
    body.as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap().to_string())
        .collect()
}

backend_test!(
    async fn repositories_list_get_update_and_delete(app) {
        push_image(&app, "library/alpha", "v1", &[b"a1"]).await;
        push_image(&app, "library/alpha", "v2", &[b"a2"]).await;
        push_image(&app, "library/team/beta", "v1", &[b"b1"]).await;

        let res = app.get("/api/v2.0/repositories").send().await;
        assert_eq!(res.status, StatusCode::OK);
        assert_eq!(res.header("x-total-count"), Some("2"));
        let body = res.json();
        assert_eq!(names(&body), vec!["library/team/beta", "library/alpha"], "newest first");
        let alpha = &body[1];
        assert_eq!(alpha["artifact_count"], 2);
        assert_eq!(alpha["pull_count"], 0);
        assert_eq!(alpha["project_id"], 1);
        assert!(alpha.get("description").is_none());

        let res = app.get("/api/v2.0/projects/library/repositories?page_size=1&sort=name").send().await;
        assert_eq!(names(&res.json()), vec!["library/alpha"]);
        assert_eq!(
            res.header("link"),
            Some("</api/v2.0/projects/library/repositories?page=2&page_size=1&sort=name>; rel=\"next\"")
        );
        let res = app.get("/api/v2.0/projects/library/repositories?q=name%3D~BETA").send().await;
        assert_eq!(names(&res.json()), vec!["library/team/beta"]);
        let res = app.get("/api/v2.0/projects/library/repositories?page_size=101").send().await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST);
        let res = app.get("/api/v2.0/projects/library/repositories?q=name").send().await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST);
        let res = app.get("/api/v2.0/projects/nothere/repositories").admin().send().await;
        assert_eq!(res.status, StatusCode::NOT_FOUND);

        // Double-encoded (and single-encoded) names with a slash.
        for path in ["team%252Fbeta", "team%2Fbeta"] {
            let res = app.get(&format!("/api/v2.0/projects/library/repositories/{path}")).admin().send().await;
            assert_eq!(res.status, StatusCode::OK, "{path}");
            assert_eq!(res.json()["name"], "library/team/beta");
        }
        // getRepository is for members: anonymous callers get 401 even on a public project.
        let res = app.get("/api/v2.0/projects/library/repositories/alpha").send().await;
        assert_eq!(res.status, StatusCode::UNAUTHORIZED);
        let res = app.get("/api/v2.0/projects/library/repositories/missing").admin().send().await;
        assert_eq!(res.status, StatusCode::NOT_FOUND);
        assert_eq!(res.json()["errors"][0]["message"], "repository library/missing not found");

        let res = app
            .put("/api/v2.0/projects/library/repositories/alpha")
            .admin()
            .json(&json!({"description": "<b>\"hi\"</b>", "name": "ignored"}))
            .send()
            .await;
        assert_eq!(res.status, StatusCode::OK);
        let res = app.get("/api/v2.0/projects/library/repositories/alpha").admin().send().await;
        assert_eq!(res.json()["description"], "&lt;b&gt;&#34;hi&#34;&lt;/b&gt;");
        assert_eq!(res.json()["name"], "library/alpha");
        let res = app.put("/api/v2.0/projects/library/repositories/alpha").admin().raw("application/json", "nope").send().await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST);

        app.create_user("carol", "Carol12345").await;
        let res = app.delete("/api/v2.0/projects/library/repositories/alpha").basic("carol", "Carol12345").send().await;
        assert_eq!(res.status, StatusCode::FORBIDDEN);
        let res = app.delete("/api/v2.0/projects/library/repositories/alpha").admin().send().await;
        assert_eq!(res.status, StatusCode::OK);
        let res = app.get("/api/v2.0/projects/library/repositories/alpha").admin().send().await;
        assert_eq!(res.status, StatusCode::NOT_FOUND);
        let res = app.get("/v2/library/alpha/manifests/v1").send().await;
        assert_eq!(res.status, StatusCode::NOT_FOUND);
        let res = app.get("/api/v2.0/repositories").send().await;
        assert_eq!(res.header("x-total-count"), Some("1"));
        // The repository can be pushed again.
        push_image(&app, "library/alpha", "v1", &[b"a1"]).await;
    }
);

/// Pushes: `app:v1` + `app:v1-beta` (one image), an untagged image, and an
/// index `app:multi` over two children. Returns (v1 digest, untagged digest, index digest, child digests).
async fn seed(app: &TestApp) -> (String, String, String, Vec<String>) {
    let name = "library/app";
    let (manifest, v1) = push_image(app, name, "v1", &[b"l1", b"l2"]).await;
    let res = put_manifest(app, name, "v1-beta", OCI_MANIFEST, &manifest).await;
    assert_eq!(res.status, StatusCode::CREATED);
    let (_, untagged) = push_image(
        app,
        name,
        &digest_of(&crate::registry::image_manifest(
            br#"{"architecture":"amd64","os":"linux","layers":1}"#,
            &[b"u"],
        )),
        &[b"u"],
    )
    .await;
    let (c1, c1_digest) = push_image(
        app,
        name,
        &digest_of(&crate::registry::image_manifest(
            br#"{"architecture":"amd64","os":"linux","layers":1}"#,
            &[b"c1"],
        )),
        &[b"c1"],
    )
    .await;
    let (c2, c2_digest) = push_image(
        app,
        name,
        &digest_of(&crate::registry::image_manifest(
            br#"{"architecture":"amd64","os":"linux","layers":1}"#,
            &[b"c2"],
        )),
        &[b"c2"],
    )
    .await;
    let mut child1 = descriptor(OCI_MANIFEST, &c1);
    child1["platform"] = json!({"architecture": "amd64", "os": "linux"});
    let mut child2 = descriptor(OCI_MANIFEST, &c2);
    child2["platform"] = json!({"architecture": "arm64", "os": "linux", "variant": "v8"});
    let index = json!({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": [child1, child2]})
        .to_string();
    let res = put_manifest(app, name, "multi", OCI_INDEX, index.as_bytes()).await;
    assert_eq!(res.status, StatusCode::CREATED);
    (
        v1,
        untagged,
        digest_of(index.as_bytes()),
        vec![c1_digest, c2_digest],
    )
}

fn digests(res: &crate::util::TestResponse) -> Vec<String> {
    res.json()
        .as_array()
        .unwrap_or_else(|| panic!("{}", res.text()))
        .iter()
        .map(|a| a["digest"].as_str().unwrap().to_string())
        .collect()
}

backend_test!(
    async fn artifact_listing_with_every_q_form(app) {
        let (v1, untagged, index, children) = seed(&app).await;
        let base = "/api/v2.0/projects/library/repositories/app/artifacts";

        // Default: tagged plus untagged non-children, newest first.
        let res = app.get(base).send().await;
        assert_eq!(res.status, StatusCode::OK);
        assert_eq!(res.header("x-total-count"), Some("3"));
        assert_eq!(digests(&res), vec![index.clone(), untagged.clone(), v1.clone()]);
        let body = res.json();
        let image = &body[2];
        assert_eq!(image["type"], "IMAGE");
        assert_eq!(image["media_type"], "application/vnd.oci.image.config.v1+json");
        assert_eq!(image["manifest_media_type"], OCI_MANIFEST);
        assert_eq!(image["repository_name"], "library/app");
        assert_eq!(image["extra_attrs"]["architecture"], "amd64");
        assert_eq!(image["pull_time"], "0001-01-01T00:00:00.000Z");
        assert_eq!(image["labels"], Value::Null);
        let tags: Vec<&str> = image["tags"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
        assert_eq!(tags, vec!["v1-beta", "v1"]);
        assert_eq!(body[1]["tags"], Value::Null);
        let refs = body[0]["references"].as_array().unwrap();
        assert_eq!(refs.len(), 2);
        assert_eq!(refs[1]["platform"]["variant"], "v8");
        assert_eq!(refs[0]["child_digest"], children[0].as_str());
        assert!(image["addition_links"]["build_history"]["href"].as_str().unwrap().ends_with("/additions/build_history"));

        let q = |query: &str| format!("{base}?q={}", query.replace('+', "%252B").replace('=', "%3D").replace(' ', "%20").replace('(', "%28").replace(')', "%29"));
        let res = app.get(&q("base=*")).send().await;
        assert_eq!(res.header("x-total-count"), Some("5"));
        let res = app.get(&q("tags=*")).send().await;
        assert_eq!(digests(&res), vec![index.clone(), v1.clone()]);
        let res = app.get(&q("tags=nil")).send().await;
        assert_eq!(digests(&res), vec![untagged.clone()]);
        let res = app.get(&q("tags=~beta")).send().await;
        assert_eq!(digests(&res), vec![v1.clone()]);
        let res = app.get(&q("tags=~BETA")).send().await;
        assert_eq!(digests(&res), Vec::<String>::new(), "tag fuzzy match is case-sensitive");
        let res = app.get(&q("tags=multi")).send().await;
        assert_eq!(digests(&res), vec![index.clone()]);
        let res = app.get(&q(&format!("digest={untagged}"))).send().await;
        assert_eq!(digests(&res), vec![untagged.clone()]);
        // Harbor decodes `q` twice, so a `+` in a value travels as `%252B`.
        let res = app.get(&q(&format!("media_type={OCI_INDEX}"))).send().await;
        assert_eq!(digests(&res), vec![index.clone()]);
        let res = app.get(&q("type=IMAGE")).send().await;
        assert_eq!(res.header("x-total-count"), Some("3"));
        let res = app.get(&q("type=CHART")).send().await;
        assert_eq!(res.header("x-total-count"), Some("0"));
        for (range, count) in [
            ("size=[1~]", "3"),
            ("size=[~1]", "0"),
            ("size={1 2}", "0"),
            ("push_time=[2000-01-01T00:00:00~]", "3"),
            ("push_time=[~2000-01-01T00:00:00]", "0"),
        ] {
            let res = app.get(&q(range).replace('[', "%5B").replace(']', "%5D").replace('{', "%7B").replace('}', "%7D")).send().await;
            assert_eq!(res.status, StatusCode::OK, "{range}");
            assert_eq!(res.header("x-total-count"), Some(count), "{range}");
        }
        // A non-number for an integer column is a 400, as on every other listing.
        let res = app.get(&q("size=x")).send().await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST);
        assert_eq!(res.json()["errors"][0]["message"], "invalid query string value: x");
        let res = app.get(&q("tags=[1~2]")).send().await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST);
        let res = app.get(&q("labels=1")).send().await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST);

        // Paging.
        let res = app.get(&format!("{base}?page=2&page_size=2")).send().await;
        assert_eq!(digests(&res), vec![v1.clone()]);
        assert_eq!(
            res.header("link"),
            Some("</api/v2.0/projects/library/repositories/app/artifacts?page=1&page_size=2>; rel=\"prev\"")
        );
        let res = app.get(&format!("{base}?with_tag=false")).send().await;
        assert_eq!(res.json()[2]["tags"], Value::Null);
        let res = app.get(&format!("{base}?sort=push_time")).send().await;
        assert_eq!(digests(&res), vec![v1.clone(), untagged.clone(), index.clone()]);
        let res = app.get("/api/v2.0/projects/library/repositories/unknown/artifacts").send().await;
        assert_eq!(res.status, StatusCode::OK);
        assert_eq!(res.json(), json!([]));
        assert_eq!(res.header("x-total-count"), Some("0"));

        // Labels: create, attach, filter with labels=(...), with_label.
        let res = app.post("/api/v2.0/labels").admin().json(&json!({"name": "prod", "scope": "g", "color": "#fff"})).send().await;
        assert_eq!(res.status, StatusCode::CREATED);
        let location = res.header("location").unwrap().to_string();
        let prod: i64 = location.rsplit('/').next().unwrap().parse().unwrap();
        let res = app.post("/api/v2.0/labels").admin().json(&json!({"name": "qa", "scope": "p", "project_id": 1})).send().await;
        assert_eq!(res.status, StatusCode::CREATED);
        let qa: i64 = res.header("location").unwrap().rsplit('/').next().unwrap().parse().unwrap();
        for (digest, label) in [(&v1, prod), (&v1, qa), (&untagged, prod)] {
            let res = app.post(&format!("{base}/{digest}/labels")).admin().json(&json!({"id": label})).send().await;
            assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        }
        let res = app.post(&format!("{base}/v1/labels")).admin().json(&json!({"id": prod})).send().await;
        assert_eq!(res.status, StatusCode::CONFLICT);
        let res = app.post(&format!("{base}/v1/labels")).admin().json(&json!({"id": 9999})).send().await;
        assert_eq!(res.status, StatusCode::NOT_FOUND);
        let res = app.get(&q(&format!("labels=({prod} {qa})"))).send().await;
        assert_eq!(digests(&res), vec![v1.clone()]);
        let res = app.get(&format!("{base}?q=labels%3D%28{prod}%2C%20{qa}%29")).send().await;
        assert_eq!(digests(&res), vec![v1.clone()], "the documented comma form");
        let res = app.get(&q(&format!("labels=({prod})"))).send().await;
        assert_eq!(digests(&res), vec![untagged.clone(), v1.clone()]);
        let res = app.get(&format!("{}&with_label=true", q(&format!("labels=({prod})")))).send().await;
        let body = res.json();
        let label_names: Vec<&str> = body[1]["labels"].as_array().unwrap().iter().map(|l| l["name"].as_str().unwrap()).collect();
        assert_eq!(label_names, vec!["prod", "qa"]);
        assert_eq!(body[1]["labels"][0]["scope"], "g");
        let res = app.delete(&format!("{base}/v1/labels/{qa}")).admin().send().await;
        assert_eq!(res.status, StatusCode::OK);
        let res = app.delete(&format!("{base}/v1/labels/{qa}")).admin().send().await;
        assert_eq!(res.status, StatusCode::NOT_FOUND);
        let res = app.get(&q(&format!("labels=({prod} {qa})"))).send().await;
        assert_eq!(res.header("x-total-count"), Some("0"));
    }
);

backend_test!(
    async fn artifacts_tags_get_and_delete(app) {
        let (v1, untagged, index, children) = seed(&app).await;
        let base = "/api/v2.0/projects/library/repositories/app/artifacts";
        for reference in ["v1", v1.as_str()] {
            let res = app.get(&format!("{base}/{reference}")).send().await;
            assert_eq!(res.status, StatusCode::OK);
            assert_eq!(res.json()["digest"], v1.as_str());
        }
        let res = app.get(&format!("{base}/nope")).send().await;
        assert_eq!(res.status, StatusCode::NOT_FOUND);
        assert_eq!(res.json()["errors"][0]["message"], "artifact library/app:nope not found");
        let missing = digest_of(b"missing");
        let res = app.get(&format!("{base}/{missing}")).send().await;
        assert_eq!(res.json()["errors"][0]["message"], format!("artifact library/app@{missing} not found"));

        let res = app.post(&format!("{base}/{untagged}/tags")).admin().json(&json!({"name": "fresh"})).send().await;
        assert_eq!(res.status, StatusCode::CREATED);
        assert!(res.header("location").is_none());
        let res = app.post(&format!("{base}/{untagged}/tags")).admin().json(&json!({"name": "v1"})).send().await;
        assert_eq!(res.status, StatusCode::CONFLICT);
        let res = app.post(&format!("{base}/{untagged}/tags")).admin().json(&json!({"name": ".bad"})).send().await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST);
        let res = app.post(&format!("{base}/{untagged}/tags")).json(&json!({"name": "anon"})).send().await;
        assert_eq!(res.status, StatusCode::UNAUTHORIZED);
        let res = app.get("/v2/library/app/manifests/fresh").send().await;
        assert_eq!(res.header("docker-content-digest"), Some(untagged.as_str()));

        let res = app.get(&format!("{base}/v1/tags")).send().await;
        assert_eq!(res.header("x-total-count"), Some("2"));
        let tags: Vec<String> = res.json().as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap().to_string()).collect();
        assert_eq!(tags, vec!["v1-beta", "v1"]);
        assert_eq!(res.json()[0]["immutable"], false);
        let res = app.delete(&format!("{base}/{v1}/tags/fresh")).admin().send().await;
        assert_eq!(res.status, StatusCode::NOT_FOUND);
        let res = app.delete(&format!("{base}/{v1}/tags/v1-beta")).admin().send().await;
        assert_eq!(res.status, StatusCode::OK);
        let res = app.get(&format!("{base}/v1/tags")).send().await;
        assert_eq!(res.header("x-total-count"), Some("1"));

        let res = app.delete(&format!("{base}/{}", children[0])).admin().send().await;
        assert_eq!(res.status, StatusCode::PRECONDITION_FAILED);
        assert_eq!(res.json()["errors"][0]["code"], "VIOLATE_FOREIGN_KEY_CONSTRAINT");
        let res = app.delete(&format!("{base}/multi")).admin().send().await;
        assert_eq!(res.status, StatusCode::OK);
        let res = app.delete(&format!("{base}/{}", children[0])).admin().send().await;
        assert_eq!(res.status, StatusCode::OK);
        let res = app.get(&format!("/v2/library/app/manifests/{index}")).send().await;
        assert_eq!(res.status, StatusCode::NOT_FOUND);
        let res = app.get(&format!("{base}?q=base%3D*")).send().await;
        assert_eq!(res.header("x-total-count"), Some("3"));
    }
);

backend_test!(
    async fn labels_api_and_permissions(app) {
        app.create_user("dave", "Dave12345").await;
        let res = app.post("/api/v2.0/labels").json(&json!({"name": "x", "scope": "g"})).send().await;
        assert_eq!(res.status, StatusCode::UNAUTHORIZED);
        let res = app.post("/api/v2.0/labels").basic("dave", "Dave12345").json(&json!({"name": "x", "scope": "g"})).send().await;
        assert_eq!(res.status, StatusCode::FORBIDDEN);
        let res = app.post("/api/v2.0/labels").basic("dave", "Dave12345").json(&json!({"name": "x", "scope": "p", "project_id": 1})).send().await;
        assert_eq!(res.status, StatusCode::FORBIDDEN);
        let res = app.post("/api/v2.0/labels").admin().json(&json!({"name": "x", "scope": "q"})).send().await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST);
        let res = app.post("/api/v2.0/labels").admin().json(&json!({"name": "", "scope": "g"})).send().await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST);
        let res = app.post("/api/v2.0/labels").admin().json(&json!({"name": "x", "scope": "g", "description": "d"})).send().await;
        assert_eq!(res.status, StatusCode::CREATED);
        let location = res.header("location").unwrap().to_string();
        let res = app.post("/api/v2.0/labels").admin().json(&json!({"name": "x", "scope": "g"})).send().await;
        assert_eq!(res.status, StatusCode::CONFLICT);
        // The same name may exist once per scope.
        let res = app.post("/api/v2.0/labels").admin().json(&json!({"name": "x", "scope": "p", "project_id": 1})).send().await;
        assert_eq!(res.status, StatusCode::CREATED);

        let res = app.get(&location).send().await;
        assert_eq!(res.status, StatusCode::OK);
        let body = res.json();
        assert_eq!(body["name"], "x");
        assert_eq!(body["description"], "d");
        assert!(body.get("project_id").is_none());
        let res = app.get("/api/v2.0/labels?scope=g").send().await;
        assert_eq!(res.header("x-total-count"), Some("1"));
        let res = app.get("/api/v2.0/labels?scope=p&project_id=1").send().await;
        assert_eq!(res.json()[0]["project_id"], 1);
        let res = app.get("/api/v2.0/labels?scope=p").send().await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST);
        let res = app.get("/api/v2.0/labels?scope=g&name=nomatch").send().await;
        assert_eq!(res.json(), json!([]));
        let res = app.delete(&location).basic("dave", "Dave12345").send().await;
        assert_eq!(res.status, StatusCode::FORBIDDEN);
        let res = app.delete(&location).admin().send().await;
        assert_eq!(res.status, StatusCode::OK);
        let res = app.get(&location).send().await;
        assert_eq!(res.status, StatusCode::NOT_FOUND);
        let res = app.get("/api/v2.0/labels/abc").send().await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST);
    }
);

backend_test!(
    async fn pull_time_and_pull_count_are_kept(app) {
        let (_, digest) = push_image(&app, "library/pulled", "v1", &[b"p"]).await;
        app.get("/v2/library/pulled/manifests/v1").send().await;
        app.get(&format!("/v2/library/pulled/manifests/{digest}")).send().await;
        app.request(axum::http::Method::HEAD, "/v2/library/pulled/manifests/v1").send().await;
        app.state.registry.flush_pulls(app.store()).await;
        let res = app.get("/api/v2.0/projects/library/repositories/pulled").admin().send().await;
        assert_eq!(res.json()["pull_count"], 2, "HEAD is not a pull");
        let res = app.get("/api/v2.0/projects/library/repositories/pulled/artifacts/v1").send().await;
        let body = res.json();
        assert_ne!(body["pull_time"], "0001-01-01T00:00:00.000Z");
        assert_ne!(body["tags"][0]["pull_time"], "0001-01-01T00:00:00.000Z");
        assert!(body["push_time"].as_str().unwrap() <= body["pull_time"].as_str().unwrap());
    }
);

backend_test!(
    async fn listing_follows_tags_and_references_as_they_change(app) {
        let (v1, untagged, index, children) = seed(&app).await;
        let base = "/api/v2.0/projects/library/repositories/app/artifacts";
        let listed = |query: &'static str| {
            let app = &app;
            async move {
                let res = app.get(&format!("{base}{query}")).send().await;
                assert_eq!(res.status, StatusCode::OK, "{}", res.text());
                let mut found = digests(&res);
                found.sort();
                assert_eq!(res.header("x-total-count"), Some(found.len().to_string().as_str()));
                found
            }
        };
        let sorted = |mut v: Vec<String>| {
            v.sort();
            v
        };
        assert_eq!(listed("").await, sorted(vec![v1.clone(), untagged.clone(), index.clone()]));
        // The repository's artifact count (kept by triggers) counts every artifact.
        let artifact_count = || {
            let app = &app;
            async move {
                let one = app.get("/api/v2.0/projects/library/repositories/app").admin().send().await.json()["artifact_count"].clone();
                let listed = app.get("/api/v2.0/projects/library/repositories").admin().send().await.json()[0]["artifact_count"].clone();
                assert_eq!(one, listed);
                one
            }
        };
        assert_eq!(artifact_count().await, 5);

        // A tagged child shows; moving its tag away hides it again.
        let res = app.post(&format!("{base}/{}/tags", children[0])).admin().json(&json!({"name": "c"})).send().await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        assert_eq!(listed("").await, sorted(vec![v1.clone(), untagged.clone(), index.clone(), children[0].clone()]));
        let manifest = app.get(&format!("/v2/library/app/manifests/{v1}")).admin().header("accept", OCI_MANIFEST).send().await.body;
        let res = put_manifest(&app, "library/app", "c", OCI_MANIFEST, &manifest).await;
        assert_eq!(res.status, StatusCode::CREATED);
        assert_eq!(listed("").await, sorted(vec![v1.clone(), untagged.clone(), index.clone()]));
        assert_eq!(listed("?q=tags%3Dnil").await, vec![untagged.clone()]);

        // An untagged index still shows; once it is gone, its children are
        // untagged non-children and show.
        let res = app.delete(&format!("{base}/multi/tags/multi")).admin().send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        assert_eq!(listed("?q=tags%3Dnil").await, sorted(vec![untagged.clone(), index.clone()]));
        let res = app.delete(&format!("{base}/{index}")).admin().send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        assert_eq!(
            listed("").await,
            sorted(vec![v1.clone(), untagged.clone(), children[0].clone(), children[1].clone()])
        );
        assert_eq!(listed("?q=tags%3D*").await, vec![v1.clone()]);
        assert_eq!(artifact_count().await, 4);

        // Tags removed one by one: v1 stays listed, untagged.
        for tag in ["v1", "v1-beta", "c"] {
            let res = app.delete(&format!("{base}/{v1}/tags/{tag}")).admin().send().await;
            assert_eq!(res.status, StatusCode::OK, "{tag}: {}", res.text());
        }
        assert_eq!(listed("?q=tags%3D*").await, Vec::<String>::new());
        assert_eq!(listed("?q=tags%3Dnil").await.len(), 4);
    }
);

backend_test!(
    async fn fsck_finds_and_recounts_wrong_listing_counts(app) {
        seed(&app).await;
        let check = |repair| berth_store::repo::fsck::check(app.store(), &app.state.registry.blobs, repair);
        assert_eq!(check(false).await.unwrap().findings, vec![], "the triggers keep every count");
        app.execute_sql("UPDATE repositories SET listed_count = listed_count + 5, tagged_count = 0").await;
        app.execute_sql("UPDATE artifacts SET parent_count = 3 WHERE id = (SELECT MIN(id) FROM artifacts)").await;
        let found = check(false).await.unwrap().findings;
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(found.iter().all(|f| f.repaired.is_none()));
        let base = "/api/v2.0/projects/library/repositories/app/artifacts";
        let res = app.get(base).send().await;
        assert_ne!(res.header("x-total-count"), Some("3"), "the listing reads the kept count");
        let repaired = check(true).await.unwrap().findings;
        assert_eq!(repaired.len(), 2, "{repaired:?}");
        assert!(repaired.iter().all(|f| f.repaired.is_some()));
        assert_eq!(check(false).await.unwrap().findings, vec![]);
        let res = app.get(base).send().await;
        assert_eq!(res.header("x-total-count"), Some("3"));
        assert_eq!(digests(&res).len(), 3);
        let res = app.get(&format!("{base}?q=tags%3D*")).send().await;
        assert_eq!(res.header("x-total-count"), Some("2"));
    }
);

backend_test!(
    async fn dense_fuzzy_tag_matches_page_alike_either_way(app) {
        // Fourteen artifacts, twelve of them matching `t`: a one-row page
        // near either end is found by a walk probing each artifact's tags, a
        // page in the middle and the sparser `1` from the matches.
        let mut others = Vec::new();
        for i in 0..14 {
            let layer = format!("dense {i}").into_bytes();
            let tag = if i == 4 || i == 9 { format!("x{i}") } else { format!("t{i}") };
            let (_, digest) = push_image(&app, "library/dense", &tag, &[&layer]).await;
            if tag.starts_with('x') {
                others.push(digest);
            }
        }
        let base = "/api/v2.0/projects/library/repositories/dense/artifacts";
        for (text, want) in [("t", 12), ("1", 5)] {
            let whole = app.get(&format!("{base}?q=tags%3D~{text}&page_size=100")).send().await;
            assert_eq!(whole.header("x-total-count"), Some(want.to_string().as_str()), "{text}");
            let whole = digests(&whole);
            assert_eq!(whole.len(), want, "{text}");
            let mut paged = Vec::new();
            for page in 1..=want + 1 {
                let res = app.get(&format!("{base}?q=tags%3D~{text}&page_size=1&page={page}")).send().await;
                assert_eq!(res.header("x-total-count"), Some(want.to_string().as_str()), "{text} page {page}");
                paged.extend(digests(&res));
            }
            assert_eq!(paged, whole, "{text}");
        }
        // In the plain listing's order, without the two that do not match.
        let mut all = digests(&app.get(&format!("{base}?page_size=100")).send().await);
        assert_eq!(all.len(), 14);
        all.retain(|d| !others.contains(d));
        let matched = digests(&app.get(&format!("{base}?q=tags%3D~t&page_size=100")).send().await);
        assert_eq!(matched, all);
    }
);

backend_test!(
    async fn fuzzy_tag_matches_follow_tags_as_they_change(app) {
        let (_, a) = push_image(&app, "library/fz", "release-2024.10", &[b"a"]).await;
        let (_, b) = push_image(&app, "library/fz", "aaaa", &[b"b"]).await;
        let (_, c) = push_image(&app, "library/other", "release-2024.10", &[b"c"]).await;
        let (_, d) = push_image(&app, "library/fz", "x", &[b"d"]).await;
        let (_, e) = push_image(&app, "library/fz", "Yz_1", &[b"e"]).await;
        let base = "/api/v2.0/projects/library/repositories/fz/artifacts";
        let matching = |text: &'static str| {
            let app = &app;
            async move {
                let res = app.get(&format!("{base}?q=tags%3D~{text}")).send().await;
                assert_eq!(res.status, StatusCode::OK, "{}", res.text());
                let mut found = digests(&res);
                found.sort();
                assert_eq!(res.header("x-total-count"), Some(found.len().to_string().as_str()), "{text}");
                // Every page of one holds the same matches, in the listing's order.
                let whole = digests(&app.get(&format!("{base}?q=tags%3D~{text}&page_size=100")).send().await);
                let mut paged = Vec::new();
                for page in 1..=found.len() + 1 {
                    let res = app.get(&format!("{base}?q=tags%3D~{text}&page_size=1&page={page}")).send().await;
                    assert_eq!(res.header("x-total-count"), Some(found.len().to_string().as_str()), "{text} page {page}");
                    paged.extend(digests(&res));
                }
                assert_eq!(paged, whole, "{text}");
                found
            }
        };
        let sorted = |mut v: Vec<String>| {
            v.sort();
            v
        };
        // Pieces of three or more characters, anywhere in the name, each
        // trigram needed; shorter texts; a trigram repeated in the name.
        assert_eq!(matching("2024.1").await, vec![a.clone()]);
        assert_eq!(matching("ease-2").await, vec![a.clone()]);
        assert_eq!(matching("2024.11").await, Vec::<String>::new());
        assert_eq!(matching("aaa").await, vec![b.clone()]);
        assert_eq!(matching("aaaaa").await, Vec::<String>::new());
        assert_eq!(matching("a").await, sorted(vec![a.clone(), b.clone()]));
        assert_eq!(matching("10").await, vec![a.clone()]);
        // One and two characters at the start, the middle and the end of a
        // name, and names shorter than three; case counts, and `_` and `%`
        // are characters like any other.
        assert_eq!(matching("r").await, vec![a.clone()]);
        assert_eq!(matching("re").await, vec![a.clone()]);
        assert_eq!(matching("-2").await, vec![a.clone()]);
        assert_eq!(matching("0").await, vec![a.clone()]);
        assert_eq!(matching("1").await, sorted(vec![a.clone(), e.clone()]));
        assert_eq!(matching("aa").await, vec![b.clone()]);
        assert_eq!(matching("x").await, vec![d.clone()]);
        assert_eq!(matching("Y").await, vec![e.clone()]);
        assert_eq!(matching("y").await, Vec::<String>::new());
        assert_eq!(matching("Yz").await, vec![e.clone()]);
        assert_eq!(matching("z_").await, vec![e.clone()]);
        assert_eq!(matching("_").await, vec![e.clone()]);
        assert_eq!(matching("_1").await, vec![e.clone()]);
        assert_eq!(matching("R").await, Vec::<String>::new());
        assert_eq!(matching("%25").await, Vec::<String>::new());
        assert_eq!(matching("1%25").await, Vec::<String>::new());
        assert_eq!(matching("xx").await, Vec::<String>::new());
        assert_eq!(matching("0x").await, Vec::<String>::new());
        // Another repository's tag of the same name is not this one's.
        assert!(!matching("release").await.contains(&c));
        assert!(!matching("r").await.contains(&c));
        // A tagged accessory is never listed, nor counted.
        let empty = b"{}".to_vec();
        push_blob(&app, "library/fz", &empty).await;
        let signature = json!({
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "artifactType": "application/vnd.dev.cosign.artifact.sig.v1+json",
            "config": descriptor("application/vnd.oci.empty.v1+json", &empty),
            "layers": [descriptor("application/vnd.oci.empty.v1+json", &empty)],
            "subject": {"mediaType": OCI_MANIFEST, "digest": d, "size": 1},
        })
        .to_string();
        let res = put_manifest(&app, "library/fz", "x.sig", OCI_MANIFEST, signature.as_bytes()).await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        assert_eq!(matching("x").await, vec![d.clone()]);
        assert_eq!(matching("x.").await, Vec::<String>::new());
        assert_eq!(matching("x.s").await, Vec::<String>::new());
        let res = app.get(&format!("{base}?q=base%3D*,tags%3D~.")).send().await;
        assert_eq!(res.header("x-total-count"), Some("1"), "{}", res.text());
        assert_eq!(digests(&res), vec![a.clone()]);
        // With another condition, the text's matches are counted whole.
        let res = app.get(&format!("{base}?q=tags%3D~1,type%3DIMAGE&page_size=1&page=2")).send().await;
        assert_eq!(res.header("x-total-count"), Some("2"), "{}", res.text());
        assert_eq!(digests(&res).len(), 1);

        // A second tag, a moved tag and a removed tag are seen at once, by
        // texts whose totals were counted (and kept) before.
        assert_eq!(matching("5").await, Vec::<String>::new());
        assert_eq!(matching("01").await, Vec::<String>::new());
        let res = app.post(&format!("{base}/{b}/tags")).admin().json(&json!({"name": "release-2025.01"})).send().await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        assert_eq!(matching("release").await, sorted(vec![a.clone(), b.clone()]));
        assert_eq!(matching("5").await, vec![b.clone()]);
        assert_eq!(matching("01").await, vec![b.clone()]);
        let manifest = app.get(&format!("/v2/library/fz/manifests/{a}")).admin().header("accept", OCI_MANIFEST).send().await.body;
        let res = put_manifest(&app, "library/fz", "aaaa", OCI_MANIFEST, &manifest).await;
        assert_eq!(res.status, StatusCode::CREATED);
        assert_eq!(matching("aaa").await, vec![a.clone()]);
        assert_eq!(matching("aa").await, vec![a.clone()]);
        assert_eq!(matching("a").await, sorted(vec![a.clone(), b.clone()]));
        // A short name moved, then pushed again where it is.
        let res = put_manifest(&app, "library/fz", "x", OCI_MANIFEST, &manifest).await;
        assert_eq!(res.status, StatusCode::CREATED);
        assert_eq!(matching("x").await, vec![a.clone()]);
        let res = put_manifest(&app, "library/fz", "x", OCI_MANIFEST, &manifest).await;
        assert_eq!(res.status, StatusCode::CREATED);
        assert_eq!(matching("x").await, vec![a.clone()]);
        let res = app.delete(&format!("{base}/{a}/tags/x")).admin().send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        assert_eq!(matching("x").await, Vec::<String>::new());
        let res = app.delete(&format!("{base}/{a}/tags/release-2024.10")).admin().send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        assert_eq!(matching("2024").await, Vec::<String>::new());
        assert_eq!(matching("4").await, Vec::<String>::new());
        assert_eq!(matching("release").await, vec![b.clone()]);
        assert_eq!(matching("r").await, vec![b.clone()]);

        // A renamed tag (no API renames one; the triggers keep any write),
        // and a tag whose name and artifact change in one statement.
        app.execute_sql("UPDATE tags SET name = 'renamed' WHERE name = 'Yz_1'").await;
        assert_eq!(matching("Y").await, Vec::<String>::new());
        assert_eq!(matching("_").await, Vec::<String>::new());
        assert_eq!(matching("ed").await, vec![e.clone()]);
        assert_eq!(matching("named").await, vec![e.clone()]);
        app.execute_sql(&format!(
            "UPDATE tags SET name = 'q9', artifact_id = (SELECT id FROM artifacts WHERE digest = '{d}' \
             AND repository_id = tags.repository_id) WHERE name = 'renamed'"
        ))
        .await;
        assert_eq!(matching("ed").await, Vec::<String>::new());
        assert_eq!(matching("q").await, vec![d.clone()]);
        assert_eq!(matching("9").await, vec![d.clone()]);

        let res = app.delete(&format!("{base}/{b}")).admin().send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        assert_eq!(matching("release").await, Vec::<String>::new());
        assert_eq!(matching("r").await, Vec::<String>::new());
        assert_eq!(matching("5").await, Vec::<String>::new());
        assert_eq!(matching("a").await, vec![a.clone()]);
    }
);

backend_test!(
    async fn deep_pages_follow_the_listing_as_it_changes(app) {
        // 2,501 artifacts, most pushed at one of 50 times (ties broken by id):
        // the middle pages start from remembered page starts, which must
        // follow pushes, deletions and new push times.
        push_image(&app, "library/deep", "seed", &[b"deep"]).await;
        let clone = |from: i64, to: i64| {
            format!(
                "INSERT INTO artifacts (project_id, repository_id, digest, manifest_blob_id, manifest_media_type, \
                 media_type, artifact_type, type, size, push_time) \
                 SELECT a.project_id, a.repository_id, 'sha256:clone' || n.i, a.manifest_blob_id, a.manifest_media_type, \
                 a.media_type, a.artifact_type, a.type, a.size, CASE WHEN n.i % 4 = 0 THEN a.push_time ELSE \
                 '2020-01-01T00:00:' || CASE WHEN n.i % 50 < 10 THEN '0' ELSE '' END || (n.i % 50) || '.000Z' END \
                 FROM artifacts a, (WITH RECURSIVE s(i) AS (SELECT {from} UNION ALL SELECT i + 1 FROM s WHERE i < {to}) \
                 SELECT i FROM s) n WHERE a.repository_id = (SELECT id FROM repositories WHERE name = 'library/deep') \
                 AND a.digest NOT LIKE 'sha256:clone%'"
            )
        };
        app.execute_sql(&clone(1, 2500)).await;
        let base = "/api/v2.0/projects/library/repositories/deep/artifacts?page_size=100";
        let pages = |sort: &'static str| {
            let app = &app;
            async move {
                let mut all = Vec::new();
                for page in 1..=27 {
                    let res = app.get(&format!("{base}&page={page}{sort}")).send().await;
                    assert_eq!(res.status, StatusCode::OK, "{}", res.text());
                    all.push((res.header("x-total-count").map(str::to_string), digests(&res)));
                }
                all
            }
        };
        // The same order, written so that it is not the listing index's.
        let same = || pages("&sort=-push_time,-id");
        let listed = pages("").await;
        assert_eq!(listed[0].0.as_deref(), Some("2501"));
        assert_eq!(listed.iter().map(|(_, rows)| rows.len()).sum::<usize>(), 2501);
        assert_eq!(listed, same().await);
        assert_eq!(pages("").await, listed, "read again from the remembered starts");

        app.execute_sql(&clone(2501, 2520)).await;
        app.execute_sql("DELETE FROM artifacts WHERE digest IN ('sha256:clone1203', 'sha256:clone7')").await;
        app.execute_sql("UPDATE artifacts SET push_time = '2020-01-01T00:00:33.500Z' WHERE digest = 'sha256:clone1500'").await;
        let changed = pages("").await;
        assert_eq!(changed[0].0.as_deref(), Some("2519"));
        assert_ne!(changed, listed);
        assert_eq!(changed, same().await);
        let res = app.get(&format!("{base}&page=13&q=tags%3Dnil")).send().await;
        assert_eq!(res.header("x-total-count"), Some("2518"));
        let res2 = app.get(&format!("{base}&page=13&q=tags%3Dnil&sort=-push_time,-id")).send().await;
        assert_eq!(digests(&res), digests(&res2));
    }
);

backend_test!(
    async fn every_page_holds_its_rows_from_either_end(app) {
        // Seven artifacts; pages of two, read page by page, give the one-page
        // listing in order, for the default order, other sorts, and filters
        // whose total is kept, counted first, or counted along with the page.
        for i in 0..7u8 {
            push_image(&app, "library/pages", &format!("tag-{i}"), &[&[b'p', i][..]]).await;
        }
        let base = "/api/v2.0/projects/library/repositories/pages/artifacts";
        for query in [
            "",
            "&sort=size,-id",
            "&sort=-push_time",
            "&q=tags%3D*",
            "&q=tags%3D~ag-",
            "&q=tags%3D~g",
            "&q=tags%3D~-&sort=size",
            "&q=tags%3D~ag&sort=-push_time",
            "&q=type%3DIMAGE",
            "&q=repository_name%3Dlibrary/pages",
        ] {
            let whole = digests(&app.get(&format!("{base}?page_size=100{query}")).send().await);
            assert_eq!(whole.len(), 7, "{query}");
            let mut paged = Vec::new();
            for page in 1..=5 {
                let res = app.get(&format!("{base}?page_size=2&page={page}{query}")).send().await;
                assert_eq!(res.status, StatusCode::OK, "{}", res.text());
                assert_eq!(res.header("x-total-count"), Some("7"), "{query}");
                let rows = digests(&res);
                assert_eq!(rows.len(), [2, 2, 2, 1, 0][page - 1], "{query} page {page}");
                paged.extend(rows);
            }
            assert_eq!(paged, whole, "{query}");
        }
        let res = app.get(&format!("{base}?q=repository_name%3Dlibrary/other")).send().await;
        assert_eq!(res.header("x-total-count"), Some("0"));
        assert_eq!(digests(&res), Vec::<String>::new());
    }
);

backend_test!(
    async fn labels_are_updated_by_whom_their_scope_allows(app) {
        use crate::harbor::fixtures::{CALLERS, PASSWORD, as_caller, message, project_with_every_role};

        let project_id = project_with_every_role(&app).await;
        let create = |body: Value| {
            let app = &app;
            async move {
                let res = app.post("/api/v2.0/labels").admin().json(&body).send().await;
                assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
                res.header("location").unwrap().to_string()
            }
        };
        let global = create(json!({"name": "g1", "scope": "g", "description": "old", "color": "#000000"})).await;
        let local = create(json!({"name": "p1", "scope": "p", "project_id": project_id, "description": "old"})).await;
        create(json!({"name": "taken", "scope": "g"})).await;
        create(json!({"name": "taken", "scope": "p", "project_id": project_id})).await;

        // Global labels: system administrators; project labels: the project's
        // maintainers and admins (Harbor's label:update).
        for (who, login) in CALLERS {
            let res = as_caller(app.put(&global), login).json(&json!({"name": format!("g-{who}")})).send().await;
            let expected = match who {
                "anonymous" => StatusCode::UNAUTHORIZED,
                "admin" => StatusCode::OK,
                _ => StatusCode::FORBIDDEN,
            };
            assert_eq!(res.status, expected, "global label by {who}: {}", res.text());
            let res = as_caller(app.put(&local), login).json(&json!({"name": format!("p-{who}")})).send().await;
            let expected = match who {
                "anonymous" => StatusCode::UNAUTHORIZED,
                "maint" | "pa" | "admin" => StatusCode::OK,
                _ => StatusCode::FORBIDDEN,
            };
            assert_eq!(res.status, expected, "project label by {who}: {}", res.text());
        }

        // Name, description and color are replaced (absent ones cleared); scope,
        // project and id stay whatever the body says.
        let res = app.put(&global).admin()
            .json(&json!({"id": 999, "name": "renamed", "description": "new", "scope": "p", "project_id": project_id}))
            .send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        let body = app.get(&global).admin().send().await.json();
        assert_eq!(body["name"], "renamed");
        assert_eq!(body["description"], "new");
        assert!(body.get("color").is_none(), "cleared: {body}");
        assert_eq!(body["scope"], "g");
        assert!(body.get("project_id").is_none());
        assert!(body["update_time"].as_str().unwrap() >= body["creation_time"].as_str().unwrap());
        let body = app.get(&local).admin().send().await.json();
        assert_eq!(body["name"], "p-admin");
        assert_eq!(body["project_id"], project_id);

        // A name taken in the same scope is 409; in the other scope it is free.
        let res = app.put(&global).admin().json(&json!({"name": "taken"})).send().await;
        assert_eq!(res.status, StatusCode::CONFLICT);
        assert_eq!(message(&res), "label taken already exists");
        let res = app.put(&local).basic("maint", PASSWORD).json(&json!({"name": "taken"})).send().await;
        assert_eq!(res.status, StatusCode::CONFLICT);
        let res = app.put(&local).admin().json(&json!({"name": "renamed"})).send().await;
        assert_eq!(res.status, StatusCode::OK);

        // Validation: 400; unknown label: 404; malformed id or body: 400.
        for body in [json!({}), json!({"name": ""}), json!({"name": "x".repeat(129)}), json!({"name": 5})] {
            let res = app.put(&global).admin().json(&body).send().await;
            assert_eq!(res.status, StatusCode::BAD_REQUEST, "{body}");
        }
        let res = app.put("/api/v2.0/labels/999999").admin().json(&json!({"name": "x"})).send().await;
        assert_eq!(res.status, StatusCode::NOT_FOUND);
        assert_eq!(message(&res), "label 999999 not found");
        let res = app.put("/api/v2.0/labels/abc").admin().json(&json!({"name": "x"})).send().await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST);
        let res = app.put(&global).admin().raw("application/json", "{").send().await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST);
        assert_eq!(app.get(&global).admin().send().await.json()["name"], "renamed", "nothing changed");
    }
);
