//! `--config berth.toml` (or `BERTH_CONFIG`): the flags' values from a file.
//!
//! A key is a flag's name without its dashes: `data-dir = "/srv/berth"`,
//! `port = 9000`, `blob-redirect = true`, `cors-origins = ["https://a.example",
//! "https://b.example"]` (a list is the flag's comma-separated value). The
//! file's values take the place of the built-in defaults, so the environment
//! and the command line still win over it. A key no flag has is an error that
//! names it: a misspelt setting is never silently ignored. Secrets are not
//! flags; they come from their variables or the files their `*_FILE`
//! variants name ([`crate::config::secret`]).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use clap::error::ErrorKind;
use clap::parser::ValueSource;
use clap::{ArgMatches, CommandFactory, FromArgMatches};

use crate::config::Cli;

/// The command line as parsed over the configuration file.
#[derive(Debug)]
pub struct Parsed {
    /// The settings and subcommand.
    pub cli: Cli,
    /// What clap parsed (for where each value came from).
    pub matches: ArgMatches,
    /// The keys the file gave.
    pub from_file: Vec<String>,
}

/// Parses `args` (the program name first) over the configuration file that
/// `--config` or `BERTH_CONFIG` names, if any.
pub fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Parsed, clap::Error> {
    let args: Vec<OsString> = args.into_iter().collect();
    let mut command = Cli::command();
    let mut from_file = Vec::new();
    if let Some(path) = config_path(&args) {
        let values = read(&command, &path)
            .map_err(|message| command.error(ErrorKind::InvalidValue, message))?;
        for (key, id, value) in values {
            command = command.mut_arg(id, |arg| arg.default_value(value));
            from_file.push(key);
        }
    }
    let matches = command.try_get_matches_from_mut(args)?;
    let cli = Cli::from_arg_matches(&matches)?;
    Ok(Parsed {
        cli,
        matches,
        from_file,
    })
}

/// The file `--config FILE`, `--config=FILE` or `BERTH_CONFIG` names.
fn config_path(args: &[OsString]) -> Option<PathBuf> {
    let mut rest = args.iter().skip(1);
    while let Some(arg) = rest.next() {
        if arg == "--" {
            break;
        }
        if arg == "--config" {
            return rest.next().map(PathBuf::from);
        }
        if let Some(path) = arg.to_str().and_then(|a| a.strip_prefix("--config=")) {
            return Some(PathBuf::from(path));
        }
    }
    std::env::var_os("BERTH_CONFIG")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// The file's `(key, argument id, value)`s, each key checked against the flags.
fn read(command: &clap::Command, path: &Path) -> Result<Vec<(String, String, String)>, String> {
    let shown = path.display();
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {shown}: {e}"))?;
    let table: toml::Table =
        toml::from_str(&text).map_err(|e| format!("{shown} is not valid TOML: {e}"))?;
    let mut values = Vec::new();
    for (key, value) in table {
        let id = command
            .get_arguments()
            .filter(|arg| !matches!(arg.get_id().as_str(), "config" | "help" | "version"))
            .find(|arg| arg.get_long() == Some(key.as_str()))
            .map(|arg| arg.get_id().to_string())
            .ok_or_else(|| {
                format!(
                    "{shown}: unknown key `{key}` (the keys are the flags of `berth --help` without their dashes)"
                )
            })?;
        let value = flag_value(&value).ok_or_else(|| {
            format!("{shown}: `{key}` takes a string, number, boolean or list of them")
        })?;
        values.push((key, id, value));
    }
    Ok(values)
}

/// A TOML value as the flag's text: a list joined with commas.
fn flag_value(value: &toml::Value) -> Option<String> {
    match value {
        toml::Value::String(text) => Some(text.clone()),
        toml::Value::Integer(n) => Some(n.to_string()),
        toml::Value::Float(x) => Some(x.to_string()),
        toml::Value::Boolean(b) => Some(b.to_string()),
        toml::Value::Array(items) => items
            .iter()
            .map(|item| match item {
                toml::Value::Array(_) => None,
                other => flag_value(other),
            })
            .collect::<Option<Vec<_>>>()
            .map(|items| items.join(",")),
        toml::Value::Datetime(_) | toml::Value::Table(_) => None,
    }
}

/// The secrets Berth reads from its environment (each also as `<NAME>_FILE`).
pub const SECRETS: [&str; 8] = [
    "MASTER_KEY",
    "JWT_SECRET",
    "CONFIG_SECRET_KEY",
    "HARBOR_ADMIN_PASSWORD",
    "DATABASE_URL",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
];

/// `berth config check`: the settings in effect, one `key = value  # source`
/// line each, with passwords in URLs masked, then whether each secret is
/// given and how. An error when a secret cannot be read.
pub fn report(parsed: &Parsed) -> Result<String, String> {
    let command = Cli::command();
    let mut lines = Vec::new();
    for arg in command.get_arguments() {
        let (id, Some(key)) = (arg.get_id().as_str(), arg.get_long()) else {
            continue;
        };
        if matches!(id, "config" | "help" | "version") {
            continue;
        }
        let Some(source) = parsed.matches.value_source(id) else {
            continue;
        };
        let source = match source {
            ValueSource::CommandLine => "flag",
            ValueSource::EnvVariable => "environment",
            _ if parsed.from_file.iter().any(|k| k == key) => "file",
            _ => "default",
        };
        let value = parsed
            .matches
            .get_raw(id)
            .map(|values| {
                values
                    .map(|v| v.to_string_lossy().into_owned())
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .unwrap_or_default();
        lines.push(format!(
            "{key} = {}  # {source}",
            // A JSON string is a valid TOML basic string.
            serde_json::Value::String(mask_password(&value))
        ));
    }
    lines.push(String::new());
    for name in SECRETS {
        let given = crate::config::secret(name)?;
        let how = match (given, std::env::var_os(format!("{name}_FILE"))) {
            (None, _) => "not set".to_string(),
            (Some(_), Some(file)) => format!("set, from {name}_FILE ({})", file.to_string_lossy()),
            (Some(_), None) => "set, from the environment".to_string(),
        };
        lines.push(format!("# {name}: {how}"));
    }
    Ok(lines.join("\n"))
}

/// `value` with the password of a URL's user information replaced by `***`.
fn mask_password(value: &str) -> String {
    let Some((scheme, rest)) = value.split_once("://") else {
        return value.to_string();
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    match authority.rsplit_once('@') {
        Some((userinfo, host)) => {
            let user = userinfo.split_once(':').map_or(userinfo, |(user, _)| user);
            format!("{scheme}://{user}:***@{host}{tail}")
        }
        None => value.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<OsString> {
        std::iter::once("berth")
            .chain(list.iter().copied())
            .map(OsString::from)
            .collect()
    }

    fn with_file(text: &str, list: &[&str]) -> Result<Parsed, clap::Error> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("berth.toml");
        std::fs::write(&path, text).unwrap();
        let mut given = vec!["--config".to_string(), path.display().to_string()];
        given.extend(list.iter().map(|s| s.to_string()));
        parse(args(&given.iter().map(String::as_str).collect::<Vec<_>>()))
    }

    #[test]
    fn file_values_replace_defaults_and_flags_win() {
        let parsed = with_file(
            "port = 9100\ndata-dir = \"/srv/berth\"\nblob-redirect = true\ncors-origins = [\"https://a.example\", \"https://b.example\"]\n",
            &["--port", "9200"],
        )
        .unwrap();
        let settings = &parsed.cli.settings;
        assert_eq!(settings.port, 9200, "the flag wins over the file");
        assert_eq!(settings.data_dir, PathBuf::from("/srv/berth"));
        assert!(settings.blob_redirect);
        assert_eq!(settings.cors_origins, "https://a.example,https://b.example");
        let report = report(&parsed).unwrap();
        assert!(report.contains("port = \"9200\"  # flag"), "{report}");
        assert!(
            report.contains("data-dir = \"/srv/berth\"  # file"),
            "{report}"
        );
        assert!(report.contains("ip = \"0.0.0.0\"  # default"), "{report}");
    }

    #[test]
    fn unknown_keys_and_bad_values_are_refused_by_name() {
        let err = with_file("data_dir = \"/srv\"\n", &[])
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown key `data_dir`"), "{err}");
        let err = with_file("port = \"many\"\n", &[]).unwrap_err().to_string();
        assert!(err.contains("many"), "{err}");
        let err = with_file("[port]\nx = 1\n", &[]).unwrap_err().to_string();
        assert!(err.contains("`port` takes"), "{err}");
        let err = with_file("port = \n", &[]).unwrap_err().to_string();
        assert!(err.contains("not valid TOML"), "{err}");
    }

    #[test]
    fn passwords_in_urls_are_masked() {
        assert_eq!(
            mask_password("postgres://berth:s3cret@db:5432/berth?sslmode=require"),
            "postgres://berth:***@db:5432/berth?sslmode=require"
        );
        assert_eq!(
            mask_password("smtp://user:p%40ss@mail.example"),
            "smtp://user:***@mail.example"
        );
        assert_eq!(
            mask_password("sqlite:///data/berth.db"),
            "sqlite:///data/berth.db"
        );
    }
}
