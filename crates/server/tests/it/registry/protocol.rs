//! The distribution protocol in process, on both backends.

use axum::http::{Method, StatusCode};
use serde_json::json;

use super::{
    descriptor, digest_of, error_code, image_manifest, push_blob, push_image, put_manifest,
};
use crate::registry_test;

const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";

registry_test!(
    async fn base_challenges_anonymous_callers_and_accepts_basic(app) {
        let res = app.get("/v2/").send().await;
        assert_eq!(res.status, StatusCode::UNAUTHORIZED);
        assert_eq!(
            res.header("www-authenticate"),
            Some(r#"Bearer realm="http://127.0.0.1:9000/service/token",service="harbor-registry""#)
        );
        assert_eq!(res.header("docker-distribution-api-version"), Some("registry/2.0"));
        assert_eq!(error_code(&res), "UNAUTHORIZED");

        let res = app.get("/v2/").admin().send().await;
        assert_eq!(res.status, StatusCode::OK);
        assert_eq!(res.json(), json!({}));
        assert_eq!(res.header("docker-distribution-api-version"), Some("registry/2.0"));

        let res = app.get("/v2/").basic("admin", "wrong").send().await;
        assert_eq!(res.status, StatusCode::UNAUTHORIZED);
        assert_eq!(error_code(&res), "UNAUTHORIZED");
    }
);

registry_test!(
    async fn chunked_upload_with_status_out_of_order_and_range_reads(app) {
        let name = "library/chunked";
        let res = app.post(&format!("/v2/{name}/blobs/uploads/")).admin().send().await;
        assert_eq!(res.status, StatusCode::ACCEPTED);
        assert_eq!(res.header("range"), Some("0-0"));
        let location = res.header("location").unwrap().to_string();
        let uuid = res.header("docker-upload-uuid").unwrap().to_string();
        assert!(location.ends_with(&uuid));

        let res = app
            .request(Method::PATCH, &location)
            .admin()
            .header("content-range", "0-4")
            .raw("application/octet-stream", b"hello".to_vec())
            .send()
            .await;
        assert_eq!(res.status, StatusCode::ACCEPTED, "{}", res.text());
        assert_eq!(res.header("range"), Some("0-4"));

        // A chunk that does not continue the upload: 416, nothing written.
        let res = app
            .request(Method::PATCH, &location)
            .admin()
            .header("content-range", "10-14")
            .raw("application/octet-stream", b"XXXXX".to_vec())
            .send()
            .await;
        assert_eq!(res.status, StatusCode::RANGE_NOT_SATISFIABLE);
        assert_eq!(res.header("range"), Some("0-4"));
        assert_eq!(error_code(&res), "BLOB_UPLOAD_INVALID");

        let res = app.get(&location).admin().send().await;
        assert_eq!(res.status, StatusCode::NO_CONTENT);
        assert_eq!(res.header("range"), Some("0-4"));

        let res = app
            .request(Method::PATCH, &location)
            .admin()
            .header("content-range", "5-10")
            .raw("application/octet-stream", b" world".to_vec())
            .send()
            .await;
        assert_eq!(res.status, StatusCode::ACCEPTED);

        let digest = digest_of(b"hello world!");
        let res = app
            .put(&format!("{location}?digest={digest}"))
            .admin()
            .raw("application/octet-stream", b"!".to_vec())
            .send()
            .await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        assert_eq!(res.header("location"), Some(format!("/v2/{name}/blobs/{digest}").as_str()));
        assert_eq!(res.header("docker-content-digest"), Some(digest.as_str()));

        // The session is gone once committed.
        let res = app.get(&location).admin().send().await;
        assert_eq!(res.status, StatusCode::NOT_FOUND);
        assert_eq!(error_code(&res), "BLOB_UPLOAD_UNKNOWN");

        let blob = format!("/v2/{name}/blobs/{digest}");
        let res = app.request(Method::HEAD, &blob).admin().send().await;
        assert_eq!(res.status, StatusCode::OK);
        assert_eq!(res.header("content-length"), Some("12"));
        assert_eq!(res.header("docker-content-digest"), Some(digest.as_str()));
        assert!(res.body.is_empty());

        let res = app.get(&blob).admin().send().await;
        assert_eq!(res.body, b"hello world!");
        let res = app.get(&blob).admin().header("range", "bytes=6-10").send().await;
        assert_eq!(res.status, StatusCode::PARTIAL_CONTENT);
        assert_eq!(res.body, b"world");
        assert_eq!(res.header("content-range"), Some("bytes 6-10/12"));
        let res = app.get(&blob).admin().header("range", "bytes=50-").send().await;
        assert_eq!(res.status, StatusCode::RANGE_NOT_SATISFIABLE);
        assert_eq!(res.header("content-range"), Some("bytes */12"));

        // Anonymous pull of a public project's blob.
        let res = app.get(&blob).send().await;
        assert_eq!(res.status, StatusCode::OK);
    }
);

registry_test!(
    async fn digest_mismatch_stores_nothing_and_cancel_ends_a_session(app) {
        let name = "library/bad";
        let wrong = digest_of(b"something else");
        let res = app
            .post(&format!("/v2/{name}/blobs/uploads/?digest={wrong}"))
            .admin()
            .raw("application/octet-stream", b"data".to_vec())
            .send()
            .await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST);
        assert_eq!(error_code(&res), "DIGEST_INVALID");
        for digest in [wrong.clone(), digest_of(b"data")] {
            let res = app.request(Method::HEAD, &format!("/v2/{name}/blobs/{digest}")).admin().send().await;
            assert_eq!(res.status, StatusCode::NOT_FOUND);
        }
        let blob_files = app.stored_blobs().await;
        assert!(blob_files.is_empty(), "{blob_files:?}");

        // A chunked session with a wrong digest at the end.
        let res = app.post(&format!("/v2/{name}/blobs/uploads/")).admin().send().await;
        let location = res.header("location").unwrap().to_string();
        let res = app
            .put(&format!("{location}?digest={wrong}"))
            .admin()
            .raw("application/octet-stream", b"data".to_vec())
            .send()
            .await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST);
        assert_eq!(error_code(&res), "DIGEST_INVALID");
        assert!(app.stored_blobs().await.is_empty());

        let res = app.post(&format!("/v2/{name}/blobs/uploads/")).admin().send().await;
        let location = res.header("location").unwrap().to_string();
        let res = app.delete(&location).admin().send().await;
        assert_eq!(res.status, StatusCode::NO_CONTENT);
        let res = app.delete(&location).admin().send().await;
        assert_eq!(error_code(&res), "BLOB_UPLOAD_UNKNOWN");
        let res = app.put(&format!("{location}?digest={wrong}")).admin().send().await;
        assert_eq!(error_code(&res), "BLOB_UPLOAD_UNKNOWN");

        let res = app.get(&format!("/v2/{name}/blobs/sha256:abc")).admin().send().await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST);
        assert_eq!(error_code(&res), "DIGEST_INVALID");
        let res = app.get(&format!("/v2/{name}/blobs/{}", digest_of(b"nope"))).admin().send().await;
        assert_eq!(res.status, StatusCode::NOT_FOUND);
        assert_eq!(error_code(&res), "BLOB_UNKNOWN");
    }
);

registry_test!(
    async fn manifests_by_tag_and_digest_with_tags_list_and_catalog(app) {
        let name = "library/app";
        let (manifest, digest) = push_image(&app, name, "v1", &[b"layer one", b"layer two"]).await;
        for reference in ["v1", digest.as_str()] {
            let res = app.get(&format!("/v2/{name}/manifests/{reference}")).admin().send().await;
            assert_eq!(res.status, StatusCode::OK);
            assert_eq!(res.body, manifest);
            assert_eq!(res.header("content-type"), Some(OCI_MANIFEST));
            assert_eq!(res.header("docker-content-digest"), Some(digest.as_str()));
            let res = app.request(Method::HEAD, &format!("/v2/{name}/manifests/{reference}")).send().await;
            assert_eq!(res.status, StatusCode::OK);
            assert_eq!(res.header("content-length"), Some(manifest.len().to_string().as_str()));
            assert!(res.body.is_empty());
        }
        // Same manifest under more tags; another repository.
        for tag in ["v2", "a", "latest"] {
            let res = put_manifest(&app, name, tag, OCI_MANIFEST, &manifest).await;
            assert_eq!(res.status, StatusCode::CREATED);
        }
        push_image(&app, "library/other/deep", "x", &[b"z"]).await;

        let res = app.get(&format!("/v2/{name}/tags/list")).send().await;
        assert_eq!(res.json(), json!({"name": name, "tags": ["a", "latest", "v1", "v2"]}));
        let res = app.get(&format!("/v2/{name}/tags/list?n=2")).send().await;
        assert_eq!(res.json()["tags"], json!(["a", "latest"]));
        assert_eq!(
            res.header("link"),
            Some(format!("</v2/{name}/tags/list?n=2&last=latest>; rel=\"next\"").as_str())
        );
        let res = app.get(&format!("/v2/{name}/tags/list?n=2&last=latest")).send().await;
        assert_eq!(res.json()["tags"], json!(["v1", "v2"]));
        let res = app.get(&format!("/v2/{name}/tags/list?n=x")).send().await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST);

        let res = app.get("/v2/_catalog").admin().send().await;
        assert_eq!(res.json(), json!({"repositories": ["library/app", "library/other/deep"]}));
        let res = app.get("/v2/_catalog?n=1").admin().send().await;
        assert_eq!(res.json(), json!({"repositories": ["library/app"]}));
        assert!(res.header("link").unwrap().contains("last=library/app") || res.header("link").unwrap().contains("last=library%2Fapp"));
        let res = app.get("/v2/_catalog").send().await;
        assert_eq!(res.status, StatusCode::UNAUTHORIZED);

        // Tag delete keeps the artifact; digest delete removes it.
        let res = app.delete(&format!("/v2/{name}/manifests/v2")).admin().send().await;
        assert_eq!(res.status, StatusCode::ACCEPTED);
        let res = app.get(&format!("/v2/{name}/manifests/v2")).admin().send().await;
        assert_eq!(error_code(&res), "MANIFEST_UNKNOWN");
        let res = app.delete(&format!("/v2/{name}/manifests/{digest}")).admin().send().await;
        assert_eq!(res.status, StatusCode::ACCEPTED);
        let res = app.get(&format!("/v2/{name}/manifests/v1")).admin().send().await;
        assert_eq!(res.status, StatusCode::NOT_FOUND);
        assert_eq!(error_code(&res), "MANIFEST_UNKNOWN");
        let res = app.get(&format!("/v2/{name}/tags/list")).send().await;
        assert_eq!(res.json()["tags"], json!([]));
        let res = app.delete(&format!("/v2/{name}/manifests/{digest}")).admin().send().await;
        assert_eq!(error_code(&res), "MANIFEST_UNKNOWN");
    }
);

registry_test!(
    async fn manifest_errors(app) {
        let name = "library/err";
        let config = b"{}";
        let layer = b"layer";
        let manifest = crate::registry::image_manifest(config, &[layer]);
        // Nothing pushed yet: the blobs are unknown.
        let res = put_manifest(&app, name, "v1", OCI_MANIFEST, &manifest).await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST);
        assert_eq!(error_code(&res), "MANIFEST_BLOB_UNKNOWN");
        push_blob(&app, name, config).await;
        let res = put_manifest(&app, name, "v1", OCI_MANIFEST, &manifest).await;
        assert_eq!(error_code(&res), "MANIFEST_BLOB_UNKNOWN");
        assert!(res.json()["errors"][0]["message"].as_str().unwrap().contains(&digest_of(layer)));
        // The repository was not created by the failed pushes.
        let res = app.get(&format!("/v2/{name}/tags/list")).send().await;
        assert_eq!(res.status, StatusCode::NOT_FOUND);
        assert_eq!(error_code(&res), "NAME_UNKNOWN");

        push_blob(&app, name, layer).await;
        let res = put_manifest(&app, name, &digest_of(b"other"), OCI_MANIFEST, &manifest).await;
        assert_eq!(error_code(&res), "DIGEST_INVALID");
        let res = put_manifest(&app, name, "v1", OCI_MANIFEST, b"{not json").await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST);
        assert_eq!(error_code(&res), "MANIFEST_INVALID");
        let res = put_manifest(&app, name, "-badtag", OCI_MANIFEST, &manifest).await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST);
        let res = put_manifest(&app, name, "v1", OCI_MANIFEST, &manifest).await;
        assert_eq!(res.status, StatusCode::CREATED);

        let res = app.get(&format!("/v2/{name}/manifests/nope")).send().await;
        assert_eq!(error_code(&res), "MANIFEST_UNKNOWN");
        let res = app.get("/v2/library/missing/manifests/v1").send().await;
        assert_eq!(error_code(&res), "NAME_UNKNOWN");
        let res = app.get("/v2/Library/UPPER/manifests/v1").send().await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST);
        assert_eq!(error_code(&res), "NAME_INVALID");
        let res = app.get("/v2/noproject/manifests/v1").send().await;
        assert_eq!(error_code(&res), "NAME_INVALID");
        let res = app.get("/v2/nosuchproject/x/manifests/v1").admin().send().await;
        assert_eq!(res.status, StatusCode::NOT_FOUND);
        assert_eq!(error_code(&res), "NAME_UNKNOWN");
        let res = app.get("/v2/library/x/unknown/endpoint").send().await;
        assert_eq!(res.status, StatusCode::NOT_FOUND);
        let res = app.post(&format!("/v2/{name}/manifests/v1")).admin().send().await;
        assert_eq!(res.status, StatusCode::METHOD_NOT_ALLOWED);
        assert_eq!(error_code(&res), "UNSUPPORTED");
    }
);

registry_test!(
    async fn push_and_pull_permissions_with_basic_and_tokens(app) {
        app.create_user("bob", "Bob12345").await;
        let name = "library/perm";
        push_image(&app, name, "v1", &[b"p"]).await;

        // Anonymous: pull from the public project, push challenged with its scope.
        let res = app.get(&format!("/v2/{name}/manifests/v1")).send().await;
        assert_eq!(res.status, StatusCode::OK);
        let res = app.post(&format!("/v2/{name}/blobs/uploads/")).send().await;
        assert_eq!(res.status, StatusCode::UNAUTHORIZED);
        assert_eq!(error_code(&res), "UNAUTHORIZED");
        assert!(res.header("www-authenticate").unwrap().ends_with(&format!(",scope=\"repository:{name}:pull,push\"")));

        // A non-member: pull yes, push denied.
        let res = app.get(&format!("/v2/{name}/manifests/v1")).basic("bob", "Bob12345").send().await;
        assert_eq!(res.status, StatusCode::OK);
        let res = app.post(&format!("/v2/{name}/blobs/uploads/")).basic("bob", "Bob12345").send().await;
        assert_eq!(res.status, StatusCode::UNAUTHORIZED);
        assert_eq!(error_code(&res), "UNAUTHORIZED");
        assert_eq!(res.json()["errors"][0]["message"], format!("unauthorized to access repository: {name}, action: push: unauthorized to access repository: {name}, action: push"));
        let res = app.delete(&format!("/v2/{name}/manifests/v1")).basic("bob", "Bob12345").send().await;
        assert_eq!(error_code(&res), "UNAUTHORIZED");

        // Tokens: each caller gets what it holds, nothing more.
        let scope = format!("repository:{name}:pull,push");
        let token_for = |res: crate::util::TestResponse| {
            assert_eq!(res.status, StatusCode::OK, "{}", res.text());
            let body = res.json();
            assert_eq!(body["expires_in"], 1800);
            body["token"].as_str().unwrap().to_string()
        };
        let anonymous = token_for(app.get(&format!("/service/token?service=harbor-registry&scope={scope}")).send().await);
        let bob = token_for(app.get(&format!("/service/token?service=harbor-registry&scope={scope}")).basic("bob", "Bob12345").send().await);
        let admin = token_for(app.get(&format!("/service/token?service=harbor-registry&scope={scope}&scope=registry:catalog:*")).admin().send().await);
        let res = app.get("/service/token?scope=x").basic("bob", "wrong").send().await;
        assert_eq!(res.status, StatusCode::UNAUTHORIZED);

        for token in [&anonymous, &bob, &admin] {
            let res = app.get(&format!("/v2/{name}/manifests/v1")).bearer(token).send().await;
            assert_eq!(res.status, StatusCode::OK);
        }
        for token in [&anonymous, &bob] {
            let res = app.post(&format!("/v2/{name}/blobs/uploads/")).bearer(token).send().await;
            assert_eq!(res.status, StatusCode::UNAUTHORIZED);
            assert!(res.header("www-authenticate").unwrap().contains("scope=\"repository:library/perm:pull,push\""));
        }
        let res = app.post(&format!("/v2/{name}/blobs/uploads/")).bearer(&admin).send().await;
        assert_eq!(res.status, StatusCode::ACCEPTED);
        // A token is for the repositories it names only.
        let res = app.get("/v2/library/elsewhere/tags/list").bearer(&admin).send().await;
        assert_eq!(res.status, StatusCode::UNAUTHORIZED);
        let res = app.get("/v2/_catalog").bearer(&admin).send().await;
        assert_eq!(res.status, StatusCode::OK);
        let res = app.get("/v2/_catalog").bearer(&bob).send().await;
        assert_eq!(res.status, StatusCode::UNAUTHORIZED);
        let res = app.get("/v2/").bearer(&bob).send().await;
        assert_eq!(res.status, StatusCode::OK);
        let res = app.get("/v2/").bearer("not-a-token").send().await;
        assert_eq!(res.status, StatusCode::UNAUTHORIZED);
        // A user token is not a registry token.
        let user_token = app.state.tokens.sign_user(1, time::OffsetDateTime::now_utc().unix_timestamp());
        let res = app.get("/v2/").bearer(&user_token).send().await;
        assert_eq!(res.status, StatusCode::UNAUTHORIZED);
    }
);

registry_test!(
    async fn index_referrers_mount_and_blob_delete(app) {
        let name = "library/multi";
        let (amd, amd_digest) = push_image(&app, name, &digest_of(&crate::registry::image_manifest(b"{\"architecture\":\"amd64\",\"os\":\"linux\",\"layers\":1}", &[b"amd"])), &[b"amd"]).await;
        let (arm, arm_digest) = push_image(&app, name, "arm", &[b"arm"]).await;
        let index = json!({
            "schemaVersion": 2,
            "mediaType": OCI_INDEX,
            "manifests": [
                {"mediaType": OCI_MANIFEST, "digest": amd_digest, "size": amd.len(), "platform": {"architecture": "amd64", "os": "linux"}},
                {"mediaType": OCI_MANIFEST, "digest": arm_digest, "size": arm.len(), "platform": {"architecture": "arm64", "os": "linux"}},
            ],
        })
        .to_string()
        .into_bytes();
        let res = put_manifest(&app, name, "multi", OCI_INDEX, &index).await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        let res = app.get(&format!("/v2/{name}/manifests/multi")).send().await;
        assert_eq!(res.body, index);
        assert_eq!(res.header("content-type"), Some(OCI_INDEX));
        // A child of an index cannot go while the index refers to it.
        let res = app.delete(&format!("/v2/{name}/manifests/{amd_digest}")).admin().send().await;
        assert_eq!(res.status, StatusCode::PRECONDITION_FAILED);
        // An index whose child is not in the repository.
        let stray = json!({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": [descriptor(OCI_MANIFEST, b"stray")]}).to_string();
        let res = put_manifest(&app, name, "stray", OCI_INDEX, stray.as_bytes()).await;
        assert_eq!(error_code(&res), "MANIFEST_BLOB_UNKNOWN");

        // A referrer (a signature-like artifact) of the amd64 image.
        push_blob(&app, name, b"{}").await;
        push_blob(&app, name, b"sig").await;
        let referrer = json!({
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "artifactType": "application/vnd.example.sig",
            "config": descriptor("application/vnd.oci.empty.v1+json", b"{}"),
            "layers": [descriptor("application/octet-stream", b"sig")],
            "subject": {"mediaType": OCI_MANIFEST, "digest": amd_digest, "size": amd.len()},
            "annotations": {"org.example": "yes"},
        })
        .to_string()
        .into_bytes();
        let referrer_digest = digest_of(&referrer);
        let res = put_manifest(&app, name, &referrer_digest, OCI_MANIFEST, &referrer).await;
        assert_eq!(res.status, StatusCode::CREATED);
        assert_eq!(res.header("oci-subject"), Some(amd_digest.as_str()));
        let res = app.get(&format!("/v2/{name}/referrers/{amd_digest}")).send().await;
        assert_eq!(res.status, StatusCode::OK);
        assert_eq!(res.header("content-type"), Some(OCI_INDEX));
        assert_eq!(
            res.json(),
            json!({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": [{
                "mediaType": OCI_MANIFEST, "digest": referrer_digest, "size": referrer.len(),
                "artifactType": "application/vnd.example.sig", "annotations": {"org.example": "yes"}}]})
        );
        let res = app.get(&format!("/v2/{name}/referrers/{amd_digest}?artifactType=other")).send().await;
        assert_eq!(res.json()["manifests"], json!([]));
        assert_eq!(res.header("oci-filters-applied"), Some("artifactType"));
        let res = app.get(&format!("/v2/{name}/referrers/{arm_digest}")).send().await;
        assert_eq!(res.json()["manifests"], json!([]));
        let res = app.get(&format!("/v2/{name}/referrers/sha256:bad")).send().await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST);

        // Mount a layer into another repository of the project.
        let layer = digest_of(b"arm");
        let res = app.post(&format!("/v2/library/copy/blobs/uploads/?mount={layer}&from={name}")).admin().send().await;
        assert_eq!(res.status, StatusCode::CREATED);
        assert_eq!(res.header("location"), Some(format!("/v2/library/copy/blobs/{layer}").as_str()));
        // Mounting an unknown blob starts an ordinary session.
        let res = app.post(&format!("/v2/library/copy/blobs/uploads/?mount={}&from={name}", digest_of(b"x"))).admin().send().await;
        assert_eq!(res.status, StatusCode::ACCEPTED);

        // Blob delete: refused while a manifest uses it, allowed for a loose blob.
        let res = app.delete(&format!("/v2/{name}/blobs/{layer}")).admin().send().await;
        assert_eq!(res.status, StatusCode::PRECONDITION_FAILED);
        let loose = push_blob(&app, name, b"loose").await;
        let res = app.delete(&format!("/v2/{name}/blobs/{loose}")).admin().send().await;
        assert_eq!(res.status, StatusCode::ACCEPTED);
        let res = app.get(&format!("/v2/{name}/blobs/{loose}")).admin().send().await;
        assert_eq!(error_code(&res), "BLOB_UNKNOWN");
        let _ = arm;
    }
);

registry_test!(
    async fn an_upload_session_survives_a_restart(app) {
        let name = "library/resume";
        let res = app.post(&format!("/v2/{name}/blobs/uploads/")).admin().send().await;
        let location = res.header("location").unwrap().to_string();
        let first = vec![7u8; 300_000];
        let res = app.request(Method::PATCH, &location).admin().raw("application/octet-stream", first.clone()).send().await;
        assert_eq!(res.status, StatusCode::ACCEPTED);
        assert_eq!(res.header("range"), Some("0-299999"));

        // A new application over the same database and data directory.
        let restarted = app.restart();
        let res = restarted.get(&location).admin().send().await;
        assert_eq!(res.status, StatusCode::NO_CONTENT);
        assert_eq!(res.header("range"), Some("0-299999"));
        let second = vec![9u8; 123_457];
        let mut all = first.clone();
        all.extend_from_slice(&second);
        let digest = digest_of(&all);
        let res = restarted
            .put(&format!("{location}?digest={digest}"))
            .admin()
            .header("content-range", "300000-423456")
            .raw("application/octet-stream", second)
            .send()
            .await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        let res = restarted.get(&format!("/v2/{name}/blobs/{digest}")).admin().send().await;
        assert_eq!(res.body, all);
    }
);

registry_test!(
    async fn docker_schema2_manifest_and_manifest_list(app) {
        const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";
        const DOCKER_LIST: &str = "application/vnd.docker.distribution.manifest.list.v2+json";
        let name = "library/dockerish";
        let config = br#"{"architecture":"amd64","os":"linux"}"#;
        push_blob(&app, name, config).await;
        push_blob(&app, name, b"docker layer").await;
        let manifest = json!({
            "schemaVersion": 2,
            "mediaType": DOCKER_MANIFEST,
            "config": descriptor("application/vnd.docker.container.image.v1+json", config),
            "layers": [descriptor("application/vnd.docker.image.rootfs.diff.tar.gzip", b"docker layer")],
        })
        .to_string()
        .into_bytes();
        let res = put_manifest(&app, name, "amd64", DOCKER_MANIFEST, &manifest).await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        let list = json!({
            "schemaVersion": 2,
            "mediaType": DOCKER_LIST,
            "manifests": [{"mediaType": DOCKER_MANIFEST, "digest": digest_of(&manifest), "size": manifest.len(),
                           "platform": {"architecture": "amd64", "os": "linux"}}],
        })
        .to_string()
        .into_bytes();
        let res = put_manifest(&app, name, "latest", DOCKER_LIST, &list).await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        let res = app.get(&format!("/v2/{name}/manifests/latest")).send().await;
        assert_eq!(res.header("content-type"), Some(DOCKER_LIST));
        assert_eq!(res.body, list);
        let res = app.get(&format!("/v2/{name}/manifests/amd64")).send().await;
        assert_eq!(res.header("content-type"), Some(DOCKER_MANIFEST));
        let res = app.get("/api/v2.0/projects/library/repositories/dockerish/artifacts/amd64").send().await;
        let body = res.json();
        assert_eq!(body["type"], "IMAGE");
        assert_eq!(body["media_type"], "application/vnd.docker.container.image.v1+json");
        assert_eq!(body["extra_attrs"]["os"], "linux");
        let res = app.get("/api/v2.0/projects/library/repositories/dockerish/artifacts/latest").send().await;
        assert_eq!(res.json()["references"][0]["platform"]["architecture"], "amd64");
        // A body whose mediaType contradicts the Content-Type is refused.
        let res = put_manifest(&app, name, "bad", OCI_MANIFEST, &manifest).await;
        assert_eq!(error_code(&res), "MANIFEST_INVALID");
    }
);

registry_test!(
    async fn concurrent_pushes_of_shared_layers(app) {
        // Sixteen images at once, all sharing one layer: every blob commit,
        // link and manifest transaction races the others.
        let pushes = (0..16).map(|i| {
            let app = &app;
            async move {
                let own = format!("own layer {i}").into_bytes();
                let name = format!("library/race{}", i % 4);
                push_image(app, &name, &format!("v{i}"), &[b"shared layer", &own]).await
            }
        });
        let pushed = futures_util::future::join_all(pushes).await;
        // Every push stored its own manifest under its own tag, with its own layer.
        for (i, (manifest, digest)) in pushed.iter().enumerate() {
            let repository = format!("library/race{}", i % 4);
            let res = app.get(&format!("/v2/{repository}/manifests/v{i}")).send().await;
            assert_eq!(res.status, StatusCode::OK, "v{i}");
            assert_eq!(&res.body, manifest, "v{i} is the manifest pushed under it");
            assert_eq!(res.header("docker-content-digest"), Some(digest.as_str()));
            let own = format!("own layer {i}").into_bytes();
            let res = app.get(&format!("/v2/{repository}/blobs/{}", digest_of(&own))).send().await;
            assert_eq!(res.body, own, "v{i}'s own layer");
        }
        let shared = digest_of(b"shared layer");
        for k in 0..4 {
            let mut tags: Vec<String> = (0..4).map(|j| format!("v{}", k + 4 * j)).collect();
            tags.sort();
            let res = app.get(&format!("/v2/library/race{k}/tags/list")).send().await;
            assert_eq!(res.json()["tags"], json!(tags), "race{k}");
            let res = app.get(&format!("/v2/library/race{k}/blobs/{shared}")).send().await;
            assert_eq!(res.body, b"shared layer", "race{k} links the shared layer");
        }
        // Mounts, deletes and pushes interleaved.
        let ops = (0..8).map(|i| {
            let app = &app;
            let shared = shared.clone();
            async move {
                let res = app
                    .post(&format!("/v2/library/mounted{i}/blobs/uploads/?mount={shared}&from=library/race0"))
                    .admin()
                    .send()
                    .await;
                assert_eq!(res.status, StatusCode::CREATED);
                let res = app.delete(&format!("/v2/library/race{}/manifests/v{i}", i % 4)).admin().send().await;
                assert_eq!(res.status, StatusCode::ACCEPTED);
            }
        });
        futures_util::future::join_all(ops).await;
        let res = app.get("/v2/library/race0/tags/list").send().await;
        assert_eq!(res.json()["tags"], json!(["v12", "v8"]));
        for i in 0..8 {
            let res = app.get(&format!("/v2/library/mounted{i}/blobs/{shared}")).send().await;
            assert_eq!(res.body, b"shared layer", "mounted{i} links the shared layer");
        }
    }
);

registry_test!(
    async fn concurrent_manifest_puts_each_stand_or_fail_alone(app) {
        // Forty-eight PUTs at once into one repository, so that on SQLite they
        // are written in groups: fresh tags, manifests naming a blob that is
        // not there, and one tag pushed with four different manifests.
        let name = "library/grouped";
        let config = br#"{"architecture":"amd64","os":"linux"}"#;
        push_blob(&app, name, config).await;
        let layers: Vec<Vec<u8>> = (0..44).map(|i| format!("layer {i}").into_bytes()).collect();
        for layer in &layers[..40] {
            push_blob(&app, name, layer).await;
        }
        let same: Vec<Vec<u8>> = (0..4)
            .map(|i| image_manifest(config, &[b"layer 0", format!("layer {}", i + 1).as_bytes()]))
            .collect();
        let fresh = (0..40).map(|i| image_manifest(config, &[&layers[i]]));
        let missing = (40..44).map(|i| image_manifest(config, &[&layers[i]]));
        let mut puts = Vec::new();
        for (i, body) in fresh.enumerate() {
            puts.push((format!("t{i}"), body, StatusCode::CREATED));
        }
        for (i, body) in missing.enumerate() {
            puts.push((format!("m{i}"), body, StatusCode::BAD_REQUEST));
        }
        for body in &same {
            puts.push(("same".to_string(), body.clone(), StatusCode::CREATED));
        }
        let answers = futures_util::future::join_all(puts.iter().map(|(tag, body, _)| {
            put_manifest(&app, name, tag, OCI_MANIFEST, body)
        }))
        .await;
        for ((tag, _, want), res) in puts.iter().zip(&answers) {
            assert_eq!(res.status, *want, "{tag}: {}", res.text());
            if *want == StatusCode::BAD_REQUEST {
                assert_eq!(error_code(res), "MANIFEST_BLOB_UNKNOWN", "{tag}");
            }
        }
        // Each accepted PUT is stored whole, under its tag; the refused left nothing.
        for (tag, body, want) in &puts[..44] {
            let res = app.get(&format!("/v2/{name}/manifests/{}", digest_of(body))).admin().send().await;
            if *want == StatusCode::CREATED {
                assert_eq!(res.body, *body, "{tag}");
                let res = app.get(&format!("/v2/{name}/manifests/{tag}")).admin().send().await;
                assert_eq!(res.body, *body, "{tag}");
            } else {
                assert_eq!(res.status, StatusCode::NOT_FOUND, "{tag}");
            }
        }
        let res = app.get(&format!("/v2/{name}/manifests/same")).admin().send().await;
        assert!(same.contains(&res.body), "the tag names one of the manifests pushed under it");
        let mut tags: Vec<String> = (0..40).map(|i| format!("t{i}")).collect();
        tags.push("same".into());
        tags.sort();
        let res = app.get(&format!("/v2/{name}/tags/list?n=100")).admin().send().await;
        assert_eq!(res.json()["tags"], json!(tags));
        // 40 fresh artifacts and the 4 pushed as "same" (three of them untagged now).
        let res = app
            .get("/api/v2.0/projects/library/repositories/grouped/artifacts?page_size=100")
            .admin()
            .send()
            .await;
        assert_eq!(res.header("x-total-count"), Some("44"));
        assert_eq!(res.json().as_array().map(Vec::len), Some(44));
    }
);

registry_test!(
    async fn a_moved_tag_and_a_project_turned_private_are_seen_at_once(app) {
        let name = "library/moving";
        let (first, _) = push_image(&app, name, "v1", &[b"first"]).await;
        let (second, _) = push_image(&app, name, "v2", &[b"second"]).await;
        let res = app.get(&format!("/v2/{name}/manifests/v1")).send().await;
        assert_eq!(res.body, first);
        let res = put_manifest(&app, name, "v1", OCI_MANIFEST, &second).await;
        assert_eq!(res.status, StatusCode::CREATED);
        let res = app.get(&format!("/v2/{name}/manifests/v1")).send().await;
        assert_eq!(res.body, second);

        let res = app
            .put("/api/v2.0/projects/1/metadatas/public")
            .admin()
            .json(&json!({"public": "false"}))
            .send()
            .await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        let res = app.get(&format!("/v2/{name}/manifests/v1")).send().await;
        assert_eq!(res.status, StatusCode::UNAUTHORIZED);
        assert!(res.header("www-authenticate").unwrap().ends_with(&format!(",scope=\"repository:{name}:pull\"")));
        let res = app.get(&format!("/v2/{name}/manifests/v1")).admin().send().await;
        assert_eq!(res.body, second);
    }
);

crate::backend_test!(
    /// The token service follows Harbor's `token_expiration` (minutes) and
    /// refuses a request naming more scopes than any client asks for.
    async fn registry_tokens_follow_token_expiration_and_bound_their_scopes(app) {
        let res = app.put("/api/v2.0/configurations").admin().json(&json!({"token_expiration": 5})).send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        let res = app.get("/service/token?service=harbor-registry&scope=repository:library/app:pull").admin().send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        assert_eq!(res.json()["expires_in"], 300);
        // The token itself says so: its `exp` is five minutes after `iat`.
        let token = res.json()["token"].as_str().unwrap().to_string();
        let payload = token.split('.').nth(1).unwrap();
        let claims: serde_json::Value = serde_json::from_slice(
            &base64::Engine::decode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, payload).unwrap(),
        )
        .unwrap();
        assert_eq!(claims["exp"].as_i64().unwrap() - claims["iat"].as_i64().unwrap(), 300);

        let scopes = |n: usize| -> String { (0..n).map(|i| format!("&scope=repository:library/r{i}:pull")).collect() };
        let res = app.get(&format!("/service/token?service=harbor-registry{}", scopes(65))).admin().send().await;
        assert_eq!(res.status, StatusCode::BAD_REQUEST, "{}", res.text());
        let res = app.get(&format!("/service/token?service=harbor-registry{}", scopes(64))).admin().send().await;
        assert_eq!(res.status, StatusCode::OK, "64 are fine: {}", res.text());
    }
);

registry_test!(
    /// Manifest lookups are kept between pulls, and every change shows at the
    /// next pull: a tag moved or deleted, a project made private, a signature
    /// policy turned on; on PostgreSQL a change made by another instance too.
    async fn kept_manifest_lookups_follow_every_change(app) {
        let name = "library/kept";
        async fn get(app: &crate::util::TestApp) -> crate::util::TestResponse {
            app.request(Method::GET, "/v2/library/kept/manifests/v1")
                .header("accept", OCI_MANIFEST)
                .send()
                .await
        }
        let digest_of_get = |res: crate::util::TestResponse| res.header("docker-content-digest").map(str::to_string);
        let (_, first) = push_image(&app, name, "v1", &[b"first kept"]).await;
        for _ in 0..2 {
            assert_eq!(digest_of_get(get(&app).await), Some(first.clone()));
        }
        let (_, second) = push_image(&app, name, "v1", &[b"second kept"]).await;
        assert_eq!(digest_of_get(get(&app).await), Some(second.clone()), "the tag moved");
        let res = app.delete(&format!("/v2/{name}/manifests/{second}")).admin().send().await;
        assert_eq!(res.status, StatusCode::ACCEPTED);
        assert_eq!(get(&app).await.status, StatusCode::NOT_FOUND, "deleted");
        push_image(&app, name, "v1", &[b"first kept"]).await;
        assert_eq!(digest_of_get(get(&app).await), Some(first.clone()));
        let private = json!({"metadata": {"public": "false"}});
        let res = app.put("/api/v2.0/projects/library").admin().json(&private).send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        assert_eq!(get(&app).await.status, StatusCode::UNAUTHORIZED, "private now");
        let public = json!({"metadata": {"public": "true", "enable_content_trust_cosign": "true"}});
        let res = app.put("/api/v2.0/projects/library").admin().json(&public).send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        assert_eq!(get(&app).await.status, StatusCode::PRECONDITION_FAILED, "signatures required now");
        let off = json!({"metadata": {"enable_content_trust_cosign": "false"}});
        app.put("/api/v2.0/projects/library").admin().json(&off).send().await;

        if app.backend == crate::util::Backend::Postgres {
            // Another instance keeps its own lookups: PostgreSQL's notification
            // of the change reaches it.
            let other = app.second_instance().await;
            assert_eq!(digest_of_get(get(&other).await), Some(first.clone()));
            let (_, third) = push_image(&app, name, "v1", &[b"third kept"]).await;
            let mut seen = None;
            for _ in 0..100 {
                seen = digest_of_get(get(&other).await);
                if seen.as_deref() == Some(third.as_str()) {
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
            assert_eq!(seen, Some(third), "the other instance sees the move");
        }
    }
);

crate::backend_test!(
    /// A member's roles are kept between pulls with Basic credentials, and a
    /// membership change shows at the next pull; on PostgreSQL a change made
    /// through another instance too.
    async fn kept_roles_follow_membership_changes(app) {
        let private = json!({"project_name": "kept-roles", "metadata": {"public": "false"}});
        let res = app.post("/api/v2.0/projects").admin().json(&private).send().await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        let name = "kept-roles/app";
        push_image(&app, name, "v1", &[b"kept roles"]).await;
        app.create_user("keeper", "Keeper-Passw0rd").await;
        async fn pull(app: &crate::util::TestApp) -> StatusCode {
            app.request(Method::GET, "/v2/kept-roles/app/manifests/v1")
                .basic("keeper", "Keeper-Passw0rd")
                .header("accept", OCI_MANIFEST)
                .send()
                .await
                .status
        }
        assert_eq!(pull(&app).await, StatusCode::UNAUTHORIZED, "not a member yet");
        let member = json!({"role_id": 3, "member_user": {"username": "keeper"}});
        let res = app.post("/api/v2.0/projects/kept-roles/members").admin().json(&member).send().await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        let member_path = res.header("location").unwrap().to_string();
        for _ in 0..2 {
            assert_eq!(pull(&app).await, StatusCode::OK, "a developer pulls");
        }
        let other = match app.backend {
            crate::util::Backend::Postgres => Some(app.second_instance().await),
            crate::util::Backend::Sqlite => None,
        };
        if let Some(other) = &other {
            assert_eq!(pull(other).await, StatusCode::OK, "the other instance too");
        }
        let res = app.delete(&member_path).admin().send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        assert_eq!(pull(&app).await, StatusCode::UNAUTHORIZED, "no longer a member");
        if let Some(other) = &other {
            let mut seen = StatusCode::OK;
            for _ in 0..100 {
                seen = pull(other).await;
                if seen == StatusCode::UNAUTHORIZED {
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
            assert_eq!(seen, StatusCode::UNAUTHORIZED, "the other instance hears of the removal");
        }
    }
);

crate::backend_test!(
    /// A refused pull or push reads as Harbor's: its error wraps a cause of
    /// the same text, so the message says it twice, which Harbor's own robot
    /// API test and CI logs match (`unauthorized to access repository: X,
    /// action: pull: unauthorized to access repository: X, action: pull`).
    async fn refusals_read_as_harbors(app) {
        let private = json!({"project_name": "closed", "metadata": {"public": "false"}});
        let res = app.post("/api/v2.0/projects").admin().json(&private).send().await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        let name = "closed/app";
        push_image(&app, name, "v1", &[b"closed"]).await;
        app.create_user("outsider", "Outsider-Passw0rd").await;
        let refusal = |action: &str| {
            let reason = format!("unauthorized to access repository: {name}, action: {action}");
            json!({"errors": [{"code": "UNAUTHORIZED", "message": format!("{reason}: {reason}")}]})
        };

        // Anonymous, a signed-in non-member, and a token without the scope.
        let res = app.get(&format!("/v2/{name}/manifests/v1")).send().await;
        assert_eq!(res.status, StatusCode::UNAUTHORIZED);
        assert_eq!(res.json(), refusal("pull"));
        let res = app.get(&format!("/v2/{name}/manifests/v1")).basic("outsider", "Outsider-Passw0rd").send().await;
        assert_eq!(res.status, StatusCode::UNAUTHORIZED);
        assert_eq!(res.json(), refusal("pull"));
        let res = app
            .get(&format!("/service/token?service=harbor-registry&scope=repository:{name}:pull"))
            .basic("outsider", "Outsider-Passw0rd")
            .send()
            .await;
        let token = res.json()["token"].as_str().unwrap().to_string();
        let res = app.get(&format!("/v2/{name}/blobs/{}", digest_of(b"closed"))).bearer(&token).send().await;
        assert_eq!(res.status, StatusCode::UNAUTHORIZED);
        assert_eq!(res.json(), refusal("pull"));
        assert!(res.header("www-authenticate").unwrap().ends_with(&format!(",scope=\"repository:{name}:pull\"")));

        let res = app.post(&format!("/v2/{name}/blobs/uploads/")).basic("outsider", "Outsider-Passw0rd").send().await;
        assert_eq!(res.status, StatusCode::UNAUTHORIZED);
        assert_eq!(res.json(), refusal("push"));
        let res = app.post(&format!("/v2/{name}/blobs/uploads/")).bearer(&token).send().await;
        assert_eq!(res.status, StatusCode::UNAUTHORIZED);
        assert_eq!(res.json(), refusal("push"));
    }
);

crate::backend_test!(
    /// A cross-repository mount needs pull on `from` as well as push on the
    /// target, as in distribution: the challenge names both scopes in one
    /// `scope`, the token service grants both, and a token carrying pull on
    /// `from` mounts (201); a token that never asked for `from` is challenged
    /// for it; only a caller who may not read `from`, or a blob `from` lacks,
    /// gets an upload session (202).
    async fn mounts_challenge_for_the_source_and_mount_with_it(app) {
        let source = "library/mount-source";
        let target = "library/mount-target";
        let digest = push_blob(&app, source, b"a layer to mount").await;
        let both = format!("repository:{target}:pull,push repository:{source}:pull");
        let mount = format!("/v2/{target}/blobs/uploads/?mount={digest}&from={source}");
        let token = |scopes: String, user: Option<(&'static str, &'static str)>| {
            let app = &app;
            async move {
                let query: String = scopes.split(' ').map(|s| format!("&scope={s}")).collect();
                let request = app.get(&format!("/service/token?service=harbor-registry{query}"));
                let request = match user {
                    Some((login, password)) => request.basic(login, password),
                    None => request.admin(),
                };
                let res = request.send().await;
                assert_eq!(res.status, StatusCode::OK, "{}", res.text());
                res.json()["token"].as_str().unwrap().to_string()
            }
        };

        // Without credentials: one challenge naming both scopes.
        let res = app.post(&mount).send().await;
        assert_eq!(res.status, StatusCode::UNAUTHORIZED);
        assert!(
            res.header("www-authenticate").unwrap().ends_with(&format!(",scope=\"{both}\"")),
            "{:?}",
            res.header("www-authenticate")
        );

        // A token for the target only: challenged for the source too, not an upload.
        let target_only = token(format!("repository:{target}:pull,push"), None).await;
        let res = app.post(&mount).bearer(&target_only).send().await;
        assert_eq!(res.status, StatusCode::UNAUTHORIZED, "{}", res.text());
        assert!(res.header("www-authenticate").unwrap().ends_with(&format!(",scope=\"{both}\"")));
        assert_eq!(app.stored_uploads().await.len(), 0, "no session was opened");

        // The token the challenge asks for mounts.
        let granted = token(both.clone(), None).await;
        let res = app.post(&mount).bearer(&granted).send().await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        assert_eq!(res.header("location"), Some(format!("/v2/{target}/blobs/{digest}").as_str()));
        assert_eq!(res.header("docker-content-digest"), Some(digest.as_str()));
        let res = app.get(&format!("/v2/{target}/blobs/{digest}")).admin().send().await;
        assert_eq!(res.body, b"a layer to mount");
        // A blob the source lacks: an upload session.
        let lacking = format!("/v2/{target}/blobs/uploads/?mount={}&from={source}", digest_of(b"absent"));
        let res = app.post(&lacking).bearer(&granted).send().await;
        assert_eq!(res.status, StatusCode::ACCEPTED, "{}", res.text());

        // A caller who may push to the target but not read the source: an
        // upload session, with a token that asked for the source and with Basic.
        let private = json!({"project_name": "sealed", "metadata": {"public": "false"}});
        let res = app.post("/api/v2.0/projects").admin().json(&private).send().await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        let sealed = "sealed/app";
        let sealed_digest = push_blob(&app, sealed, b"a sealed layer").await;
        app.create_user("mounter", "Mounter-Passw0rd").await;
        let own = json!({"project_name": "mounters", "metadata": {"public": "false"}});
        let res = app.post("/api/v2.0/projects").basic("mounter", "Mounter-Passw0rd").json(&own).send().await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        let into = "mounters/app";
        let from_sealed = format!("/v2/{into}/blobs/uploads/?mount={sealed_digest}&from={sealed}");
        let refused = token(
            format!("repository:{into}:pull,push repository:{sealed}:pull"),
            Some(("mounter", "Mounter-Passw0rd")),
        )
        .await;
        let res = app.post(&from_sealed).bearer(&refused).send().await;
        assert_eq!(res.status, StatusCode::ACCEPTED, "{}", res.text());
        let res = app.post(&from_sealed).basic("mounter", "Mounter-Passw0rd").send().await;
        assert_eq!(res.status, StatusCode::ACCEPTED, "{}", res.text());
        let res = app.get(&format!("/v2/{into}/blobs/{sealed_digest}")).admin().send().await;
        assert_eq!(res.status, StatusCode::NOT_FOUND, "nothing was mounted");
        // With Basic credentials the caller's own pull right decides: a public source mounts.
        let from_public = format!("/v2/{into}/blobs/uploads/?mount={digest}&from={source}");
        let res = app.post(&from_public).basic("mounter", "Mounter-Passw0rd").send().await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
    }
);
