//! Registry endpoints' writes (the upstreams of proxy-cache projects, and
//! later of replication): administrators only; each records its event in its
//! transaction and delivers it. The settings are judged (and the endpoint
//! tried) by Harbor's `/registries`, the one surface that manages them.

use berth_domain::model::registry::{Registry, RegistrySettings, SecretChange};
use berth_domain::rbac::{Action, SystemResource};

use crate::error::ApiError;
use crate::extract::Principal;
use crate::state::AppState;

/// Creates a registry with `secret`; records `registry.created`.
pub async fn create(
    state: &AppState,
    principal: &Principal,
    settings: &RegistrySettings,
    secret: &str,
) -> Result<Registry, ApiError> {
    principal.require_system(SystemResource::Registry, Action::Create)?;
    let by = principal.audit_name();
    let created = state
        .store
        .registries()
        .create(settings, secret, by)
        .await?;
    state.deliver_events();
    Ok(created)
}

/// Stores registry `id`'s settings and secret change; `false` when it is
/// gone. Records `registry.updated`.
pub async fn update(
    state: &AppState,
    principal: &Principal,
    id: i64,
    settings: &RegistrySettings,
    secret: &SecretChange,
) -> Result<bool, ApiError> {
    principal.require_system(SystemResource::Registry, Action::Update)?;
    let by = principal.audit_name();
    let done = state
        .store
        .registries()
        .update(id, settings, secret, by)
        .await?;
    state.deliver_events();
    Ok(done)
}

/// Deletes registry `id`; `false` when it is gone, 412 while a project uses
/// it. Records `registry.deleted`.
pub async fn delete(state: &AppState, principal: &Principal, id: i64) -> Result<bool, ApiError> {
    principal.require_system(SystemResource::Registry, Action::Delete)?;
    let by = principal.audit_name();
    let done = state.store.registries().delete(id, by).await?;
    state.deliver_events();
    Ok(done)
}
