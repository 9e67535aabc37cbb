//! `GET /systeminfo`: Harbor's GeneralInfo; `GET /systeminfo/volumes`: the
//! blob storage's size and free space; `GET /systeminfo/getcert`: Harbor's
//! root CA download, which Berth, having no CA, answers as Harbor does without one.

use axum::Json;
use axum::extract::State;
use berth_domain::rbac::{Action, SystemResource};
use serde::Serialize;

use crate::error::{ApiError, HarborResult};
use crate::extract::Principal;
use crate::operations::{Routes, Surface};
use crate::state::AppState;

/// Harbor's GeneralInfo. Anonymous callers get the first five fields only.
#[derive(Debug, Serialize)]
pub struct GeneralInfo {
    auth_mode: String,
    primary_auth_mode: bool,
    self_registration: bool,
    banner_message: String,
    oidc_provider_name: String,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    detail: Option<GeneralInfoDetail>,
}

/// The fields only signed-in callers see.
#[derive(Debug, Serialize)]
pub struct GeneralInfoDetail {
    current_time: String,
    registry_url: String,
    external_url: String,
    project_creation_restriction: String,
    has_ca_root: bool,
    harbor_version: &'static str,
    registry_storage_provider_name: &'static str,
    read_only: bool,
    notification_enable: bool,
}

pub(super) fn routes() -> Routes {
    Routes::new(Surface::Harbor)
        .get("/systeminfo", get_system_info)
        .get("/systeminfo/volumes", get_volumes)
        .get("/systeminfo/getcert", get_cert)
}

/// Harbor's SystemInfo.
#[derive(Debug, Serialize)]
pub struct SystemInfo {
    storage: Vec<Storage>,
}

/// Harbor's Storage: bytes.
#[derive(Debug, Serialize)]
pub struct Storage {
    total: u64,
    free: u64,
}

/// The size and free space of the blob storage (system administrators): for
/// a blob directory, its filesystem's (`df`'s figures); for an S3 bucket,
/// which has no size, zeros, as Harbor answers when its storage path is not there.
pub async fn get_volumes(
    State(state): State<AppState>,
    principal: Principal,
) -> HarborResult<Json<SystemInfo>> {
    principal.require_system(SystemResource::SystemVolumes, Action::Read)?;
    let capacity = state.registry.blobs.capacity().await.map_err(|e| {
        ApiError::internal(format!("the blob storage's capacity cannot be read: {e}"))
    })?;
    let (total, free) = capacity.map_or((0, 0), |c| (c.total, c.free));
    Ok(Json(SystemInfo {
        storage: vec![Storage { total, free }],
    }))
}

/// The registry's root CA certificate as a download: Berth has none (it
/// serves no self-signed certificate), so this is Harbor's answer when the
/// certificate file is absent: 404, to anyone.
pub async fn get_cert() -> HarborResult<()> {
    Err(ApiError::not_found("cert not found: this registry has no root CA certificate").into())
}

/// Reports the general settings of the system.
pub async fn get_system_info(
    State(state): State<AppState>,
    principal: Principal,
) -> HarborResult<Json<GeneralInfo>> {
    let config = state.store.configurations().load().await?;
    let detail = principal
        .require_authenticated()
        .ok()
        .map(|()| GeneralInfoDetail {
            current_time: berth_domain::time::now(),
            registry_url: state
                .external_url
                .split_once("://")
                .map_or(state.external_url.as_str(), |(_, rest)| rest)
                .to_string(),
            external_url: state.external_url.clone(),
            project_creation_restriction: config.string("project_creation_restriction").to_string(),
            has_ca_root: false,
            harbor_version: crate::service::health::HARBOR_VERSION,
            registry_storage_provider_name: "filesystem",
            read_only: config.flag("read_only"),
            notification_enable: config.flag("notification_enable"),
        });
    Ok(Json(GeneralInfo {
        auth_mode: config.string("auth_mode").to_string(),
        primary_auth_mode: config.flag("primary_auth_mode"),
        self_registration: config.flag("self_registration"),
        banner_message: config.string("banner_message").to_string(),
        oidc_provider_name: config.string("oidc_name").to_string(),
        detail,
    }))
}
