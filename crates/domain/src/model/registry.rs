//! Upstream registries (Harbor's `/registries`): endpoints a proxy-cache
//! project pulls through, with the credential Berth signs in with there.
//! The credential's secret is sealed at rest and never shown.

use crate::DomainError;

/// The longest registry name Harbor accepts.
pub const MAX_NAME_LEN: usize = 64;

/// The credential type a registry gets when it has an access key and names none.
pub const CREDENTIAL_BASIC: &str = "basic";

/// The health a registry that answered its check is stored with.
pub const HEALTHY: &str = "healthy";

/// What kind of server a registry is (Harbor's adapter types Berth supports).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RegistryType {
    /// Docker Hub.
    DockerHub,
    /// Any server speaking the distribution API (docker-registry, zot, Berth ...).
    DockerRegistry,
    /// Another Harbor (or Berth).
    Harbor,
}

/// Docker Hub's web address, which Harbor's UI fixes as a `docker-hub` registry's URL.
const DOCKER_HUB_WEB: &str = "https://hub.docker.com";
/// Where Docker Hub serves the distribution API.
const DOCKER_HUB_API: &str = "https://registry-1.docker.io";

impl RegistryType {
    /// Every supported type, in the order `/replication/adapters` lists them.
    pub const ALL: [RegistryType; 3] = [Self::DockerHub, Self::DockerRegistry, Self::Harbor];

    /// The type named `name` (Harbor's wire names).
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.name() == name)
    }

    /// Harbor's wire name.
    pub fn name(self) -> &'static str {
        match self {
            Self::DockerHub => "docker-hub",
            Self::DockerRegistry => "docker-registry",
            Self::Harbor => "harbor",
        }
    }

    /// The base URL of the distribution API (`<base>/v2/`) of a registry of
    /// this type at `url` (normalized): Docker Hub's web address stands for
    /// its API host, as in Harbor; any other URL (a mirror) is used as given.
    pub fn api_base(self, url: &str) -> String {
        match self {
            Self::DockerHub if url.eq_ignore_ascii_case(DOCKER_HUB_WEB) => DOCKER_HUB_API.into(),
            _ => url.to_string(),
        }
    }

    /// The upstream name of `repository` (the name within the proxy project):
    /// Docker Hub keeps its official images under `library/`, which
    /// `docker pull nginx` leaves out.
    pub fn upstream_repository(self, repository: &str) -> String {
        match self {
            Self::DockerHub if !repository.contains('/') => format!("library/{repository}"),
            _ => repository.to_string(),
        }
    }
}

/// A stored upstream registry. The secret is not part of it: only whether
/// one is kept (see the store's `access_secret`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registry {
    /// Harbor `id`.
    pub id: i64,
    /// What it was created or last updated with.
    pub settings: RegistrySettings,
    /// Whether a (sealed) secret is kept.
    pub has_secret: bool,
    /// Creation time, store format.
    pub created_at: String,
    /// Last update time, store format.
    pub updated_at: String,
}

/// What a registry is created or updated with (everything but its id, its
/// times and its secret).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RegistrySettings {
    /// Unique name, 1 to [`MAX_NAME_LEN`] characters.
    pub name: String,
    /// Normalized URL ([`normalize_url`]).
    pub url: String,
    /// Harbor's type name.
    pub kind: String,
    /// Free text.
    pub description: String,
    /// Whether TLS certificates go unchecked.
    pub insecure: bool,
    /// PEM CA certificates, or empty.
    pub ca_certificate: String,
    /// `basic`, or empty without an access key.
    pub credential_type: String,
    /// The user name, or empty.
    pub access_key: String,
    /// The health found by the last check.
    pub status: String,
}

/// What an update does to the stored secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretChange {
    /// Keep it as it is.
    Keep,
    /// Replace it.
    Set(String),
    /// Remove it.
    Clear,
}

/// Checks a registry name: Harbor's rules (not empty, at most 64 characters).
pub fn validate_name(name: &str) -> Result<(), DomainError> {
    if name.is_empty() {
        return Err(DomainError::invalid("name", "name cannot be empty"));
    }
    if name.chars().count() > MAX_NAME_LEN {
        return Err(DomainError::invalid(
            "name",
            format!("the max length of name is {MAX_NAME_LEN}"),
        ));
    }
    Ok(())
}

/// The type named `name`, or Harbor's 400 for one Berth has no adapter for.
pub fn parse_type(name: &str) -> Result<RegistryType, DomainError> {
    RegistryType::parse(name).ok_or_else(|| {
        DomainError::invalid(
            "type",
            format!(
                "unsupported registry type {name:?}: it must be one of {}",
                RegistryType::ALL.map(RegistryType::name).join(", ")
            ),
        )
    })
}

/// The credential type to store for `access_key` and the requested type:
/// none without an access key, `basic` by default. Only Basic credentials are
/// supported (they are what Docker Hub, Harbor and docker-registry take).
pub fn credential_type(requested: &str, access_key: &str) -> Result<String, DomainError> {
    if access_key.is_empty() {
        return Ok(String::new());
    }
    match requested {
        "" | CREDENTIAL_BASIC => Ok(CREDENTIAL_BASIC.into()),
        other => Err(DomainError::invalid(
            "credential.type",
            format!("unsupported credential type {other:?}: only \"basic\" is supported"),
        )),
    }
}

/// Harbor's `ValidateHTTPURL`: spaces and trailing slashes trimmed, `http://`
/// added when no scheme is given, and only `scheme://host[:port][/path]` kept
/// (user info, query and fragment dropped, so a registry cannot carry
/// credentials or parameters in its URL). The scheme must be http or https
/// and the host present and well formed.
pub fn normalize_url(text: &str) -> Result<String, DomainError> {
    let trimmed = text.trim_matches(' ').trim_end_matches('/');
    if trimmed.is_empty() {
        return Err(DomainError::invalid("url", "empty string"));
    }
    let with_scheme;
    let full = if trimmed.contains("://") {
        trimmed
    } else {
        with_scheme = format!("http://{trimmed}");
        &with_scheme
    };
    let invalid = |why: &str| DomainError::invalid("url", format!("invalid URL: {why}"));
    let (scheme, rest) = full.split_once("://").ok_or_else(|| invalid("no scheme"))?;
    let scheme = scheme.to_ascii_lowercase();
    if scheme != "http" && scheme != "https" {
        return Err(DomainError::invalid(
            "url",
            format!("invalid HTTP scheme: {scheme}"),
        ));
    }
    let rest = rest.split(['?', '#']).next().unwrap_or_default();
    let (authority, path) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    validate_host_port(host_port).map_err(invalid)?;
    if path.chars().any(|c| c.is_control() || c == ' ') {
        return Err(invalid("the path has spaces or control characters"));
    }
    let path = path.trim_end_matches('/');
    Ok(format!(
        "{scheme}://{}{path}",
        host_port.to_ascii_lowercase()
    ))
}

/// Checks `host[:port]` (IPv6 hosts in brackets).
fn validate_host_port(host_port: &str) -> Result<(), &'static str> {
    let (host, port) = if let Some(rest) = host_port.strip_prefix('[') {
        let (inside, after) = rest.split_once(']').ok_or("unclosed IPv6 bracket")?;
        if inside.parse::<std::net::Ipv6Addr>().is_err() {
            return Err("bad IPv6 address");
        }
        match after {
            "" => ("v6", None),
            _ => ("v6", Some(after.strip_prefix(':').ok_or("bad port")?)),
        }
    } else {
        match host_port.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (host_port, None),
        }
    };
    if host.is_empty() {
        return Err("missing host");
    }
    let host_ok = host
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'));
    if !host_ok {
        return Err("bad host");
    }
    if let Some(port) = port
        && port.parse::<u16>().is_err()
    {
        return Err("bad port");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_normalized_as_harbor_does() {
        assert_eq!(
            normalize_url(" https://Reg.Example.com:5000/ ").unwrap(),
            "https://reg.example.com:5000"
        );
        assert_eq!(
            normalize_url("127.0.0.1:5000").unwrap(),
            "http://127.0.0.1:5000"
        );
        assert_eq!(
            normalize_url("https://user:pw@host/sub/path/?q=1#f").unwrap(),
            "https://host/sub/path"
        );
        assert_eq!(normalize_url("http://[::1]:80").unwrap(), "http://[::1]:80");
        for bad in [
            "",
            "  / ",
            "ftp://host",
            "http://",
            "http://:5000",
            "http://host:port",
            "http://host:99999",
            "http://ho st",
            "http://[::1",
        ] {
            assert!(normalize_url(bad).is_err(), "{bad:?}");
        }
        assert_eq!(
            normalize_url("").unwrap_err(),
            DomainError::invalid("url", "empty string")
        );
        assert_eq!(
            normalize_url("ftp://x").unwrap_err().to_string(),
            "invalid HTTP scheme: ftp"
        );
    }

    #[test]
    fn names_types_and_credentials() {
        assert!(validate_name("").is_err());
        assert!(validate_name(&"x".repeat(64)).is_ok());
        assert!(validate_name(&"x".repeat(65)).is_err());
        assert_eq!(parse_type("harbor").unwrap(), RegistryType::Harbor);
        assert!(parse_type("quay").is_err());
        assert_eq!(credential_type("", "").unwrap(), "");
        assert_eq!(credential_type("oauth", "").unwrap(), "");
        assert_eq!(credential_type("", "me").unwrap(), "basic");
        assert!(credential_type("oauth", "me").is_err());
    }

    #[test]
    fn docker_hub_is_reached_at_its_api_host() {
        assert_eq!(
            RegistryType::DockerHub.api_base("https://hub.docker.com"),
            "https://registry-1.docker.io"
        );
        assert_eq!(
            RegistryType::DockerHub.api_base("http://127.0.0.1:5000"),
            "http://127.0.0.1:5000"
        );
        assert_eq!(
            RegistryType::Harbor.api_base("https://hub.docker.com"),
            "https://hub.docker.com"
        );
    }

    #[test]
    fn docker_hub_official_images_live_under_library() {
        let hub = RegistryType::DockerHub;
        assert_eq!(hub.upstream_repository("nginx"), "library/nginx");
        assert_eq!(hub.upstream_repository("bitnami/redis"), "bitnami/redis");
        assert_eq!(hub.upstream_repository("a/b/c"), "a/b/c");
        for other in [RegistryType::DockerRegistry, RegistryType::Harbor] {
            assert_eq!(other.upstream_repository("nginx"), "nginx");
        }
    }
}
