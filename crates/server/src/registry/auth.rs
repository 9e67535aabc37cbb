//! Who may push and pull: Basic credentials or registry tokens on `/v2/`, and
//! the token service (`GET /service/token`) that docker-style clients ask.

use std::net::IpAddr;
use std::sync::Arc;

use axum::Json;
use axum::extract::{RawQuery, State};
use axum::http::header::AUTHORIZATION;
use axum::http::{Extensions, HeaderMap};
use axum::response::{IntoResponse, Response};
use berth_auth::registry_token::{Access, RegistryClaims};
use berth_domain::model::{Project, ProjectRef, User};
use berth_domain::oci::{is_valid_name, reference::project_of};
use berth_domain::rbac::{Action, Resource};
use serde_json::json;

use super::{RegistryError, oci};
use crate::access::{Actor, project_access, require_found_project};
use crate::error::{ApiError, ErrorKind, OciCode};
use crate::identity::{self, Accepts, Account, BasicCredentials, RobotLogin};
use crate::state::AppState;

/// The most scopes one token request may name: each costs a project look-up,
/// and docker, buildkit and skopeo ask for a handful.
const MAX_SCOPES: usize = 64;

/// The caller of a `/v2/` request.
#[derive(Debug, Clone)]
pub enum Caller {
    /// No credentials.
    Anonymous,
    /// Basic credentials of a user.
    User(Arc<User>),
    /// Basic credentials of a robot account.
    Robot(Arc<RobotLogin>),
    /// A token from `/service/token`.
    Token(Box<RegistryClaims>),
}

impl Caller {
    /// The caller's name in audit logs.
    pub fn audit_name(&self) -> &str {
        match self {
            Self::Anonymous => crate::audit::ANONYMOUS,
            Self::User(user) => &user.username,
            Self::Robot(robot) => &robot.login,
            Self::Token(claims) if claims.sub.is_empty() => crate::audit::ANONYMOUS,
            Self::Token(claims) => &claims.sub,
        }
    }

    /// Reads the caller from the `Authorization` header of a request from
    /// `client`; wrong credentials are a 401.
    pub async fn from_headers(
        state: &AppState,
        client: IpAddr,
        headers: &HeaderMap,
    ) -> Result<Self, RegistryError> {
        let Some(value) = headers.get(AUTHORIZATION) else {
            return Ok(Self::Anonymous);
        };
        let value = value
            .to_str()
            .map_err(|_| unauthorized("invalid authorization header"))?;
        if let Some(creds) = BasicCredentials::parse(value) {
            return match verify(state, client, &creds).await? {
                Account::User(user) => Ok(Self::User(user)),
                Account::Robot(robot) => Ok(Self::Robot(robot)),
            };
        }
        if let Some(token) = identity::bearer_token(value) {
            return match state.registry.tokens.verify(token) {
                Ok(claims) => Ok(Self::Token(Box::new(claims))),
                Err(_) => Err(unauthorized("invalid or expired token")),
            };
        }
        Err(unauthorized("unsupported authorization scheme"))
    }

    /// Whether the caller is authenticated (a user or a token of a user).
    pub fn is_authenticated(&self) -> bool {
        match self {
            Self::Anonymous => false,
            Self::User(_) | Self::Robot(_) => true,
            Self::Token(claims) => !claims.sub.is_empty(),
        }
    }

    /// Whether the caller may list the catalog: system administrators, and
    /// robots with the system `catalog` `read` permission (Harbor's check of
    /// Basic credentials; its token service grants the scope to
    /// administrators only).
    pub fn may_list_catalog(&self) -> bool {
        match self {
            Self::Anonymous => false,
            Self::Robot(robot) => robot.robot.allows_system("catalog", "read"),
            Self::User(user) => user.is_sysadmin(),
            Self::Token(claims) => claims.allows("registry", "catalog", "*"),
        }
    }
}

/// What a `/v2/` operation does to a repository.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RepoAction {
    /// Read content.
    Pull,
    /// Write content.
    Push,
    /// Delete manifests, tags and blob links.
    Delete,
}

impl RepoAction {
    fn token_action(self) -> &'static str {
        match self {
            Self::Pull => "pull",
            Self::Push => "push",
            Self::Delete => "delete",
        }
    }

    fn rbac(self) -> (Resource, Action) {
        match self {
            Self::Pull => (Resource::Repository, Action::Pull),
            Self::Push => (Resource::Repository, Action::Push),
            Self::Delete => (Resource::Repository, Action::Delete),
        }
    }

    /// Harbor's refusal of this action on repository `name`, which docker
    /// and CI logs show as `unauthorized: unauthorized to access repository:
    /// <name>, action: <action>: unauthorized to access repository: <name>,
    /// action: <action>`: Harbor's error wraps a cause of the same text and
    /// prints both, and clients (Harbor's own API tests among them) match
    /// the doubled text.
    pub(super) fn refused(self, name: &str) -> RegistryError {
        let reason = format!(
            "unauthorized to access repository: {name}, action: {}",
            self.token_action()
        );
        unauthorized(&format!("{reason}: {reason}")).with_scope(self.scope(name))
    }

    /// The scope a client should ask for to do this.
    pub(super) fn scope(self, name: &str) -> String {
        let actions = match self {
            Self::Pull => "pull",
            Self::Push => "pull,push",
            Self::Delete => "delete",
        };
        format!("repository:{name}:{actions}")
    }
}

/// A 401 with the registry's challenge.
pub fn unauthorized(message: &str) -> RegistryError {
    RegistryError::from(oci(ErrorKind::Unauthorized, OciCode::Unauthorized, message))
}

/// Checks that `caller` may do `action` on repository `name` (already validated)
/// and returns its project. Missing projects are `NAME_UNKNOWN` for callers who
/// could see them, else the same 401/403 as a forbidden one (as Harbor).
pub async fn authorize(
    state: &AppState,
    caller: &Caller,
    name: &str,
    action: RepoAction,
) -> Result<Project, RegistryError> {
    if let Caller::Token(claims) = caller
        && !claims.allows("repository", name, action.token_action())
    {
        return Err(action.refused(name));
    }
    let project_ref = ProjectRef::Name(project_of(name).unwrap_or(name).to_string());
    let found = state.store.projects().find(&project_ref).await?;
    authorize_found(state, caller, name, action, found).await
}

/// [`authorize`] with the project already looked up: `found` is the project
/// `name` starts with (`None`: no such project).
pub async fn authorize_found(
    state: &AppState,
    caller: &Caller,
    name: &str,
    action: RepoAction,
    found: Option<Project>,
) -> Result<Project, RegistryError> {
    let name_unknown = || {
        RegistryError::from(oci(
            ErrorKind::NotFound,
            OciCode::NameUnknown,
            &format!("repository name not known to registry: {name}"),
        ))
    };
    match caller {
        Caller::Token(claims) => {
            if !claims.allows("repository", name, action.token_action()) {
                return Err(action.refused(name));
            }
            found.ok_or_else(name_unknown)
        }
        Caller::Anonymous | Caller::User(_) | Caller::Robot(_) => {
            let actor = match caller {
                Caller::User(user) => Actor::User(user),
                Caller::Robot(robot) => Actor::Robot(&robot.robot),
                Caller::Anonymous | Caller::Token(_) => Actor::Anonymous,
            };
            let project_ref = ProjectRef::Name(project_of(name).unwrap_or(name).to_string());
            let (resource, rbac_action) = action.rbac();
            match require_found_project(state, actor, &project_ref, found, resource, rbac_action)
                .await
            {
                Ok(access) => Ok(access.project),
                // Harbor answers a caller without the permission, signed in
                // or not, with a 401 naming the repository and the action.
                Err(err) => Err(match err.kind {
                    ErrorKind::Unauthorized | ErrorKind::Forbidden => action.refused(name),
                    ErrorKind::NotFound => name_unknown(),
                    _ => RegistryError::from(err),
                }),
            }
        }
    }
}

/// The account Basic credentials name (users and robot accounts); 401 when none.
async fn verify(
    state: &AppState,
    client: IpAddr,
    creds: &BasicCredentials,
) -> Result<Account, RegistryError> {
    identity::verify_basic(
        state,
        client,
        &creds.login,
        &creds.password,
        Accepts::UsersAndRobots,
    )
    .await?
    // Harbor's answer, whatever was wrong (password, a disabled or expired
    // robot): docker shows it as `unauthorized: authentication required`.
    .ok_or_else(|| unauthorized("authentication required"))
}

/// `GET /service/token`: a registry token granting the requested scopes the
/// caller holds (docker's token protocol; Harbor's `harbor-registry` service).
pub async fn get_token(
    State(state): State<AppState>,
    extensions: Extensions,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
) -> Result<Response, RegistryError> {
    let client = state.signin.client(&extensions, &headers);
    let pairs: Vec<(String, String)> =
        serde_urlencoded::from_str(query.as_deref().unwrap_or(""))
            .map_err(|_| RegistryError::from(ApiError::bad_request("invalid query string")))?;
    let account = match headers.get(AUTHORIZATION) {
        None => None,
        Some(value) => {
            let value = value
                .to_str()
                .map_err(|_| unauthorized("invalid authorization header"))?;
            let creds = BasicCredentials::parse(value)
                .ok_or_else(|| unauthorized("the token service takes Basic credentials"))?;
            Some(verify(&state, client, &creds).await?)
        }
    };
    let actor = account.as_ref().map_or(Actor::Anonymous, Account::actor);
    let scopes: Vec<&str> = pairs
        .iter()
        .filter(|(k, _)| k == "scope")
        .flat_map(|(_, v)| v.split(' '))
        .filter(|s| !s.is_empty())
        .collect();
    if scopes.len() > MAX_SCOPES {
        return Err(ApiError::bad_request(format!(
            "a token request names at most {MAX_SCOPES} scopes"
        ))
        .into());
    }
    let mut access = Vec::new();
    for scope in scopes {
        if let Some(granted) = grant(&state, actor, scope).await? {
            access.push(granted);
        }
    }
    // Harbor's `token_expiration` (minutes).
    let lifetime = state
        .configuration()
        .await?
        .int("token_expiration")
        .clamp(1, 60 * 24 * 365)
        * 60;
    let now = time::OffsetDateTime::now_utc();
    let subject = match &account {
        None => "",
        Some(Account::User(user)) => user.username.as_str(),
        Some(Account::Robot(robot)) => robot.login.as_str(),
    };
    let token = state
        .registry
        .tokens
        .sign(subject, access, now.unix_timestamp(), lifetime);
    let body = json!({
        "token": token,
        "access_token": token,
        "expires_in": lifetime,
        "issued_at": berth_domain::time::format_timestamp(now),
    });
    Ok(Json(body).into_response())
}

/// The part of one requested scope (`repository:<name>:<actions>`) the caller holds.
async fn grant(
    state: &AppState,
    actor: Actor<'_>,
    scope: &str,
) -> Result<Option<Access>, RegistryError> {
    let Some((kind, rest)) = scope.split_once(':') else {
        return Ok(None);
    };
    let Some((name, actions)) = rest.rsplit_once(':') else {
        return Ok(None);
    };
    let requested: Vec<&str> = actions.split(',').filter(|a| !a.is_empty()).collect();
    let granted: Vec<String> = match kind {
        "registry" if name == "catalog" => {
            if actor.is_sysadmin() {
                requested.iter().map(|a| (*a).to_string()).collect()
            } else {
                Vec::new()
            }
        }
        "repository" if is_valid_name(name) => {
            let Some(project_name) = project_of(name) else {
                return Ok(None);
            };
            let project_ref = ProjectRef::Name(project_name.to_string());
            let Some(project) = state.store.projects().find(&project_ref).await? else {
                return Ok(Some(Access {
                    kind: kind.into(),
                    name: name.into(),
                    actions: Vec::new(),
                }));
            };
            let access = project_access(state, actor, project).await?;
            let expanded: Vec<RepoAction> = requested
                .iter()
                .flat_map(|a| match *a {
                    "pull" => vec![RepoAction::Pull],
                    "push" => vec![RepoAction::Push],
                    "delete" => vec![RepoAction::Delete],
                    "*" => vec![RepoAction::Pull, RepoAction::Push, RepoAction::Delete],
                    _ => Vec::new(),
                })
                .collect();
            let mut granted: Vec<String> = Vec::new();
            for action in expanded {
                let (resource, rbac_action) = action.rbac();
                let name = action.token_action().to_string();
                if access.allows(resource, rbac_action) && !granted.contains(&name) {
                    granted.push(name);
                }
            }
            granted
        }
        _ => return Ok(None),
    };
    Ok(Some(Access {
        kind: kind.into(),
        name: name.into(),
        actions: granted,
    }))
}
