//! [`SecretBox`]: the [`Sealer`] the server uses for secrets kept in the
//! database. ChaCha20-Poly1305 with a random 96-bit nonce per value and the
//! place the value is kept as associated data; the 256-bit key is derived from
//! `CONFIG_SECRET_KEY` with HMAC-SHA256 (the key is random and long, so no slow
//! password hash is needed).
//!
//! Sealed form: `enc:v1:` + base64url (no padding) of nonce || ciphertext || tag.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use berth_domain::sealing::{SEALED_PREFIX, SealError, Sealer};
use ring::aead::{Aad, CHACHA20_POLY1305, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use ring::hmac;

use crate::secret::random_bytes;

/// Domain separation of the key derivation: the same `CONFIG_SECRET_KEY` used
/// for anything else gives an unrelated key.
const KEY_LABEL: &[u8] = b"berth sealed secrets v1";

/// The shortest `CONFIG_SECRET_KEY` accepted, in bytes.
pub const MIN_KEY_LEN: usize = 32;

/// Seals and opens secrets with one key.
pub struct SecretBox {
    key: LessSafeKey,
}

impl std::fmt::Debug for SecretBox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretBox(..)")
    }
}

/// Why a key was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("CONFIG_SECRET_KEY must be at least {MIN_KEY_LEN} characters long")]
pub struct ShortKey;

impl SecretBox {
    /// A box keyed by `secret` (the `CONFIG_SECRET_KEY` text); at least [`MIN_KEY_LEN`] bytes.
    pub fn new(secret: &str) -> Result<Self, ShortKey> {
        if secret.len() < MIN_KEY_LEN {
            return Err(ShortKey);
        }
        let derived = hmac::sign(
            &hmac::Key::new(hmac::HMAC_SHA256, KEY_LABEL),
            secret.as_bytes(),
        );
        let unbound = UnboundKey::new(&CHACHA20_POLY1305, derived.as_ref())
            .expect("HMAC-SHA256 gives a 256-bit key");
        Ok(Self {
            key: LessSafeKey::new(unbound),
        })
    }
}

impl Sealer for SecretBox {
    fn seal(&self, context: &str, plain: &str) -> String {
        let nonce_bytes: [u8; NONCE_LEN] = random_bytes(NONCE_LEN)
            .try_into()
            .expect("NONCE_LEN random bytes");
        let mut buffer = plain.as_bytes().to_vec();
        self.key
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce_bytes),
                Aad::from(context.as_bytes()),
                &mut buffer,
            )
            .expect("a configuration secret is far below the cipher's length limit");
        let mut out = nonce_bytes.to_vec();
        out.extend_from_slice(&buffer);
        format!("{SEALED_PREFIX}{}", URL_SAFE_NO_PAD.encode(out))
    }

    fn open(&self, context: &str, sealed: &str) -> Result<String, SealError> {
        let encoded = sealed
            .strip_prefix(SEALED_PREFIX)
            .ok_or(SealError::Malformed)?;
        let bytes = URL_SAFE_NO_PAD
            .decode(encoded)
            .map_err(|_| SealError::Malformed)?;
        if bytes.len() < NONCE_LEN + CHACHA20_POLY1305.tag_len() {
            return Err(SealError::Malformed);
        }
        let (nonce, rest) = bytes.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| SealError::Malformed)?;
        let mut buffer = rest.to_vec();
        let plain = self
            .key
            .open_in_place(nonce, Aad::from(context.as_bytes()), &mut buffer)
            .map_err(|_| SealError::WrongKey)?;
        String::from_utf8(plain.to_vec()).map_err(|_| SealError::Malformed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "0123456789abcdef0123456789abcdef";

    #[test]
    fn round_trip_with_a_fresh_nonce_each_time() {
        let sealer = SecretBox::new(KEY).unwrap();
        let a = sealer.seal("configurations/x", "s3cret");
        let b = sealer.seal("configurations/x", "s3cret");
        assert!(a.starts_with("enc:v1:"));
        assert!(!a.contains("s3cret"));
        assert_ne!(a, b, "random nonce per value");
        assert_eq!(sealer.open("configurations/x", &a).unwrap(), "s3cret");
        assert_eq!(sealer.open("configurations/x", &b).unwrap(), "s3cret");
        assert_eq!(sealer.open("c", &sealer.seal("c", "")).unwrap(), "");
    }

    #[test]
    fn wrong_key_context_or_tampering_is_refused() {
        let sealer = SecretBox::new(KEY).unwrap();
        let other = SecretBox::new("another-key-another-key-another-key").unwrap();
        let sealed = sealer.seal("configurations/x", "s3cret");
        assert_eq!(
            other.open("configurations/x", &sealed),
            Err(SealError::WrongKey)
        );
        assert_eq!(
            sealer.open("configurations/y", &sealed),
            Err(SealError::WrongKey)
        );
        // One bit of the tag flipped (in the bytes: a changed last base64
        // character may not even decode).
        let mut bytes = URL_SAFE_NO_PAD
            .decode(sealed.strip_prefix(SEALED_PREFIX).unwrap())
            .unwrap();
        *bytes.last_mut().unwrap() ^= 1;
        let tampered = format!("{SEALED_PREFIX}{}", URL_SAFE_NO_PAD.encode(bytes));
        assert_eq!(
            sealer.open("configurations/x", &tampered),
            Err(SealError::WrongKey)
        );
        assert_eq!(sealer.open("c", "plain"), Err(SealError::Malformed));
        assert_eq!(sealer.open("c", "enc:v1:!!"), Err(SealError::Malformed));
        assert_eq!(sealer.open("c", "enc:v1:AAAA"), Err(SealError::Malformed));
    }

    #[test]
    fn short_keys_are_refused() {
        assert_eq!(SecretBox::new("short").unwrap_err(), ShortKey);
    }
}
