//! `/v2/` answers only with the distribution spec's error codes; malformed
//! manifest references; client-declared sizes in manifests. Both backends.

use axum::http::{Method, StatusCode};
use serde_json::{Value, json};

use super::SPEC_CODES;
use super::{digest_of, push_blob, push_image, put_manifest};
use crate::registry_test;
use crate::util::TestResponse;

const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
const OCI_CONFIG: &str = "application/vnd.oci.image.config.v1+json";
const OCI_LAYER: &str = "application/vnd.oci.image.layer.v1.tar+gzip";

/// Asserts `res` has `status` and one error whose code is `code`, from the spec's table.
fn assert_error(res: &TestResponse, status: StatusCode, code: &str) {
    assert!(SPEC_CODES.contains(&code), "{code} is not a spec code");
    assert_eq!(res.status, status, "{}", res.text());
    let body = res.json();
    let errors = body["errors"].as_array().expect("an errors list");
    assert_eq!(errors.len(), 1, "{body}");
    assert_eq!(errors[0]["code"], code, "{body}");
}

/// An image manifest with a config and layers of the given digests and declared sizes,
/// sizes written as raw JSON numbers.
fn manifest_with_sizes(config: (&str, &str), layers: &[(&str, &str)]) -> Vec<u8> {
    let descriptor = |media_type: &str, (digest, size): (&str, &str)| {
        format!(r#"{{"mediaType":"{media_type}","digest":"{digest}","size":{size}}}"#)
    };
    let layers: Vec<String> = layers.iter().map(|l| descriptor(OCI_LAYER, *l)).collect();
    format!(
        r#"{{"schemaVersion":2,"mediaType":"{OCI_MANIFEST}","config":{},"layers":[{}]}}"#,
        descriptor(OCI_CONFIG, config),
        layers.join(",")
    )
    .into_bytes()
}

registry_test!(
    async fn v2_answers_only_with_spec_error_codes(app) {
        let name = "library/codes";
        push_image(&app, name, "v1", &[b"codes layer"]).await;

        // Paths that address nothing, and methods a path does not have.
        for path in ["/v2/library/codes/unknown/endpoint", "/v2/library", "/v2/library/codes/manifests"] {
            let res = app.get(path).admin().send().await;
            assert_error(&res, StatusCode::NOT_FOUND, "UNSUPPORTED");
        }
        let res = app.post("/v2/").admin().send().await;
        assert_error(&res, StatusCode::METHOD_NOT_ALLOWED, "UNSUPPORTED");
        assert_eq!(res.header("docker-distribution-api-version"), Some("registry/2.0"));
        let res = app.request(Method::PATCH, &format!("/v2/{name}/tags/list")).admin().send().await;
        assert_error(&res, StatusCode::METHOD_NOT_ALLOWED, "UNSUPPORTED");

        // A bad page size, on the tags list and the catalog.
        for n in ["x", "-1", "1.5", "99999999999999999999"] {
            let res = app.get(&format!("/v2/{name}/tags/list?n={n}")).send().await;
            assert_error(&res, StatusCode::BAD_REQUEST, "UNSUPPORTED");
            let res = app.get(&format!("/v2/_catalog?n={n}")).admin().send().await;
            assert_error(&res, StatusCode::BAD_REQUEST, "UNSUPPORTED");
        }
        let res = app.get(&format!("/v2/{name}/tags/list?n=0")).send().await;
        assert_eq!(res.status, StatusCode::OK);
        assert_eq!(res.json()["tags"], json!([]));
        assert_eq!(res.header("link"), None);

        // Malformed references on PUT and DELETE stay 400, with spec codes.
        let manifest = crate::registry::image_manifest(b"{}", &[]);
        for (reference, code) in [
            ("-badtag", "MANIFEST_INVALID"),
            (".dot", "MANIFEST_INVALID"),
            ("sha256:abc", "DIGEST_INVALID"),
            ("sha256:", "DIGEST_INVALID"),
        ] {
            let res = put_manifest(&app, name, reference, OCI_MANIFEST, &manifest).await;
            assert_error(&res, StatusCode::BAD_REQUEST, code);
            let res = app.delete(&format!("/v2/{name}/manifests/{reference}")).admin().send().await;
            assert_error(&res, StatusCode::BAD_REQUEST, code);
        }
        let long_tag = "a".repeat(129);
        let res = put_manifest(&app, name, &long_tag, OCI_MANIFEST, &manifest).await;
        assert_error(&res, StatusCode::BAD_REQUEST, "MANIFEST_INVALID");
        // Who may not push learns nothing about the reference.
        let res = app
            .request(Method::PUT, &format!("/v2/{name}/manifests/-badtag"))
            .raw(OCI_MANIFEST, manifest.clone())
            .send()
            .await;
        assert_error(&res, StatusCode::UNAUTHORIZED, "UNAUTHORIZED");
    }
);

registry_test!(
    async fn malformed_references_on_get_and_head_are_manifest_unknown(app) {
        let name = "library/refs";
        push_image(&app, name, "v1", &[b"refs layer"]).await;
        let sha512 = format!("sha512:{}", "a".repeat(128));
        let long_tag = "a".repeat(129);
        let references = [
            "bad%20tag",
            "-leading-dash",
            ".leading-dot",
            long_tag.as_str(),
            "sha256:abc",
            "sha256:ZZZZ",
            "sha256:",
            "nosuchalgo:abc",
            sha512.as_str(),
        ];
        for reference in references {
            let path = format!("/v2/{name}/manifests/{reference}");
            let res = app.get(&path).send().await;
            assert_error(&res, StatusCode::NOT_FOUND, "MANIFEST_UNKNOWN");
            let res = app.get(&path).admin().send().await;
            assert_error(&res, StatusCode::NOT_FOUND, "MANIFEST_UNKNOWN");
            let res = app.request(Method::HEAD, &path).send().await;
            assert_eq!(res.status, StatusCode::NOT_FOUND, "HEAD {reference}");
            assert!(res.body.is_empty());
        }
        // In a repository that does not exist: the repository is what is unknown.
        let res = app.get("/v2/library/nothing-here/manifests/-bad").admin().send().await;
        assert_error(&res, StatusCode::NOT_FOUND, "NAME_UNKNOWN");
        // A private project: who may not pull learns nothing, not even that the reference is malformed.
        let res = app
            .post("/api/v2.0/projects")
            .admin()
            .json(&json!({"project_name": "private", "metadata": {"public": "false"}}))
            .send()
            .await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        let res = app.get("/v2/private/app/manifests/-bad").send().await;
        assert_error(&res, StatusCode::UNAUTHORIZED, "UNAUTHORIZED");
        app.create_user("carol", "Carol12345").await;
        let res = app.get("/v2/private/app/manifests/-bad").basic("carol", "Carol12345").send().await;
        assert_error(&res, StatusCode::UNAUTHORIZED, "UNAUTHORIZED");
        // The well-formed reference is still served.
        let res = app.get(&format!("/v2/{name}/manifests/v1")).send().await;
        assert_eq!(res.status, StatusCode::OK);
    }
);

registry_test!(
    async fn manifest_sizes_that_overflow_or_are_negative_are_manifest_invalid(app) {
        let name = "library/sizes";
        let config = br#"{"architecture":"amd64","os":"linux"}"#;
        let config_digest = push_blob(&app, name, config).await;
        let layer_digest = push_blob(&app, name, b"sizes layer").await;
        let max = i64::MAX.to_string();
        let config_size = config.len().to_string();
        let cases: Vec<Vec<u8>> = vec![
            // The layers add up past i64::MAX.
            manifest_with_sizes(
                (&config_digest, &config_size),
                &[(&layer_digest, &max), (&layer_digest, &max)],
            ),
            // The config and one layer do.
            manifest_with_sizes((&config_digest, &max), &[(&layer_digest, "1")]),
            // Negative sizes.
            manifest_with_sizes((&config_digest, "-1"), &[(&layer_digest, "11")]),
            manifest_with_sizes((&config_digest, &config_size), &[(&layer_digest, "-11")]),
            // Not an i64 at all.
            manifest_with_sizes((&config_digest, &config_size), &[(&layer_digest, "9223372036854775808")]),
            manifest_with_sizes((&config_digest, &config_size), &[(&layer_digest, "1e3")]),
        ];
        for manifest in &cases {
            let res = put_manifest(&app, name, "v1", OCI_MANIFEST, manifest).await;
            assert_error(&res, StatusCode::BAD_REQUEST, "MANIFEST_INVALID");
            let res = put_manifest(&app, name, &digest_of(manifest), OCI_MANIFEST, manifest).await;
            assert_error(&res, StatusCode::BAD_REQUEST, "MANIFEST_INVALID");
        }
        // An index whose children's sizes overflow.
        let index = format!(
            r#"{{"schemaVersion":2,"mediaType":"{OCI_INDEX}","manifests":[{{"mediaType":"{OCI_MANIFEST}","digest":"{}","size":{max}}},{{"mediaType":"{OCI_MANIFEST}","digest":"{}","size":{max}}}]}}"#,
            digest_of(b"one"),
            digest_of(b"two")
        );
        let res = put_manifest(&app, name, "index", OCI_INDEX, index.as_bytes()).await;
        assert_error(&res, StatusCode::BAD_REQUEST, "MANIFEST_INVALID");
        // Nothing was stored by the refused pushes.
        let res = app.get(&format!("/v2/{name}/tags/list")).send().await;
        assert_error(&res, StatusCode::NOT_FOUND, "NAME_UNKNOWN");

        // The largest sum that fits is accepted; Harbor's size saturates, never wraps.
        let almost = (i64::MAX - config.len() as i64).to_string();
        let manifest = manifest_with_sizes((&config_digest, &config_size), &[(&layer_digest, &almost)]);
        let res = put_manifest(&app, name, "v1", OCI_MANIFEST, &manifest).await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        let res = app.get("/api/v2.0/projects/library/repositories/sizes/artifacts/v1").admin().send().await;
        assert_eq!(res.status, StatusCode::OK, "{}", res.text());
        assert_eq!(res.json()["size"], json!(i64::MAX));
        assert_eq!(res.json()["extra_attrs"]["architecture"], "amd64");
    }
);

/// A valid image config of at least `len` bytes.
fn big_config(len: usize) -> Vec<u8> {
    let mut config = br#"{"architecture":"amd64","os":"linux","padding":""#.to_vec();
    config.resize(len, b'x');
    config.extend_from_slice(b"\"}");
    config
}

/// The `extra_attrs` Harbor shows for `library/<repository>:<tag>`.
async fn extra_attrs(app: &crate::util::TestApp, repository: &str, tag: &str) -> Value {
    let res = app
        .get(&format!(
            "/api/v2.0/projects/library/repositories/{repository}/artifacts/{tag}"
        ))
        .admin()
        .send()
        .await;
    assert_eq!(res.status, StatusCode::OK, "{}", res.text());
    res.json()["extra_attrs"].clone()
}

registry_test!(
    async fn image_configs_are_read_only_up_to_the_limit(app) {
        const LIMIT: usize = 4 << 20;
        let name = "library/configs";
        let layer = push_blob(&app, name, b"configs layer").await;
        let layer_size = b"configs layer".len().to_string();

        // Under the limit: read, its attributes shown.
        let small = big_config(LIMIT - 64);
        assert!(small.len() <= LIMIT);
        let small_digest = push_blob(&app, name, &small).await;
        let manifest = manifest_with_sizes(
            (&small_digest, &small.len().to_string()),
            &[(&layer, &layer_size)],
        );
        let res = put_manifest(&app, name, "small", OCI_MANIFEST, &manifest).await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        assert_eq!(extra_attrs(&app, "configs", "small").await["architecture"], "amd64");

        // Over the limit, declared truthfully: the push succeeds, the config is not read.
        let big = big_config(LIMIT + 1);
        let big_digest = push_blob(&app, name, &big).await;
        let manifest = manifest_with_sizes(
            (&big_digest, &big.len().to_string()),
            &[(&layer, &layer_size)],
        );
        let res = put_manifest(&app, name, "big", OCI_MANIFEST, &manifest).await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        assert_eq!(extra_attrs(&app, "configs", "big").await, json!({}));
        // The same bytes declared small: the stored size decides, not the declaration.
        let manifest = manifest_with_sizes((&big_digest, "100"), &[(&layer, &layer_size)]);
        let res = put_manifest(&app, name, "understated", OCI_MANIFEST, &manifest).await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        assert_eq!(extra_attrs(&app, "configs", "understated").await, json!({}));
        // A small config declared huge is not read either.
        let manifest = manifest_with_sizes(
            (&small_digest, &(1_i64 << 40).to_string()),
            &[(&layer, &layer_size)],
        );
        let res = put_manifest(&app, name, "overstated", OCI_MANIFEST, &manifest).await;
        assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
        assert_eq!(extra_attrs(&app, "configs", "overstated").await, json!({}));
        // Every image is still served as pushed.
        let res = app.get(&format!("/v2/{name}/blobs/{big_digest}")).send().await;
        assert_eq!(res.body.len(), big.len());
    }
);

registry_test!(
    async fn server_errors_on_v2_carry_no_code_and_no_internal_text(app) {
        let name = "library/down";
        push_image(&app, name, "v1", &[b"down layer"]).await;
        app.store().close().await;
        for (method, path) in [
            (Method::GET, format!("/v2/{name}/tags/list")),
            (Method::GET, format!("/v2/{name}/manifests/v1")),
            (Method::HEAD, format!("/v2/{name}/manifests/v1")),
        ] {
            let res = app.request(method.clone(), &path).send().await;
            assert_eq!(res.status, StatusCode::INTERNAL_SERVER_ERROR, "{method} {path}");
            assert_eq!(res.header("docker-distribution-api-version"), Some("registry/2.0"));
            if method != Method::HEAD {
                assert_eq!(res.json(), json!({"errors": []}), "{method} {path}");
            }
        }
    }
);
