//! The route table: every API module lists its operations once (method, path
//! template, handler) in a [`Routes`], which both builds the axum router and
//! names each operation. Metrics label requests by those names and the OpenAPI
//! document lists them, so neither can drift from what is routed.
//!
//! An operation is named after its handler (the house rule): Harbor handlers
//! are Harbor's operationIds in snake case, so the name is turned back into
//! camel case (`list_projects` is `listProjects`); distribution and
//! generator-rest handlers keep their snake-case names (`get_manifest`,
//! `show_article`). A handler routed twice is named explicitly ([`Routes::named`]).

use std::collections::HashMap;
use std::sync::Arc;

use axum::Router;
use axum::handler::Handler;
use axum::http::Method;
use axum::routing::MethodRouter;
use berth_domain::oci::{V2Path, parse_v2_path};

use crate::state::AppState;

/// Which API an operation belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Surface {
    /// Harbor's management API under `/api/v2.0`.
    Harbor,
    /// The OCI distribution API under `/v2/` and its token service.
    Registry,
    /// The generator-rest users, auth and articles API.
    Rest,
    /// Berth's own operations: metrics and this document.
    Berth,
}

impl Surface {
    /// The tag the OpenAPI document groups the surface's operations under.
    pub fn tag(self) -> &'static str {
        match self {
            Self::Harbor => "harbor",
            Self::Registry => "distribution",
            Self::Rest => "rest",
            Self::Berth => "berth",
        }
    }
}

/// One routed operation.
#[derive(Debug, Clone)]
pub struct Operation {
    /// The HTTP method (`GET` routes answer `HEAD` too).
    pub method: Method,
    /// The path template as routed, with `{parameter}` segments (OpenAPI's syntax too).
    pub path: String,
    /// The operationId.
    pub id: Arc<str>,
    /// The API it belongs to.
    pub surface: Surface,
}

/// A router under construction together with the operations it routes.
pub struct Routes {
    surface: Surface,
    router: Router<AppState>,
    operations: Vec<Operation>,
}

macro_rules! method_fns {
    ($($(#[$doc:meta])* $name:ident => $method:ident;)*) => {$(
        $(#[$doc])*
        pub fn $name<H, T>(self, path: &str, handler: H) -> Self
        where
            H: Handler<T, AppState>,
            T: 'static,
        {
            let id = handler_operation_id::<H>(self.surface);
            self.named(Method::$method, path, &id, axum::routing::$name(handler))
        }
    )*};
}

impl Routes {
    /// An empty table of `surface`.
    pub fn new(surface: Surface) -> Self {
        Self {
            surface,
            router: Router::new(),
            operations: Vec::new(),
        }
    }

    method_fns! {
        /// Routes `GET path` (and `HEAD`) to `handler`, named after it.
        get => GET;
        /// Routes `HEAD path` to `handler`, named after it.
        head => HEAD;
        /// Routes `POST path` to `handler`, named after it.
        post => POST;
        /// Routes `PUT path` to `handler`, named after it.
        put => PUT;
        /// Routes `PATCH path` to `handler`, named after it.
        patch => PATCH;
        /// Routes `DELETE path` to `handler`, named after it.
        delete => DELETE;
    }

    /// Routes `method path` to `route` (a method router, possibly with its own
    /// layers) as the operation `id`.
    pub fn named(
        mut self,
        method: Method,
        path: &str,
        id: &str,
        route: MethodRouter<AppState>,
    ) -> Self {
        self.router = self.router.route(path, route);
        self.operations.push(Operation {
            method,
            path: path.to_string(),
            id: Arc::from(id),
            surface: self.surface,
        });
        self
    }

    /// Adds `router`, whose operations are `operations` (for a router that
    /// dispatches inside one route, as the distribution API does).
    pub fn adopt(mut self, router: Router<AppState>, operations: Vec<Operation>) -> Self {
        self.router = self.router.merge(router);
        self.operations.extend(operations);
        self
    }

    /// Adds the routes of `other`.
    pub fn merge(mut self, other: Routes) -> Self {
        self.router = self.router.merge(other.router);
        self.operations.extend(other.operations);
        self
    }

    /// Mounts `other` under `prefix`.
    pub fn nest(mut self, prefix: &str, other: Routes) -> Self {
        self.router = self.router.nest(prefix, other.router);
        self.operations
            .extend(other.operations.into_iter().map(|op| Operation {
                path: format!("{prefix}{}", op.path),
                ..op
            }));
        self
    }

    /// Changes the router (layers, fallbacks) without changing what is routed.
    pub fn map_router(mut self, f: impl FnOnce(Router<AppState>) -> Router<AppState>) -> Self {
        self.router = f(self.router);
        self
    }

    /// The router and the operations it routes.
    pub fn into_parts(self) -> (Router<AppState>, Vec<Operation>) {
        (self.router, self.operations)
    }
}

/// The operationId of handler `H`: its function name, in camel case for Harbor.
fn handler_operation_id<H>(surface: Surface) -> String {
    let path = std::any::type_name::<H>();
    let name = path.rsplit("::").next().unwrap_or(path);
    match surface {
        Surface::Harbor => harbor_spelling(camel_case(name)),
        Surface::Registry | Surface::Rest | Surface::Berth => name.to_string(),
    }
}

/// Harbor's operationIds whose case is not plain camel case of a snake-case name.
const HARBOR_SPELLINGS: &[&str] = &[
    "ListRobot",
    "CreateRobot",
    "GetRobotByID",
    "UpdateRobot",
    "RefreshSec",
    "DeleteRobot",
    "ListImmuRules",
    "CreateImmuRule",
    "UpdateImmuRule",
    "DeleteImmuRule",
    "CopyArtifact",
    "ListLabels",
    "CreateLabel",
    "GetLabelByID",
    "UpdateLabel",
    "DeleteLabel",
    "getSystemCVEAllowlist",
    "putSystemCVEAllowlist",
    "createGCSchedule",
    "updateGCSchedule",
    "getGCSchedule",
    "getGCHistory",
    "getGC",
    "getGCLog",
    "stopGC",
];

/// `id` as Harbor spells it.
fn harbor_spelling(id: String) -> String {
    HARBOR_SPELLINGS
        .iter()
        .find(|spelt| spelt.eq_ignore_ascii_case(&id))
        .map_or(id, |spelt| (*spelt).to_string())
}

/// `list_projects` → `listProjects`.
fn camel_case(snake: &str) -> String {
    let mut out = String::with_capacity(snake.len());
    let mut upper = false;
    for ch in snake.chars() {
        if ch == '_' {
            upper = true;
        } else if upper {
            out.push(ch.to_ascii_uppercase());
            upper = false;
        } else {
            out.push(ch);
        }
    }
    out
}

/// The operations of the distribution API: its base and token routes, and
/// those behind its one catch-all route (`/v2/{*rest}`, parsed from the right),
/// with the OCI spec's path templates.
pub const OCI_OPERATIONS: &[(&str, &str, &str)] = &[
    ("GET", "/v2", "get_base"),
    ("GET", "/service/token", "get_token"),
    ("GET", "/v2/_catalog", "get_catalog"),
    ("GET", "/v2/{name}/tags/list", "get_tags_list"),
    ("GET", "/v2/{name}/manifests/{reference}", "get_manifest"),
    ("HEAD", "/v2/{name}/manifests/{reference}", "head_manifest"),
    ("PUT", "/v2/{name}/manifests/{reference}", "put_manifest"),
    (
        "DELETE",
        "/v2/{name}/manifests/{reference}",
        "delete_manifest",
    ),
    ("GET", "/v2/{name}/referrers/{digest}", "get_referrers"),
    ("GET", "/v2/{name}/blobs/{digest}", "get_blob"),
    ("HEAD", "/v2/{name}/blobs/{digest}", "head_blob"),
    ("DELETE", "/v2/{name}/blobs/{digest}", "delete_blob"),
    ("POST", "/v2/{name}/blobs/uploads", "post_blob_upload"),
    (
        "GET",
        "/v2/{name}/blobs/uploads/{reference}",
        "get_blob_upload",
    ),
    (
        "PATCH",
        "/v2/{name}/blobs/uploads/{reference}",
        "patch_blob_upload",
    ),
    (
        "PUT",
        "/v2/{name}/blobs/uploads/{reference}",
        "put_blob_upload",
    ),
    (
        "DELETE",
        "/v2/{name}/blobs/uploads/{reference}",
        "delete_blob_upload",
    ),
];

/// The catch-all route template of the distribution API.
pub const V2_CATCH_ALL: &str = "/v2/{*rest}";

/// The OCI path template of a `/v2/...` request (`None`: no such endpoint);
/// with the method, [`OperationIndex::find`] names its operation.
pub fn oci_route(path: &str) -> Option<&'static str> {
    let rest = path.strip_prefix("/v2/")?;
    let decoded = percent_encoding::percent_decode_str(rest).decode_utf8_lossy();
    Some(match parse_v2_path(&decoded)? {
        V2Path::Catalog => "/v2/_catalog",
        V2Path::TagsList { .. } => "/v2/{name}/tags/list",
        V2Path::Manifest { .. } => "/v2/{name}/manifests/{reference}",
        V2Path::Referrers { .. } => "/v2/{name}/referrers/{digest}",
        V2Path::Blob { .. } => "/v2/{name}/blobs/{digest}",
        V2Path::Uploads { .. } => "/v2/{name}/blobs/uploads",
        V2Path::Upload { .. } => "/v2/{name}/blobs/uploads/{reference}",
    })
}

/// The distribution API's operations ([`OCI_OPERATIONS`]), as operations.
pub fn registry_operations() -> Vec<Operation> {
    OCI_OPERATIONS
        .iter()
        .map(|(method, path, id)| Operation {
            method: Method::from_bytes(method.as_bytes()).unwrap_or(Method::GET),
            path: (*path).to_string(),
            id: Arc::from(*id),
            surface: Surface::Registry,
        })
        .collect()
}

/// Finds the operation of a routed request by method and matched template.
#[derive(Debug, Default)]
pub struct OperationIndex {
    by_method: HashMap<Method, HashMap<String, Arc<str>>>,
}

impl OperationIndex {
    /// The index of `operations`.
    pub fn new(operations: &[Operation]) -> Self {
        let mut by_method: HashMap<Method, HashMap<String, Arc<str>>> = HashMap::new();
        for op in operations {
            by_method
                .entry(op.method.clone())
                .or_default()
                .insert(op.path.clone(), op.id.clone());
        }
        Self { by_method }
    }

    /// The operation `method` on the template `path` names (`HEAD` falls back to `GET`).
    pub fn find(&self, method: &Method, path: &str) -> Option<&Arc<str>> {
        let lookup = |m: &Method| self.by_method.get(m).and_then(|paths| paths.get(path));
        lookup(method).or_else(|| {
            (method == Method::HEAD)
                .then(|| lookup(&Method::GET))
                .flatten()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn harbor_names_are_camel_case() {
        assert_eq!(camel_case("list_projects"), "listProjects");
        assert_eq!(camel_case("get_project_deletable"), "getProjectDeletable");
        assert_eq!(camel_case("ping"), "ping");
        assert_eq!(
            harbor_spelling(camel_case("get_label_by_id")),
            "GetLabelByID"
        );
        assert_eq!(harbor_spelling(camel_case("get_gc")), "getGC");
    }

    #[test]
    fn oci_paths_name_their_operation() {
        let index = OperationIndex::new(&registry_operations());
        let name = |method: Method, path: &str| {
            oci_route(path)
                .and_then(|template| index.find(&method, template))
                .map(|id| id.to_string())
        };
        assert_eq!(
            name(Method::GET, "/v2/_catalog").as_deref(),
            Some("get_catalog")
        );
        assert_eq!(
            name(Method::HEAD, "/v2/library/a/b/manifests/latest").as_deref(),
            Some("head_manifest")
        );
        assert_eq!(
            name(Method::PATCH, "/v2/library/a/blobs/uploads/abc").as_deref(),
            Some("patch_blob_upload")
        );
        assert_eq!(name(Method::POST, "/v2/library/a/manifests/x"), None);
        assert_eq!(name(Method::GET, "/v2/nothing-here"), None);
    }
}
