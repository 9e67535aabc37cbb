//! The OpenID provider of the tests: `scripts/oidc-fixture` (the certified
//! `oidc-provider` package on Node), which `scripts/test` starts and names in
//! `BERTH_TEST_OIDC_URL`. A missing provider fails the test.
//!
//! Besides the standard endpoints, the fixture has control endpoints under
//! `/test/`: accounts (claims by id), key rotation, and ID tokens minted with
//! its current signing key (for the refusals: wrong audience, expired ...).

use std::collections::BTreeMap;

use reqwest::redirect::Policy;
use serde_json::{Value, json};

/// The provider, and an HTTP client that does not follow redirects.
pub struct OidcProvider {
    /// The issuer URL.
    pub url: String,
    http: reqwest::Client,
}

/// A client registered at the provider for one test.
pub struct OidcClient {
    pub id: String,
    pub secret: String,
}

/// A browser's cookies for one site, kept by name.
#[derive(Default, Clone, Debug)]
pub struct CookieJar(BTreeMap<String, String>);

impl CookieJar {
    /// Keeps the cookies a response sets (a `Max-Age=0` one is removed).
    pub fn take(&mut self, response: &reqwest::Response) {
        for value in response.headers().get_all(reqwest::header::SET_COOKIE) {
            let text = value.to_str().unwrap_or("");
            let pair = text.split(';').next().unwrap_or("");
            if let Some((name, value)) = pair.split_once('=') {
                if text.contains("Max-Age=0") || value.is_empty() {
                    self.0.remove(name.trim());
                } else {
                    self.0
                        .insert(name.trim().to_string(), value.trim().to_string());
                }
            }
        }
    }

    /// The `Cookie` header value.
    pub fn header(&self) -> String {
        self.0
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// One cookie's value.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(String::as_str)
    }

    /// Forgets one cookie.
    pub fn remove(&mut self, name: &str) {
        self.0.remove(name);
    }
}

/// An HTTP client that does not follow redirects (the tests follow them).
pub fn manual_client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(Policy::none())
        .build()
        .expect("an HTTP client")
}

/// The `Location` of a redirect, made absolute against `base`.
pub fn location(response: &reqwest::Response) -> String {
    let raw = response
        .headers()
        .get(reqwest::header::LOCATION)
        .unwrap_or_else(|| panic!("a redirect, got {}", response.status()))
        .to_str()
        .unwrap()
        .to_string();
    response.url().join(&raw).unwrap().to_string()
}

impl OidcProvider {
    /// The provider `scripts/test` started.
    pub fn from_env() -> Self {
        let url = std::env::var("BERTH_TEST_OIDC_URL").expect(
            "BERTH_TEST_OIDC_URL is not set: run the tests through scripts/test, which starts \
             the OpenID provider (scripts/oidc-fixture)",
        );
        Self {
            url: url.trim_end_matches('/').to_string(),
            http: manual_client(),
        }
    }

    /// Registers a confidential client that may come back to `redirect_uri`.
    pub async fn register(&self, redirect_uri: &str) -> OidcClient {
        let res = self
            .http
            .post(format!("{}/reg", self.url))
            .json(&json!({
                "redirect_uris": [redirect_uri],
                "post_logout_redirect_uris": [redirect_uri.replace("/c/oidc/callback", "/harbor/sign-in")],
                "grant_types": ["authorization_code", "refresh_token"],
                "response_types": ["code"],
                "token_endpoint_auth_method": "client_secret_basic",
            }))
            .send()
            .await
            .expect("the provider answers /reg");
        assert!(res.status().is_success(), "registration: {}", res.status());
        let body: Value = res.json().await.unwrap();
        OidcClient {
            id: body["client_id"].as_str().unwrap().to_string(),
            secret: body["client_secret"].as_str().unwrap().to_string(),
        }
    }

    /// Creates or replaces account `id` with `claims`.
    pub async fn put_account(&self, id: &str, claims: Value) {
        let res = self
            .http
            .put(format!("{}/test/accounts/{id}", self.url))
            .json(&claims)
            .send()
            .await
            .unwrap();
        assert!(res.status().is_success(), "put account: {}", res.status());
    }

    /// Removes account `id`: its refresh tokens stop working.
    pub async fn delete_account(&self, id: &str) {
        let res = self
            .http
            .delete(format!("{}/test/accounts/{id}", self.url))
            .send()
            .await
            .unwrap();
        assert!(
            res.status().is_success(),
            "delete account: {}",
            res.status()
        );
    }

    /// Revokes every refresh token of account `id` (the account stays); how many.
    pub async fn revoke_refresh_tokens(&self, id: &str) -> u64 {
        let res = self
            .http
            .post(format!("{}/test/accounts/{id}/revoke", self.url))
            .send()
            .await
            .unwrap();
        assert!(res.status().is_success(), "revoke: {}", res.status());
        let body: Value = res.json().await.unwrap();
        body["revoked"].as_u64().unwrap()
    }

    /// A new signing key; the old one leaves the key set.
    pub async fn rotate(&self) -> String {
        let res = self
            .http
            .post(format!("{}/test/rotate", self.url))
            .send()
            .await
            .unwrap();
        let body: Value = res.json().await.unwrap();
        body["kid"].as_str().unwrap().to_string()
    }

    /// An ID token signed with the provider's current key: `sub`, `aud`,
    /// expiring in `exp_in` seconds, with `more` fields (`iss`, `nonce`, `claims`).
    pub async fn id_token(&self, sub: &str, aud: &str, exp_in: i64, more: Value) -> String {
        let mut body = json!({"sub": sub, "aud": aud, "exp_in": exp_in});
        if let (Some(body), Some(more)) = (body.as_object_mut(), more.as_object()) {
            body.extend(more.clone());
        }
        let res = self
            .http
            .post(format!("{}/test/id-token", self.url))
            .json(&body)
            .send()
            .await
            .unwrap();
        let body: Value = res.json().await.unwrap();
        body["id_token"].as_str().unwrap().to_string()
    }

    /// Signs `account` in at the provider, starting from the authorization
    /// URL a relying party redirected to; the URL the provider sends the
    /// browser back to (the relying party's callback, with code and state).
    pub async fn authorize(&self, authorization_url: &str, account: &str) -> String {
        let mut jar = CookieJar::default();
        let mut url = authorization_url.to_string();
        let mut logged_in = false;
        for _ in 0..10 {
            if !url.starts_with(&self.url) {
                return url;
            }
            let res = self
                .http
                .get(&url)
                .header("cookie", jar.header())
                .send()
                .await
                .unwrap();
            jar.take(&res);
            if res.status().is_redirection() {
                url = location(&res);
                continue;
            }
            assert_eq!(res.status(), 200, "the provider's page at {url}");
            assert!(!logged_in, "the provider asked to sign in twice");
            // The sign-in form.
            let res = self
                .http
                .post(format!("{}/login", url.trim_end_matches('/')))
                .header("cookie", jar.header())
                .form(&[("login", account)])
                .send()
                .await
                .unwrap();
            jar.take(&res);
            assert!(
                res.status().is_redirection(),
                "signing in {account}: {}",
                res.status()
            );
            logged_in = true;
            url = location(&res);
        }
        panic!("the provider did not send the browser back");
    }
}
