//! Repositories and what they hold, as a caller reaches them: the project
//! check every surface makes the same way, the artifact a reference names, and
//! deleting a repository with everything in it.

use berth_domain::model::{Artifact, ProjectRef, Repository};
use berth_domain::oci::Digest;
use berth_domain::rbac::{Action, Resource};

use crate::access::{ProjectAccess, require_project};
use crate::error::ApiError;
use crate::extract::Principal;
use crate::state::AppState;

/// A repository as a caller reached it.
#[derive(Debug)]
pub struct Reached {
    /// The caller's standing in the repository's project (already checked).
    pub access: ProjectAccess,
    /// The repository's full name, `project/name`.
    pub name: String,
    /// The repository, when it exists.
    pub repository: Option<Repository>,
}

/// Checks that `principal` may do `action` on `resource` in project
/// `project_name` (Harbor's 401/403/404 rules) and looks up repository
/// `name_in_project` there (decoded: `a/b`, not `a%2Fb`).
pub async fn reach(
    state: &AppState,
    principal: &Principal,
    project_name: &str,
    name_in_project: &str,
    resource: Resource,
    action: Action,
) -> Result<Reached, ApiError> {
    let access = require_project(
        state,
        principal.actor(),
        &ProjectRef::Name(project_name.to_string()),
        resource,
        action,
    )
    .await?;
    let name = format!("{project_name}/{name_in_project}");
    let repository = state.store.repositories().find(&name).await?;
    Ok(Reached {
        access,
        name,
        repository,
    })
}

/// The 404 of a repository that does not exist.
pub fn repository_not_found(name: &str) -> ApiError {
    ApiError::not_found(format!("repository {name} not found"))
}

/// The artifact `reference` (a digest or a tag) names in a repository, after
/// checking `action` on `resource` as [`reach`] does; 404 when missing.
pub async fn find_artifact(
    state: &AppState,
    principal: &Principal,
    project_name: &str,
    name_in_project: &str,
    reference: &str,
    resource: Resource,
    action: Action,
) -> Result<Artifact, ApiError> {
    let Reached {
        name, repository, ..
    } = reach(
        state,
        principal,
        project_name,
        name_in_project,
        resource,
        action,
    )
    .await?;
    let store = state.store.artifacts();
    match Digest::parse(reference) {
        Ok(digest) => {
            let found = match &repository {
                Some(r) => store.artifact_by_digest(r.id, digest.as_str()).await?,
                None => None,
            };
            found.ok_or_else(|| ApiError::not_found(format!("artifact {name}@{digest} not found")))
        }
        Err(_) => {
            let repository = repository.ok_or_else(|| repository_not_found(&name))?;
            store
                .artifact_by_tag(repository.id, reference)
                .await?
                .ok_or_else(|| {
                    ApiError::not_found(format!("artifact {name}:{reference} not found"))
                })
        }
    }
}

/// The repository [`reach`] finds for `action` on repositories; 404 when missing.
async fn existing(
    state: &AppState,
    principal: &Principal,
    project_name: &str,
    name_in_project: &str,
    action: Action,
) -> Result<Repository, ApiError> {
    let reached = reach(
        state,
        principal,
        project_name,
        name_in_project,
        Resource::Repository,
        action,
    )
    .await?;
    reached
        .repository
        .ok_or_else(|| repository_not_found(&reached.name))
}

/// Deletes a repository and every artifact in it (repository delete
/// permission), recording `repository.deleted`.
pub async fn delete(
    state: &AppState,
    principal: &Principal,
    project_name: &str,
    name_in_project: &str,
) -> Result<(), ApiError> {
    let repository = existing(
        state,
        principal,
        project_name,
        name_in_project,
        Action::Delete,
    )
    .await?;
    state
        .store
        .repositories()
        .delete(repository.id, principal.audit_name())
        .await?;
    state.deliver_events();
    Ok(())
}

/// Sets a repository's description (repository update permission).
pub async fn describe(
    state: &AppState,
    principal: &Principal,
    project_name: &str,
    name_in_project: &str,
    description: &str,
) -> Result<(), ApiError> {
    let repository = existing(
        state,
        principal,
        project_name,
        name_in_project,
        Action::Update,
    )
    .await?;
    state
        .store
        .repositories()
        .update_description(repository.id, description)
        .await?;
    Ok(())
}
