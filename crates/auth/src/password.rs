//! Password hashes as PHC strings.
//!
//! New hashes are argon2id; verification also accepts bcrypt (`$2a$`, `$2b$`,
//! `$2y$`) so that generator-rest databases can be imported as they are.

use std::sync::LazyLock;

use argon2::{Argon2, PasswordHasher, PasswordVerifier};

/// A hash of a random password with the parameters of every new hash.
static DUMMY_HASH: LazyLock<String> =
    LazyLock::new(|| hash_password(&crate::secret::random_alphanumeric(24)));

/// A hash made as [`hash_password`] makes them, of a password nobody knows.
/// Verifying against it costs what verifying against a real hash costs, so a
/// sign-in for a user who does not exist (or has no local password) takes as
/// long as one with a wrong password. The first call hashes once.
pub fn dummy_hash() -> &'static str {
    &DUMMY_HASH
}

/// Hashes a password with argon2id and a random salt. Slow on purpose: call it
/// off the async workers (`spawn_blocking`).
pub fn hash_password(password: &str) -> String {
    Argon2::default()
        .hash_password(password.as_bytes())
        .expect("argon2 with default parameters and a random salt cannot fail")
        .to_string()
}

/// Whether `password` matches the stored PHC string. Unknown or corrupt hashes never match.
pub fn verify_password(password: &str, stored: &str) -> bool {
    if stored.starts_with("$2a$") || stored.starts_with("$2b$") || stored.starts_with("$2y$") {
        bcrypt::verify(password, stored).unwrap_or(false)
    } else if stored.starts_with("$argon2") {
        Argon2::default()
            .verify_password(password.as_bytes(), stored)
            .is_ok()
    } else {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argon2_round_trip() {
        let hash = hash_password("s3cret-Pass");
        assert!(hash.starts_with("$argon2id$"));
        assert!(verify_password("s3cret-Pass", &hash));
        assert!(!verify_password("s3cret-pass", &hash));
    }

    #[test]
    fn bcrypt_hashes_from_generator_rest_verify() {
        let hash = bcrypt::hash("123456", 4).unwrap();
        assert!(verify_password("123456", &hash));
        assert!(!verify_password("1234567", &hash));
        let b = hash.replacen("$2b$", "$2a$", 1);
        assert!(verify_password("123456", &b));
    }

    #[test]
    fn garbage_never_matches() {
        assert!(!verify_password("", ""));
        assert!(!verify_password("x", "$argon2id$broken"));
        assert!(!verify_password("x", "plain"));
    }
}
