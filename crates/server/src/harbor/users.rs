//! Harbor's users API (the part clients need).

use axum::routing::get;
use axum::{Json, Router};
use berth_domain::model::User;
use serde::Serialize;

use crate::error::HarborResult;
use crate::extract::Principal;
use crate::state::AppState;

/// Harbor's UserResp; empty strings are omitted as go-swagger does.
#[derive(Debug, Serialize)]
pub struct UserResp {
    #[serde(skip_serializing_if = "str::is_empty")]
    email: String,
    #[serde(skip_serializing_if = "str::is_empty")]
    realname: String,
    #[serde(skip_serializing_if = "str::is_empty")]
    comment: String,
    user_id: i64,
    username: String,
    sysadmin_flag: bool,
    admin_role_in_auth: bool,
    creation_time: String,
    update_time: String,
}

impl From<&User> for UserResp {
    fn from(user: &User) -> Self {
        Self {
            email: user.email.clone().unwrap_or_default(),
            realname: user.realname.clone().unwrap_or_default(),
            comment: user.comment.clone().unwrap_or_default(),
            user_id: user.id,
            username: user.username.clone(),
            sysadmin_flag: user.sysadmin,
            admin_role_in_auth: false,
            creation_time: user.created_at.clone(),
            update_time: user.updated_at.clone(),
        }
    }
}

pub(super) fn router() -> Router<AppState> {
    Router::new().route("/users/current", get(get_current_user_info))
}

/// The signed-in caller; 401 for anonymous callers.
pub async fn get_current_user_info(principal: Principal) -> HarborResult<Json<UserResp>> {
    Ok(Json(UserResp::from(principal.require_user()?)))
}
