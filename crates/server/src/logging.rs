//! Log output: text or JSON lines on standard error. Every line logged while a
//! request is answered carries the request's span (`app.rs`), and with it the
//! request's `X-Request-Id` (the client's, or one generated for it).

use std::io::IsTerminal;

use tracing::Subscriber;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::util::SubscriberInitExt;

use crate::config::LogFormat;

/// The subscriber `berth` logs through: `filter` (`info`, `berth=debug` ...,
/// `info` when it does not parse) in `format`, written to `writer`.
pub fn subscriber<W>(
    format: LogFormat,
    filter: &str,
    writer: W,
    ansi: bool,
) -> Box<dyn Subscriber + Send + Sync>
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    let filter = EnvFilter::try_new(filter).unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi)
        .with_writer(writer);
    match format {
        LogFormat::Json => Box::new(builder.json().finish()),
        LogFormat::Text => Box::new(builder.finish()),
    }
}

/// Logs to standard error for the rest of the process (colours only for a terminal).
pub fn init(format: LogFormat, filter: &str) {
    let ansi = std::io::stderr().is_terminal();
    let subscriber = subscriber(format, filter, std::io::stderr, ansi);
    // `try_init` also forwards the `log` records of dependencies.
    if subscriber.try_init().is_err() {
        eprintln!("berth: a logger was already installed");
    }
}
