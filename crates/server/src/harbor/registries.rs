//! Harbor's upstream registries (`/registries`, `/replication/adapters`):
//! the endpoints proxy-cache projects pull through, for system
//! administrators. A registry is checked (pinged) before it is stored, as in
//! Harbor; its access secret is sealed at rest and shown only as `*****`.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use berth_domain::model::registry::{
    self, HEALTHY, Registry, RegistrySettings, RegistryType, SecretChange,
};
use berth_domain::rbac::{Action, SystemResource};
use serde::{Deserialize, Serialize};

use crate::error::{ApiError, HarborResult};
use crate::extract::Principal;
use crate::extract::harbor::{HarborJson, HarborQuery, LaterJson, paged, path_int};
use crate::operations::{Routes, Surface};
use crate::service::registries;
use crate::state::AppState;
use crate::upstream::{self, tls};

pub(super) fn routes() -> Routes {
    Routes::new(Surface::Harbor)
        .get("/registries", list_registries)
        .post("/registries", create_registry)
        .post("/registries/ping", ping_registry)
        .get("/registries/{id}", get_registry)
        .get("/registries/{id}/info", get_registry_info)
        .put("/registries/{id}", update_registry)
        .delete("/registries/{id}", delete_registry)
        .get("/replication/adapters", list_registry_provider_types)
}

/// What Harbor shows instead of a stored secret.
const HIDDEN_SECRET: &str = "*****";

/// Harbor's `RegistryCredential` as responses carry it.
#[derive(Debug, Serialize)]
pub struct CredentialWire {
    #[serde(rename = "type", skip_serializing_if = "String::is_empty")]
    kind: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    access_key: String,
    #[serde(skip_serializing_if = "str::is_empty")]
    access_secret: &'static str,
}

/// Harbor's `Registry`, with go-swagger's omission rules.
#[derive(Debug, Serialize)]
pub struct RegistryWire {
    id: i64,
    #[serde(skip_serializing_if = "String::is_empty")]
    url: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    credential: Option<CredentialWire>,
    #[serde(rename = "type", skip_serializing_if = "String::is_empty")]
    kind: String,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    insecure: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    ca_certificate: Option<String>,
    #[serde(skip_serializing_if = "String::is_empty")]
    description: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    status: String,
    creation_time: String,
    update_time: String,
}

/// The wire form of `registry`; `with_credential: false` strips the
/// credential (a project summary shows a registry without it).
pub(crate) fn registry_wire(registry: &Registry, with_credential: bool) -> RegistryWire {
    RegistryWire {
        id: registry.id,
        url: registry.settings.url.clone(),
        name: registry.settings.name.clone(),
        credential: with_credential.then(|| CredentialWire {
            kind: registry.settings.credential_type.clone(),
            access_key: registry.settings.access_key.clone(),
            access_secret: if registry.has_secret {
                HIDDEN_SECRET
            } else {
                ""
            },
        }),
        kind: registry.settings.kind.clone(),
        insecure: registry.settings.insecure,
        ca_certificate: (!registry.settings.ca_certificate.is_empty())
            .then(|| registry.settings.ca_certificate.clone()),
        description: registry.settings.description.clone(),
        status: registry.settings.status.clone(),
        creation_time: registry.created_at.clone(),
        update_time: registry.updated_at.clone(),
    }
}

/// Harbor's `RegistryCredential` as a request carries it.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct CredentialReq {
    #[serde(rename = "type")]
    kind: Option<String>,
    access_key: Option<String>,
    access_secret: Option<String>,
}

/// Harbor's `Registry` as createRegistry's body (`id`, `status` and the
/// times are ignored).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct RegistryReq {
    name: Option<String>,
    url: Option<String>,
    #[serde(rename = "type")]
    kind: Option<String>,
    description: Option<String>,
    insecure: Option<bool>,
    ca_certificate: Option<String>,
    credential: Option<CredentialReq>,
}

/// Harbor's `RegistryUpdate`: every field absent is left as it is.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct RegistryUpdate {
    name: Option<String>,
    description: Option<String>,
    url: Option<String>,
    credential_type: Option<String>,
    access_key: Option<String>,
    access_secret: Option<String>,
    insecure: Option<bool>,
    ca_certificate: Option<String>,
}

/// Harbor's `RegistryPing`: a stored registry (`id`) or the settings of one
/// about to be created.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct RegistryPing {
    id: Option<i64>,
    #[serde(rename = "type")]
    kind: Option<String>,
    url: Option<String>,
    credential_type: Option<String>,
    access_key: Option<String>,
    access_secret: Option<String>,
    insecure: Option<bool>,
    ca_certificate: Option<String>,
}

/// Harbor's 400 for a `ca_certificate` that is not PEM certificates.
fn checked_ca(pem: String) -> Result<String, ApiError> {
    tls::validate_ca_certificate(&pem).map_err(ApiError::bad_request)?;
    Ok(pem)
}

/// Applies the endpoint fields a request gives (URL, certificate check, CA
/// certificates) to `settings`, checked.
fn set_endpoint(
    settings: &mut RegistrySettings,
    url: Option<String>,
    insecure: Option<bool>,
    ca_certificate: Option<String>,
) -> Result<(), ApiError> {
    if let Some(url) = url {
        settings.url = registry::normalize_url(&url)?;
    }
    if let Some(insecure) = insecure {
        settings.insecure = insecure;
    }
    if let Some(ca) = ca_certificate {
        settings.ca_certificate = checked_ca(ca)?;
    }
    Ok(())
}

/// Pings a registry of `kind` with `settings` and `secret`: Harbor's 400
/// `the registry is unhealthy` (with why) when it is unreachable or refuses
/// the credential. A secret without an access key is no credential (it is
/// not stored either).
async fn check_health(
    state: &AppState,
    kind: RegistryType,
    settings: &RegistrySettings,
    secret: &str,
) -> Result<(), ApiError> {
    let target = upstream::Target {
        base: kind.api_base(&settings.url),
        insecure: settings.insecure,
        ca_certificate: &settings.ca_certificate,
        credential: (!settings.access_key.is_empty())
            .then_some((settings.access_key.as_str(), secret)),
        deadlines: state.registry.proxy.settings().deadlines,
    };
    upstream::ping(&target).await.map_err(|why| {
        tracing::info!(registry = %settings.url, %why, "registry ping failed");
        ApiError::bad_request(format!("the registry is unhealthy: {why}"))
    })
}

/// Registry `{id}` (404 when there is none).
async fn registry_for(state: &AppState, id: &str) -> Result<Registry, ApiError> {
    let id = path_int("id", id)?;
    state
        .store
        .registries()
        .get(id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("registry {id} not found")))
}

/// `POST /registries`: checks the registry (name, URL, type, CA, then a
/// ping with the credential) and stores it; 201 with its `Location`.
pub async fn create_registry(
    State(state): State<AppState>,
    principal: Principal,
    query: HarborQuery,
    HarborJson(req): HarborJson<RegistryReq>,
) -> HarborResult<Response> {
    principal.require_system(SystemResource::Registry, Action::Create)?;
    let ca_certificate = checked_ca(req.ca_certificate.unwrap_or_default())?;
    let name = req.name.unwrap_or_default();
    registry::validate_name(&name)?;
    let url = registry::normalize_url(&req.url.unwrap_or_default())?;
    let kind = registry::parse_type(&req.kind.unwrap_or_default())?;
    let credential = req.credential.unwrap_or_default();
    let access_key = credential.access_key.unwrap_or_default();
    let secret = credential.access_secret.unwrap_or_default();
    let mut settings = RegistrySettings {
        name,
        url,
        kind: kind.name().to_string(),
        description: req.description.unwrap_or_default(),
        insecure: req.insecure.unwrap_or(false),
        ca_certificate,
        credential_type: registry::credential_type(
            &credential.kind.unwrap_or_default(),
            &access_key,
        )?,
        access_key,
        status: String::new(),
    };
    check_health(&state, kind, &settings, &secret).await?;
    settings.status = HEALTHY.to_string();
    let created = registries::create(&state, &principal, &settings, &secret).await?;
    let location = format!("{}/{}", query.path.trim_end_matches('/'), created.id);
    Ok((StatusCode::CREATED, [(header::LOCATION, location)]).into_response())
}

/// `GET /registries?q&sort&page&page_size&name`: a page of registries, by id.
pub async fn list_registries(
    State(state): State<AppState>,
    principal: Principal,
    query: HarborQuery,
) -> HarborResult<Response> {
    principal.require_system(SystemResource::Registry, Action::List)?;
    let paging = query.paging()?;
    let name = query.string("name");
    let (total, registries) = state
        .store
        .registries()
        .list(&query.query()?, name.as_deref(), &query.sort()?, paging)
        .await?;
    let wire: Vec<RegistryWire> = registries.iter().map(|r| registry_wire(r, true)).collect();
    Ok(paged(&wire, total, query.link(paging, total)))
}

/// `GET /registries/{id}`.
pub async fn get_registry(
    State(state): State<AppState>,
    principal: Principal,
    Path(id): Path<String>,
) -> HarborResult<Json<RegistryWire>> {
    principal.require_system(SystemResource::Registry, Action::Read)?;
    let registry = registry_for(&state, &id).await?;
    Ok(Json(registry_wire(&registry, true)))
}

/// `PUT /registries/{id}`: the given fields replace the stored ones, then
/// the registry is checked again. A new URL without a new secret drops the
/// stored secret (as Harbor), so a secret is never sent to an endpoint it
/// was not given for.
pub async fn update_registry(
    State(state): State<AppState>,
    principal: Principal,
    Path(id): Path<String>,
    body: LaterJson<RegistryUpdate>,
) -> HarborResult<StatusCode> {
    principal.require_system(SystemResource::Registry, Action::Update)?;
    let registry = registry_for(&state, &id).await?;
    let req = body.parse()?;
    let mut settings = registry.settings.clone();
    if let Some(name) = req.name {
        settings.name = name;
    }
    if let Some(description) = req.description {
        settings.description = description;
    }
    set_endpoint(&mut settings, req.url, req.insecure, req.ca_certificate)?;
    if let Some(access_key) = req.access_key {
        settings.access_key = access_key;
    }
    let requested_type = req
        .credential_type
        .unwrap_or_else(|| settings.credential_type.clone());
    settings.credential_type = registry::credential_type(&requested_type, &settings.access_key)?;
    registry::validate_name(&settings.name)?;
    let change = match req.access_secret {
        Some(secret) => SecretChange::Set(secret),
        None if settings.url != registry.settings.url => SecretChange::Clear,
        None => SecretChange::Keep,
    };
    let secret = match &change {
        SecretChange::Set(secret) => secret.clone(),
        SecretChange::Clear => String::new(),
        SecretChange::Keep => state
            .store
            .registries()
            .access_secret(registry.id)
            .await?
            .unwrap_or_default(),
    };
    let kind = registry::parse_type(&settings.kind)?;
    check_health(&state, kind, &settings, &secret).await?;
    settings.status = HEALTHY.to_string();
    if !registries::update(&state, &principal, registry.id, &settings, &change).await? {
        return Err(ApiError::not_found(format!("registry {} not found", registry.id)).into());
    }
    Ok(StatusCode::OK)
}

/// `DELETE /registries/{id}`: 412 while a proxy-cache project uses it.
pub async fn delete_registry(
    State(state): State<AppState>,
    principal: Principal,
    Path(id): Path<String>,
) -> HarborResult<StatusCode> {
    principal.require_system(SystemResource::Registry, Action::Delete)?;
    let registry = registry_for(&state, &id).await?;
    if !registries::delete(&state, &principal, registry.id).await? {
        return Err(ApiError::not_found(format!("registry {} not found", registry.id)).into());
    }
    Ok(StatusCode::OK)
}

/// `POST /registries/ping`: 200 when the registry answers and accepts its
/// credential, else 400. For a stored registry (`id`) its own URL, TLS
/// settings and secret are used (a URL given beside the id is ignored, so
/// the stored secret cannot be sent elsewhere); the credential fields may
/// still be given to try other ones.
pub async fn ping_registry(
    State(state): State<AppState>,
    principal: Principal,
    HarborJson(req): HarborJson<RegistryPing>,
) -> HarborResult<StatusCode> {
    principal.require_system(SystemResource::Registry, Action::Read)?;
    let (mut settings, mut secret) = match req.id {
        Some(id) => {
            let registry = state
                .store
                .registries()
                .get(id)
                .await?
                .ok_or_else(|| ApiError::not_found(format!("registry {id} not found")))?;
            let secret = state
                .store
                .registries()
                .access_secret(id)
                .await?
                .unwrap_or_default();
            (registry.settings.clone(), secret)
        }
        None => (RegistrySettings::default(), String::new()),
    };
    if let Some(kind) = req.kind {
        settings.kind = kind;
    }
    if req.id.is_none() {
        set_endpoint(&mut settings, req.url, req.insecure, req.ca_certificate)?;
    }
    if let Some(access_key) = req.access_key {
        settings.access_key = access_key;
    }
    if let Some(access_secret) = req.access_secret {
        secret = access_secret;
    }
    if settings.kind.is_empty() || settings.url.is_empty() {
        return Err(ApiError::bad_request("type or url cannot be empty").into());
    }
    let kind = registry::parse_type(&settings.kind)?;
    let requested_type = req
        .credential_type
        .unwrap_or_else(|| settings.credential_type.clone());
    registry::credential_type(&requested_type, &settings.access_key)?;
    check_health(&state, kind, &settings, &secret).await?;
    Ok(StatusCode::OK)
}

/// `GET /registries/{id}/info`: what replication can do with the registry
/// (the filters and triggers of a policy pulling from it).
pub async fn get_registry_info(
    State(state): State<AppState>,
    principal: Principal,
    Path(id): Path<String>,
) -> HarborResult<Json<serde_json::Value>> {
    principal.require_system(SystemResource::Registry, Action::Read)?;
    let registry = registry_for(&state, &id).await?;
    let kind = registry::parse_type(&registry.settings.kind)?;
    let mut filters = vec![
        serde_json::json!({"type": "name", "style": "input"}),
        serde_json::json!({"type": "tag", "style": "input"}),
    ];
    if kind == RegistryType::Harbor {
        filters.push(serde_json::json!({"type": "resource", "style": "radio", "values": ["image", "artifact"]}));
    }
    Ok(Json(serde_json::json!({
        "type": kind.name(),
        "description": registry.settings.description,
        "supported_resource_filters": filters,
        "supported_triggers": ["manual", "scheduled"],
    })))
}

/// `GET /replication/adapters`: the registry types Berth can use.
pub async fn list_registry_provider_types(
    principal: Principal,
) -> HarborResult<Json<Vec<&'static str>>> {
    principal.require_system(SystemResource::ReplicationAdapter, Action::List)?;
    Ok(Json(RegistryType::ALL.map(RegistryType::name).to_vec()))
}
