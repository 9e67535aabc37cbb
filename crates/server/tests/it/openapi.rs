//! `GET /openapi.json`: generated from the route table, checked against a
//! snapshot, against what is routed, against Harbor's swagger, and by a real
//! OpenAPI 3.1 validator (openapi-spec-validator, installed by scripts/test).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use axum::http::{Method, StatusCode};
use berth::metrics::MetricsSettings;
use berth::operations::{Operation, Surface};
use serde_json::Value;

use crate::util::{Backend, TestApp};

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The snapshot of the document; `BERTH_UPDATE_SNAPSHOTS=1` rewrites it.
fn snapshot_path() -> PathBuf {
    manifest_dir().join("tests/it/snapshots/openapi.json")
}

async fn served_document(app: &TestApp) -> Value {
    let res = app.get("/openapi.json").send().await;
    assert_eq!(res.status, StatusCode::OK);
    assert_eq!(res.header("content-type"), Some("application/json"));
    res.json()
}

fn operations(app: &TestApp) -> Vec<Operation> {
    berth::app::routes(&app.state, &MetricsSettings::default())
        .into_parts()
        .1
}

#[tokio::test]
async fn the_document_matches_its_snapshot() {
    let app = TestApp::new(Backend::Sqlite).await;
    let document = served_document(&app).await;
    let pretty = serde_json::to_string_pretty(&document).unwrap() + "\n";
    let path = snapshot_path();
    if std::env::var("BERTH_UPDATE_SNAPSHOTS").is_ok_and(|v| v == "1") {
        std::fs::write(&path, &pretty).unwrap();
        return;
    }
    let stored = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        stored == pretty,
        "the OpenAPI document changed; if that is intended, run the test with \
         BERTH_UPDATE_SNAPSHOTS=1 and commit {}",
        path.display()
    );
}

/// A value for a path parameter that names something plausible.
fn sample(parameter: &str) -> &'static str {
    match parameter {
        "project_name" | "project_name_or_id" => "library",
        "name" => "library/nothing",
        "reference" => "latest",
        "digest" => "sha256:0000000000000000000000000000000000000000000000000000000000000000",
        "provider" => "github",
        "token" => "no-such-token",
        _ if parameter.ends_with("name") => "nothing",
        _ => "999999",
    }
}

fn filled(path: &str) -> String {
    path.split('/')
        .map(
            |segment| match segment.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
                Some(parameter) => sample(parameter).to_string(),
                None => segment.to_string(),
            },
        )
        .collect::<Vec<_>>()
        .join("/")
}

#[tokio::test]
async fn every_routed_operation_is_documented_and_routed() {
    let app = TestApp::new(Backend::Sqlite).await;
    let document = served_document(&app).await;
    let operations = operations(&app);
    let mut documented = 0;
    let mut ids = BTreeSet::new();
    for op in &operations {
        let entry = &document["paths"][&op.path][op.method.as_str().to_ascii_lowercase()];
        assert_eq!(
            entry["operationId"].as_str(),
            Some(&*op.id),
            "{} {} is not in the document",
            op.method,
            op.path
        );
        assert!(ids.insert(op.id.to_string()), "operationId {} twice", op.id);
        documented += 1;

        let res = app
            .request(op.method.clone(), &filled(&op.path))
            .send()
            .await;
        let body = res.text();
        let unrouted = res.status == StatusCode::METHOD_NOT_ALLOWED
            || (res.status == StatusCode::NOT_FOUND && body.contains("was not found"))
            || body.contains("UNSUPPORTED");
        assert!(
            !unrouted,
            "{} {} ({}) is documented but not routed: {} {body}",
            op.method,
            op.path,
            filled(&op.path),
            res.status
        );
    }
    let in_document: usize = document["paths"]
        .as_object()
        .unwrap()
        .values()
        .map(|methods| methods.as_object().unwrap().len())
        .sum();
    assert_eq!(
        in_document, documented,
        "the document lists unrouted operations"
    );
    for surface in [Surface::Harbor, Surface::Registry, Surface::Rest] {
        assert!(operations.iter().any(|op| op.surface == surface));
    }
}

/// Harbor's operations by (method, path under /api/v2.0), from its swagger.
fn harbor_swagger_operations() -> BTreeMap<(String, String), String> {
    let path = manifest_dir().join("../../../shared/reference/harbor-swagger.yaml");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("Harbor's swagger at {}: {e}", path.display()));
    let mut found = BTreeMap::new();
    let (mut current_path, mut current_method) = (String::new(), String::new());
    let mut in_paths = false;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        if !line.starts_with(' ') {
            in_paths = line.starts_with("paths:");
            continue;
        }
        if !in_paths {
            continue;
        }
        if let Some(p) = line
            .strip_prefix("  ")
            .filter(|l| l.starts_with('/') || l.starts_with("'/"))
        {
            // Harbor routes `/metadatas/` as `/metadatas`, as Berth does.
            let p = p.trim_end_matches(':').trim_matches('\'');
            current_path = p.strip_suffix('/').unwrap_or(p).to_string();
        } else if let Some(m) = line.strip_prefix("    ").filter(|l| !l.starts_with(' ')) {
            current_method = m.trim_end_matches(':').to_ascii_uppercase();
        } else if let Some(id) = line.trim().strip_prefix("operationId:") {
            found.insert(
                (current_method.clone(), current_path.clone()),
                id.trim().to_string(),
            );
        }
    }
    assert!(
        found.len() > 100,
        "parsed too few operations from {}",
        path.display()
    );
    found
}

#[tokio::test]
async fn harbor_operations_carry_harbors_operation_ids() {
    let app = TestApp::new(Backend::Sqlite).await;
    let swagger = harbor_swagger_operations();
    for op in operations(&app)
        .iter()
        .filter(|op| op.surface == Surface::Harbor)
    {
        let relative = op.path.strip_prefix("/api/v2.0").unwrap();
        let key = (op.method.to_string(), relative.to_string());
        assert_eq!(
            swagger.get(&key).map(String::as_str),
            Some(&*op.id),
            "{} {}",
            op.method,
            op.path
        );
    }
    assert_eq!(Method::GET.as_str(), "GET");
}

#[tokio::test]
async fn the_document_is_valid_openapi_3_1() {
    let app = TestApp::new(Backend::Sqlite).await;
    let document = served_document(&app).await;
    assert_eq!(document["openapi"], "3.1.0");
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), document.to_string()).unwrap();
    let script = "import json, sys\n\
                  from openapi_spec_validator import OpenAPIV31SpecValidator, validate\n\
                  validate(json.load(open(sys.argv[1])), cls=OpenAPIV31SpecValidator)\n";
    let output = std::process::Command::new("python3")
        .args(["-c", script])
        .arg(file.path())
        .output()
        .expect("python3 runs (scripts/test installs it)");
    assert!(
        output.status.success(),
        "openapi-spec-validator rejected the document or is missing \
         (scripts/test installs it with pip): {}",
        String::from_utf8_lossy(&output.stderr)
    );
}
