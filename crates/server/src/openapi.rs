//! `GET /openapi.json`: an OpenAPI 3.1 document of every routed operation,
//! generated from the route table ([`crate::operations`]) the router is built
//! from, so the two cannot drift. Each operation carries its operationId (for
//! Harbor, Harbor's own), its surface's tag, its path parameters, the
//! authentication the surface accepts and the error body it answers with.

use std::collections::BTreeMap;

use axum::Extension;
use axum::http::{HeaderValue, Method, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use bytes::Bytes;
use serde_json::{Map, Value, json};

use crate::operations::{Operation, Routes, Surface};

/// The rendered document, shared by every request (answered without a copy).
#[derive(Debug, Clone)]
pub struct ApiDocument(Bytes);

impl ApiDocument {
    /// The document of `operations`.
    pub fn new(operations: &[Operation]) -> Self {
        Self(Bytes::from(document(operations).to_string()))
    }
}

/// `GET /openapi.json`.
pub async fn get_openapi(Extension(ApiDocument(text)): Extension<ApiDocument>) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        text,
    )
        .into_response()
}

/// The `/openapi.json` route (its handler needs an [`ApiDocument`] extension).
pub fn routes() -> Routes {
    Routes::new(Surface::Berth).named(
        Method::GET,
        "/openapi.json",
        "get_openapi",
        get(get_openapi),
    )
}

/// The parameters a path template names (`{name}` and catch-all `{*name}`).
fn path_parameters(path: &str) -> Vec<String> {
    path.split('/')
        .filter_map(|segment| segment.strip_prefix('{')?.strip_suffix('}'))
        .map(|name| name.trim_start_matches('*').to_string())
        .collect()
}

fn error_schema(surface: Surface) -> &'static str {
    match surface {
        Surface::Harbor | Surface::Berth => "#/components/schemas/HarborErrors",
        Surface::Registry => "#/components/schemas/OciErrors",
        Surface::Rest => "#/components/schemas/RestError",
    }
}

fn security(surface: Surface) -> Value {
    match surface {
        Surface::Harbor | Surface::Registry => json!([{}, {"basic": []}, {"bearer": []}]),
        Surface::Rest => json!([{}, {"bearer": []}, {"masterKey": []}]),
        Surface::Berth => json!([{}, {"basic": []}]),
    }
}

fn operation_object(op: &Operation) -> Value {
    let parameters: Vec<Value> = path_parameters(&op.path)
        .into_iter()
        .map(|name| {
            json!({
                "name": name,
                "in": "path",
                "required": true,
                "schema": {"type": "string"},
            })
        })
        .collect();
    let mut object = json!({
        "operationId": &*op.id,
        "tags": [op.surface.tag()],
        "security": security(op.surface),
        "responses": {
            "2XX": {"description": "Success"},
            "default": {
                "description": "An error",
                "content": {"application/json": {"schema": {"$ref": error_schema(op.surface)}}},
            },
        },
    });
    if !parameters.is_empty() {
        object["parameters"] = Value::Array(parameters);
    }
    object
}

/// The OpenAPI 3.1 document of `operations`, paths and methods in a stable order.
pub fn document(operations: &[Operation]) -> Value {
    let mut paths: BTreeMap<&str, Map<String, Value>> = BTreeMap::new();
    for op in operations {
        paths.entry(op.path.as_str()).or_default().insert(
            op.method.as_str().to_ascii_lowercase(),
            operation_object(op),
        );
    }
    let paths: Map<String, Value> = paths
        .into_iter()
        .map(|(path, methods)| (path.to_string(), Value::Object(methods)))
        .collect();
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "Berth",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "A single-binary container registry: Harbor's management API (v2.0), \
                            the OCI distribution API and a generator-rest users, auth and articles API.",
            "license": {"name": "Apache-2.0", "identifier": "Apache-2.0"},
        },
        "tags": [
            {"name": "harbor", "description": "Harbor's management API, wire-compatible, under /api/v2.0"},
            {"name": "distribution", "description": "The OCI distribution API under /v2/ and its token service"},
            {"name": "rest", "description": "The generator-rest users, auth, password-reset and articles API"},
            {"name": "berth", "description": "Berth's own operations: metrics and this document"},
        ],
        "paths": paths,
        "components": {
            "securitySchemes": {
                "basic": {"type": "http", "scheme": "basic"},
                "bearer": {"type": "http", "scheme": "bearer", "bearerFormat": "JWT"},
                "masterKey": {"type": "apiKey", "in": "query", "name": "access_token",
                              "description": "The generator-rest master key"},
            },
            "schemas": {
                "HarborErrors": {
                    "type": "object",
                    "properties": {"errors": {"type": "array", "items": {
                        "type": "object",
                        "properties": {"code": {"type": "string"}, "message": {"type": "string"}},
                    }}},
                },
                "OciErrors": {
                    "type": "object",
                    "properties": {"errors": {"type": "array", "items": {
                        "type": "object",
                        "properties": {
                            "code": {"type": "string"},
                            "message": {"type": "string"},
                            "detail": {},
                        },
                    }}},
                },
                "RestError": {
                    "type": "object",
                    "description": "A generator-rest error: a message, or the failed validation",
                    "additionalProperties": true,
                },
            },
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_parameters_are_named() {
        assert_eq!(
            path_parameters("/api/v2.0/projects/{project_name}/repositories/{repository_name}"),
            ["project_name", "repository_name"]
        );
        assert!(path_parameters("/v2/_catalog").is_empty());
    }
}
