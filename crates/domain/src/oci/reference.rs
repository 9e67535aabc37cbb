//! Repository names, tags, digests and manifest references, with the grammars
//! of the OCI distribution spec.

use std::fmt;

/// The longest repository name accepted (distribution's limit).
pub const MAX_NAME_LEN: usize = 255;

/// Whether `name` is a valid repository name:
/// `[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*(/[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*)*`.
pub fn is_valid_name(name: &str) -> bool {
    !name.is_empty() && name.len() <= MAX_NAME_LEN && name.split('/').all(is_valid_component)
}

fn is_valid_component(part: &str) -> bool {
    let bytes = part.as_bytes();
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    if bytes.is_empty() || !alnum(bytes[0]) || !alnum(bytes[bytes.len() - 1]) {
        return false;
    }
    let mut i = 0;
    while i < bytes.len() {
        if alnum(bytes[i]) {
            i += 1;
            continue;
        }
        // A separator run: `.`, `_`, `__` or one or more `-`.
        let start = i;
        while i < bytes.len() && !alnum(bytes[i]) {
            i += 1;
        }
        let sep = &part[start..i];
        let ok = sep == "." || sep == "_" || sep == "__" || sep.bytes().all(|b| b == b'-');
        if !ok {
            return false;
        }
    }
    true
}

/// Whether `tag` is a valid tag: `[a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}`.
pub fn is_valid_tag(tag: &str) -> bool {
    let bytes = tag.as_bytes();
    let first = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let rest = |b: u8| first(b) || b == b'.' || b == b'-';
    !bytes.is_empty()
        && bytes.len() <= 128
        && first(bytes[0])
        && bytes[1..].iter().all(|&b| rest(b))
}

/// Why a digest string was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DigestError {
    /// Not `algorithm:encoded` with a well-formed encoding.
    Invalid,
    /// Well-formed, but an algorithm this registry does not store.
    Unsupported,
}

/// A hash algorithm blobs and manifests may be addressed by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Algorithm {
    /// `sha256`, the default.
    Sha256,
    /// `sha512`.
    Sha512,
}

impl Algorithm {
    /// Every supported algorithm.
    pub const ALL: [Self; 2] = [Self::Sha256, Self::Sha512];

    /// The name as written in a digest (`sha256`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Sha256 => "sha256",
            Self::Sha512 => "sha512",
        }
    }

    /// The algorithm named `name`, if supported.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|a| a.name() == name)
    }

    /// Length of the hex encoding.
    pub fn hex_len(self) -> usize {
        match self {
            Self::Sha256 => 64,
            Self::Sha512 => 128,
        }
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A content digest, `sha256:<64 hex>` or `sha512:<128 hex>` (lower case).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Digest(String);

impl Digest {
    /// Parses `<algorithm>:<hex>`; well-formed digests of other algorithms are `Unsupported`.
    pub fn parse(text: &str) -> Result<Self, DigestError> {
        let (algorithm, encoded) = text.split_once(':').ok_or(DigestError::Invalid)?;
        let algo_ok = !algorithm.is_empty()
            && algorithm
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"+._-".contains(&b));
        let enc_ok = !encoded.is_empty()
            && encoded
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"=_-".contains(&b));
        if !algo_ok || !enc_ok {
            return Err(DigestError::Invalid);
        }
        let algorithm = Algorithm::from_name(algorithm).ok_or(DigestError::Unsupported)?;
        let hex_ok = encoded.len() == algorithm.hex_len()
            && encoded
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        if hex_ok {
            Ok(Self(text.to_string()))
        } else {
            Err(DigestError::Invalid)
        }
    }

    /// The digest of raw hash output `bytes` of `algorithm`.
    pub fn from_hash(algorithm: Algorithm, bytes: &[u8]) -> Self {
        let name = algorithm.name();
        let mut text = String::with_capacity(name.len() + 1 + bytes.len() * 2);
        text.push_str(name);
        text.push(':');
        for b in bytes {
            text.push(char::from(HEX[usize::from(b >> 4)]));
            text.push(char::from(HEX[usize::from(b & 15)]));
        }
        Self(text)
    }

    /// The digest of 32 raw SHA-256 bytes.
    pub fn from_sha256_bytes(bytes: &[u8]) -> Self {
        Self::from_hash(Algorithm::Sha256, bytes)
    }

    /// The full text, `<algorithm>:<hex>`.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The algorithm.
    pub fn algorithm(&self) -> Algorithm {
        if self.0.starts_with("sha512:") {
            Algorithm::Sha512
        } else {
            Algorithm::Sha256
        }
    }

    /// The hex part.
    pub fn hex(&self) -> &str {
        &self.0[self.algorithm().name().len() + 1..]
    }
}

const HEX: &[u8; 16] = b"0123456789abcdef";

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// How a manifest is addressed: by tag or by digest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reference {
    /// A tag name.
    Tag(String),
    /// A manifest digest.
    Digest(Digest),
}

impl Reference {
    /// A digest when the text contains `:`, else a tag; `None` when neither is valid.
    pub fn parse(text: &str) -> Result<Self, DigestError> {
        if text.contains(':') {
            Digest::parse(text).map(Self::Digest)
        } else if is_valid_tag(text) {
            Ok(Self::Tag(text.to_string()))
        } else {
            Err(DigestError::Invalid)
        }
    }
}

impl fmt::Display for Reference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Tag(tag) => f.write_str(tag),
            Self::Digest(digest) => f.write_str(digest.as_str()),
        }
    }
}

/// The project part of a repository name (`library` of `library/nginx`), if it has one.
pub fn project_of(name: &str) -> Option<&str> {
    name.split_once('/').map(|(project, _)| project)
}

/// A repository's name within its project: `team/app` of `library/team/app`
/// (the whole name when it has no project part).
pub fn within_project(name: &str) -> &str {
    name.split_once('/').map_or(name, |(_, rest)| rest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        for ok in ["library/nginx", "a", "a/b/c", "a.b_c__d---e/x", "p/0"] {
            assert!(is_valid_name(ok), "{ok}");
        }
        for bad in [
            "", "A/b", "a//b", "a/", "/a", "a/-b", "a/b_", "a/b..c", "a/b___c", "a/b%2Fc",
        ] {
            assert!(!is_valid_name(bad), "{bad}");
        }
        assert!(!is_valid_name(&"a".repeat(256)));
    }

    #[test]
    fn tags() {
        assert!(is_valid_tag("latest"));
        assert!(is_valid_tag("_v1.2-rc"));
        assert!(!is_valid_tag(".x"));
        assert!(!is_valid_tag("-x"));
        assert!(!is_valid_tag(""));
        assert!(!is_valid_tag(&"a".repeat(129)));
        assert!(is_valid_tag(&"a".repeat(128)));
    }

    #[test]
    fn digests() {
        let hex = "a".repeat(64);
        let d = Digest::parse(&format!("sha256:{hex}")).unwrap();
        assert_eq!(d.hex(), hex);
        assert_eq!(Digest::parse("sha256:abc"), Err(DigestError::Invalid));
        assert_eq!(
            Digest::parse(&format!("sha256:{}", "A".repeat(64))),
            Err(DigestError::Invalid)
        );
        assert_eq!(Digest::parse("nocolon"), Err(DigestError::Invalid));
        let long = Digest::parse(&format!("sha512:{}", "a".repeat(128))).unwrap();
        assert_eq!(long.algorithm(), Algorithm::Sha512);
        assert_eq!(long.hex(), "a".repeat(128));
        assert_eq!(d.algorithm(), Algorithm::Sha256);
        assert_eq!(
            Digest::parse(&format!("md5:{}", "a".repeat(32))),
            Err(DigestError::Unsupported)
        );
        assert_eq!(Digest::parse("sha512:abc"), Err(DigestError::Invalid));
        assert_eq!(
            Digest::parse(&format!("sha512:{}", "a".repeat(64))),
            Err(DigestError::Invalid)
        );
        assert_eq!(Algorithm::from_name("sha512"), Some(Algorithm::Sha512));
        assert_eq!(Algorithm::from_name("sha384"), None);
        assert_eq!(
            Digest::from_sha256_bytes(&[0xab; 32]).hex(),
            "ab".repeat(32)
        );
    }

    #[test]
    fn references() {
        assert_eq!(
            Reference::parse("latest"),
            Ok(Reference::Tag("latest".into()))
        );
        assert!(matches!(
            Reference::parse(&format!("sha256:{}", "0".repeat(64))),
            Ok(Reference::Digest(_))
        ));
        assert!(Reference::parse("bad tag").is_err());
        assert_eq!(project_of("library/nginx"), Some("library"));
        assert_eq!(project_of("nginx"), None);
    }
}
