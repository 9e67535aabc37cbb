//! The generator-rest API (generator-rest.md): users, sign-in, password resets
//! and articles, mounted at the root (`/users`, `/auth`, `/password-resets`,
//! `/articles`). Errors render as the reference's ([`crate::error::RestError`]).

mod articles;
mod auth;
mod http;
mod input;
mod mail;
mod password_resets;
mod social;
mod users;
mod views;

use std::sync::Arc;

use axum::extract::Request;
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::Response;
use berth_domain::rest_query::ListQuery;
use tower_http::cors::{AllowOrigin, Any, CorsLayer};

use crate::config::Settings;
use crate::operations::Routes;
use crate::page_cache::PageCache;

pub use http::HttpClient;
pub use mail::Mailer;

/// How the generator-rest API is configured.
#[derive(Debug, Clone)]
pub struct RestConfig {
    /// SMTP URL for password-reset e-mails; `None` disables password resets (503).
    pub smtp_url: Option<String>,
    /// Sender of password-reset e-mails.
    pub smtp_from: String,
    /// The project name in e-mail subjects.
    pub app_name: String,
    /// GitHub API base URL.
    pub github_api_url: String,
    /// Google API base URL.
    pub google_api_url: String,
    /// Facebook Graph API base URL.
    pub facebook_api_url: String,
    /// `*`, a comma-separated origin list, or `none`.
    pub cors_origins: String,
    /// The identity providers `POST /auth/{provider}` accepts (none by default).
    pub providers: crate::config::Providers,
}

impl Default for RestConfig {
    fn default() -> Self {
        Self {
            smtp_url: None,
            smtp_from: "no-reply@berth.local".into(),
            app_name: "Berth".into(),
            github_api_url: "https://api.github.com".into(),
            google_api_url: "https://www.googleapis.com".into(),
            facebook_api_url: "https://graph.facebook.com".into(),
            cors_origins: "*".into(),
            providers: crate::config::Providers::default(),
        }
    }
}

impl RestConfig {
    /// The configuration the command-line settings give.
    pub fn from_settings(settings: &Settings) -> Self {
        Self {
            smtp_url: settings.smtp_url.clone().filter(|u| !u.is_empty()),
            smtp_from: settings.smtp_from.clone(),
            github_api_url: settings.github_api_url.clone(),
            google_api_url: settings.google_api_url.clone(),
            facebook_api_url: settings.facebook_api_url.clone(),
            cors_origins: settings.cors_origins.clone(),
            providers: settings.auth_providers.clone(),
            ..Self::default()
        }
    }
}

/// The configuration plus what it opens: the mail transport and the HTTP client.
#[derive(Debug, Clone)]
pub struct RestServices {
    /// The settings.
    pub config: RestConfig,
    /// The mail transport, when `smtp_url` is set.
    pub mailer: Option<Mailer>,
    /// The client for identity providers.
    pub http: HttpClient,
    /// Rendered `GET /articles` pages.
    pub article_pages: Arc<PageCache<ListQuery>>,
}

/// How many bytes of rendered article pages are kept at most.
const ARTICLE_PAGES_BYTES: usize = 16 << 20;

impl RestServices {
    /// Opens the services; a malformed SMTP URL or sender is an error.
    pub fn new(config: RestConfig) -> anyhow::Result<Self> {
        let mailer = config
            .smtp_url
            .as_deref()
            .map(|url| Mailer::new(url, &config.smtp_from))
            .transpose()?;
        let http = HttpClient::new()?;
        cors_origins(&config.cors_origins)?;
        Ok(Self {
            config,
            mailer,
            http,
            article_pages: Arc::new(PageCache::new(ARTICLE_PAGES_BYTES)),
        })
    }
}

/// The root routes of the generator-rest API, with its CORS layer.
pub fn routes(services: &RestServices) -> Routes {
    let routes = Routes::new(crate::operations::Surface::Rest)
        .merge(users::routes())
        // Sign-in answers carry a token: never cached.
        .merge(
            auth::routes()
                .map_router(|r| r.layer(middleware::map_response(crate::headers::no_store))),
        )
        // `GET /password-resets/:token` answers with the reset token.
        .merge(
            password_resets::routes()
                .map_router(|r| r.layer(middleware::map_response(crate::headers::no_store))),
        )
        .merge(articles::routes());
    match cors_origins(&services.config.cors_origins).ok().flatten() {
        Some(origin) => routes.map_router(|router| {
            router
                .layer(
                    CorsLayer::new()
                        .allow_origin(origin)
                        .allow_methods([
                            Method::GET,
                            Method::HEAD,
                            Method::PUT,
                            Method::PATCH,
                            Method::POST,
                            Method::DELETE,
                        ])
                        .allow_headers(tower_http::cors::AllowHeaders::mirror_request()),
                )
                .layer(middleware::from_fn(preflight_no_content))
        }),
        None => routes,
    }
}

/// Parses `CORS_ORIGINS`: `None` when CORS is off.
fn cors_origins(text: &str) -> anyhow::Result<Option<AllowOrigin>> {
    let text = text.trim();
    if text.eq_ignore_ascii_case("none") || text.is_empty() {
        return Ok(None);
    }
    if text == "*" {
        return Ok(Some(AllowOrigin::from(Any)));
    }
    let origins = text
        .split(',')
        .map(|o| HeaderValue::from_str(o.trim().trim_end_matches('/')))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| anyhow::anyhow!("CORS_ORIGINS holds an invalid origin: {text}"))?;
    Ok(Some(AllowOrigin::list(origins)))
}

/// The `cors` package answers preflights 204; tower-http answers 200.
async fn preflight_no_content(request: Request, next: Next) -> Response {
    let preflight = request.method() == Method::OPTIONS
        && request
            .headers()
            .contains_key(header::ACCESS_CONTROL_REQUEST_METHOD);
    let mut response = next.run(request).await;
    if preflight && response.status() == StatusCode::OK {
        *response.status_mut() = StatusCode::NO_CONTENT;
    }
    response
}
