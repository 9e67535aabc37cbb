//! The `berth` command: `serve` (the default), `migrate`, `healthcheck`, `user`.

use std::io::BufRead;
use std::net::SocketAddr;
use std::process::ExitCode;

use anyhow::{Context, bail};
use berth::config::{Command, ConfigCommand, Settings, UserCommand};
use berth::{app, bootstrap, identity};
use berth_domain::model::NewUser;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn main() -> ExitCode {
    let parsed = match berth::settings_file::parse(std::env::args_os()) {
        Ok(parsed) => parsed,
        Err(err) => err.exit(),
    };
    if let Some(Command::Config(ConfigCommand::Check)) = &parsed.cli.command {
        return config_check(&parsed);
    }
    let cli = parsed.cli;
    init_logging(&cli.settings);
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(err) => {
            eprintln!("berth: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match cli.command.unwrap_or(Command::Serve) {
            Command::Serve => serve(&cli.settings).await,
            Command::Migrate => migrate(&cli.settings).await,
            Command::Backup { to } => berth::backup::backup(&cli.settings, &to).await.map(
                |copied| {
                    println!(
                        "backed up the database, {} blob files ({} bytes) and the secrets to {}",
                        copied.blobs,
                        copied.bytes,
                        to.display()
                    );
                },
            ),
            Command::Restore { from } => berth::backup::restore(&cli.settings, &from).await.map(
                |copied| {
                    println!(
                        "restored the database, {} blob files ({} bytes) and the secrets from {}",
                        copied.blobs,
                        copied.bytes,
                        from.display()
                    );
                },
            ),
            Command::Healthcheck { url } => healthcheck(&cli.settings, url).await,
            Command::User(command) => user(&cli.settings, command).await,
            Command::Config(ConfigCommand::Check) => unreachable!("answered before the runtime"),
            Command::Gc {
                grace,
                upload_expiry,
            } => gc(&cli.settings, grace, upload_expiry).await,
            Command::Fsck { repair } => fsck(&cli.settings, repair).await,
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("berth: {err:#}");
            if err.is::<bootstrap::StorageUnavailable>() {
                ExitCode::from(2)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}

/// `berth config check`: the settings in effect, or why they are not valid.
fn config_check(parsed: &berth::settings_file::Parsed) -> ExitCode {
    let checked = berth::settings_file::report(parsed).and_then(|report| {
        let settings = &parsed.cli.settings;
        if let Some(files) = settings.tls() {
            berth::tls::server_config(&files).map_err(|e| format!("TLS: {e:#}"))?;
        }
        Ok(report)
    });
    match checked {
        Ok(report) => {
            println!("{report}\nthe configuration is valid");
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("berth: {err}");
            ExitCode::FAILURE
        }
    }
}

fn init_logging(settings: &Settings) {
    berth::logging::init(settings.log_format, &settings.log);
}

async fn serve(settings: &Settings) -> anyhow::Result<()> {
    let tls = settings
        .tls()
        .map(|files| berth::tls::server_config(&files))
        .transpose()?;
    let state = bootstrap::open(settings).await?;
    let addr = SocketAddr::new(settings.ip, settings.port);
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("listening on {addr}"))?;
    let metrics = settings.metrics();
    if let Some(metrics_addr) = metrics.addr {
        let listener = tokio::net::TcpListener::bind(metrics_addr)
            .await
            .with_context(|| format!("listening for metrics on {metrics_addr}"))?;
        tracing::info!(addr = %metrics_addr, "metrics are served at /metrics");
        let router = berth::metrics::router(state.clone(), &metrics);
        let limits = settings.serve_limits();
        tokio::spawn(berth::serve::serve(
            listener,
            router,
            limits,
            None,
            shutdown_signal(),
        ));
    }
    tokio::spawn(berth::events::sweep(state.clone()));
    tokio::spawn(berth::workers::sweep(state.clone()));
    tokio::spawn(berth::workers::run(
        state.clone(),
        settings.job_lease(),
        settings.job_workers.clone(),
    ));
    tracing::info!(%addr, backend = ?state.store.backend(), tls = tls.is_some(), "berth is listening");
    if let Some(proxies) = berth_net::proxies_in_use() {
        tracing::info!(%proxies, "outbound HTTP goes through the proxies the environment names");
    }
    berth::serve::serve(
        listener,
        app::build_with(state.clone(), &metrics),
        settings.serve_limits(),
        tls,
        shutdown_signal(),
    )
    .await;
    state.registry.flush_pulls(&state.store).await;
    state.audit_queue.flush(&state.store).await;
    state.store.close().await;
    tracing::info!("berth stopped");
    Ok(())
}

/// Resolves on SIGINT or SIGTERM; in-flight requests then finish. The
/// handlers are installed when this is called, not when the future is first
/// polled: a signal sent as soon as the server answers is never the default
/// (process-ending) one.
fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    #[cfg(unix)]
    let signals = {
        use tokio::signal::unix::{SignalKind, signal};
        (
            signal(SignalKind::interrupt()).ok(),
            signal(SignalKind::terminate()).ok(),
        )
    };
    async move {
        #[cfg(unix)]
        {
            let (mut interrupt, mut terminate) = signals;
            let interrupt = async {
                match interrupt.as_mut() {
                    Some(signal) => drop(signal.recv().await),
                    None => std::future::pending::<()>().await,
                }
            };
            let terminate = async {
                match terminate.as_mut() {
                    Some(signal) => drop(signal.recv().await),
                    None => std::future::pending::<()>().await,
                }
            };
            tokio::select! {
                () = interrupt => {},
                () = terminate => {},
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
        }
        tracing::info!("shutting down: finishing in-flight requests");
    }
}

async fn migrate(settings: &Settings) -> anyhow::Result<()> {
    if settings.no_migrate {
        bail!("`berth migrate` and --no-migrate (BERTH_NO_MIGRATE) contradict each other");
    }
    bootstrap::open_store(settings).await?;
    println!("database is up to date");
    Ok(())
}

/// Asks a running instance whether it is ready: by default this instance's
/// `/readyz` (over TLS when `--tls-cert` is set); succeeds on a 200 whose
/// body does not say `unhealthy` (Harbor's `/api/v2.0/health` can be given
/// with `--url`).
async fn healthcheck(settings: &Settings, url: Option<String>) -> anyhow::Result<()> {
    let url = url.unwrap_or_else(|| format!("{}/readyz", settings.local_url()));
    let (tls, rest) = if let Some(rest) = url.strip_prefix("https://") {
        (true, rest)
    } else if let Some(rest) = url.strip_prefix("http://") {
        (false, rest)
    } else {
        bail!("healthcheck takes http:// or https:// URLs");
    };
    let (authority, path) = rest
        .split_once('/')
        .map_or((rest, "/".to_string()), |(a, p)| (a, format!("/{p}")));
    let request = format!("GET {path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n");
    let exchange = async {
        let stream = tokio::net::TcpStream::connect(authority).await?;
        let mut response = Vec::new();
        if tls {
            let mut stream = berth::tls::probe_connector()?
                .connect(berth::tls::probe_server_name(authority)?, stream)
                .await?;
            stream.write_all(request.as_bytes()).await?;
            // A server may end a TLS connection without close_notify after
            // `Connection: close`; what arrived is the answer.
            let _ = stream.read_to_end(&mut response).await;
        } else {
            let mut stream = stream;
            stream.write_all(request.as_bytes()).await?;
            stream.read_to_end(&mut response).await?;
        }
        anyhow::Ok(String::from_utf8_lossy(&response).into_owned())
    };
    let response = tokio::time::timeout(std::time::Duration::from_secs(5), exchange)
        .await
        .context("timed out")??;
    let status_ok = response.starts_with("HTTP/1.1 200");
    let body = response.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    if status_ok && !body.contains("unhealthy") {
        println!("healthy");
        Ok(())
    } else {
        let status = response.lines().next().unwrap_or("no answer");
        bail!("not healthy: {status} {}", body.trim())
    }
}

fn read_password_from_stdin() -> anyhow::Result<String> {
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .context("reading the password from standard input")?;
    let password = line.trim_end_matches(['\r', '\n']).to_string();
    if password.is_empty() {
        bail!("no password on standard input");
    }
    Ok(password)
}

async fn user(settings: &Settings, command: UserCommand) -> anyhow::Result<()> {
    let store = bootstrap::open_store(settings).await?;
    match command {
        UserCommand::Create {
            username,
            email,
            realname,
            admin,
        } => {
            berth_domain::model::user::validate_username(&username)
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            let password = read_password_from_stdin()?;
            let hash = identity::hash_password(&password)
                .await
                .map_err(|e| anyhow::anyhow!(e.message))?;
            let user = store
                .users()
                .create(&NewUser {
                    realname: Some(realname.unwrap_or_else(|| username.clone())),
                    username,
                    email: Some(email.trim().to_lowercase()),
                    password_hash: Some(hash),
                    sysadmin: admin,
                    ..NewUser::default()
                })
                .await?;
            println!("created user {} (id {})", user.username, user.id);
        }
        UserCommand::SetPassword { username } => {
            let password = read_password_from_stdin()?;
            let user = store
                .users()
                .find_by_login(&username)
                .await?
                .with_context(|| format!("no user {username}"))?;
            let hash = identity::hash_password(&password)
                .await
                .map_err(|e| anyhow::anyhow!(e.message))?;
            store.users().set_password(user.id, &hash).await?;
            println!("password of {} changed", user.username);
        }
    }
    Ok(())
}

/// `berth gc`: one garbage collection over the data directory and database.
async fn gc(settings: &Settings, grace: i64, upload_expiry: i64) -> anyhow::Result<()> {
    let blobs = bootstrap::open_blobs(settings).await?;
    let store = bootstrap::open_store(settings).await?;
    if store.configurations().load().await?.flag("read_only") {
        anyhow::bail!(
            "the registry is in read-only mode (configuration read_only): garbage collection does not run"
        );
    }
    let secs = |s: i64| std::time::Duration::from_secs(u64::try_from(s).unwrap_or(0));
    let options = berth_store::repo::gc::GcOptions {
        grace: secs(grace),
        upload_expiry: secs(upload_expiry),
        ..Default::default()
    };
    if let Some(reason) = options.unsafe_reason() {
        eprintln!("warning: unsafe while clients push: {reason}");
    }
    let stats = berth_store::repo::gc::collect_garbage(&store, &blobs, options).await?;
    println!(
        "garbage collection done: {} blobs ({} bytes) deleted, {} links dropped, {} uploads expired, {} stray files removed",
        stats.blobs, stats.bytes, stats.links, stats.uploads, stats.stray_files
    );
    Ok(())
}

/// `berth fsck`: checks (and with `repair`, fixes) stored content; an error when
/// something is left wrong.
async fn fsck(settings: &Settings, repair: bool) -> anyhow::Result<()> {
    let blobs = bootstrap::open_blobs(settings).await?;
    let store = bootstrap::open_store(settings).await?;
    let report = berth_store::repo::fsck::check(&store, &blobs, repair).await?;
    println!(
        "checked {} blobs, {} blob files, {} upload sessions: {} problems",
        report.blobs,
        report.files,
        report.uploads,
        report.findings.len()
    );
    for finding in &report.findings {
        match &finding.repaired {
            Some(done) => println!(
                "{}: {} (repaired: {done})",
                finding.subject, finding.problem
            ),
            None => println!("{}: {}", finding.subject, finding.problem),
        }
    }
    if report.unresolved() {
        anyhow::bail!(
            "content problems found{}",
            if repair {
                " that repair cannot fix"
            } else {
                "; `berth fsck --repair` fixes what is safe to fix"
            }
        );
    }
    Ok(())
}
