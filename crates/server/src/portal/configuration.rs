//! System configuration for system administrators: the authentication mode,
//! self-registration, who may create projects, and the LDAP settings, saved
//! through updateConfigurations' rules; the LDAP connection test is pingLdap.

use axum::Router;
use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use berth_domain::model::Configuration;
use serde::Deserialize;
use serde_json::{Map, Value};

use super::html::{self, esc};
use super::{PortalError, PortalForm, PortalUser, check_form_csrf, see_other};
use crate::service::configuration::{self, auth_mode_editable};
use crate::service::ldap_ping::{self, LdapConf};
use crate::session::SessionUser;
use crate::state::AppState;

pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route(
            "/harbor/configuration",
            get(show_configuration).post(save_configuration),
        )
        .route("/harbor/configuration/ldap-ping", post(test_ldap))
}

/// The settings the page shows and edits (never the search password).
#[derive(Debug, Default, Deserialize)]
pub(super) struct ConfigForm {
    #[serde(default)]
    csrf_token: String,
    #[serde(default)]
    auth_mode: Option<String>,
    #[serde(default)]
    self_registration: Option<String>,
    #[serde(default)]
    project_creation_restriction: String,
    #[serde(default)]
    ldap_url: String,
    #[serde(default)]
    ldap_search_dn: String,
    #[serde(default)]
    ldap_search_password: String,
    #[serde(default)]
    ldap_base_dn: String,
    #[serde(default)]
    ldap_filter: String,
    #[serde(default)]
    ldap_uid: String,
    #[serde(default)]
    ldap_scope: String,
    #[serde(default)]
    ldap_verify_cert: Option<String>,
}

impl ConfigForm {
    /// The stored settings, as the form shows them.
    fn stored(config: &Configuration) -> Self {
        let checked = |flag: bool| flag.then(|| "true".to_string());
        Self {
            csrf_token: String::new(),
            auth_mode: Some(config.string("auth_mode").to_string()),
            self_registration: checked(config.flag("self_registration")),
            project_creation_restriction: config.string("project_creation_restriction").into(),
            ldap_url: config.string("ldap_url").into(),
            ldap_search_dn: config.string("ldap_search_dn").into(),
            ldap_search_password: String::new(),
            ldap_base_dn: config.string("ldap_base_dn").into(),
            ldap_filter: config.string("ldap_filter").into(),
            ldap_uid: config.string("ldap_uid").into(),
            ldap_scope: config.int("ldap_scope").to_string(),
            ldap_verify_cert: checked(config.flag("ldap_verify_cert")),
        }
    }

    /// The scope as a number; anything else is left for validation to refuse.
    fn scope(&self) -> Value {
        match self.ldap_scope.trim().parse::<i64>() {
            Ok(scope) => Value::from(scope),
            Err(_) => Value::String(self.ldap_scope.clone()),
        }
    }

    /// The items updateConfigurations receives: an empty search password keeps
    /// the stored one, an absent auth mode (a locked select) is not sent.
    fn items(&self) -> Map<String, Value> {
        let mut items = Map::new();
        if let Some(mode) = &self.auth_mode {
            items.insert("auth_mode".into(), Value::String(mode.clone()));
        }
        items.insert(
            "self_registration".into(),
            Value::Bool(self.self_registration.is_some()),
        );
        items.insert(
            "project_creation_restriction".into(),
            Value::String(self.project_creation_restriction.clone()),
        );
        for (name, value) in [
            ("ldap_url", &self.ldap_url),
            ("ldap_search_dn", &self.ldap_search_dn),
            ("ldap_base_dn", &self.ldap_base_dn),
            ("ldap_filter", &self.ldap_filter),
            ("ldap_uid", &self.ldap_uid),
        ] {
            items.insert(name.into(), Value::String(value.trim().to_string()));
        }
        if !self.ldap_search_password.is_empty() {
            items.insert(
                "ldap_search_password".into(),
                Value::String(self.ldap_search_password.clone()),
            );
        }
        items.insert("ldap_scope".into(), self.scope());
        items.insert(
            "ldap_verify_cert".into(),
            Value::Bool(self.ldap_verify_cert.is_some()),
        );
        items
    }

    /// The settings pingLdap tries (an empty password: the stored one).
    fn ldap_conf(&self) -> LdapConf {
        LdapConf {
            ldap_url: Some(self.ldap_url.trim().to_string()),
            ldap_search_dn: Some(self.ldap_search_dn.trim().to_string()),
            ldap_search_password: Some(self.ldap_search_password.clone()),
            ldap_base_dn: Some(self.ldap_base_dn.trim().to_string()),
            ldap_filter: Some(self.ldap_filter.trim().to_string()),
            ldap_uid: Some(self.ldap_uid.trim().to_string()),
            ldap_scope: self.scope().as_i64(),
            ldap_connection_timeout: None,
            ldap_verify_cert: Some(self.ldap_verify_cert.is_some()),
        }
    }
}

/// What was just done.
#[derive(Debug, Default, Deserialize)]
pub(super) struct ShowQuery {
    #[serde(default)]
    saved: Option<String>,
}

/// `GET /harbor/configuration`.
async fn show_configuration(
    State(state): State<AppState>,
    portal: PortalUser,
    Query(query): Query<ShowQuery>,
) -> Result<Response, PortalError> {
    portal.require_admin()?;
    let session = &portal.0;
    let failed = |err| PortalError::api(err, Some(session));
    let config = state
        .store
        .configurations()
        .load()
        .await
        .map_err(|e| failed(e.into()))?;
    let editable = auth_mode_editable(&state).await.map_err(failed)?;
    let notice = if query.saved.is_some() {
        html::notice("ok", "The configuration was saved.")
    } else {
        String::new()
    };
    Ok(render(session, &ConfigForm::stored(&config), editable, &notice).into_response())
}

/// `POST /harbor/configuration`: updateConfigurations' rules.
async fn save_configuration(
    State(state): State<AppState>,
    portal: PortalUser,
    PortalForm(form): PortalForm<ConfigForm>,
) -> Result<Response, PortalError> {
    portal.require_admin()?;
    let session = &portal.0;
    check_form_csrf(session, &form.csrf_token)?;
    configuration::update(&state, &portal.principal(), &form.items())
        .await
        .map_err(|err| PortalError::api(err, Some(session)))?;
    Ok(see_other("/harbor/configuration?saved=1"))
}

/// `POST /harbor/configuration/ldap-ping`: pingLdap with the form's settings,
/// which come back unsaved with the result.
async fn test_ldap(
    State(state): State<AppState>,
    portal: PortalUser,
    PortalForm(mut form): PortalForm<ConfigForm>,
) -> Result<Response, PortalError> {
    portal.require_admin()?;
    let session = &portal.0;
    check_form_csrf(session, &form.csrf_token)?;
    let failed = |err| PortalError::api(err, Some(session));
    if form.auth_mode.is_none() {
        let config = state
            .store
            .configurations()
            .load()
            .await
            .map_err(|e| failed(e.into()))?;
        form.auth_mode = Some(config.string("auth_mode").to_string());
    }
    let notice = match ldap_ping::ping(&state, &portal.principal(), form.ldap_conf()).await {
        Ok(Ok(())) => html::notice("ok", "Connection to the LDAP server succeeded."),
        Ok(Err(message)) => html::notice(
            "error",
            &format!("Connection to the LDAP server failed: {message}"),
        ),
        Err(err) if err.status().is_client_error() => html::notice(
            "error",
            &format!("The LDAP settings are not valid: {}", err.message),
        ),
        Err(err) => return Err(failed(err)),
    };
    let editable = auth_mode_editable(&state).await.map_err(failed)?;
    Ok(render(session, &form, editable, &notice).into_response())
}

/// The configuration page showing `form`'s values.
fn render(session: &SessionUser, form: &ConfigForm, editable: bool, notice: &str) -> html::Page {
    let auth_mode = form.auth_mode.as_deref().unwrap_or("db_auth");
    let option = |value: &str, label: &str, current: &str| {
        format!(
            r#"<option value="{}"{}>{}</option>"#,
            esc(value),
            if value == current { " selected" } else { "" },
            esc(label)
        )
    };
    let mut modes = [("db_auth", "Database"), ("ldap_auth", "LDAP")]
        .iter()
        .map(|(v, l)| option(v, l, auth_mode))
        .collect::<String>();
    if !["db_auth", "ldap_auth"].contains(&auth_mode) {
        modes.push_str(&option(auth_mode, auth_mode, auth_mode));
    }
    let (mode_lock, mode_note) = if editable {
        ("", "")
    } else {
        (
            " disabled",
            r#"<p class="muted">The authentication mode cannot change once users other than admin exist.</p>"#,
        )
    };
    let restriction = [
        ("everyone", "Everyone"),
        ("adminonly", "Administrators only"),
    ]
    .iter()
    .map(|(v, l)| option(v, l, &form.project_creation_restriction))
    .collect::<String>();
    let scope = [("0", "Base"), ("1", "One level"), ("2", "Subtree")]
        .iter()
        .map(|(v, l)| option(v, l, form.ldap_scope.trim()))
        .collect::<String>();
    let checked = |value: &Option<String>| if value.is_some() { " checked" } else { "" };
    let text = |id: &str, label: &str, value: &str| {
        format!(
            r#"<label for="{id}">{label}</label><input type="text" name="{id}" id="{id}" value="{}">"#,
            esc(value)
        )
    };
    let main = format!(
        r#"<h1>Configuration</h1>{notice}
<form class="settings" method="post" action="/harbor/configuration" id="configuration">{csrf}
<h2>Authentication</h2>
<label for="auth_mode">Authentication mode</label><select name="auth_mode" id="auth_mode"{mode_lock}>{modes}</select>{mode_note}
<label class="check"><input type="checkbox" name="self_registration" id="self_registration" value="true"{self_reg}> Allow self-registration</label>
<label for="project_creation_restriction">Who may create projects</label><select name="project_creation_restriction" id="project_creation_restriction">{restriction}</select>
<h2>LDAP</h2>
{url}{search_dn}
<label for="ldap_search_password">Search password</label><input type="password" name="ldap_search_password" id="ldap_search_password" value="" autocomplete="new-password" placeholder="Unchanged when empty">
{base_dn}{filter}{uid}
<label for="ldap_scope">Search scope</label><select name="ldap_scope" id="ldap_scope">{scope}</select>
<label class="check"><input type="checkbox" name="ldap_verify_cert" id="ldap_verify_cert" value="true"{verify}> Verify the server's certificate</label>
<div class="actions"><button type="submit" id="save_configuration">Save</button>
<button class="secondary" type="submit" id="ping_ldap" formaction="/harbor/configuration/ldap-ping">Test LDAP connection</button></div>
</form>"#,
        csrf = html::csrf_field(session),
        self_reg = checked(&form.self_registration),
        url = text("ldap_url", "LDAP URL", &form.ldap_url),
        search_dn = text("ldap_search_dn", "Search DN", &form.ldap_search_dn),
        base_dn = text("ldap_base_dn", "Base DN", &form.ldap_base_dn),
        filter = text("ldap_filter", "Filter", &form.ldap_filter),
        uid = text("ldap_uid", "UID attribute", &form.ldap_uid),
        verify = checked(&form.ldap_verify_cert),
    );
    html::page("Configuration", Some(session), &main)
}
