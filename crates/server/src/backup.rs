//! `berth backup --to DIR` and `berth restore --from DIR`: an online copy of a
//! single instance (SQLite and a blob directory) and its way back.
//!
//! A backup is the database first, then the blobs, as `docs/deployment.md`
//! explains for every shape: `VACUUM INTO` copies the database in one read
//! transaction while servers keep writing; blob files are only ever added and
//! removed, never changed, so the copy taken after it holds every blob the
//! database copy names (unless a garbage collection removed one in between:
//! keep collections out of the backup window). Blobs pushed after the database
//! copy began are harmless extras a later `berth fsck --repair` removes. The
//! generated secrets go with it: without `config_secret_key` the secrets kept
//! in the database cannot be opened.
//!
//! A directory holds `berth.db`, `blobs/sha256/..` (and `sha512`), and
//! `secrets.json` when the data directory had one. PostgreSQL and S3 are
//! backed up with their own tools, in the same order (the guide says how).

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

use crate::config::{BlobLocation, Settings};

/// The database file's name in a backup.
const DATABASE: &str = "berth.db";
/// The generated secrets' file, in a data directory and in a backup.
const SECRETS: &str = "secrets.json";
/// The directories of a blob store that hold content (not uploads, not quarantine).
const CONTENT: [&str; 2] = ["sha256", "sha512"];

/// What a backup or a restore copied.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Copied {
    /// Blob files.
    pub blobs: u64,
    /// Their bytes.
    pub bytes: u64,
}

/// The SQLite file and blob directory of a single instance; an error naming
/// the way for any other shape.
fn single_instance(settings: &Settings) -> anyhow::Result<(PathBuf, PathBuf)> {
    const OTHERWISE: &str = "for PostgreSQL or S3, dump the database (pg_dump), then copy the blobs: \
                             see docs/deployment.md, Backups";
    let url = settings.database_url()?;
    let Some(file) = url
        .strip_prefix("sqlite://")
        .map(|rest| rest.split('?').next().unwrap_or(rest))
    else {
        bail!("berth backup and restore copy a SQLite database; {OTHERWISE}");
    };
    let BlobLocation::Directory(blobs) = settings.blob_location() else {
        bail!("berth backup and restore copy a blob directory; {OTHERWISE}");
    };
    Ok((PathBuf::from(file), blobs))
}

/// Copies the instance's database, blobs and secrets into the new or empty
/// directory `to`, while servers may run.
pub async fn backup(settings: &Settings, to: &Path) -> anyhow::Result<Copied> {
    let (database, blobs) = single_instance(settings)?;
    if !database.exists() {
        bail!("no database at {}", database.display());
    }
    empty_directory(to)?;
    let store = berth_store::Store::connect(&settings.database_url()?)
        .await
        .context("opening the database")?;
    let copied = store.backup_into(&to.join(DATABASE)).await;
    store.close().await;
    copied.context("copying the database")?;
    let secrets = settings.data_dir.join(SECRETS);
    if secrets.exists() {
        copy_private(&secrets, &to.join(SECRETS))?;
    }
    let (blobs, to_blobs) = (blobs, to.join("blobs"));
    tokio::task::spawn_blocking(move || copy_content(&blobs, &to_blobs))
        .await
        .context("copying the blobs")?
}

/// Puts the backup in `from` in place of the instance's (empty) data: the
/// database file, the blobs and the secrets.
pub async fn restore(settings: &Settings, from: &Path) -> anyhow::Result<Copied> {
    let (database, blobs) = single_instance(settings)?;
    let source = from.join(DATABASE);
    if !source.is_file() {
        bail!("{} holds no backup ({DATABASE} is missing)", from.display());
    }
    if database.exists() {
        bail!(
            "{} already exists: restore into an empty data directory (or move it away first)",
            database.display()
        );
    }
    if CONTENT.iter().any(|dir| blobs.join(dir).exists()) {
        bail!(
            "{} already holds blobs: restore into an empty blob directory",
            blobs.display()
        );
    }
    if let Some(parent) = database.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
    }
    crate::secrets::create_private_dir(&settings.data_dir)?;
    let secrets = from.join(SECRETS);
    if secrets.exists() {
        let target = settings.data_dir.join(SECRETS);
        if target.exists() {
            bail!(
                "{} already exists: restore into an empty data directory",
                target.display()
            );
        }
        copy_private(&secrets, &target)?;
    }
    let (from_blobs, to_blobs) = (from.join("blobs"), blobs);
    let copied = tokio::task::spawn_blocking(move || copy_content(&from_blobs, &to_blobs))
        .await
        .context("copying the blobs")??;
    // The database last: an interrupted restore leaves no database behind,
    // and is started again from the top.
    let partial = database.with_extension("db.restoring");
    std::fs::copy(&source, &partial)
        .with_context(|| format!("copying {} to {}", source.display(), partial.display()))?;
    std::fs::rename(&partial, &database)
        .with_context(|| format!("moving {} into place", database.display()))?;
    Ok(copied)
}

/// Creates `dir` readable by its owner only, or accepts it when it exists and
/// is empty (and restricts it so): a backup holds password hashes and secrets.
fn empty_directory(dir: &Path) -> anyhow::Result<()> {
    if dir.exists() {
        let mut entries =
            std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))?;
        if entries.next().is_some() {
            bail!(
                "{} is not empty: back up into a new or empty directory",
                dir.display()
            );
        }
    }
    crate::secrets::create_private_dir(dir)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
            .with_context(|| format!("restricting {}", dir.display()))?;
    }
    Ok(())
}

/// Copies `from` to the new file `to`, readable by its owner only.
fn copy_private(from: &Path, to: &Path) -> anyhow::Result<()> {
    std::fs::copy(from, to)
        .with_context(|| format!("copying {} to {}", from.display(), to.display()))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(to, std::fs::Permissions::from_mode(0o600))
            .with_context(|| format!("restricting {}", to.display()))?;
    }
    Ok(())
}

/// Copies the content directories of the blob store `from` into `to`.
fn copy_content(from: &Path, to: &Path) -> anyhow::Result<Copied> {
    let mut copied = Copied::default();
    for dir in CONTENT {
        let source = from.join(dir);
        if source.exists() {
            copy_tree(&source, &to.join(dir), &mut copied)?;
        }
    }
    Ok(copied)
}

fn copy_tree(from: &Path, to: &Path, copied: &mut Copied) -> anyhow::Result<()> {
    std::fs::create_dir_all(to).with_context(|| format!("creating {}", to.display()))?;
    for entry in std::fs::read_dir(from).with_context(|| format!("reading {}", from.display()))? {
        let entry = entry?;
        let (source, target) = (entry.path(), to.join(entry.file_name()));
        let kind = entry.file_type()?;
        if kind.is_dir() {
            copy_tree(&source, &target, copied)?;
        } else if kind.is_file() {
            match std::fs::copy(&source, &target) {
                Ok(bytes) => {
                    copied.blobs += 1;
                    copied.bytes += bytes;
                }
                // Collected while the copy ran: no manifest used it (only
                // unused blobs are collected); after a restore, `berth fsck
                // --repair` drops the row the database copy may still have.
                Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
                Err(err) => {
                    return Err(err).with_context(|| format!("copying {}", source.display()));
                }
            }
        }
    }
    Ok(())
}
