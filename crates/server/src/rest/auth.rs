//! `POST /auth` (generator-rest.md §4.2): master key plus Basic e-mail and
//! password give a user token (in `ldap_auth` mode: the directory uid or
//! e-mail and the directory password). The social providers are in `social.rs`.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use berth_domain::model::User;

use super::input::RestInput;
use super::social;
use super::views::{AuthView, UserView};
use crate::error::RestResult;
use crate::operations::{Routes, Surface};
use crate::state::AppState;

pub(super) fn routes() -> Routes {
    Routes::new(Surface::Rest)
        .post("/auth", authenticate)
        .post("/auth/{provider}", social::authenticate_with_provider)
}

/// A signed token for `user` and the full view: the body of every sign-in.
pub(super) fn auth_view(state: &AppState, user: &User) -> AuthView {
    AuthView {
        token: crate::identity::issue_user_token(state, user),
        user: UserView::full(user),
    }
}

/// `POST /auth`: 201 `{token, user}`. The master key is checked first.
pub async fn authenticate(
    State(state): State<AppState>,
    input: RestInput,
) -> RestResult<(StatusCode, Json<AuthView>)> {
    input.require_master(&state)?;
    let user = input.require_sign_in(&state).await?;
    Ok((StatusCode::CREATED, Json(auth_view(&state, &user))))
}
