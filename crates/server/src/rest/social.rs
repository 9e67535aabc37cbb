//! `POST /auth/{github,google,facebook}`: the provider's OAuth access token in,
//! the provider's profile fetched, the user found by linked account or e-mail
//! (or created), `{token, user}` out (generator-rest.md §3 "Social").

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::http::header::AUTHORIZATION;
use berth_domain::model::{NewUser, User};
use berth_store::StoreError;
use serde::Deserialize;

use super::auth::auth_view;
use super::input::{PathParam, RestInput, bearer_refused, not_found};
use super::users::{default_name, gravatar, user_keywords};
use super::views::AuthView;
use crate::error::{ApiError, ErrorKind, RestMessage, RestResult};
use crate::outbound::FetchError;
use crate::state::AppState;
use berth_domain::rest_query::bounded_name;

/// What the providers tell about an account.
#[derive(Debug)]
struct Profile {
    subject: String,
    name: Option<String>,
    email: Option<String>,
    /// Whether the provider vouches that the account owns `email`: only then
    /// is the account linked to an existing user with that address.
    email_verified: bool,
    picture: Option<String>,
}

impl FetchError {
    /// A refusal is 401 like a wrong bearer token; any other failure is 502.
    fn into_api(self, provider: &str) -> ApiError {
        match self {
            Self::Refused(..) => bearer_refused(),
            Self::Failed(cause) => {
                tracing::warn!(provider, %cause, "identity provider failed");
                ApiError::new(
                    ErrorKind::BadGateway,
                    format!("{provider} did not answer with a profile"),
                )
            }
        }
    }
}

/// A provider's account id, a number or a string.
fn subject_of(value: &serde_json::Value) -> Result<String, FetchError> {
    match value {
        serde_json::Value::String(s) if !s.is_empty() => Ok(s.clone()),
        serde_json::Value::Number(n) => Ok(n.to_string()),
        _ => Err(FetchError::Failed("profile without an id".into())),
    }
}

async fn github(state: &AppState, token: &str) -> Result<Profile, FetchError> {
    #[derive(Deserialize)]
    struct GithubUser {
        id: serde_json::Value,
        login: Option<String>,
        name: Option<String>,
        avatar_url: Option<String>,
    }
    #[derive(Deserialize)]
    struct GithubEmail {
        email: String,
        #[serde(default)]
        primary: bool,
        #[serde(default)]
        verified: bool,
    }
    let base = state.rest.config.github_api_url.trim_end_matches('/');
    let auth = format!("token {token}");
    let headers = [(AUTHORIZATION, auth.as_str())];
    let user: GithubUser = state
        .rest
        .http
        .get_json(&format!("{base}/user"), &headers)
        .await?;
    let emails: Vec<GithubEmail> = state
        .rest
        .http
        .get_json(&format!("{base}/user/emails"), &headers)
        .await?;
    // The primary address, and only when GitHub has verified it.
    let email = emails
        .into_iter()
        .find(|e| e.primary && e.verified)
        .map(|e| e.email);
    Ok(Profile {
        subject: subject_of(&user.id)?,
        name: user.name.or(user.login),
        email_verified: email.is_some(),
        email,
        picture: user.avatar_url,
    })
}

async fn google(state: &AppState, token: &str) -> Result<Profile, FetchError> {
    #[derive(Deserialize)]
    struct GoogleUser {
        id: serde_json::Value,
        name: Option<String>,
        email: Option<String>,
        #[serde(default)]
        verified_email: bool,
        picture: Option<String>,
    }
    let base = state.rest.config.google_api_url.trim_end_matches('/');
    let auth = format!("Bearer {token}");
    let user: GoogleUser = state
        .rest
        .http
        .get_json(
            &format!("{base}/userinfo/v2/me"),
            &[(AUTHORIZATION, auth.as_str())],
        )
        .await?;
    Ok(Profile {
        subject: subject_of(&user.id)?,
        name: user.name,
        email: user.email,
        email_verified: user.verified_email,
        picture: user.picture,
    })
}

async fn facebook(state: &AppState, token: &str) -> Result<Profile, FetchError> {
    #[derive(Deserialize)]
    struct FacebookPictureData {
        url: Option<String>,
    }
    #[derive(Deserialize)]
    struct FacebookPicture {
        data: Option<FacebookPictureData>,
    }
    #[derive(Deserialize)]
    struct FacebookUser {
        id: serde_json::Value,
        name: Option<String>,
        email: Option<String>,
        picture: Option<FacebookPicture>,
    }
    let base = state.rest.config.facebook_api_url.trim_end_matches('/');
    let query =
        serde_urlencoded::to_string([("fields", "id,name,email,picture"), ("access_token", token)])
            .map_err(|e| FetchError::Failed(e.to_string()))?;
    let user: FacebookUser = state
        .rest
        .http
        .get_json(&format!("{base}/me?{query}"), &[])
        .await?;
    Ok(Profile {
        subject: subject_of(&user.id)?,
        name: user.name,
        email: user.email,
        // The Graph API says nothing of verification: never linked by e-mail.
        email_verified: false,
        picture: user.picture.and_then(|p| p.data).and_then(|d| d.url),
    })
}

/// Finds the user linked to the account, else the user with its e-mail when
/// the provider vouches for the address (and links it), else creates one
/// without a local password where the registry lets people register
/// themselves (`self_registration`, local accounts); name and picture are
/// refreshed from the provider, as the reference does.
async fn sign_in(state: &AppState, provider: &str, profile: Profile) -> RestResult<User> {
    let store = &state.store;
    let Some(email) = profile
        .email
        .as_deref()
        .map(|e| e.trim().to_lowercase())
        .filter(|e| !e.is_empty())
    else {
        return Err(ApiError {
            detail: Some(
                RestMessage::about(
                    "email",
                    &format!("the {provider} account has no e-mail address"),
                )
                .to_json(),
            ),
            ..ApiError::bad_request("no e-mail address")
        }
        .into());
    };
    // Two attempts: a concurrent first sign-in may create the user between our look-up and insert.
    for _ in 0..2 {
        let linked = match store
            .identities()
            .find_user_id(provider, &profile.subject)
            .await?
        {
            Some(id) => store.users().find_by_id(id).await?,
            None => None,
        };
        let existing = match linked {
            Some(user) => Some(user),
            None => match store.users().find_by_email(&email).await? {
                Some(_) if !profile.email_verified => {
                    return Err(ApiError::new(
                        ErrorKind::Conflict,
                        format!(
                            "an account with this e-mail address exists, and {provider} does not vouch for the address: sign in with its password"
                        ),
                    )
                    .into());
                }
                found => found,
            },
        };
        let user = match existing {
            Some(user) => {
                let name = profile
                    .name
                    .as_deref()
                    .map(bounded_name)
                    .or(user.realname.clone());
                let picture = profile.picture.clone().or(user.picture.clone());
                let keywords = user_keywords(user.email.as_deref(), name.as_deref());
                store
                    .users()
                    .update_profile(user.id, name.as_deref(), picture.as_deref(), &keywords)
                    .await?
                    .ok_or_else(not_found)?
            }
            None => {
                may_register(state).await?;
                let name = profile
                    .name
                    .as_deref()
                    .map(bounded_name)
                    .or_else(|| default_name(&email));
                let new = NewUser {
                    username: email.clone(),
                    keywords: user_keywords(Some(&email), name.as_deref()),
                    email: Some(email.clone()),
                    realname: name,
                    picture: Some(profile.picture.clone().unwrap_or_else(|| gravatar(&email))),
                    ..NewUser::default()
                };
                match store.users().create(&new).await {
                    Ok(user) => user,
                    Err(StoreError::Domain(berth_domain::DomainError::Conflict(_))) => continue,
                    Err(other) => return Err(other.into()),
                }
            }
        };
        store
            .identities()
            .link(provider, &profile.subject, user.id)
            .await?;
        return Ok(user);
    }
    Err(ApiError::new(
        ErrorKind::Conflict,
        "the account is being created concurrently",
    )
    .into())
}

/// Refuses to make an account unless people may register themselves: the
/// registry's `self_registration` is on and accounts are local (`db_auth`;
/// under LDAP the directory holds the accounts, as Harbor's createUser says).
async fn may_register(state: &AppState) -> Result<(), ApiError> {
    let config = state.configuration().await?;
    if config.string("auth_mode") != "db_auth" {
        return Err(ApiError::forbidden(
            "accounts come from the directory: a provider cannot create one",
        ));
    }
    if !config.flag("self_registration") {
        return Err(ApiError::forbidden(
            "self-registration is off: an administrator creates accounts",
        ));
    }
    Ok(())
}

/// `POST /auth/:provider` (`github`, `google`, `facebook`): 201 `{token, user}`.
pub async fn authenticate_with_provider(
    State(state): State<AppState>,
    provider: PathParam,
    input: RestInput,
) -> RestResult<(StatusCode, Json<AuthView>)> {
    let provider = provider.as_str();
    if !crate::config::PROVIDERS.contains(&provider) {
        return Err(not_found().into());
    }
    if !state.rest.config.providers.enabled(provider) {
        return Err(ApiError::forbidden(format!(
            "sign-in with {provider} is not enabled on this server"
        ))
        .into());
    }
    let token = input.provider_token()?;
    let profile = match provider {
        "github" => github(&state, &token).await,
        "google" => google(&state, &token).await,
        _ => facebook(&state, &token).await,
    }
    .map_err(|e| e.into_api(provider))?;
    let user = sign_in(&state, provider, profile).await?;
    Ok((StatusCode::CREATED, Json(auth_view(&state, &user))))
}
