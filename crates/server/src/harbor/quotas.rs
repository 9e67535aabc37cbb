//! Harbor's quota API (`/quotas`): each project's storage limit and usage, read
//! and changed by system administrators. A quota's id is its project's id.

use berth_domain::rbac::{Action, SystemResource};
use std::collections::BTreeMap;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use berth_domain::model::project::MAX_STORAGE_LIMIT;
use berth_store::repo::quotas::{QuotaFilter, QuotaRow};
use serde::{Deserialize, Serialize};

use crate::error::{ApiError, HarborResult};
use crate::extract::Principal;
use crate::extract::harbor::{HarborQuery, LaterJson, paged, path_int};
use crate::operations::{Routes, Surface};
use crate::state::AppState;

pub(super) fn routes() -> Routes {
    Routes::new(Surface::Harbor)
        .get("/quotas", list_quotas)
        .get("/quotas/{id}", get_quota)
        .put("/quotas/{id}", update_quota)
}

/// The one resource a project quota limits.
const STORAGE: &str = "storage";

/// Harbor's Quota.
#[derive(Debug, Serialize)]
pub struct Quota {
    id: i64,
    #[serde(rename = "ref")]
    reference: QuotaRef,
    hard: BTreeMap<&'static str, i64>,
    used: BTreeMap<&'static str, i64>,
    creation_time: String,
    update_time: String,
}

/// What a project quota refers to (Harbor's QuotaRefObject of a project).
#[derive(Debug, Serialize)]
struct QuotaRef {
    id: i64,
    name: String,
    owner_name: String,
}

impl From<QuotaRow> for Quota {
    fn from(row: QuotaRow) -> Self {
        Self {
            id: row.id,
            reference: QuotaRef {
                id: row.id,
                name: row.project_name,
                owner_name: row.owner_name,
            },
            hard: BTreeMap::from([(STORAGE, row.hard)]),
            used: BTreeMap::from([(STORAGE, row.used)]),
            creation_time: row.created_at,
            update_time: row.updated_at,
        }
    }
}

/// `GET /quotas`: a page of quotas, `reference` / `reference_id` filtering.
pub async fn list_quotas(
    State(state): State<AppState>,
    principal: Principal,
    query: HarborQuery,
) -> HarborResult<Response> {
    principal.require_system(SystemResource::Quota, Action::List)?;
    let filter = QuotaFilter {
        reference: query.string("reference"),
        reference_id: query.string("reference_id"),
        sort: query.sort()?,
        paging: query.paging()?,
    };
    let (total, rows) = state.store.quotas().list(&filter).await?;
    let wire: Vec<Quota> = rows.into_iter().map(Quota::from).collect();
    Ok(paged(&wire, total, query.link(filter.paging, total)))
}

/// `GET /quotas/{id}`.
pub async fn get_quota(
    State(state): State<AppState>,
    principal: Principal,
    Path(id): Path<String>,
) -> HarborResult<Json<Quota>> {
    principal.require_system(SystemResource::Quota, Action::Read)?;
    let row = state
        .store
        .quotas()
        .get(quota_id(&id)?)
        .await?
        .ok_or_else(|| quota_not_found(&id))?;
    Ok(Json(Quota::from(row)))
}

/// Harbor's QuotaUpdateReq.
#[derive(Debug, Deserialize)]
pub struct QuotaUpdateReq {
    hard: Option<BTreeMap<String, i64>>,
}

/// `PUT /quotas/{id}`: a new storage limit (`-1`: unlimited). A limit below
/// the usage is accepted, as Harbor does; pushes then fail until it is raised.
pub async fn update_quota(
    State(state): State<AppState>,
    principal: Principal,
    Path(id): Path<String>,
    body: LaterJson<QuotaUpdateReq>,
) -> HarborResult<StatusCode> {
    principal.require_system(SystemResource::Quota, Action::Update)?;
    let quota = quota_id(&id)?;
    let hard = body
        .parse()?
        .hard
        .filter(|hard| !hard.is_empty())
        .ok_or_else(|| ApiError::bad_request("hard required in body"))?;
    if state.store.quotas().get(quota).await?.is_none() {
        return Err(quota_not_found(&id).into());
    }
    if let Some(name) = hard.keys().find(|name| name.as_str() != STORAGE) {
        return Err(ApiError::bad_request(format!("resource {name} not support")).into());
    }
    let Some(&storage) = hard.get(STORAGE) else {
        return Err(ApiError::bad_request("resource storage not found").into());
    };
    if storage != -1 && !(1..=MAX_STORAGE_LIMIT).contains(&storage) {
        return Err(ApiError::bad_request(format!(
            "invalid value for resource storage: {storage} (-1, or 1 to {MAX_STORAGE_LIMIT} bytes)"
        ))
        .into());
    }
    if !state
        .store
        .projects()
        .set_storage_limit(quota, storage)
        .await?
    {
        return Err(quota_not_found(&id).into());
    }
    Ok(StatusCode::OK)
}

fn quota_id(text: &str) -> Result<i64, ApiError> {
    path_int("id", text)
}

fn quota_not_found(id: &str) -> ApiError {
    ApiError::not_found(format!("quota {id} not found"))
}
