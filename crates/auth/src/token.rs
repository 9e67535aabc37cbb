//! Signed bearer tokens (JWT, HMAC) for the generator-rest API.

use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};

/// Why a token was not accepted.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// Bad signature, malformed, expired or an unexpected algorithm.
    #[error("invalid token")]
    Invalid,
}

/// The claims of a user token: generator-rest's `{id, iat}` plus an expiry.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct UserClaims {
    /// The user's id as a decimal string.
    pub id: String,
    /// Issued at, unix seconds.
    pub iat: i64,
    /// Expiry, unix seconds; tokens without one are accepted as generator-rest's are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exp: Option<i64>,
}

/// What a valid user token says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VerifiedUserToken {
    /// The user's id.
    pub id: i64,
    /// When the token was issued, unix seconds.
    pub iat: i64,
}

/// The HMAC keys tokens are signed and checked with.
#[derive(Clone)]
pub struct TokenKeys {
    encoding: EncodingKey,
    decoding: DecodingKey,
    validation: Validation,
    lifetime_secs: i64,
}

impl std::fmt::Debug for TokenKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenKeys").finish_non_exhaustive()
    }
}

impl TokenKeys {
    /// Keys from the JWT secret; issued tokens live `lifetime_secs` (0 = never expire).
    pub fn new(secret: &[u8], lifetime_secs: i64) -> Self {
        let mut validation = Validation::new(Algorithm::HS256);
        validation.algorithms = vec![Algorithm::HS256, Algorithm::HS384, Algorithm::HS512];
        validation.required_spec_claims.clear();
        validation.validate_exp = true;
        // A token valid only from some future time (`nbf`) is not valid now.
        validation.validate_nbf = true;
        validation.leeway = 0;
        Self {
            encoding: EncodingKey::from_secret(secret),
            decoding: DecodingKey::from_secret(secret),
            validation,
            lifetime_secs,
        }
    }

    /// Signs a token for user `id`, issued at `now` (unix seconds).
    pub fn sign_user(&self, id: i64, now: i64) -> String {
        let claims = UserClaims {
            id: id.to_string(),
            iat: now,
            exp: (self.lifetime_secs > 0).then(|| now + self.lifetime_secs),
        };
        jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, &self.encoding)
            .expect("HS256 signing of plain claims cannot fail")
    }

    /// Verifies a user token and returns the user id it names and when it was issued.
    pub fn verify_user(&self, token: &str) -> Result<VerifiedUserToken, TokenError> {
        let data = jsonwebtoken::decode::<UserClaims>(token, &self.decoding, &self.validation)
            .map_err(|_| TokenError::Invalid)?;
        Ok(VerifiedUserToken {
            id: data.claims.id.parse().map_err(|_| TokenError::Invalid)?,
            iat: data.claims.iat,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sign_and_verify() {
        let keys = TokenKeys::new(b"secret", 3600);
        let now = 1_900_000_000;
        let token = keys.sign_user(42, now);
        // exp in the future relative to the real clock: 1.9e9 is in 2030.
        assert_eq!(keys.verify_user(&token).unwrap().id, 42);
        assert!(TokenKeys::new(b"other", 3600).verify_user(&token).is_err());
        assert!(keys.verify_user("garbage").is_err());
    }

    #[test]
    fn expired_tokens_are_refused() {
        let keys = TokenKeys::new(b"secret", 60);
        let token = keys.sign_user(1, 1_000_000);
        assert!(keys.verify_user(&token).is_err());
    }

    #[test]
    fn tokens_not_valid_yet_are_refused() {
        #[derive(Serialize)]
        struct WithNbf {
            id: String,
            iat: i64,
            nbf: i64,
        }
        let keys = TokenKeys::new(b"secret", 0);
        let now = jsonwebtoken::get_current_timestamp() as i64;
        let sign = |nbf: i64| {
            let claims = WithNbf {
                id: "7".into(),
                iat: now,
                nbf,
            };
            jsonwebtoken::encode(
                &Header::new(Algorithm::HS256),
                &claims,
                &EncodingKey::from_secret(b"secret"),
            )
            .unwrap()
        };
        assert!(
            keys.verify_user(&sign(now + 3600)).is_err(),
            "valid only in an hour"
        );
        assert_eq!(keys.verify_user(&sign(now - 10)).unwrap().id, 7);
    }

    #[test]
    fn tokens_without_expiry_are_accepted() {
        let keys = TokenKeys::new(b"secret", 0);
        let token = keys.sign_user(7, 1_000_000);
        assert_eq!(
            keys.verify_user(&token).unwrap(),
            VerifiedUserToken {
                id: 7,
                iat: 1_000_000
            }
        );
    }
}
