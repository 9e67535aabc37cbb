//! One artifact: its details, tags, layers (or an index's children),
//! accessories (signatures, SBOMs ...) and manifest; deleting it.

use axum::Router;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use berth_domain::model::{Artifact, Tag};
use berth_domain::oci::reference::project_of;
use berth_domain::oci::{Descriptor, Digest, Manifest, ManifestKind, Reference};
use berth_domain::query::Paging;
use berth_domain::rbac::{Action, Resource};
use serde::Deserialize;
use serde_json::Value;

use super::html::{self, esc, url_part};
use super::{PortalError, PortalForm, PortalUser, check_form_csrf, see_other};
use crate::error::ApiError;
use crate::service::artifacts::{self, ArtifactAt};
use crate::service::repositories::{self, Reached};
use crate::session::SessionUser;
use crate::state::AppState;

/// Accessories shown on an artifact page.
const ACCESSORIES_SHOWN: i64 = 100;

pub(super) fn router() -> Router<AppState> {
    Router::new().route("/harbor/artifacts/delete", post(delete_artifact))
}

/// Splits the tail of a repository page's path, `{repository...}/artifacts/{digest}`,
/// when it names an artifact (repository names cannot contain `:`, digests do).
pub(super) fn split_artifact_path(path: &str) -> Option<(&str, &str)> {
    let (repository, digest) = path.rsplit_once("/artifacts/")?;
    Digest::parse(digest).ok()?;
    (!repository.is_empty()).then_some((repository, digest))
}

/// The first 12 hex digits of a digest, as lists show it.
pub(super) fn short_digest(digest: &str) -> String {
    let hex = digest.split_once(':').map_or(digest, |(_, hex)| hex);
    hex.chars().take(12).collect()
}

/// The portal path of a repository inside its project (`a/b` → `a/b`, segments encoded).
pub(super) fn repository_path(in_project: &str) -> String {
    in_project
        .split('/')
        .map(url_part)
        .collect::<Vec<_>>()
        .join("/")
}

/// The portal link of an artifact page.
pub(super) fn artifact_link(project: &str, in_project: &str, digest: &str) -> String {
    format!(
        "/harbor/projects/{}/repositories/{}/artifacts/{}",
        url_part(project),
        repository_path(in_project),
        url_part(digest)
    )
}

/// `GET /harbor/projects/{project}/repositories/{repository...}/artifacts/{digest}`:
/// getArtifact's permission (artifact read), the page of one artifact.
pub(super) async fn show_artifact(
    state: &AppState,
    portal: &PortalUser,
    project_name: &str,
    repository_name: &str,
    digest: &str,
) -> Result<Response, PortalError> {
    let session = &portal.0;
    let failed = |err: ApiError| PortalError::api(err, Some(session));
    let Reached {
        access,
        name: full_name,
        repository,
    } = repositories::reach(
        state,
        &portal.principal(),
        project_name,
        repository_name,
        Resource::Artifact,
        Action::Read,
    )
    .await
    .map_err(failed)?;
    let project = &access.project;
    let missing = || {
        failed(ApiError::not_found(format!(
            "artifact {full_name}@{digest} not found"
        )))
    };
    let repository = repository.ok_or_else(missing)?;
    let store = state.store.artifacts();
    let artifact = store
        .artifact_by_digest(repository.id, digest)
        .await
        .map_err(|e| failed(e.into()))?
        .ok_or_else(missing)?;
    let tags = store
        .tags_of(&[artifact.id])
        .await
        .map_err(|e| failed(e.into()))?;
    let (accessories, accessory_total) = if access.allows(Resource::Accessory, Action::List) {
        store
            .accessories_of(
                &artifact,
                Paging {
                    page: 1,
                    page_size: ACCESSORIES_SHOWN,
                },
            )
            .await
            .map_err(|e| failed(e.into()))?
    } else {
        (Vec::new(), 0)
    };
    let stored = state
        .store
        .registry()
        .manifest_lookup(
            project_of(&artifact.repository_name).unwrap_or(&project.name),
            &artifact.repository_name,
            &Reference::Digest(Digest::parse(&artifact.digest).map_err(|_| missing())?),
        )
        .await
        .map_err(|e| failed(e.into()))?
        .and_then(|lookup| lookup.manifest);
    let in_project = full_name
        .strip_prefix(&format!("{}/", project.name))
        .unwrap_or(&full_name)
        .to_string();
    let link = |d: &str| artifact_link(&project.name, &in_project, d);
    let (contents, manifest_text) = match &stored {
        Some(stored) => {
            let parsed = Manifest::parse(&stored.body, Some(&stored.media_type)).ok();
            let pretty = serde_json::from_slice::<Value>(&stored.body)
                .ok()
                .and_then(|v| serde_json::to_string_pretty(&v).ok())
                .unwrap_or_else(|| String::from_utf8_lossy(&stored.body).into_owned());
            (contents_section(parsed.as_ref(), &link), pretty)
        }
        None => (String::new(), String::new()),
    };
    let host = super::repositories::registry_host(state);
    let subject = match &artifact.subject_digest {
        Some(subject) => format!(
            r#"<dt>Subject</dt><dd><a href="{}"><code>{}</code></a></dd>"#,
            esc(&link(subject)),
            esc(subject)
        ),
        None => String::new(),
    };
    let delete = if access.allows(Resource::Artifact, Action::Delete) {
        format!(
            r#"<form class="toolbar" method="post" action="/harbor/artifacts/delete" data-confirm="Delete artifact {digest} and its tags?">{csrf}<input type="hidden" name="project" value="{project}"><input type="hidden" name="repository" value="{in_project}"><input type="hidden" name="digest" value="{digest}"><button type="submit" class="danger" id="delete_artifact">Delete artifact</button></form>"#,
            csrf = html::csrf_field(session),
            project = esc(&project.name),
            in_project = esc(&in_project),
            digest = esc(&artifact.digest),
        )
    } else {
        String::new()
    };
    let by_digest = format!(
        "docker pull {host}/{}@{}",
        artifact.repository_name, artifact.digest
    );
    let main = format!(
        r#"<p><a href="/harbor/projects">Projects</a> / <a href="/harbor/projects/{project_path}">{project}</a> / <a href="/harbor/projects/{project_path}/repositories/{repo_path}">{repository}</a> /</p>
<h1>{repository}@<code>{short}</code> <span class="badge">{kind}</span></h1>{delete}
<dl class="stats" id="artifact_details"><dt>Digest</dt><dd><code>{digest}</code> <button type="button" class="secondary small copy-digest" data-copy="{by_digest}" title="{by_digest}">Copy pull command</button></dd>
<dt>Manifest media type</dt><dd><code>{manifest_media_type}</code></dd><dt>Config media type</dt><dd><code>{media_type}</code></dd>{artifact_type}
<dt>Size</dt><dd>{size}</dd><dt>Pushed</dt><dd>{pushed}</dd><dt>Pulled</dt><dd>{pulled}</dd>{subject}</dl>
<h2>Tags ({tag_count})</h2>{tags}
{contents}
<h2>Accessories ({accessory_total})</h2>{accessories}
<h2>Manifest</h2><pre class="manifest" id="manifest"><code>{manifest}</code></pre>"#,
        project_path = url_part(&project.name),
        project = esc(&project.name),
        repo_path = repository_path(&in_project),
        repository = esc(&full_name),
        short = esc(&short_digest(&artifact.digest)),
        kind = esc(&artifact.kind),
        digest = esc(&artifact.digest),
        by_digest = esc(&by_digest),
        manifest_media_type = esc(&artifact.manifest_media_type),
        media_type = esc(&artifact.media_type),
        artifact_type = if artifact.artifact_type.is_empty() {
            String::new()
        } else {
            format!(
                "<dt>Artifact type</dt><dd><code>{}</code></dd>",
                esc(&artifact.artifact_type)
            )
        },
        size = esc(&html::human_size(artifact.size)),
        pushed = esc(&html::when(&artifact.push_time)),
        pulled = esc(&html::when(&artifact.pull_time)),
        tag_count = tags.len(),
        tags = tags_table(&host, &artifact.repository_name, &tags),
        accessories = accessories_table(&accessories, &link),
        manifest = esc(&manifest_text),
    );
    let title = format!("{full_name}@{}", short_digest(&artifact.digest));
    Ok(html::page(&title, Some(session), &main).into_response())
}

/// The tags with their pull commands.
fn tags_table(host: &str, repository: &str, tags: &[Tag]) -> String {
    if tags.is_empty() {
        return r#"<p class="muted">untagged</p>"#.into();
    }
    let rows: String = tags
        .iter()
        .map(|tag| {
            let command = format!("docker pull {host}/{repository}:{}", tag.name);
            format!(
                r#"<tr data-tag="{name}"><td><code>{name}</code></td><td>{pushed}</td><td>{pulled}</td><td><button type="button" class="secondary small copy-tag" data-copy="{command}" title="{command}">Copy pull command</button></td></tr>"#,
                name = esc(&tag.name),
                pushed = esc(&html::when(&tag.push_time)),
                pulled = esc(&html::when(&tag.pull_time)),
                command = esc(&command),
            )
        })
        .collect();
    format!(
        r#"<table id="tags"><thead><tr><th>Tag</th><th>Pushed</th><th>Pulled</th><th>Pull</th></tr></thead><tbody>{rows}</tbody></table>"#
    )
}

/// An image's config and layers, or an index's children (linked to their pages).
fn contents_section(manifest: Option<&Manifest>, link: &dyn Fn(&str) -> String) -> String {
    let row = |role: &str, d: &Descriptor, extra: String| {
        format!(
            r#"<tr data-layer="{digest}"><td>{role}</td><td><code>{digest}</code></td><td><code>{media_type}</code></td><td>{size}</td>{extra}</tr>"#,
            role = esc(role),
            digest = esc(d.digest.as_str()),
            media_type = esc(&d.media_type),
            size = esc(&html::human_size(d.size)),
        )
    };
    match manifest.map(|m| &m.kind) {
        Some(ManifestKind::Image { config, layers }) => {
            let mut rows = row("config", config, String::new());
            for (index, layer) in layers.iter().enumerate() {
                rows.push_str(&row(&format!("layer {}", index + 1), layer, String::new()));
            }
            format!(
                r#"<h2>Layers ({count})</h2><table id="layers"><thead><tr><th></th><th>Digest</th><th>Media type</th><th>Size</th></tr></thead><tbody>{rows}</tbody></table>"#,
                count = layers.len(),
            )
        }
        Some(ManifestKind::Index { manifests }) => {
            let mut rows = String::new();
            for child in manifests {
                let platform = child
                    .platform
                    .as_ref()
                    .map(|p| {
                        let field = |k: &str| p.get(k).and_then(Value::as_str).unwrap_or("");
                        [field("os"), field("architecture"), field("variant")]
                            .iter()
                            .filter(|s| !s.is_empty())
                            .copied()
                            .collect::<Vec<_>>()
                            .join("/")
                    })
                    .unwrap_or_default();
                let extra = format!(
                    r#"<td>{}</td><td><a href="{}">open</a></td>"#,
                    esc(&platform),
                    esc(&link(child.digest.as_str()))
                );
                rows.push_str(&row("manifest", child, extra));
            }
            format!(
                r#"<h2>Children ({count})</h2><table id="layers"><thead><tr><th></th><th>Digest</th><th>Media type</th><th>Size</th><th>Platform</th><th></th></tr></thead><tbody>{rows}</tbody></table>"#,
                count = manifests.len(),
            )
        }
        None => String::new(),
    }
}

/// Signatures, SBOMs and other referrers, with their type, linked to their pages.
fn accessories_table(accessories: &[Artifact], link: &dyn Fn(&str) -> String) -> String {
    if accessories.is_empty() {
        return r#"<p class="muted">No signatures, SBOMs or other accessories.</p>"#.into();
    }
    let rows: String = accessories
        .iter()
        .map(|a| {
            format!(
                r#"<tr data-accessory="{digest}"><td><a href="{href}"><code title="{digest}">{short}</code></a></td><td class="accessory-type">{kind}</td><td>{size}</td><td>{pushed}</td></tr>"#,
                digest = esc(&a.digest),
                href = esc(&link(&a.digest)),
                short = esc(&short_digest(&a.digest)),
                kind = esc(a.accessory_type.as_deref().unwrap_or("")),
                size = esc(&html::human_size(a.size)),
                pushed = esc(&html::when(&a.push_time)),
            )
        })
        .collect();
    format!(
        r#"<table id="accessories"><thead><tr><th>Digest</th><th>Type</th><th>Size</th><th>Pushed</th></tr></thead><tbody>{rows}</tbody></table>"#
    )
}

/// The delete-artifact form's fields.
#[derive(Debug, Deserialize)]
pub(super) struct DeleteArtifactForm {
    #[serde(default)]
    csrf_token: String,
    project: String,
    repository: String,
    digest: String,
}

/// `POST /harbor/artifacts/delete`: deleteArtifact itself (artifact delete
/// permission, refused while an index refers to it or an immutable tag rule
/// protects one of its tags).
async fn delete_artifact(
    State(state): State<AppState>,
    portal: PortalUser,
    PortalForm(form): PortalForm<DeleteArtifactForm>,
) -> Result<Response, PortalError> {
    let session: &SessionUser = &portal.0;
    check_form_csrf(session, &form.csrf_token)?;
    let at = ArtifactAt {
        project: &form.project,
        repository: &form.repository,
        reference: &form.digest,
    };
    artifacts::delete(&state, &portal.principal(), at)
        .await
        .map_err(|err| PortalError::api(err, Some(session)))?;
    Ok(see_other(&format!(
        "/harbor/projects/{}/repositories/{}?removed={}",
        url_part(&form.project),
        repository_path(&form.repository),
        url_part(&short_digest(&form.digest))
    )))
}
