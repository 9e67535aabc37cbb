//! Harbor's system CVE allowlist: getSystemCVEAllowlist (any signed-in
//! caller) and putSystemCVEAllowlist (system administrators). Berth scans
//! nothing, so the list is kept and shown, for clients that manage it.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use berth_domain::model::CveAllowlist;
use berth_domain::rbac::{Action, SystemResource};
use berth_domain::time::ZERO_TIME;
use serde::Serialize;

use super::projects::{CveAllowlistReq, allowlist_items};
use crate::error::HarborResult;
use crate::extract::Principal;
use crate::extract::harbor::HarborJson;
use crate::operations::{Routes, Surface};
use crate::state::AppState;

pub(super) fn routes() -> Routes {
    Routes::new(Surface::Harbor)
        .get("/system/CVEAllowlist", get_system_cve_allowlist)
        .put("/system/CVEAllowlist", put_system_cve_allowlist)
}

/// Harbor's CVEAllowlistItem.
#[derive(Debug, Serialize)]
pub struct CveAllowlistItem {
    cve_id: String,
}

/// Harbor's CVEAllowlist with go-swagger's omission rules: `id` is 0 (left
/// out) until the list is first written, `project_id` always 0 (left out),
/// `expires_at` left out when the list never expires; both times the zero
/// date until the list is first written.
#[derive(Debug, Serialize)]
pub struct SystemCveAllowlistWire {
    #[serde(skip_serializing_if = "is_zero")]
    id: i64,
    #[serde(skip_serializing_if = "is_zero")]
    project_id: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    expires_at: Option<i64>,
    items: Vec<CveAllowlistItem>,
    creation_time: String,
    update_time: String,
}

fn is_zero(v: &i64) -> bool {
    *v == 0
}

/// The system allowlist; an empty one before the first write.
pub async fn get_system_cve_allowlist(
    State(state): State<AppState>,
    principal: Principal,
) -> HarborResult<Json<SystemCveAllowlistWire>> {
    principal.require_authenticated()?;
    let stored = state.store.system_cve_allowlist().get().await?;
    let wire = match stored {
        Some(stored) => SystemCveAllowlistWire {
            id: stored.id,
            project_id: 0,
            expires_at: stored.allowlist.expires_at,
            items: stored
                .allowlist
                .items
                .into_iter()
                .map(|cve_id| CveAllowlistItem { cve_id })
                .collect(),
            creation_time: stored.created_at,
            update_time: stored.updated_at,
        },
        None => SystemCveAllowlistWire {
            id: 0,
            project_id: 0,
            expires_at: None,
            items: Vec::new(),
            creation_time: ZERO_TIME.to_string(),
            update_time: ZERO_TIME.to_string(),
        },
    };
    Ok(Json(wire))
}

/// Replaces the system allowlist with the body's `items` and `expires_at`
/// (absent: never expires); the other fields are ignored, as Harbor does.
pub async fn put_system_cve_allowlist(
    State(state): State<AppState>,
    principal: Principal,
    HarborJson(body): HarborJson<CveAllowlistReq>,
) -> HarborResult<StatusCode> {
    principal.require_system(SystemResource::Configuration, Action::Update)?;
    let list = CveAllowlist {
        expires_at: body.expires_at,
        items: allowlist_items(body.items, "items")?,
    };
    state.store.system_cve_allowlist().set(&list).await?;
    Ok(StatusCode::OK)
}
