//! Harbor's immutable tag rules (`/projects/{p}/immutabletagrules`): project
//! administrators and maintainers list, create, update and delete them; the
//! store refuses every move or delete of a tag they protect.

use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use berth_domain::model::immutable::ImmutableRule;
use berth_domain::rbac::{Action, Resource};

use crate::error::{ApiError, HarborResult};
use crate::extract::harbor::{HarborQuery, LaterJson, paged, path_int};
use crate::harbor::projects::ProjectCaller;
use crate::operations::{Routes, Surface};
use crate::state::AppState;

const BASE: &str = "/projects/{project_name_or_id}/immutabletagrules";

pub(super) fn routes() -> Routes {
    Routes::new(Surface::Harbor)
        .get(BASE, list_immu_rules)
        .post(BASE, create_immu_rule)
        .put(&format!("{BASE}/{{immutable_rule_id}}"), update_immu_rule)
        .delete(&format!("{BASE}/{{immutable_rule_id}}"), delete_immu_rule)
}

/// `GET .../immutabletagrules`: the project's rules, by id.
pub async fn list_immu_rules(
    State(state): State<AppState>,
    caller: ProjectCaller,
    Path(project): Path<String>,
    query: HarborQuery,
) -> HarborResult<Response> {
    let access = caller
        .require(&state, &project, Resource::ImmutableTag, Action::List)
        .await?;
    let paging = query.paging()?;
    let (total, rules) = state
        .store
        .immutable_rules()
        .list(access.project.id, paging)
        .await?;
    Ok(paged(&rules, total, query.link(paging, total)))
}

/// `POST .../immutabletagrules`: 201 with the new rule's location.
pub async fn create_immu_rule(
    State(state): State<AppState>,
    caller: ProjectCaller,
    Path(project): Path<String>,
    body: LaterJson<ImmutableRule>,
) -> HarborResult<Response> {
    let access = caller
        .require(&state, &project, Resource::ImmutableTag, Action::Create)
        .await?;
    let mut rule = body.parse()?;
    rule.validate()?;
    let id = state
        .store
        .immutable_rules()
        .create(access.project.id, &rule)
        .await?;
    let location = format!("/api/v2.0/projects/{project}/immutabletagrules/{id}");
    Ok((StatusCode::CREATED, [(header::LOCATION, location)]).into_response())
}

/// `PUT .../immutabletagrules/{id}`: replaces the rule (or only enables or
/// disables it, as Harbor's UI does with a body of `{"disabled": ...}` plus
/// the rest of the rule).
pub async fn update_immu_rule(
    State(state): State<AppState>,
    caller: ProjectCaller,
    Path((project, id)): Path<(String, String)>,
    body: LaterJson<ImmutableRule>,
) -> HarborResult<StatusCode> {
    let access = caller
        .require(&state, &project, Resource::ImmutableTag, Action::Update)
        .await?;
    let id = path_int("immutable_rule_id", &id)?;
    let rules = state.store.immutable_rules();
    if rules.get(access.project.id, id).await?.is_none() {
        return Err(rule_not_found(id).into());
    }
    let mut rule = body.parse()?;
    rule.validate()?;
    if !rules.update(access.project.id, id, &rule).await? {
        return Err(rule_not_found(id).into());
    }
    Ok(StatusCode::OK)
}

/// `DELETE .../immutabletagrules/{id}`.
pub async fn delete_immu_rule(
    State(state): State<AppState>,
    caller: ProjectCaller,
    Path((project, id)): Path<(String, String)>,
) -> HarborResult<StatusCode> {
    let access = caller
        .require(&state, &project, Resource::ImmutableTag, Action::Delete)
        .await?;
    let id = path_int("immutable_rule_id", &id)?;
    if !state
        .store
        .immutable_rules()
        .delete(access.project.id, id)
        .await?
    {
        return Err(rule_not_found(id).into());
    }
    Ok(StatusCode::OK)
}

fn rule_not_found(id: i64) -> ApiError {
    ApiError::not_found(format!("immutable tag rule {id} not found"))
}
