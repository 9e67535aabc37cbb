//! Password hashes as PHC strings.
//!
//! New hashes are argon2id; verification also accepts bcrypt (`$2a$`, `$2b$`,
//! `$2y$`) so that generator-rest databases can be imported as they are.

use std::cell::RefCell;
use std::sync::LazyLock;

use argon2::password_hash::generate_salt;
use argon2::password_hash::phc::{Output, ParamsString, PasswordHash, Salt};
use argon2::{Algorithm, Argon2, Block, Params, Version};

thread_local! {
    /// argon2's working memory (19 MiB with the default parameters), kept by
    /// each thread for its next hash. Allocated afresh for every hash (64-byte
    /// aligned), it fragmented the allocator's heaps: each freed block was a
    /// little too small for the next aligned request, and 64 connections
    /// signing in with a wrong password left the server at over 500 MB of RSS.
    static BLOCKS: RefCell<Vec<Block>> = const { RefCell::new(Vec::new()) };
}

/// argon2 of `password` and `salt` into `out`, in this thread's kept memory.
/// argon2 writes every block before it reads it, so what an earlier hash left
/// there does not matter.
fn argon2_into(
    argon2: &Argon2<'_>,
    password: &[u8],
    salt: &[u8],
    out: &mut [u8],
) -> argon2::Result<()> {
    BLOCKS.with_borrow_mut(|blocks| {
        let count = argon2.params().block_count();
        if blocks.len() < count {
            *blocks = vec![Block::new(); count];
        }
        argon2.hash_password_into_with_memory(password, salt, out, &mut blocks[..count])
    })
}

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
/// off the async workers, on few threads (each keeps the hash's memory).
pub fn hash_password(password: &str) -> String {
    let argon2 = Argon2::default();
    let salt = generate_salt();
    let mut out = [0u8; Params::DEFAULT_OUTPUT_LEN];
    argon2_into(&argon2, password.as_bytes(), &salt, &mut out)
        .expect("argon2 with default parameters and a random salt cannot fail");
    PasswordHash {
        algorithm: Algorithm::default().ident(),
        version: Some(Version::default().into()),
        params: ParamsString::try_from(argon2.params()).expect("default parameters"),
        salt: Some(Salt::new(&salt).expect("a salt of the recommended length")),
        hash: Some(Output::new(&out).expect("an output of the default length")),
    }
    .to_string()
}

/// Whether `password` matches the stored PHC string. Unknown or corrupt hashes never match.
pub fn verify_password(password: &str, stored: &str) -> bool {
    if stored.starts_with("$2a$") || stored.starts_with("$2b$") || stored.starts_with("$2y$") {
        bcrypt::verify(password, stored).unwrap_or(false)
    } else if stored.starts_with("$argon2") {
        verify_argon2(password.as_bytes(), stored).unwrap_or(false)
    } else {
        false
    }
}

/// What `Argon2::verify_password` does, in this thread's kept memory; `None`
/// for a hash that does not parse.
fn verify_argon2(password: &[u8], stored: &str) -> Option<bool> {
    let hash = PasswordHash::new(stored).ok()?;
    let (salt, expected) = (hash.salt.as_ref()?, hash.hash.as_ref()?);
    let algorithm = Algorithm::try_from(hash.algorithm.as_str()).ok()?;
    let version = hash
        .version
        .map_or(Ok(Version::default()), Version::try_from)
        .ok()?;
    let params = Params::try_from(&hash).ok()?;
    let mut out = vec![0u8; params.output_len().unwrap_or(Params::DEFAULT_OUTPUT_LEN)];
    argon2_into(
        &Argon2::new(algorithm, version, params),
        password,
        salt,
        &mut out,
    )
    .ok()?;
    // `Output`'s comparison takes the same time wherever the bytes differ.
    Some(Output::new(&out).ok()? == *expected)
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
    fn hashes_of_the_argon2_crate_verify_and_ours_verify_there() {
        use argon2::{PasswordHasher, PasswordVerifier};
        let theirs = Argon2::default()
            .hash_password(b"s3cret-Pass")
            .unwrap()
            .to_string();
        assert!(verify_password("s3cret-Pass", &theirs));
        assert!(!verify_password("s3cret-pass", &theirs));
        let ours = hash_password("s3cret-Pass");
        let parsed = PasswordHash::new(&ours).unwrap();
        assert!(
            Argon2::default()
                .verify_password(b"s3cret-Pass", &parsed)
                .is_ok()
        );
        assert!(
            Argon2::default()
                .verify_password(b"s3cret-pass", &parsed)
                .is_err()
        );
    }

    #[test]
    fn other_parameters_in_the_kept_memory() {
        use argon2::PasswordHasher;
        // Smaller and larger memory costs than the default, and argon2i and
        // version 0x10, on one thread one after the other.
        for (algorithm, version, m_cost) in [
            (Algorithm::Argon2id, Version::V0x13, 4096),
            (Algorithm::Argon2i, Version::V0x10, 8192),
            (Algorithm::Argon2id, Version::V0x13, 32768),
        ] {
            let params = Params::new(m_cost, 2, 1, Some(32)).unwrap();
            let stored = Argon2::new(algorithm, version, params)
                .hash_password(b"pw-123456")
                .unwrap()
                .to_string();
            assert!(verify_password("pw-123456", &stored), "{stored}");
            assert!(!verify_password("pw-1234567", &stored), "{stored}");
        }
        assert!(verify_password("s3cret", &hash_password("s3cret")));
    }

    #[test]
    fn garbage_never_matches() {
        assert!(!verify_password("", ""));
        assert!(!verify_password("x", "$argon2id$broken"));
        assert!(!verify_password("x", "plain"));
    }
}
