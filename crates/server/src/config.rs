//! Command line and environment: every setting is a flag with an environment
//! fallback, and the flag wins.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};

use berth_store::s3::S3Config;
use clap::{Args, Parser, Subcommand};

use crate::metrics::MetricsSettings;
use crate::signin::{SignInSettings, ThrottleLimits, TrustedProxies};
use crate::units::parse_duration_secs;

/// Berth: one binary serving Harbor's management API, the OCI distribution API
/// and a generator-rest users/auth/articles API over one user store.
#[derive(Debug, Parser)]
#[command(
    name = "berth",
    version = concat!(env!("CARGO_PKG_VERSION"), " (", env!("BERTH_COMMIT"), ")"),
    about
)]
pub struct Cli {
    /// Settings shared by every subcommand.
    #[command(flatten)]
    pub settings: Settings,
    /// What to do; `serve` when omitted.
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the server (the default).
    Serve,
    /// Bring the database schema up to date and exit.
    Migrate,
    /// Exit 0 when a running server is ready (`/readyz` answers 200), 1
    /// otherwise: a container's `HEALTHCHECK`.
    Healthcheck {
        /// The URL to ask; defaults to `/readyz` on this instance's
        /// `--ip`/`--port`, over TLS when `--tls-cert` is set.
        #[arg(long)]
        url: Option<String>,
    },
    /// Copy a single instance (its SQLite database, blob directory and
    /// generated secrets) into a new or empty directory, while it serves.
    Backup {
        /// The directory to write the copy to.
        #[arg(long, value_name = "DIR")]
        to: PathBuf,
    },
    /// Put a copy made by `berth backup` in place of an empty data directory
    /// (and blob directory); start the server afterwards.
    Restore {
        /// The directory `berth backup --to` wrote.
        #[arg(long, value_name = "DIR")]
        from: PathBuf,
    },
    /// Check the configuration (file, environment, flags) and print the
    /// settings in effect, secrets masked; exit 1 when it is not valid.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Manage users from the command line (operators).
    #[command(subcommand)]
    User(UserCommand),
    /// Remove unreferenced blobs and expired uploads once, then exit (safe while
    /// servers run). Values below 1h are unsafe while clients push: a push in
    /// flight may fail and must be repeated (nothing acknowledged is lost).
    Gc {
        /// How long a pushed blob no manifest uses yet is kept (`24h`, `30m`,
        /// seconds); safe from 1h.
        #[arg(long, default_value = "24h", value_parser = parse_duration_secs)]
        grace: i64,
        /// How long an idle upload session is kept; safe from 1h.
        #[arg(long, default_value = "24h", value_parser = parse_duration_secs)]
        upload_expiry: i64,
    },
    /// Check that every stored blob hashes to its name and that every blob,
    /// manifest and upload the database names has its bytes; exit 1 when
    /// something is wrong (safe while servers run).
    Fsck {
        /// Also fix what is safe to fix: remove stray files, move corrupt
        /// files aside, finish an interrupted collection, end broken uploads.
        #[arg(long)]
        repair: bool,
    },
}

/// `berth config ...`
#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Validate the configuration and print the settings in effect.
    Check,
}

/// `berth user ...`
#[derive(Debug, Subcommand)]
pub enum UserCommand {
    /// Create a local user; the password is read from the first line of standard input.
    Create {
        /// Login name.
        #[arg(long)]
        username: String,
        /// E-mail address.
        #[arg(long)]
        email: String,
        /// Real name (defaults to the username).
        #[arg(long)]
        realname: Option<String>,
        /// Make the user a system administrator.
        #[arg(long)]
        admin: bool,
    },
    /// Replace a user's password with the first line of standard input.
    SetPassword {
        /// Login name or e-mail address.
        #[arg(long)]
        username: String,
    },
}

/// Log output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// Settings shared by every subcommand.
#[derive(Debug, Clone, Args)]
pub struct Settings {
    /// Read the flags' values from this TOML file (a key per flag, without its
    /// dashes: `data-dir = "/srv/berth"`); the environment and flags win over it.
    #[arg(long, env = "BERTH_CONFIG", value_name = "FILE", global = true)]
    pub config: Option<PathBuf>,
    /// Address to listen on.
    #[arg(long, env = "IP", default_value = "0.0.0.0", global = true)]
    pub ip: IpAddr,
    /// Port to listen on.
    #[arg(long, env = "PORT", default_value_t = 9000, global = true)]
    pub port: u16,
    /// Serve HTTPS (HTTP/2 and HTTP/1.1) with this certificate chain (PEM,
    /// leaf first); read again when the file changes.
    #[arg(
        long,
        env = "BERTH_TLS_CERT",
        value_name = "PEM",
        requires = "tls_key",
        global = true
    )]
    pub tls_cert: Option<PathBuf>,
    /// The private key of `--tls-cert` (PEM).
    #[arg(
        long,
        env = "BERTH_TLS_KEY",
        value_name = "PEM",
        requires = "tls_cert",
        global = true
    )]
    pub tls_key: Option<PathBuf>,
    /// Require client certificates signed by this CA (PEM): mutual TLS.
    #[arg(
        long,
        env = "BERTH_TLS_CLIENT_CA",
        value_name = "PEM",
        requires = "tls_cert",
        global = true
    )]
    pub tls_client_ca: Option<PathBuf>,
    /// Directory for the SQLite database, blobs and generated secrets.
    #[arg(long, env = "BERTH_DATA_DIR", default_value = "data", global = true)]
    pub data_dir: PathBuf,
    /// Where blobs are stored: `file:///absolute/path` (a directory, which several
    /// instances may share), or `s3://BUCKET[/PREFIX]?endpoint=http://HOST:PORT&region=REGION`
    /// (keys from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, else AWS's credential chain;
    /// no endpoint: AWS);
    /// defaults to `<data-dir>/blobs`.
    #[arg(long, env = "BLOB_STORE", value_name = "URL", value_parser = parse_blob_store, global = true)]
    pub blob_store: Option<BlobLocation>,
    /// Answer blob downloads from an S3 store with a 307 redirect to a presigned URL
    /// (clients then fetch the bytes from the bucket directly).
    #[arg(long, env = "BLOB_REDIRECT", global = true)]
    pub blob_redirect: bool,
    /// How long a proxy-cache project serves a tag before checking it upstream
    /// again (a `HEAD`, which Docker Hub does not count against its pull limit):
    /// seconds, or with a unit (`30s`, `5m`, `1h`).
    #[arg(long, env = "PROXY_CACHE_TTL", default_value = "5m", value_parser = parse_duration_secs, global = true)]
    pub proxy_cache_ttl: i64,
    /// How long connecting to another registry (a proxy cache's upstream, a
    /// replication peer) may take: `10s`, `1m` ...
    #[arg(long, env = "BERTH_PEER_CONNECT_TIMEOUT", default_value = "10s", value_parser = parse_duration_secs, global = true)]
    pub peer_connect_timeout: i64,
    /// How long another registry may take to answer a request's headers (to
    /// answer at all), and to send a small document whole (a token, a
    /// manifest, a page of a listing): `30s`, `2m` ...
    #[arg(long, env = "BERTH_PEER_ANSWER_TIMEOUT", default_value = "30s", value_parser = parse_duration_secs, global = true)]
    pub peer_answer_timeout: i64,
    /// How long a blob streamed from or to another registry may go without
    /// a byte moving before its transfer fails (a proxied pull, a
    /// replication task): `30s`, `2m` ...
    #[arg(long, env = "BERTH_PEER_IDLE_TIMEOUT", default_value = "30s", value_parser = parse_duration_secs, global = true)]
    pub peer_idle_timeout: i64,
    /// Leave the database schema as it is: refuse to start (or to run a
    /// subcommand) unless it is the schema of this version. For a `berth gc`
    /// cron job or a new instance that must never migrate under running servers.
    #[arg(long, env = "BERTH_NO_MIGRATE", global = true)]
    pub no_migrate: bool,
    /// `sqlite://...` or `postgres://...`; defaults to `<data-dir>/berth.db`.
    #[arg(long, env = "DATABASE_URL", global = true)]
    pub database_url: Option<String>,
    /// The URL clients reach this server at (Harbor's `external_url`).
    #[arg(long, env = "EXTERNAL_URL", global = true)]
    pub external_url: Option<String>,
    /// How long issued user tokens live: seconds, or with a unit (`30m`, `12h`, `7d`); `0` never expires.
    #[arg(long, env = "JWT_EXPIRES_IN", default_value = "7d", value_parser = parse_duration_secs, global = true)]
    pub jwt_expires_in: i64,
    /// Log filter (`info`, `debug`, `berth=debug,tower_http=info` ...).
    #[arg(long, env = "BERTH_LOG", default_value = "info", value_parser = parse_log_filter, global = true)]
    pub log: String,
    /// Log format.
    #[arg(
        long,
        env = "BERTH_LOG_FORMAT",
        value_enum,
        default_value = "text",
        global = true
    )]
    pub log_format: LogFormat,
    /// SMTP server for password-reset e-mails (`smtp://host:port`, `smtps://user:pass@host`);
    /// unset: password resets answer 503 and send nothing.
    #[arg(long, env = "SMTP_URL", global = true)]
    pub smtp_url: Option<String>,
    /// Sender address of password-reset e-mails.
    #[arg(
        long,
        env = "SMTP_FROM",
        default_value = "no-reply@berth.local",
        global = true
    )]
    pub smtp_from: String,
    /// Base URL of GitHub's API, for `POST /auth/github`.
    #[arg(
        long,
        env = "GITHUB_API_URL",
        default_value = "https://api.github.com",
        global = true
    )]
    pub github_api_url: String,
    /// Base URL of Google's API, for `POST /auth/google`.
    #[arg(
        long,
        env = "GOOGLE_API_URL",
        default_value = "https://www.googleapis.com",
        global = true
    )]
    pub google_api_url: String,
    /// Base URL of Facebook's Graph API, for `POST /auth/facebook`.
    #[arg(
        long,
        env = "FACEBOOK_API_URL",
        default_value = "https://graph.facebook.com",
        global = true
    )]
    pub facebook_api_url: String,
    /// How long a client has to send a request's headers (and how long an idle
    /// keep-alive connection stays open): `30s`, `1m` ...
    #[arg(long, env = "BERTH_HEADER_TIMEOUT", default_value = "30s", value_parser = parse_duration_secs, global = true)]
    pub header_timeout: i64,
    /// How long a connection with no request in flight stays open (an
    /// HTTP/2 connection that opens no stream, a TLS connection that sends
    /// nothing after its handshake): `60s`, `5m` ...
    #[arg(long, env = "BERTH_IDLE_TIMEOUT", default_value = "60s", value_parser = parse_duration_secs, global = true)]
    pub idle_timeout: i64,
    /// How long a request body may send nothing before the request fails:
    /// `30s`, `2m` ... (a body that keeps `--body-min-rate` may take any time).
    #[arg(long, env = "BERTH_BODY_TIMEOUT", default_value = "30s", value_parser = parse_duration_secs, global = true)]
    pub body_timeout: i64,
    /// The least a request body must send on average, in bytes a second; a
    /// slower one fails once it has used up `--body-timeout` of waiting. `0`
    /// leaves only `--body-timeout`.
    #[arg(
        long,
        env = "BERTH_BODY_MIN_RATE",
        default_value_t = 1024,
        global = true
    )]
    pub body_min_rate: u64,
    /// How many connections are served at once; more wait to be accepted.
    #[arg(
        long,
        env = "BERTH_MAX_CONNECTIONS",
        default_value_t = 4096,
        global = true
    )]
    pub max_connections: usize,
    /// Identity providers `POST /auth/{provider}` signs in with: a comma-separated
    /// list of `github`, `google`, `facebook`; empty (the default) enables none.
    #[arg(long, env = "AUTH_PROVIDERS", default_value = "", value_parser = parse_providers, global = true)]
    pub auth_providers: Providers,
    /// Origins CORS allows on the generator-rest routes: `*`, a comma-separated list, or `none`.
    #[arg(long, env = "CORS_ORIGINS", default_value = "*", global = true)]
    pub cors_origins: String,
    /// Throttle of failed sign-ins: `off`, or `key=value` pairs over the defaults
    /// `account-address=5,address=20,account=100,window=15m`.
    #[arg(
        long,
        env = "BERTH_SIGNIN_THROTTLE",
        default_value = "account-address=5,address=20,account=100,window=15m",
        global = true
    )]
    pub signin_throttle: ThrottleLimits,
    /// Reverse proxies whose `X-Forwarded-For` names the client: addresses and
    /// CIDR blocks, comma-separated (`10.0.0.0/8,127.0.0.1`); empty trusts none.
    #[arg(long, env = "BERTH_TRUSTED_PROXIES", default_value = "", global = true)]
    pub trusted_proxies: TrustedProxies,
    /// Under `oidc_auth`, how long the OpenID provider's word that a user's
    /// refresh token is still good is trusted before a CLI secret sign-in
    /// asks it again (a user removed at the provider loses CLI access within
    /// this time): `5m`, `30s` ...
    #[arg(long, env = "BERTH_OIDC_TOKEN_CHECK", default_value = "5m", value_parser = parse_duration_secs, global = true)]
    pub oidc_token_check: i64,
    /// On SIGTERM or SIGINT, how long requests in flight (a push, a pull) may
    /// take to finish before their connections are closed.
    #[arg(long, env = "BERTH_SHUTDOWN_TIMEOUT", default_value = "30s", value_parser = parse_duration_secs, global = true)]
    pub shutdown_timeout: i64,
    /// How long a job's task (garbage collection, retention, audit purge) is
    /// held without a sign of life before another instance takes it over (its
    /// instance died): `60s`, `2m` ...; its worker renews it a third of that.
    #[arg(long, env = "BERTH_JOB_LEASE", default_value = "60s", value_parser = parse_duration_secs, global = true)]
    pub job_lease: i64,
    /// How many job tasks this instance runs at once in each lane: `lane=count`
    /// pairs over the defaults (`webhook=20` keeps the others); a task never
    /// waits behind another lane's, and one webhook or replication policy
    /// holds at most half its lane. A lane of 0 runs nothing here.
    #[arg(
        long,
        env = "BERTH_JOB_WORKERS",
        default_value = "webhook=10,replication=4,retention=2,gc=1,audit-purge=1",
        global = true
    )]
    pub job_workers: crate::workers::JobWorkers,
    /// Serve Prometheus metrics (`/metrics`) on this address (`127.0.0.1:9090`)
    /// instead of on the main port.
    #[arg(long, env = "BERTH_METRICS_ADDR", global = true)]
    pub metrics_addr: Option<SocketAddr>,
    /// Answer `/metrics` to system administrators only (Basic auth); it is open
    /// otherwise, as Harbor's exporter is.
    #[arg(long, env = "BERTH_METRICS_REQUIRE_ADMIN", global = true)]
    pub metrics_require_admin: bool,
}

impl Settings {
    /// Where `/metrics` is served and who may read it.
    pub fn metrics(&self) -> MetricsSettings {
        MetricsSettings {
            addr: self.metrics_addr,
            require_admin: self.metrics_require_admin,
        }
    }

    /// How long a job task is held without a renewal.
    pub fn job_lease(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.job_lease.max(3).unsigned_abs())
    }

    /// How long each step of a request to another registry may take (at
    /// least a second each).
    pub fn peer_deadlines(&self) -> berth_net::Deadlines {
        let seconds = |value: i64| std::time::Duration::from_secs(value.max(1).unsigned_abs());
        berth_net::Deadlines {
            connect: seconds(self.peer_connect_timeout),
            answer: seconds(self.peer_answer_timeout),
            idle: seconds(self.peer_idle_timeout),
        }
    }

    /// The limits of the server loop.
    pub fn serve_limits(&self) -> crate::serve::ServeLimits {
        crate::serve::ServeLimits {
            header_timeout: std::time::Duration::from_secs(
                self.header_timeout.max(1).unsigned_abs(),
            ),
            idle_timeout: std::time::Duration::from_secs(self.idle_timeout.max(1).unsigned_abs()),
            body_timeout: std::time::Duration::from_secs(self.body_timeout.max(1).unsigned_abs()),
            body_min_rate: self.body_min_rate,
            max_connections: self.max_connections.max(1),
            shutdown_timeout: std::time::Duration::from_secs(
                self.shutdown_timeout.max(0).unsigned_abs(),
            ),
        }
    }

    /// The files TLS is served from, when it is.
    pub fn tls(&self) -> Option<crate::tls::TlsFiles> {
        Some(crate::tls::TlsFiles {
            cert: self.tls_cert.clone()?,
            key: self.tls_key.clone()?,
            client_ca: self.tls_client_ca.clone(),
        })
    }

    /// The sign-in protection in effect.
    pub fn signin(&self) -> SignInSettings {
        SignInSettings {
            limits: self.signin_throttle,
            trusted_proxies: self.trusted_proxies.clone(),
            oidc_token_check: std::time::Duration::from_secs(
                self.oidc_token_check.max(0).unsigned_abs(),
            ),
        }
    }

    /// The database URL in effect: `--database-url` / `DATABASE_URL`, the file
    /// `DATABASE_URL_FILE` names, else SQLite in the data directory.
    pub fn database_url(&self) -> anyhow::Result<String> {
        if let Some(url) = &self.database_url {
            anyhow::ensure!(
                std::env::var_os("DATABASE_URL_FILE").is_none(),
                "both DATABASE_URL (or --database-url) and DATABASE_URL_FILE are set: keep one"
            );
            return Ok(url.clone());
        }
        if let Some(url) = secret("DATABASE_URL").map_err(anyhow::Error::msg)? {
            return Ok(url);
        }
        Ok(format!(
            "sqlite://{}?mode=rwc",
            self.data_dir.join("berth.db").display()
        ))
    }

    /// The blob store in effect: the `--blob-store` one, else the directory `<data-dir>/blobs`.
    pub fn blob_location(&self) -> BlobLocation {
        self.blob_store
            .clone()
            .unwrap_or_else(|| BlobLocation::Directory(blob_dir(&self.data_dir)))
    }

    /// This instance's own listener as a URL a local client reaches it at
    /// (loopback when listening on every address).
    pub fn local_url(&self) -> String {
        let host = if self.ip.is_unspecified() {
            "127.0.0.1".to_string()
        } else {
            match self.ip {
                IpAddr::V6(v6) => format!("[{v6}]"),
                IpAddr::V4(v4) => v4.to_string(),
            }
        };
        let scheme = if self.tls_cert.is_some() {
            "https"
        } else {
            "http"
        };
        format!("{scheme}://{host}:{}", self.port)
    }

    /// The external URL in effect: the configured one, else this listener's address.
    pub fn external_url(&self) -> String {
        match &self.external_url {
            Some(url) => url.trim_end_matches('/').to_string(),
            None => self.local_url(),
        }
    }
}

/// The secret `name` from the environment: the variable itself, or the
/// contents of the file `<name>_FILE` names (as Docker and Kubernetes secrets
/// are mounted; one trailing newline dropped). Both set is an error, as is a
/// file that cannot be read.
pub fn secret(name: &str) -> Result<Option<String>, String> {
    secret_with(name, |var| std::env::var(var).ok())
}

/// [`secret`] with the environment read through `env`.
pub fn secret_with(
    name: &str,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Option<String>, String> {
    let file_var = format!("{name}_FILE");
    let direct = env(name).filter(|v| !v.is_empty());
    let Some(path) = env(&file_var).filter(|v| !v.is_empty()) else {
        return Ok(direct);
    };
    if direct.is_some() {
        return Err(format!("both {name} and {file_var} are set: keep one"));
    }
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("{file_var}: cannot read {path}: {e}"))?;
    let text = text
        .strip_suffix('\n')
        .map_or(text.as_str(), |t| t.strip_suffix('\r').unwrap_or(t));
    Ok(Some(text.to_string()).filter(|t| !t.is_empty()))
}

/// Where blobs are kept.
#[derive(Clone, Debug)]
pub enum BlobLocation {
    /// A directory.
    Directory(PathBuf),
    /// An S3-compatible bucket (its `Debug` hides the secret key).
    S3(S3Config),
}

/// Parses a `--blob-store` URL: `file:///absolute/path`, or
/// `s3://BUCKET[/PREFIX]?endpoint=...&region=...` with keys from the AWS
/// environment variables, or none (AWS's credential chain).
pub fn parse_blob_store(text: &str) -> Result<BlobLocation, String> {
    // A credential file that cannot be read is reported as missing credentials
    // by the parser, with `secret`'s reason logged first.
    parse_blob_store_with(text, |name| {
        secret(name)
            .map_err(|e| eprintln!("berth: {e}"))
            .ok()
            .flatten()
    })
}

/// [`parse_blob_store`] with the environment read through `env`.
pub fn parse_blob_store_with(
    text: &str,
    env: impl Fn(&str) -> Option<String>,
) -> Result<BlobLocation, String> {
    const USE: &str = "use file:///absolute/path or s3://BUCKET[/PREFIX]?endpoint=http://HOST:PORT";
    let text = text.trim();
    let Some((scheme, rest)) = text.split_once("://") else {
        return Err(format!("`{text}` is not a blob store URL: {USE}"));
    };
    match scheme.to_ascii_lowercase().as_str() {
        "file" => {}
        "s3" => {
            return S3Config::parse(text, env)
                .map(BlobLocation::S3)
                .map_err(|e| format!("`{text}`: {e}"));
        }
        _ => {
            return Err(format!(
                "`{text}`: unknown blob store scheme `{scheme}`; {USE}"
            ));
        }
    }
    if !rest.starts_with('/') || rest.len() < 2 {
        return Err(format!(
            "`{text}` names no absolute path: use file:///absolute/path (three slashes)"
        ));
    }
    if rest.contains(['?', '#', '%']) {
        return Err(format!(
            "`{text}`: a blob store path takes no query, fragment or percent-encoding \
             (use file:///absolute/path)"
        ));
    }
    Ok(BlobLocation::Directory(PathBuf::from(rest)))
}

/// The default blob directory of a data directory (when `--blob-store` is unset).
pub fn blob_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("blobs")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blob_store_urls() {
        assert!(matches!(
            parse_blob_store("file:///srv/berth/blobs"),
            Ok(BlobLocation::Directory(path)) if path == std::path::Path::new("/srv/berth/blobs")
        ));
        let env = |name: &str| match name {
            "AWS_ACCESS_KEY_ID" => Some("AKID".to_string()),
            "AWS_SECRET_ACCESS_KEY" => Some("very-secret".to_string()),
            _ => None,
        };
        let Ok(BlobLocation::S3(s3)) = parse_blob_store_with(
            "s3://bucket/some/prefix?endpoint=http://127.0.0.1:9000&region=eu-west-1",
            env,
        ) else {
            panic!("an S3 URL with credentials parses");
        };
        assert_eq!(
            (s3.bucket.as_str(), s3.prefix.as_str(), s3.region.as_str()),
            ("bucket", "some/prefix", "eu-west-1")
        );
        assert_eq!(s3.endpoint.as_deref(), Some("http://127.0.0.1:9000"));
        let printed = format!("{:?}", BlobLocation::S3(s3));
        assert!(!printed.contains("very-secret"), "{printed}");
        let Ok(BlobLocation::S3(chain)) = parse_blob_store_with("s3://bucket", |_| None) else {
            panic!("an S3 URL without keys parses: the credential chain finds them");
        };
        assert!(chain.keys.is_none());
        let half = parse_blob_store_with("s3://bucket", |name| {
            (name == "AWS_ACCESS_KEY_ID").then(|| "AKID".to_string())
        })
        .unwrap_err();
        assert!(half.contains("AWS_SECRET_ACCESS_KEY"), "{half}");
        for bad in [
            "s3://",
            "s3://bucket?colour=blue",
            "s3://bucket?endpoint=ftp://x",
        ] {
            assert!(parse_blob_store_with(bad, env).is_err(), "{bad}");
        }
        for bad in [
            "/srv/blobs",
            "file://relative/path",
            "file://",
            "file:///a?b",
            "http://host/blobs",
        ] {
            let err = parse_blob_store(bad).unwrap_err();
            assert!(err.contains("file:///absolute/path"), "{bad}: {err}");
        }
    }
}

/// The identity providers an administrator enabled (`--auth-providers`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Providers(pub Vec<String>);

impl Providers {
    /// Whether `provider` is enabled.
    pub fn enabled(&self, provider: &str) -> bool {
        self.0.iter().any(|p| p == provider)
    }
}

/// The providers `POST /auth/{provider}` knows.
pub const PROVIDERS: [&str; 3] = ["github", "google", "facebook"];

/// A log filter `tracing` understands (`info`, `berth=debug,sqlx=warn`).
fn parse_log_filter(text: &str) -> Result<String, String> {
    tracing_subscriber::EnvFilter::try_new(text)
        .map(|_| text.to_string())
        .map_err(|e| format!("not a log filter: {e}"))
}

fn parse_providers(text: &str) -> Result<Providers, String> {
    let mut enabled = Vec::new();
    for name in text.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let name = name.to_ascii_lowercase();
        if !PROVIDERS.contains(&name.as_str()) {
            return Err(format!(
                "unknown identity provider {name:?}: use {}",
                PROVIDERS.join(", ")
            ));
        }
        if !enabled.contains(&name) {
            enabled.push(name);
        }
    }
    Ok(Providers(enabled))
}
