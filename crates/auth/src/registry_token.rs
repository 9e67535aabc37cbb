//! Registry bearer tokens: what `/service/token` issues and `/v2/` accepts, in
//! the shape of the docker token specification (`access` claims per scope).

use hmac::{Hmac, KeyInit, Mac};
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

use crate::TokenError;

/// The `iss` of registry tokens.
pub const ISSUER: &str = "harbor-token-issuer";
/// The `aud` (and the challenge's `service`) of registry tokens.
pub const SERVICE: &str = "harbor-registry";

/// One granted scope: `repository:library/nginx:pull,push`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Access {
    /// `repository` or `registry`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Repository name, or `catalog`.
    pub name: String,
    /// Granted actions (`pull`, `push`, `delete`, `*`).
    pub actions: Vec<String>,
}

/// The claims of a registry token.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RegistryClaims {
    /// Issuer.
    pub iss: String,
    /// The user's name; empty for anonymous.
    pub sub: String,
    /// Audience: the registry service.
    pub aud: String,
    /// Expiry, unix seconds.
    pub exp: i64,
    /// Not before, unix seconds.
    pub nbf: i64,
    /// Issued at, unix seconds.
    pub iat: i64,
    /// Granted scopes.
    #[serde(default)]
    pub access: Vec<Access>,
}

impl RegistryClaims {
    /// Whether the token grants `action` on repository `name`.
    pub fn allows(&self, kind: &str, name: &str, action: &str) -> bool {
        self.access.iter().any(|a| {
            a.kind == kind && a.name == name && a.actions.iter().any(|x| x == action || x == "*")
        })
    }
}

/// Signs and verifies registry tokens with a key derived from the server secret,
/// so that user tokens and registry tokens are never interchangeable.
#[derive(Clone)]
pub struct RegistryTokenKeys {
    encoding: EncodingKey,
    decoding: DecodingKey,
    validation: Validation,
}

impl std::fmt::Debug for RegistryTokenKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegistryTokenKeys").finish_non_exhaustive()
    }
}

impl RegistryTokenKeys {
    /// Keys derived from `secret` (HMAC-SHA256 of a fixed label).
    pub fn new(secret: &[u8]) -> Self {
        let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes any key length");
        mac.update(b"berth registry token v1");
        let key = mac.finalize().into_bytes();
        let mut validation = Validation::new(Algorithm::HS256);
        validation.set_audience(&[SERVICE]);
        validation.set_issuer(&[ISSUER]);
        validation.set_required_spec_claims(&["exp", "aud", "iss"]);
        validation.leeway = 5;
        Self {
            encoding: EncodingKey::from_secret(&key),
            decoding: DecodingKey::from_secret(&key),
            validation,
        }
    }

    /// Signs a token for `subject` with `access`, valid `lifetime_secs` from `now`.
    pub fn sign(&self, subject: &str, access: Vec<Access>, now: i64, lifetime_secs: i64) -> String {
        let claims = RegistryClaims {
            iss: ISSUER.into(),
            sub: subject.into(),
            aud: SERVICE.into(),
            exp: now + lifetime_secs,
            nbf: now - 1,
            iat: now,
            access,
        };
        jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, &self.encoding)
            .expect("HS256 signing of plain claims cannot fail")
    }

    /// Verifies a registry token.
    pub fn verify(&self, token: &str) -> Result<RegistryClaims, TokenError> {
        jsonwebtoken::decode::<RegistryClaims>(token, &self.decoding, &self.validation)
            .map(|data| data.claims)
            .map_err(|_| TokenError::Invalid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> i64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64
    }

    #[test]
    fn sign_verify_and_scopes() {
        let keys = RegistryTokenKeys::new(b"secret");
        let access = vec![Access {
            kind: "repository".into(),
            name: "library/x".into(),
            actions: vec!["pull".into()],
        }];
        let token = keys.sign("alice", access, now(), 60);
        let claims = keys.verify(&token).unwrap();
        assert_eq!(claims.sub, "alice");
        assert!(claims.allows("repository", "library/x", "pull"));
        assert!(!claims.allows("repository", "library/x", "push"));
        assert!(!claims.allows("repository", "library/y", "pull"));
        assert!(RegistryTokenKeys::new(b"other").verify(&token).is_err());
        let expired = keys.sign("alice", vec![], now() - 3600, 60);
        assert!(keys.verify(&expired).is_err());
    }

    #[test]
    fn user_tokens_are_not_registry_tokens() {
        let user_token = crate::TokenKeys::new(b"secret", 3600).sign_user(1, now());
        assert!(
            RegistryTokenKeys::new(b"secret")
                .verify(&user_token)
                .is_err()
        );
    }
}
