//! Harbor's OIDC API: testing a provider's endpoint before saving it.

use axum::extract::State;
use axum::http::{Method, StatusCode};
use axum::routing::post;
use berth_domain::rbac::{Action, SystemResource};
use serde::Deserialize;

use crate::error::{ApiError, HarborResult};
use crate::extract::Principal;
use crate::extract::harbor::HarborJson;
use crate::operations::{Routes, Surface};
use crate::state::AppState;

pub(super) fn routes() -> Routes {
    Routes::new(Surface::Harbor).named(
        Method::POST,
        "/system/oidc/ping",
        "pingOIDC",
        post(ping_oidc),
    )
}

/// Harbor's ping body: the endpoint to test.
#[derive(Debug, Deserialize)]
pub struct OidcEndpoint {
    #[serde(default)]
    url: String,
    #[serde(default = "verify_by_default")]
    verify_cert: bool,
}

fn verify_by_default() -> bool {
    true
}

/// Reads the endpoint's discovery document (administrators): 200 when it
/// answers with one, else Harbor's 400 `failed to verify connection` (the
/// cause is logged).
pub async fn ping_oidc(
    State(state): State<AppState>,
    principal: Principal,
    HarborJson(endpoint): HarborJson<OidcEndpoint>,
) -> HarborResult<StatusCode> {
    principal.require_system(SystemResource::Configuration, Action::Update)?;
    if let Err(why) = state.oidc.ping(&endpoint.url, endpoint.verify_cert).await {
        tracing::info!(error = %why, "OIDC ping failed");
        return Err(ApiError::bad_request("failed to verify connection").into());
    }
    Ok(StatusCode::OK)
}
