//! What the server talks to beyond its clients, and the settings for it: the
//! mail server (password-reset e-mails), identity providers (third-party
//! sign-in), webhook receivers, and the browsers' origins the generator-rest
//! API answers (CORS).
//! Held by the application state, below the surfaces.

mod http;
mod mail;
mod webhook;

use std::sync::Arc;

use axum::http::HeaderValue;
use berth_domain::rest_query::ListQuery;
use tower_http::cors::{AllowOrigin, Any};

use crate::config::Settings;
use crate::page_cache::PageCache;

pub use http::{FetchError, HttpClient};
pub use mail::Mailer;
pub use webhook::WebhookSender;

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

/// Parses `CORS_ORIGINS`: `None` when CORS is off.
pub fn cors_origins(text: &str) -> anyhow::Result<Option<AllowOrigin>> {
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
