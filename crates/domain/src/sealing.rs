//! Secrets kept at rest in the database (configuration passwords today,
//! upstream registry credentials later) are sealed: encrypted and
//! authenticated with a key the database does not hold.
//!
//! The store seals and opens through [`Sealer`]; the cipher itself lives in
//! `berth-auth` and the key beside the server's other generated secrets.

/// The prefix of every sealed value: the scheme and its version, so that plain
/// values written before sealing existed (and later schemes) are recognized.
pub const SEALED_PREFIX: &str = "enc:v1:";

/// Whether `stored` is a sealed value rather than plain text.
pub fn is_sealed(stored: &str) -> bool {
    stored.starts_with(SEALED_PREFIX)
}

/// Why a sealed value could not be opened.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SealError {
    /// No key was configured where a secret had to be sealed or opened.
    #[error("no key to seal or open secrets with")]
    NoKey,
    /// Authentication failed: sealed with another key, or altered.
    #[error(
        "it was encrypted with another CONFIG_SECRET_KEY (or altered); give every instance the key it was stored with"
    )]
    WrongKey,
    /// Not a value this version can read (bad encoding, unknown version).
    #[error("it is not a sealed value this version can read")]
    Malformed,
}

/// Seals and opens secrets. `context` names where the value is kept (e.g.
/// `configurations/ldap_search_password`); it is authenticated with the value,
/// so a sealed value copied to another place does not open there.
pub trait Sealer: Send + Sync + std::fmt::Debug {
    /// The sealed form of `plain`: [`SEALED_PREFIX`] and an encoding of a fresh nonce and the ciphertext.
    fn seal(&self, context: &str, plain: &str) -> String;

    /// The plain text of a value made by [`Sealer::seal`] with the same key and context.
    fn open(&self, context: &str, sealed: &str) -> Result<String, SealError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix() {
        assert!(is_sealed("enc:v1:abc"));
        assert!(!is_sealed("plain password"));
        assert!(!is_sealed(""));
    }
}
