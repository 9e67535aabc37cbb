//! Random secrets and constant-time comparison.

use rand::Rng;
use subtle::ConstantTimeEq;

const ALPHANUMERIC: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

/// A random string of `len` characters from `[A-Za-z0-9]`, from the OS-seeded CSPRNG.
pub fn random_alphanumeric(len: usize) -> String {
    let mut rng = rand::rng();
    (0..len)
        .map(|_| {
            // 62 symbols: reject bytes >= 248 to keep the draw uniform.
            loop {
                let byte = (rng.next_u32() & 0xff) as u8;
                if byte < 248 {
                    return ALPHANUMERIC[usize::from(byte % 62)] as char;
                }
            }
        })
        .collect()
}

/// `len` random bytes from the OS-seeded CSPRNG.
pub fn random_bytes(len: usize) -> Vec<u8> {
    let mut out = vec![0u8; len];
    rand::rng().fill_bytes(&mut out);
    out
}

/// Compares two secrets in time independent of where they differ.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.ct_eq(b).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alphanumeric_has_the_length_and_alphabet() {
        let s = random_alphanumeric(32);
        assert_eq!(s.len(), 32);
        assert!(s.bytes().all(|b| b.is_ascii_alphanumeric()));
        assert_ne!(s, random_alphanumeric(32));
    }

    #[test]
    fn comparison() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
    }
}

/// A key that never shows in `Debug` output and is compared in constant time.
#[derive(Clone)]
pub struct SecretKey(String);

impl SecretKey {
    /// Wraps a key.
    pub fn new(key: impl Into<String>) -> Self {
        Self(key.into())
    }

    /// Whether `candidate` is this key, compared in constant time.
    pub fn matches(&self, candidate: &str) -> bool {
        constant_time_eq(self.0.as_bytes(), candidate.as_bytes())
    }

    /// The key itself, for the one place that must show it (first-start output).
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretKey(..)")
    }
}
