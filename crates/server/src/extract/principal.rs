//! The caller of a Harbor (`/api/v2.0`) operation.

use std::sync::Arc;

use axum::extract::FromRequestParts;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use berth_domain::model::User;
use berth_domain::rbac::{Action, SystemResource};

use crate::access::Actor;
use crate::error::{ApiError, HarborError};
use crate::identity::{self, Accepts, Account, BasicCredentials, RobotLogin};
use crate::session;
use crate::state::AppState;

/// Who is calling. Wrong credentials are refused with 401 instead of being
/// treated as anonymous (Harbor's behaviour; see docs/compatibility.md).
#[derive(Debug, Clone)]
pub enum Principal {
    /// No credentials.
    Anonymous,
    /// A signed-in user.
    User(Arc<User>),
    /// A robot account (Basic credentials).
    Robot(Arc<RobotLogin>),
}

impl Principal {
    /// The caller's name in audit logs.
    pub fn audit_name(&self) -> &str {
        match self {
            Self::Anonymous => crate::audit::ANONYMOUS,
            Self::User(user) => &user.username,
            Self::Robot(robot) => &robot.login,
        }
    }

    /// The caller as the role model sees it.
    pub fn actor(&self) -> Actor<'_> {
        match self {
            Self::Anonymous => Actor::Anonymous,
            Self::User(user) => Actor::User(user),
            Self::Robot(robot) => Actor::Robot(&robot.robot),
        }
    }

    /// The signed-in user, if any (robots are not users).
    pub fn user(&self) -> Option<&User> {
        match self {
            Self::User(user) => Some(user),
            Self::Anonymous | Self::Robot(_) => None,
        }
    }

    /// Passes any authenticated caller, user or robot; anonymous callers get 401.
    pub fn require_authenticated(&self) -> Result<(), ApiError> {
        match self {
            Self::Anonymous => Err(ApiError::unauthorized()),
            Self::User(_) | Self::Robot(_) => Ok(()),
        }
    }

    /// The signed-in user; 401 for anonymous callers, 403 for robot accounts.
    pub fn require_user(&self) -> Result<&User, ApiError> {
        match self {
            Self::User(user) => Ok(user),
            Self::Anonymous => Err(ApiError::unauthorized()),
            Self::Robot(robot) => Err(ApiError::forbidden(robot.login.clone())),
        }
    }

    /// Whether the caller is a system administrator.
    pub fn is_sysadmin(&self) -> bool {
        self.user().is_some_and(User::is_sysadmin)
    }

    /// Whether the caller may do `action` on the system resource `resource`:
    /// system administrators everything, a robot what its system permissions
    /// grant (Harbor's system RBAC), nobody else anything.
    pub fn can(&self, resource: SystemResource, action: Action) -> bool {
        match self {
            Self::User(user) => user.is_sysadmin(),
            Self::Robot(robot) => robot.robot.allows_system(resource.name(), action.name()),
            Self::Anonymous => false,
        }
    }

    /// Passes callers who [`can`](Self::can) do `action` on `resource`;
    /// anonymous callers get 401, others 403 with their name as the message
    /// (as Harbor's `RequireSystemAccess` answers).
    pub fn require_system(&self, resource: SystemResource, action: Action) -> Result<(), ApiError> {
        match self {
            _ if self.can(resource, action) => Ok(()),
            Self::Anonymous => Err(ApiError::unauthorized()),
            Self::User(user) => Err(ApiError::forbidden(user.username.clone())),
            Self::Robot(robot) => Err(ApiError::forbidden(robot.login.clone())),
        }
    }

    /// [`require_system`](Self::require_system) for the first of `actions`
    /// the caller may do (a service both of Harbor's create and update
    /// operations reach: each operation checks its own action first).
    pub fn require_system_any(
        &self,
        resource: SystemResource,
        actions: &[Action],
    ) -> Result<(), ApiError> {
        match actions.iter().find(|&&action| self.can(resource, action)) {
            Some(_) => Ok(()),
            None => self.require_system(resource, actions.first().copied().unwrap_or(Action::Read)),
        }
    }

    /// Passes system administrators; anonymous callers get 401, others 403
    /// with their username as the message (as Harbor's system RBAC answers).
    pub fn require_sysadmin(&self) -> Result<&User, ApiError> {
        let user = self.require_user()?;
        if user.is_sysadmin() {
            Ok(user)
        } else {
            Err(ApiError::forbidden(user.username.clone()))
        }
    }
}

impl FromRequestParts<AppState> for Principal {
    type Rejection = HarborError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        if let Some(principal) = parts.extensions.get::<Principal>() {
            return Ok(principal.clone());
        }
        let Some(value) = parts.headers.get(AUTHORIZATION) else {
            return from_session(parts, state).await;
        };
        let value = value.to_str().map_err(|_| ApiError::unauthorized())?;
        let account = if let Some(creds) = BasicCredentials::parse(value) {
            let client = state.signin.client(&parts.extensions, &parts.headers);
            let accepts = Accepts::UsersAndRobots;
            identity::verify_basic(state, client, &creds.login, &creds.password, accepts).await?
        } else if let Some(token) = identity::bearer_token(value) {
            match identity::verify_user_token(state, token).await? {
                Some(user) => Some(Account::User(user)),
                // An OpenID provider's ID token, under `oidc_auth`.
                None => identity::verify_id_token(state, token)
                    .await?
                    .map(Account::User),
            }
        } else {
            None
        };
        let principal = match account.ok_or_else(ApiError::unauthorized)? {
            Account::User(user) => Self::User(user),
            Account::Robot(robot) => Self::Robot(robot),
        };
        parts.extensions.insert(principal.clone());
        Ok(principal)
    }
}

/// The caller a portal session cookie names (anonymous without one). A
/// state-changing request authenticated only by the cookie must carry the
/// session's CSRF token in `X-Harbor-CSRF-Token`, else 403.
async fn from_session(parts: &mut Parts, state: &AppState) -> Result<Principal, HarborError> {
    let Some(session) = session::from_headers(state, &parts.headers).await? else {
        return Ok(Principal::Anonymous);
    };
    session::check_csrf_header(&session, &parts.method, &parts.headers)?;
    let principal = Principal::User(session.user);
    parts.extensions.insert(principal.clone());
    Ok(principal)
}
