//! The generator-rest API (`/users`, `/auth`, `/password-resets`, `/articles`),
//! through HTTP, on SQLite and PostgreSQL. The cases of generator-rest.md §8
//! are all here, plus the deviations listed in docs/compatibility.md.

mod articles;
mod auth;
mod bounds;
mod ldap;
mod password_resets;
mod signin_security;
mod social;
mod users;

use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::util::{MASTER_KEY, TestApp, TestResponse};

/// A user created through `POST /users`, with a token.
pub struct RestUser {
    /// The id as the wire shows it.
    pub id: String,
    /// A token for the user.
    pub token: String,
}

/// Creates a user with the master key (JSON body) and signs a token for it.
pub async fn sign_up(app: &TestApp, email: &str, name: &str, role: &str) -> RestUser {
    let res = app
        .post("/users")
        .json(&json!({
            "access_token": MASTER_KEY,
            "email": email,
            "password": "123456",
            "name": name,
            "role": role
        }))
        .send()
        .await;
    assert_eq!(res.status, StatusCode::CREATED, "{}", res.text());
    let id = res.json()["id"].as_str().expect("string id").to_string();
    let token = app.state.tokens.sign_user(id.parse().unwrap(), unix_now());
    RestUser { id, token }
}

/// The fixture of the generated user tests: `a@a.com` and `b@b.com` named
/// "user", `c@c.com` an admin named "c"; all with password 123456.
pub async fn three_users(app: &TestApp) -> (RestUser, RestUser, RestUser) {
    (
        sign_up(app, "a@a.com", "user", "user").await,
        sign_up(app, "b@b.com", "user", "user").await,
        sign_up(app, "c@c.com", "c", "admin").await,
    )
}

/// Seconds since the epoch.
pub fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// Asserts a 401 with an empty body and no challenge (`token()`, `password()`).
#[track_caller]
pub fn assert_empty_401(res: &TestResponse) {
    assert_eq!(res.status, StatusCode::UNAUTHORIZED, "{}", res.text());
    assert!(res.body.is_empty(), "unexpected body {}", res.text());
    assert!(res.header("www-authenticate").is_none());
}

/// Asserts passport's 401 `Unauthorized` text with a bearer challenge.
#[track_caller]
pub fn assert_challenge_401(res: &TestResponse, invalid_token: bool) {
    assert_eq!(res.status, StatusCode::UNAUTHORIZED, "{}", res.text());
    assert_eq!(res.text(), "Unauthorized");
    let expected = if invalid_token {
        r#"Bearer realm="Users", error="invalid_token""#
    } else {
        r#"Bearer realm="Users""#
    };
    assert_eq!(res.header("www-authenticate"), Some(expected));
}

/// Asserts a 404 with an empty body.
#[track_caller]
pub fn assert_empty_404(res: &TestResponse) {
    assert_eq!(res.status, StatusCode::NOT_FOUND, "{}", res.text());
    assert!(res.body.is_empty(), "unexpected body {}", res.text());
}

/// Asserts a 400 whose JSON body names `param`; returns the body.
#[track_caller]
pub fn assert_param_400(res: &TestResponse, param: &str) -> Value {
    assert_eq!(res.status, StatusCode::BAD_REQUEST, "{}", res.text());
    let body = res.json();
    assert_eq!(body["param"], param, "{body}");
    body
}

/// The keys of each JSON object of `text` (an object or an array of them), in wire order.
pub fn wire_keys(text: &str) -> Vec<Vec<String>> {
    struct Keys(Vec<String>);
    impl<'de> serde::Deserialize<'de> for Keys {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct Visitor;
            impl<'de> serde::de::Visitor<'de> for Visitor {
                type Value = Keys;
                fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                    f.write_str("an object")
                }
                fn visit_map<A: serde::de::MapAccess<'de>>(
                    self,
                    mut map: A,
                ) -> Result<Keys, A::Error> {
                    let mut keys = Vec::new();
                    while let Some((key, _)) = map.next_entry::<String, serde::de::IgnoredAny>()? {
                        keys.push(key);
                    }
                    Ok(Keys(keys))
                }
            }
            d.deserialize_map(Visitor)
        }
    }
    if text.trim_start().starts_with('[') {
        let items: Vec<Keys> = serde_json::from_str(text).expect("a JSON array of objects");
        items.into_iter().map(|k| k.0).collect()
    } else {
        vec![serde_json::from_str::<Keys>(text).expect("a JSON object").0]
    }
}
