//! What only an S3 blob store does: downloads redirected to presigned URLs
//! (`--blob-redirect`) and the storage health of a bucket that does not answer.
//! Everything else of the registry runs on S3 too, through `registry_test!`.

use axum::http::{Method, StatusCode};

use super::{digest_of, push_blob, push_image};
use crate::util::{Backend, RefusedPort, Storage, TestApp};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn downloads_redirect_to_presigned_urls_when_asked_postgres_s3() {
    let app = TestApp::with_storage(Backend::Postgres, Storage::S3)
        .await
        .with_blob_redirect();
    let name = "library/redirected";
    let layer = b"bytes the client fetches from the bucket".to_vec();
    let (manifest, manifest_digest) = push_image(&app, name, "v1", &[&layer]).await;
    let digest = digest_of(&layer);

    let res = app
        .get(&format!("/v2/{name}/blobs/{digest}"))
        .admin()
        .send()
        .await;
    assert_eq!(res.status, StatusCode::TEMPORARY_REDIRECT, "{}", res.text());
    assert_eq!(res.header("docker-content-digest"), Some(digest.as_str()));
    let url = res.header("location").expect("a Location").to_string();
    assert!(url.contains("X-Amz-Signature="), "{url}");
    let client = reqwest::Client::new();
    let fetched = client.get(&url).send().await.unwrap();
    assert_eq!(fetched.status(), 200);
    assert_eq!(fetched.bytes().await.unwrap().to_vec(), layer);
    let ranged = client
        .get(&url)
        .header("range", "bytes=6-9")
        .send()
        .await
        .unwrap();
    assert_eq!(ranged.status(), 206);
    assert_eq!(ranged.bytes().await.unwrap().to_vec(), layer[6..10]);
    let tampered = url.replace("X-Amz-Expires=", "X-Amz-Expires=9");
    let refused = client.get(&tampered).send().await.unwrap().status();
    assert!(
        refused.is_client_error(),
        "a changed URL is refused: {refused}"
    );

    // HEAD answers itself; a manifest is not in the bucket and is served here.
    let res = app
        .request(Method::HEAD, &format!("/v2/{name}/blobs/{digest}"))
        .admin()
        .send()
        .await;
    assert_eq!(res.status, StatusCode::OK);
    assert_eq!(
        res.header("content-length"),
        Some(layer.len().to_string().as_str())
    );
    let res = app
        .get(&format!("/v2/{name}/blobs/{manifest_digest}"))
        .admin()
        .send()
        .await;
    assert_eq!(res.status, StatusCode::OK);
    assert_eq!(res.body.to_vec(), manifest);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn downloads_stream_from_the_bucket_without_redirect_postgres_s3() {
    let app = TestApp::with_storage(Backend::Postgres, Storage::S3).await;
    let name = "library/streamed";
    let blob: Vec<u8> = (0..(9u32 << 20)).map(|i| (i % 241) as u8).collect();
    let digest = push_blob(&app, name, &blob).await;
    let res = app
        .get(&format!("/v2/{name}/blobs/{digest}"))
        .admin()
        .send()
        .await;
    assert_eq!(res.status, StatusCode::OK);
    assert_eq!(res.body.len(), blob.len());
    assert!(res.body.to_vec() == blob, "the bytes pushed");
    let res = app
        .get(&format!("/v2/{name}/blobs/{digest}"))
        .admin()
        .header("range", "bytes=8388600-8388615")
        .send()
        .await;
    assert_eq!(res.status, StatusCode::PARTIAL_CONTENT);
    assert_eq!(res.body.to_vec(), blob[8_388_600..8_388_616]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bucket_that_does_not_answer_is_unhealthy_storage_postgres_s3() {
    let refused = RefusedPort::new();
    let url = format!(
        "s3://bucket/blobs?endpoint=http://127.0.0.1:{}",
        refused.port()
    );
    let config = berth_store::s3::S3Config::parse(&url, |name| match name {
        "AWS_ACCESS_KEY_ID" => Some("id".into()),
        "AWS_SECRET_ACCESS_KEY" => Some("kept-out-of-answers".into()),
        _ => None,
    })
    .unwrap();
    let blobs = berth_store::BlobStore::Objects(berth_store::ObjectBlobs::new(
        berth_store::s3::S3Client::new(config).unwrap(),
    ));
    let app = TestApp::new(Backend::Postgres).await.with_blobs(blobs);
    let res = app.get("/api/v2.0/health").send().await;
    assert_eq!(res.status, StatusCode::OK);
    let body = res.json();
    assert_eq!(body["status"], "unhealthy");
    assert_eq!(body["components"][2]["name"], "storage");
    assert_eq!(body["components"][2]["status"], "unhealthy");
    let error = body["components"][2]["error"].as_str().unwrap();
    assert!(error.contains("bucket"), "{error}");
    assert!(!res.text().contains("kept-out-of-answers"));
}
