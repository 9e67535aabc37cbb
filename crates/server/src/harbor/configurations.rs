//! System configuration: getConfigurations, updateConfigurations, getInternalconfig
//! (administrators only; passwords are accepted and never returned).

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use berth_domain::model::ConfigValue;
use berth_domain::model::configuration::{ConfigType, KEYS};
use berth_domain::rbac::{Action, SystemResource};
use serde_json::{Map, Value, json};

use crate::error::{ApiError, HarborResult};
use crate::extract::Principal;
use crate::extract::harbor::HarborJson;
use crate::operations::{Routes, Surface};
use crate::service::configuration;
use crate::state::AppState;

pub(super) fn routes() -> Routes {
    Routes::new(Surface::Harbor)
        .get("/configurations", get_configurations)
        .put("/configurations", update_configurations)
        .get("/internalconfig", get_internalconfig)
}

fn wire_value(value: &ConfigValue) -> Value {
    match value {
        ConfigValue::String(s) => Value::String(s.clone()),
        ConfigValue::Bool(b) => Value::Bool(*b),
        ConfigValue::Int(i) => Value::from(*i),
    }
}

/// `{"key": {"value": ..., "editable": ...}}` for every non-password item.
/// Object items (`scan_all_policy`) are the object itself on `/configurations`,
/// as Harbor's ConfigurationsResponse types it, and `{"value": "<its JSON
/// text>", "editable": ...}` on `/internalconfig`, as Harbor gives map items there.
async fn response_map(state: &AppState, internal: bool) -> Result<Map<String, Value>, ApiError> {
    let config = state.store.configurations().load().await?;
    let auth_mode_editable = configuration::auth_mode_editable(state).await?;
    let mut map = Map::new();
    for key in KEYS.iter().filter(|k| k.kind != ConfigType::Password) {
        let value = config
            .get(key.name)
            .cloned()
            .unwrap_or_else(|| key.default_value());
        let editable = key.name != "auth_mode" || auth_mode_editable;
        let item = match (key.kind, &value) {
            (ConfigType::Object, ConfigValue::String(text)) if !internal => {
                serde_json::from_str(text).unwrap_or_else(|_| json!({}))
            }
            _ => json!({"value": wire_value(&value), "editable": editable}),
        };
        map.insert(key.name.to_string(), item);
    }
    Ok(map)
}

/// The configuration in effect (administrators).
pub async fn get_configurations(
    State(state): State<AppState>,
    principal: Principal,
) -> HarborResult<Json<Map<String, Value>>> {
    principal.require_system(SystemResource::Configuration, Action::Read)?;
    Ok(Json(response_map(&state, false).await?))
}

/// The same map for administrators (the user's spec opens it to them; Harbor
/// reserves it for internal services). Passwords are not included.
pub async fn get_internalconfig(
    State(state): State<AppState>,
    principal: Principal,
) -> HarborResult<Json<Map<String, Value>>> {
    principal.require_sysadmin()?;
    Ok(Json(response_map(&state, true).await?))
}

/// Updates the given items (any subset), all or nothing.
pub async fn update_configurations(
    State(state): State<AppState>,
    principal: Principal,
    HarborJson(body): HarborJson<Map<String, Value>>,
) -> HarborResult<StatusCode> {
    configuration::update(&state, &principal, &body).await?;
    Ok(StatusCode::OK)
}
