//! Harbor's artifacts: listArtifacts, listArtifactsOfProject, getArtifact,
//! deleteArtifact, getAddition, getVulnerabilitiesAddition.

use std::collections::HashMap;

use axum::extract::{Path, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use berth_domain::model::{Artifact, ArtifactReference, Label, Tag};
use berth_domain::oci::manifest::image_build_history;
use berth_domain::oci::reference::project_of;
use berth_domain::oci::{Digest, Manifest, ManifestKind};
use berth_domain::query::ArtifactFilter;
use berth_domain::rbac::{Action, Resource};
use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};

use super::labels::LabelJson;
use super::projects::ProjectCaller;
use super::repositories::{load_repository, name_in_project};
use super::tags::{TagJson, immutable_status};
use crate::error::{ApiError, HarborResult};
use crate::extract::Principal;
use crate::extract::harbor::{HarborQuery, paged};
use crate::operations::{Routes, Surface};
use crate::service::artifacts::{self, ArtifactAt};
use crate::service::chart;
use crate::service::content::read_config;
use crate::service::repositories;
use crate::state::AppState;
use berth_domain::model::immutable::Protection;

pub(super) const BASE: &str = "/projects/{project_name}/repositories/{repository_name}/artifacts";

pub(super) fn routes() -> Routes {
    Routes::new(Surface::Harbor)
        .get(
            "/projects/{project_name_or_id}/artifacts",
            list_artifacts_of_project,
        )
        .get(BASE, list_artifacts)
        .post(BASE, super::artifact_copy::copy_artifact)
        .get(&format!("{BASE}/{{reference}}"), get_artifact)
        .delete(&format!("{BASE}/{{reference}}"), delete_artifact)
        .get(
            &format!("{BASE}/{{reference}}/additions/vulnerabilities"),
            get_vulnerabilities_addition,
        )
        .get(
            &format!("{BASE}/{{reference}}/additions/{{addition}}"),
            get_addition,
        )
        .get(
            &format!("{BASE}/{{reference}}/accessories"),
            super::artifact_copy::list_accessories,
        )
}

/// What to embed in each artifact.
#[derive(Debug, Clone, Copy)]
struct Embed {
    tags: bool,
    labels: bool,
}

impl Embed {
    fn from_query(query: &HarborQuery) -> Self {
        Self {
            tags: query.bool("with_tag", true),
            labels: query.bool("with_label", false),
        }
    }
}

fn parse_json(text: Option<&str>) -> Option<Value> {
    text.and_then(|t| serde_json::from_str(t).ok())
}

fn reference_json(r: &ArtifactReference) -> Value {
    let platform = parse_json(r.platform.as_deref()).map(|p| {
        let mut out = json!({
            "architecture": p.get("architecture").cloned().unwrap_or(json!("")),
            "os": p.get("os").cloned().unwrap_or(json!("")),
            "OsFeatures": p.get("os.features").cloned().unwrap_or(Value::Null),
        });
        if let Some(variant) = p.get("variant") {
            out["variant"] = variant.clone();
        }
        if let Some(version) = p.get("os.version") {
            out["OsVersion"] = version.clone();
        }
        out
    });
    let mut body = json!({
        "parent_id": r.parent_id,
        "child_id": r.child_id,
        "child_digest": r.child_digest,
        "urls": parse_json(r.urls.as_deref()).unwrap_or(Value::Null),
    });
    if let Some(platform) = platform {
        body["platform"] = platform;
    }
    if let Some(annotations) = parse_json(r.annotations.as_deref()) {
        body["annotations"] = annotations;
    }
    body
}

/// Harbor's Artifact model. The embedded lists are `null` unless asked for
/// and non-empty, as in Harbor; stored JSON (`extra_attrs`, `annotations`) is
/// written out as stored, not parsed and re-serialized.
#[derive(Serialize)]
struct ArtifactJson<'a> {
    id: i64,
    #[serde(rename = "type")]
    kind: &'a str,
    media_type: &'a str,
    manifest_media_type: &'a str,
    artifact_type: &'a str,
    project_id: i64,
    repository_id: i64,
    repository_name: &'a str,
    digest: &'a str,
    size: i64,
    icon: &'a str,
    push_time: &'a str,
    pull_time: &'a str,
    extra_attrs: &'a RawValue,
    addition_links: AdditionLinks,
    #[serde(skip_serializing_if = "Option::is_none")]
    annotations: Option<&'a RawValue>,
    references: Option<Vec<Value>>,
    tags: Option<Vec<TagJson<'a>>>,
    labels: Option<Vec<LabelJson<'a>>>,
    accessories: Option<()>,
}

/// The additions an artifact advertises: an image's build history, a Helm
/// chart's values, readme and dependencies (Harbor's processors' lists).
#[derive(Serialize)]
struct AdditionLinks {
    #[serde(skip_serializing_if = "Option::is_none")]
    build_history: Option<AdditionLink>,
    #[serde(rename = "values.yaml", skip_serializing_if = "Option::is_none")]
    values: Option<AdditionLink>,
    #[serde(rename = "readme.md", skip_serializing_if = "Option::is_none")]
    readme: Option<AdditionLink>,
    #[serde(skip_serializing_if = "Option::is_none")]
    dependencies: Option<AdditionLink>,
}

#[derive(Serialize)]
struct AdditionLink {
    absolute: bool,
    href: String,
}

/// Stored JSON text as it is, or `None` when it is absent or not JSON.
fn raw_json(text: Option<&str>) -> Option<&RawValue> {
    text.and_then(|t| serde_json::from_str(t).ok())
}

/// The empty object, for an artifact without extra attributes.
fn empty_object() -> &'static RawValue {
    serde_json::from_str("{}").expect("{} is JSON")
}

/// What [`artifacts_json`] embeds in a page of artifacts: one query per
/// embedded list, whatever the page size.
struct Embedded {
    tags: Vec<Tag>,
    protection: Option<Protection>,
    labels: Vec<(i64, Label)>,
    references: Vec<ArtifactReference>,
}

impl Embedded {
    async fn load(
        state: &AppState,
        artifacts: &[Artifact],
        embed: Embed,
        protection: Option<Protection>,
    ) -> Result<Self, ApiError> {
        let ids: Vec<i64> = artifacts.iter().map(|a| a.id).collect();
        let store = state.store.artifacts();
        Ok(Self {
            tags: if embed.tags {
                store.tags_of(&ids).await?
            } else {
                Vec::new()
            },
            protection,
            labels: if embed.labels {
                store.labels_of(&ids).await?
            } else {
                Vec::new()
            },
            references: store.references_of(&ids).await?,
        })
    }
}

/// Renders artifacts with what `embedded` holds for them.
fn artifacts_json<'a>(
    project_name: &str,
    artifacts: &'a [Artifact],
    embedded: &'a Embedded,
) -> Vec<ArtifactJson<'a>> {
    let mut tags: HashMap<i64, Vec<TagJson<'a>>> = HashMap::new();
    // A project's listing spans repositories: each tag is judged in its own.
    let repositories: HashMap<i64, &str> = artifacts
        .iter()
        .map(|a| (a.id, berth_domain::oci::within_project(&a.repository_name)))
        .collect();
    for tag in &embedded.tags {
        let repository = repositories.get(&tag.artifact_id).copied().unwrap_or("");
        tags.entry(tag.artifact_id).or_default().push(TagJson::new(
            tag,
            repository,
            embedded.protection.as_ref(),
        ));
    }
    let mut labels: HashMap<i64, Vec<LabelJson<'a>>> = HashMap::new();
    for (id, label) in &embedded.labels {
        labels.entry(*id).or_default().push(LabelJson::from(label));
    }
    let mut references: HashMap<i64, Vec<Value>> = HashMap::new();
    for reference in &embedded.references {
        references
            .entry(reference.parent_id)
            .or_default()
            .push(reference_json(reference));
    }
    artifacts
        .iter()
        .map(|a| {
            let mut body = artifact_json(project_name, a);
            body.tags = tags.remove(&a.id);
            body.labels = labels.remove(&a.id);
            body.references = references.remove(&a.id);
            body
        })
        .collect()
}

/// Whether an artifact has a build history: an image manifest (not an index).
/// Exactly these advertise `addition_links.build_history`, and [`get_addition`]
/// serves it for exactly these.
fn has_build_history(a: &Artifact) -> bool {
    a.kind == "IMAGE"
        && a.manifest_media_type != berth_domain::oci::media_type::OCI_INDEX
        && a.manifest_media_type != berth_domain::oci::media_type::DOCKER_LIST
}

/// Harbor's Artifact model without the embedded lists (those are `null`).
fn artifact_json<'a>(project_name: &str, a: &'a Artifact) -> ArtifactJson<'a> {
    let icon = if a.icon.is_empty() {
        super::icons::of_type(&a.kind)
    } else {
        a.icon.as_str()
    };
    let link = |addition: &str| {
        let repo_in_project = a
            .repository_name
            .strip_prefix(project_name)
            .and_then(|rest| rest.strip_prefix('/'))
            .unwrap_or(&a.repository_name);
        let encoded = utf8_percent_encode(repo_in_project, NON_ALPHANUMERIC).to_string();
        let double = utf8_percent_encode(&encoded, NON_ALPHANUMERIC);
        AdditionLink {
            absolute: false,
            href: format!(
                "/api/v2.0/projects/{project_name}/repositories/{double}/artifacts/{}/additions/{addition}",
                a.digest
            ),
        }
    };
    let chart = a.kind == "CHART";
    let addition_links = AdditionLinks {
        build_history: has_build_history(a).then(|| link("build_history")),
        values: chart.then(|| link("values.yaml")),
        readme: chart.then(|| link("readme.md")),
        dependencies: chart.then(|| link("dependencies")),
    };
    ArtifactJson {
        id: a.id,
        kind: &a.kind,
        media_type: &a.media_type,
        manifest_media_type: &a.manifest_media_type,
        artifact_type: &a.artifact_type,
        project_id: a.project_id,
        repository_id: a.repository_id,
        repository_name: &a.repository_name,
        digest: &a.digest,
        size: a.size,
        icon,
        push_time: &a.push_time,
        pull_time: &a.pull_time,
        extra_attrs: raw_json(Some(a.extra_attrs.as_str())).unwrap_or_else(|| empty_object()),
        addition_links,
        annotations: raw_json(a.annotations.as_deref()),
        references: None,
        tags: None,
        labels: None,
        accessories: None,
    }
}

/// `GET .../artifacts`: Harbor's listing (tagged plus untagged non-children
/// by default, every `q` form of the spec), paged, with embedded tags/labels.
pub async fn list_artifacts(
    State(state): State<AppState>,
    principal: Principal,
    Path((project_name, repository_name)): Path<(String, String)>,
    query: HarborQuery,
) -> HarborResult<Response> {
    let paging = query.paging()?;
    let filter = ArtifactFilter::from_query(query.query()?)?;
    let sort = query.sort()?;
    let (_, _, repository) = load_repository(
        &state,
        &principal,
        &project_name,
        &repository_name,
        Resource::Artifact,
        Action::List,
    )
    .await?;
    let Some(repository) = repository else {
        // Harbor does not check the repository here: an unknown one lists nothing.
        return Ok(paged(&[(); 0], 0, None));
    };
    let (artifacts, total) = state
        .store
        .artifacts()
        .list_artifacts(repository.id, &filter, &sort, paging)
        .await?;
    let protection = immutable_status(&state, &query, repository.project_id).await?;
    let embedded =
        Embedded::load(&state, &artifacts, Embed::from_query(&query), protection).await?;
    let body = artifacts_json(&project_name, &artifacts, &embedded);
    Ok(paged(&body, total, query.link(paging, total)))
}

/// `GET /projects/{project_name_or_id}/artifacts`: listArtifacts over every
/// repository of the project (each artifact names its `repository_name`),
/// for signed-in callers who may list its artifacts, as in Harbor. With
/// `latest_in_repository=true` (harborapi sends `latest`), each repository's
/// newest push among the artifacts `q` keeps, which must then name exactly
/// one of `media_type` and `artifact_type` (Harbor's rule).
pub async fn list_artifacts_of_project(
    State(state): State<AppState>,
    caller: ProjectCaller,
    Path(project_name_or_id): Path<String>,
    query: HarborQuery,
) -> HarborResult<Response> {
    caller.principal.require_authenticated()?;
    let paging = query.paging()?;
    let q = query.query()?;
    let sort = query.sort()?;
    let latest = query.bool("latest_in_repository", false) || query.bool("latest", false);
    if latest {
        let names = |key: &str| q.terms.iter().any(|t| t.key == key);
        if names("media_type") == names("artifact_type") {
            return Err(ApiError::bad_request(
                "either 'media_type' or 'artifact_type' must be specified, but not both, when querying with latest_in_repository",
            )
            .into());
        }
    }
    let filter = ArtifactFilter::from_query(q)?;
    let access = caller
        .require(
            &state,
            &project_name_or_id,
            Resource::Artifact,
            Action::List,
        )
        .await?;
    let project = access.project;
    let (artifacts, total) = state
        .store
        .artifacts()
        .list_project_artifacts(project.id, &filter, &sort, paging, latest)
        .await?;
    let protection = immutable_status(&state, &query, project.id).await?;
    let embedded =
        Embedded::load(&state, &artifacts, Embed::from_query(&query), protection).await?;
    let body = artifacts_json(&project.name, &artifacts, &embedded);
    Ok(paged(&body, total, query.link(paging, total)))
}

/// Loads the artifact a `{reference}` (digest or tag) names, after checking `action`.
pub(crate) async fn load_artifact(
    state: &AppState,
    principal: &Principal,
    project_name: &str,
    repository_name: &str,
    reference: &str,
    resource: Resource,
    action: Action,
) -> Result<Artifact, ApiError> {
    repositories::find_artifact(
        state,
        principal,
        project_name,
        &name_in_project(repository_name),
        reference,
        resource,
        action,
    )
    .await
}

/// `GET .../artifacts/{reference}`.
pub async fn get_artifact(
    State(state): State<AppState>,
    principal: Principal,
    Path((project_name, repository_name, reference)): Path<(String, String, String)>,
    query: HarborQuery,
) -> HarborResult<Response> {
    let artifact = load_artifact(
        &state,
        &principal,
        &project_name,
        &repository_name,
        &reference,
        Resource::Artifact,
        Action::Read,
    )
    .await?;
    let artifacts = std::slice::from_ref(&artifact);
    let protection = immutable_status(&state, &query, artifact.project_id).await?;
    let embedded = Embedded::load(&state, artifacts, Embed::from_query(&query), protection).await?;
    let body = artifacts_json(&project_name, artifacts, &embedded);
    Ok(axum::Json(&body[0]).into_response())
}

/// `DELETE .../artifacts/{reference}`: 412 while an index refers to it.
pub async fn delete_artifact(
    State(state): State<AppState>,
    principal: Principal,
    Path((project_name, repository_name, reference)): Path<(String, String, String)>,
) -> HarborResult<()> {
    let at = ArtifactAt {
        project: &project_name,
        repository: &name_in_project(&repository_name),
        reference: &reference,
    };
    artifacts::delete(&state, &principal, at).await?;
    Ok(())
}

/// `GET .../artifacts/{reference}/additions/vulnerabilities`: Berth scans
/// nothing, so every artifact has no report: `{}`, Harbor's answer for an
/// artifact its scanner has not scanned (reports by MIME type, none here).
pub async fn get_vulnerabilities_addition(
    State(state): State<AppState>,
    principal: Principal,
    Path((project_name, repository_name, reference)): Path<(String, String, String)>,
) -> HarborResult<Response> {
    load_artifact(
        &state,
        &principal,
        &project_name,
        &repository_name,
        &reference,
        Resource::ArtifactAddition,
        Action::Read,
    )
    .await?;
    Ok(([(header::CONTENT_TYPE, "application/json")], "{}").into_response())
}

/// `GET .../artifacts/{reference}/additions/{addition}`: `build_history` of an
/// image (the config's `history` entries, as Harbor's image processor gives
/// them); `values.yaml`, `readme.md` and `dependencies` of a Helm chart (read
/// from its .tgz layer, as Harbor's chart processor gives them: the files as
/// text, empty when the chart has none, the dependencies as JSON); any other
/// addition, or an artifact without one, is a 400 as in Harbor.
pub async fn get_addition(
    State(state): State<AppState>,
    principal: Principal,
    Path((project_name, repository_name, reference, addition)): Path<(
        String,
        String,
        String,
        String,
    )>,
) -> HarborResult<Response> {
    let artifact = load_artifact(
        &state,
        &principal,
        &project_name,
        &repository_name,
        &reference,
        Resource::ArtifactAddition,
        Action::Read,
    )
    .await?;
    let supported = match addition.as_str() {
        "build_history" => has_build_history(&artifact),
        "values.yaml" | "readme.md" | "dependencies" => artifact.kind == "CHART",
        _ => false,
    };
    if !supported {
        return Err(ApiError::bad_request(format!(
            "addition {addition} isn't supported for {}",
            artifact.kind
        ))
        .into());
    }
    let unavailable = || {
        ApiError::not_found(format!(
            "the {addition} of {}@{} is not available",
            artifact.repository_name, artifact.digest
        ))
    };
    let digest = Digest::parse(&artifact.digest).map_err(|_| unavailable())?;
    let lookup = state
        .store
        .registry()
        .manifest_lookup(
            project_of(&artifact.repository_name).unwrap_or(&project_name),
            &artifact.repository_name,
            &berth_domain::oci::Reference::Digest(digest),
        )
        .await?;
    let stored = lookup.and_then(|l| l.manifest).ok_or_else(unavailable)?;
    let manifest =
        Manifest::parse(&stored.body, Some(&stored.media_type)).map_err(|_| unavailable())?;
    let ManifestKind::Image { config, layers } = &manifest.kind else {
        return Err(unavailable().into());
    };
    if addition == "build_history" {
        let bytes = read_config(&state, config).await.ok_or_else(unavailable)?;
        let body = image_build_history(&bytes).to_string();
        return Ok((
            [(header::CONTENT_TYPE, "application/json; charset=utf-8")],
            body,
        )
            .into_response());
    }
    let layer = layers
        .iter()
        .find(|l| l.media_type == chart::CHART_LAYER)
        .ok_or_else(unavailable)?;
    let files = chart::read_chart(&state, layer)
        .await
        .ok_or_else(unavailable)?;
    let (content_type, body) = match addition.as_str() {
        "values.yaml" => (
            "text/plain; charset=utf-8",
            files.values.unwrap_or_default(),
        ),
        "readme.md" => (
            "text/markdown; charset=utf-8",
            files.readme.unwrap_or_default(),
        ),
        _ => {
            let dependencies = files.dependencies().ok_or_else(unavailable)?;
            (
                "application/json; charset=utf-8",
                serde_json::to_string(&dependencies).map_err(ApiError::internal)?,
            )
        }
    };
    Ok(([(header::CONTENT_TYPE, content_type)], body).into_response())
}
