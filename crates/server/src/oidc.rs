//! The OpenID provider of Harbor's `oidc_auth` mode, as a client sees it: the
//! settings held in the configuration, the provider's discovery document and
//! signing keys (cached; keys fetched again when a token names one not yet
//! seen, so keys the provider rotates are picked up), the authorization URL,
//! the token endpoint, and ID token verification (signature, issuer,
//! audience, expiry, nonce).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::header;
use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use berth_auth::secret::constant_time_eq;
use berth_domain::model::Configuration;
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::error::{ApiError, ErrorKind};
use crate::outbound::{FetchError, HttpClient};

/// The `auth_mode` value of single sign-on through an OpenID provider.
pub const OIDC_AUTH: &str = "oidc_auth";
/// The path providers send the browser back to (Harbor's).
pub const CALLBACK_PATH: &str = "/c/oidc/callback";
/// The scopes asked for when `oidc_scope` is empty.
const DEFAULT_SCOPE: &str = "openid,profile,email,offline_access";
/// How long a discovery document is used before it is read again.
const DISCOVERY_TTL: Duration = Duration::from_secs(3600);
/// How long a key set is used before it is read again.
const KEYS_TTL: Duration = Duration::from_secs(3600);
/// A token naming an unknown key fetches the key set again at most this often
/// (tokens naming keys that do not exist cannot make every request fetch).
const KEYS_REFETCH: Duration = Duration::from_secs(1);
/// Clock difference allowed between Berth and the provider.
const LEEWAY_SECS: u64 = 60;

/// The `oidc_*` settings of the configuration.
#[derive(Clone)]
pub struct OidcSettings {
    /// The name the sign-in button shows.
    pub name: String,
    /// The issuer URL, without a trailing slash.
    pub endpoint: String,
    /// The client registered at the provider.
    pub client_id: String,
    /// Its secret.
    pub client_secret: String,
    /// The scopes asked for.
    pub scopes: Vec<String>,
    /// Whether the provider's certificate is verified.
    pub verify_cert: bool,
    /// Whether new users are created without asking them for a username.
    pub auto_onboard: bool,
    /// The claim the username comes from (empty: `preferred_username`, `name`, `email`).
    pub user_claim: String,
    /// The claim that lists the user's groups (empty: none).
    pub groups_claim: String,
    /// Only groups whose name matches this regular expression are kept (empty: all).
    pub group_filter: String,
    /// Members of this group are system administrators.
    pub admin_group: String,
    /// Extra parameters of the authorization request.
    pub extra_parameters: Vec<(String, String)>,
    /// Whether signing out also ends the provider's session.
    pub logout: bool,
}

impl std::fmt::Debug for OidcSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OidcSettings")
            .field("endpoint", &self.endpoint)
            .field("client_id", &self.client_id)
            .finish_non_exhaustive()
    }
}

impl OidcSettings {
    /// The settings of `config`.
    pub fn of(config: &Configuration) -> Self {
        let scope = config.string("oidc_scope").trim();
        let scope = if scope.is_empty() {
            DEFAULT_SCOPE
        } else {
            scope
        };
        let extra: Map<String, Value> =
            serde_json::from_str(config.string("oidc_extra_redirect_parms")).unwrap_or_default();
        Self {
            name: config.string("oidc_name").to_string(),
            endpoint: config
                .string("oidc_endpoint")
                .trim()
                .trim_end_matches('/')
                .to_string(),
            client_id: config.string("oidc_client_id").to_string(),
            client_secret: config.string("oidc_client_secret").to_string(),
            scopes: scope
                .split([',', ' '])
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect(),
            verify_cert: config.flag("oidc_verify_cert"),
            auto_onboard: config.flag("oidc_auto_onboard"),
            user_claim: config.string("oidc_user_claim").trim().to_string(),
            groups_claim: config.string("oidc_groups_claim").trim().to_string(),
            group_filter: config.string("oidc_group_filter").trim().to_string(),
            admin_group: config.string("oidc_admin_group").trim().to_string(),
            extra_parameters: extra
                .into_iter()
                .filter_map(|(k, v)| match v {
                    Value::String(s) => Some((k, s)),
                    Value::Number(_) | Value::Bool(_) => Some((k, v.to_string())),
                    _ => None,
                })
                .collect(),
            logout: config.flag("oidc_logout"),
        }
    }

    /// Whether the mode can work: an endpoint and a client.
    pub fn complete(&self) -> bool {
        !self.endpoint.is_empty() && !self.client_id.is_empty()
    }

    /// Whether `offline_access` is asked for (a refresh token is then expected).
    pub fn offline(&self) -> bool {
        self.scopes.iter().any(|s| s == "offline_access")
    }
}

/// Checks `oidc_endpoint`: an `https://` URL, or `http://` to a loopback
/// address (a provider on the same machine, as in tests).
pub fn check_endpoint(url: &str) -> Result<(), String> {
    let url = url.trim();
    let parsed = url::Url::parse(url).map_err(|e| format!("the OIDC endpoint {url}: {e}"))?;
    let loopback = match parsed.host() {
        Some(url::Host::Ipv4(ip)) => IpAddr::V4(ip).is_loopback(),
        Some(url::Host::Ipv6(ip)) => IpAddr::V6(ip).is_loopback(),
        Some(url::Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
        None => false,
    };
    match parsed.scheme() {
        "https" => Ok(()),
        "http" if loopback => Ok(()),
        _ => Err(format!(
            "the OIDC endpoint must be an https:// URL (http:// only to a loopback address): {url}"
        )),
    }
}

/// What the provider's discovery document says.
#[derive(Debug, Clone, Deserialize)]
pub struct Discovery {
    /// The issuer ID tokens name.
    pub issuer: String,
    /// Where the browser is sent to sign in.
    pub authorization_endpoint: String,
    /// Where codes and refresh tokens are exchanged.
    pub token_endpoint: String,
    /// The provider's signing keys.
    pub jwks_uri: String,
    /// Where the provider's session ends (RP-initiated logout).
    #[serde(default)]
    pub end_session_endpoint: Option<String>,
}

/// The token endpoint's answer.
#[derive(Clone, Deserialize)]
pub struct Tokens {
    /// The ID token (absent from some refresh answers).
    #[serde(default)]
    pub id_token: Option<String>,
    /// The refresh token, when the provider issued one.
    #[serde(default)]
    pub refresh_token: Option<String>,
    /// The access token's lifetime in seconds.
    #[serde(default)]
    pub expires_in: Option<i64>,
}

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokens")
            .field("expires_in", &self.expires_in)
            .finish_non_exhaustive()
    }
}

/// A verified ID token's claims.
#[derive(Debug, Clone)]
pub struct IdToken {
    /// `sub`.
    pub subject: String,
    /// `iss`.
    pub issuer: String,
    /// `exp` (unix seconds).
    pub expires_at: i64,
    /// Every claim.
    pub claims: Map<String, Value>,
}

impl IdToken {
    /// Harbor's key of a provider's user: subject and issuer.
    pub fn subiss(&self) -> String {
        format!("{}{}", self.subject, self.issuer)
    }

    /// A string claim, if present and not empty.
    pub fn string(&self, name: &str) -> Option<&str> {
        self.claims
            .get(name)
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|s| !s.is_empty())
    }

    /// The username the claims suggest: `user_claim` when set, else
    /// `preferred_username`, `name`, then `email`.
    pub fn username(&self, user_claim: &str) -> Option<&str> {
        if !user_claim.is_empty() {
            return self.string(user_claim);
        }
        ["preferred_username", "name", "email"]
            .into_iter()
            .find_map(|claim| self.string(claim))
    }

    /// The groups the claim `groups_claim` lists (a list of strings, or one string).
    pub fn groups(&self, groups_claim: &str) -> Vec<String> {
        if groups_claim.is_empty() {
            return Vec::new();
        }
        match self.claims.get(groups_claim) {
            Some(Value::Array(items)) => items
                .iter()
                .filter_map(Value::as_str)
                .map(str::trim)
                .filter(|g| !g.is_empty())
                .map(String::from)
                .collect(),
            Some(Value::String(one)) if !one.trim().is_empty() => vec![one.trim().to_string()],
            _ => Vec::new(),
        }
    }
}

/// Why an ID token was not accepted.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// Not signed by the provider, for another client, expired, wrong nonce.
    #[error("{0}")]
    Invalid(String),
    /// The provider could not be asked for its keys.
    #[error("{0}")]
    Provider(String),
}

/// The PKCE pair of one sign-in: the verifier kept here, its S256 challenge sent.
pub fn pkce_challenge(verifier: &str) -> String {
    URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()))
}

/// The provider's documents, cached per instance.
#[derive(Debug)]
pub struct OidcClient {
    verifying: HttpClient,
    trusting: HttpClient,
    discovery: Mutex<HashMap<String, (Instant, Arc<Discovery>)>>,
    keys: Mutex<HashMap<String, (Instant, Arc<JwkSet>)>>,
}

impl OidcClient {
    /// A client with empty caches.
    pub fn new() -> anyhow::Result<Self> {
        Ok(Self {
            verifying: HttpClient::new()?,
            trusting: HttpClient::trusting(berth_net::Trust::AnyCertificate)?,
            discovery: Mutex::default(),
            keys: Mutex::default(),
        })
    }

    fn http(&self, verify_cert: bool) -> &HttpClient {
        if verify_cert {
            &self.verifying
        } else {
            &self.trusting
        }
    }

    /// Reads `<endpoint>/.well-known/openid-configuration` now, without the cache
    /// (`POST /system/oidc/ping`).
    pub async fn ping(&self, endpoint: &str, verify_cert: bool) -> Result<Discovery, String> {
        check_endpoint(endpoint)?;
        let url = format!(
            "{}/.well-known/openid-configuration",
            endpoint.trim().trim_end_matches('/')
        );
        self.http(verify_cert)
            .get_json::<Discovery>(&url, &[])
            .await
            .map_err(|e| format!("{url}: {e}"))
    }

    /// The provider's discovery document, from the cache when read within the hour.
    pub async fn discovery(&self, settings: &OidcSettings) -> Result<Arc<Discovery>, ApiError> {
        if let Some((at, doc)) = lock(&self.discovery).get(&settings.endpoint)
            && at.elapsed() < DISCOVERY_TTL
        {
            return Ok(doc.clone());
        }
        let doc = Arc::new(
            self.ping(&settings.endpoint, settings.verify_cert)
                .await
                .map_err(provider_failed)?,
        );
        lock(&self.discovery).insert(settings.endpoint.clone(), (Instant::now(), doc.clone()));
        Ok(doc)
    }

    /// Where to send the browser to sign in.
    pub async fn authorization_url(
        &self,
        settings: &OidcSettings,
        redirect_uri: &str,
        state: &str,
        nonce: &str,
        verifier: &str,
    ) -> Result<String, ApiError> {
        let doc = self.discovery(settings).await?;
        let mut url = url::Url::parse(&doc.authorization_endpoint)
            .map_err(|e| provider_failed(format!("authorization endpoint: {e}")))?;
        {
            let mut query = url.query_pairs_mut();
            query
                .append_pair("response_type", "code")
                .append_pair("client_id", &settings.client_id)
                .append_pair("redirect_uri", redirect_uri)
                .append_pair("scope", &settings.scopes.join(" "))
                .append_pair("state", state)
                .append_pair("nonce", nonce)
                .append_pair("code_challenge", &pkce_challenge(verifier))
                .append_pair("code_challenge_method", "S256");
            for (name, value) in &settings.extra_parameters {
                query.append_pair(name, value);
            }
        }
        Ok(url.into())
    }

    /// Exchanges an authorization code for tokens.
    pub async fn exchange_code(
        &self,
        settings: &OidcSettings,
        code: &str,
        redirect_uri: &str,
        verifier: &str,
    ) -> Result<Tokens, ApiError> {
        self.token_request(
            settings,
            &[
                ("grant_type", "authorization_code"),
                ("code", code),
                ("redirect_uri", redirect_uri),
                ("code_verifier", verifier),
            ],
        )
        .await
        .map_err(|e| match e {
            FetchError::Refused(status, body) => {
                tracing::info!(%status, %body, "the OIDC provider refused the code");
                ApiError::new(
                    ErrorKind::Unauthorized,
                    "the OIDC provider refused the sign-in code",
                )
            }
            FetchError::Failed(why) => provider_failed(why),
        })
    }

    /// Uses a refresh token: `Ok(Some)` with the new tokens, `Ok(None)` when
    /// the provider refuses it (revoked, expired, the user gone).
    pub async fn refresh(
        &self,
        settings: &OidcSettings,
        refresh_token: &str,
    ) -> Result<Option<Tokens>, ApiError> {
        match self
            .token_request(
                settings,
                &[
                    ("grant_type", "refresh_token"),
                    ("refresh_token", refresh_token),
                ],
            )
            .await
        {
            Ok(tokens) => Ok(Some(tokens)),
            Err(FetchError::Refused(status, body)) => {
                tracing::info!(%status, %body, "the OIDC provider refused a refresh token");
                Ok(None)
            }
            Err(FetchError::Failed(why)) => Err(provider_failed(why)),
        }
    }

    async fn token_request(
        &self,
        settings: &OidcSettings,
        form: &[(&str, &str)],
    ) -> Result<Tokens, FetchError> {
        let doc = self
            .discovery(settings)
            .await
            .map_err(|e| FetchError::Failed(e.message))?;
        // client_secret_basic: both parts form-encoded, then base64 (RFC 6749 §2.3.1).
        let encode =
            |s: &str| serde_urlencoded::to_string([("", s)]).unwrap_or_default()[1..].to_string();
        let basic = format!(
            "Basic {}",
            STANDARD.encode(format!(
                "{}:{}",
                encode(&settings.client_id),
                encode(&settings.client_secret)
            ))
        );
        self.http(settings.verify_cert)
            .post_form(
                &doc.token_endpoint,
                &[(header::AUTHORIZATION, basic.as_str())],
                form,
            )
            .await
    }

    /// Verifies an ID token: signed by one of the provider's keys (fetched
    /// again once when the token names a key not in the cached set), issued by
    /// the provider to this client, not expired, and carrying `nonce` when one
    /// is expected.
    pub async fn verify_id_token(
        &self,
        settings: &OidcSettings,
        token: &str,
        nonce: Option<&str>,
    ) -> Result<IdToken, TokenError> {
        let invalid = |why: String| TokenError::Invalid(why);
        let header = jsonwebtoken::decode_header(token)
            .map_err(|e| invalid(format!("not a signed token: {e}")))?;
        if matches!(
            header.alg,
            Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512
        ) {
            return Err(invalid("the token is not signed with a public key".into()));
        }
        let doc = self
            .discovery(settings)
            .await
            .map_err(|e| TokenError::Provider(e.message))?;
        let key = self
            .key(settings, &doc.jwks_uri, header.kid.as_deref())
            .await?;
        let mut validation = Validation::new(header.alg);
        validation.set_audience(&[&settings.client_id]);
        validation.set_issuer(&[&doc.issuer]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        validation.leeway = LEEWAY_SECS;
        // A token not valid yet (`nbf` ahead by more than the leeway) is refused.
        validation.validate_nbf = true;
        let claims = jsonwebtoken::decode::<Map<String, Value>>(token, &key, &validation)
            .map_err(|e| invalid(format!("the ID token is not valid: {e}")))?
            .claims;
        if let Some(expected) = nonce {
            let sent = claims.get("nonce").and_then(Value::as_str).unwrap_or("");
            if !constant_time_eq(sent.as_bytes(), expected.as_bytes()) {
                return Err(invalid("the ID token's nonce is not this sign-in's".into()));
            }
        }
        let text = |name: &str| {
            claims
                .get(name)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        Ok(IdToken {
            subject: text("sub"),
            issuer: text("iss"),
            expires_at: claims.get("exp").and_then(Value::as_i64).unwrap_or(0),
            claims,
        })
    }

    /// The key `kid` names (or the only key, for a token that names none).
    async fn key(
        &self,
        settings: &OidcSettings,
        jwks_uri: &str,
        kid: Option<&str>,
    ) -> Result<DecodingKey, TokenError> {
        let pick = |set: &JwkSet| match kid {
            Some(kid) => set.find(kid).cloned(),
            None if set.keys.len() == 1 => set.keys.first().cloned(),
            None => None,
        };
        let cached = lock(&self.keys).get(jwks_uri).cloned();
        let found = match &cached {
            Some((at, set)) if at.elapsed() < KEYS_TTL => pick(set),
            _ => None,
        };
        let jwk = match found {
            Some(jwk) => jwk,
            None => {
                // Refetch, unless another token just did.
                let recent = cached
                    .as_ref()
                    .is_some_and(|(at, _)| at.elapsed() < KEYS_REFETCH);
                let set = match cached {
                    Some((_, set)) if recent => set,
                    _ => {
                        let set = Arc::new(
                            self.http(settings.verify_cert)
                                .get_json::<JwkSet>(jwks_uri, &[])
                                .await
                                .map_err(|e| {
                                    TokenError::Provider(format!("the provider's keys: {e}"))
                                })?,
                        );
                        lock(&self.keys)
                            .insert(jwks_uri.to_string(), (Instant::now(), set.clone()));
                        set
                    }
                };
                pick(&set).ok_or_else(|| {
                    TokenError::Invalid(
                        "the token is signed with a key the provider does not list".into(),
                    )
                })?
            }
        };
        DecodingKey::from_jwk(&jwk)
            .map_err(|e| TokenError::Invalid(format!("the provider's key is not usable: {e}")))
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// A provider that fails or does not answer: 502, the cause logged.
pub fn provider_failed(why: impl std::fmt::Display) -> ApiError {
    tracing::warn!(error = %why, "OIDC provider failure");
    ApiError::new(ErrorKind::BadGateway, format!("OIDC provider: {why}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_must_be_https_unless_loopback() {
        assert!(check_endpoint("https://id.example.com/realms/x").is_ok());
        assert!(check_endpoint("http://127.0.0.1:5556").is_ok());
        assert!(check_endpoint("http://localhost:5556/dex").is_ok());
        assert!(check_endpoint("http://[::1]:80").is_ok());
        assert!(check_endpoint("http://id.example.com").is_err());
        assert!(check_endpoint("ftp://127.0.0.1").is_err());
        assert!(check_endpoint("not a url").is_err());
    }

    #[test]
    fn pkce_s256_matches_rfc7636() {
        // RFC 7636, appendix B.
        assert_eq!(
            pkce_challenge("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"),
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
    }

    fn token(claims: Value) -> IdToken {
        IdToken {
            subject: "s".into(),
            issuer: "i".into(),
            expires_at: 0,
            claims: claims.as_object().cloned().unwrap_or_default(),
        }
    }

    #[test]
    fn usernames_and_groups_from_claims() {
        let t = token(serde_json::json!({
            "name": "Alice A", "email": "a@x.test", "login": "al",
            "groups": ["dev", " ", "ops"], "team": "one"
        }));
        assert_eq!(t.username(""), Some("Alice A"));
        assert_eq!(t.username("login"), Some("al"));
        assert_eq!(t.username("missing"), None);
        assert_eq!(t.groups("groups"), vec!["dev", "ops"]);
        assert_eq!(t.groups("team"), vec!["one"]);
        assert!(t.groups("").is_empty());
        assert_eq!(t.subiss(), "si");
    }
}
