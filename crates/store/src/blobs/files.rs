//! Blobs in a directory: parts and staged blobs are files, placing is a hard link.
//!
//! Part files are created with `O_EXCL`, written in large buffers on the
//! blocking pool and fsynced (with `fdatasync`s along the way) before they are
//! recorded; the directory entries are synced too.
//!
//! A chunked upload keeps its bytes in one file, [`IN_PLACE`], that each
//! chunk extends where the recorded bytes end. Only the request holding the
//! file's lock (`flock`, held by the open file; the kernel drops it with a
//! dead process) may change it, and it first cuts the file back to the
//! recorded length, so bytes a failed or killed request left past it never
//! count.

use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use berth_domain::oci::{Algorithm, Digest};
use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use tokio::task::JoinHandle;

use super::{BlobError, ByteStream, Hasher, Staged, digest_named};

/// How many bytes are gathered before one write (`writev`) to a file.
const WRITE_BUFFER: usize = 1 << 20;
/// Bytes written between two `fdatasync`s while an upload streams in: the
/// disk writes during the transfer, and the final `fdatasync` waits for the
/// tail only (a single one at the end waited ~80 ms for 100 MB here).
const SYNC_EVERY: u64 = 16 << 20;

/// The file a chunked upload's chunks are appended to, in its directory.
pub const IN_PLACE: &str = "data";

/// An upload's [`IN_PLACE`] file, locked by this request until dropped.
#[derive(Debug)]
pub struct HeldFile {
    file: Arc<std::fs::File>,
    path: PathBuf,
}

/// How many bytes one read of a blob file takes.
const READ_CHUNK: u64 = 1 << 20;

/// The blob directory.
#[derive(Debug, Clone)]
pub struct FileBlobs {
    root: PathBuf,
}

impl FileBlobs {
    /// A store rooted at `root` (created on first write).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// Where the bytes of `digest` live.
    pub fn blob_path(&self, digest: &Digest) -> PathBuf {
        let hex = digest.hex();
        self.root
            .join(digest.algorithm().name())
            .join(&hex[..2])
            .join(hex)
    }

    /// The directory of upload `id` (an id the server generated: a UUID).
    pub fn upload_dir(&self, id: &str) -> PathBuf {
        self.root.join("uploads").join(id)
    }

    /// [`super::BlobStore::write_part`] into the new file `name`: its length.
    pub(super) async fn write_part<S, E>(
        &self,
        id: &str,
        name: &str,
        hasher: &mut Hasher,
        body: S,
    ) -> Result<u64, BlobError>
    where
        S: Stream<Item = Result<Bytes, E>> + Send,
        E: std::fmt::Display,
    {
        let dir = self.upload_dir(id);
        let path = dir.join(name);
        let opened = path.clone();
        let file = joined(tokio::task::spawn_blocking(move || {
            std::fs::create_dir_all(&dir)?;
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(opened)
        }))
        .await?;
        match write_hashed(Arc::new(file), hasher, body).await {
            Ok(len) => {
                sync_dir(self.upload_dir(id)).await?;
                Ok(len)
            }
            Err(err) => {
                let _ = tokio::fs::remove_file(&path).await;
                Err(err)
            }
        }
    }

    /// Opens upload `id`'s [`IN_PLACE`] file (created empty if missing) and
    /// takes its lock; `None` while another request holds it.
    pub async fn hold(&self, id: &str) -> io::Result<Option<HeldFile>> {
        let dir = self.upload_dir(id);
        let path = dir.join(IN_PLACE);
        joined(tokio::task::spawn_blocking(move || {
            std::fs::create_dir_all(&dir)?;
            let file = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(&path)?;
            match file.try_lock() {
                Ok(()) => Ok(Some(HeldFile {
                    file: Arc::new(file),
                    path,
                })),
                Err(std::fs::TryLockError::WouldBlock) => Ok(None),
                Err(std::fs::TryLockError::Error(err)) => Err(err),
            }
        }))
        .await
    }

    /// Appends `body` to `held` after its first `offset` bytes (anything
    /// beyond them is cut off first), continuing `hasher`; the bytes added,
    /// durable when this returns. On an error the file is cut back to `offset`.
    pub async fn append<S, E>(
        &self,
        held: &HeldFile,
        offset: u64,
        hasher: &mut Hasher,
        body: S,
    ) -> Result<u64, BlobError>
    where
        S: Stream<Item = Result<Bytes, E>> + Send,
        E: std::fmt::Display,
    {
        let file = Arc::clone(&held.file);
        joined(tokio::task::spawn_blocking(move || {
            use std::io::Seek;
            file.set_len(offset)?;
            (&*file).seek(io::SeekFrom::Start(offset)).map(drop)
        }))
        .await?;
        let written = write_hashed(Arc::clone(&held.file), hasher, body).await;
        if written.is_err() {
            self.cut(held, offset).await?;
        }
        written
    }

    /// Cuts `held` back to its first `len` bytes.
    pub async fn cut(&self, held: &HeldFile, len: u64) -> io::Result<()> {
        let file = Arc::clone(&held.file);
        joined(tokio::task::spawn_blocking(move || file.set_len(len))).await
    }

    /// The digest by `algorithm` and the length of `held`'s bytes, read again.
    pub async fn hash_held(
        &self,
        held: &HeldFile,
        algorithm: Algorithm,
    ) -> io::Result<(Digest, u64)> {
        let path = held.path.clone();
        joined(tokio::task::spawn_blocking(move || {
            hash_file(&path, algorithm)
        }))
        .await
    }

    /// Removes part `name` of upload `id` (a part that lost its race).
    pub(super) async fn discard_part(&self, id: &str, name: &str) {
        let _ = tokio::fs::remove_file(self.upload_dir(id).join(name)).await;
    }

    /// The length of part `name` of upload `id`.
    pub(super) async fn part_len(&self, id: &str, name: &str) -> io::Result<u64> {
        Ok(tokio::fs::metadata(self.upload_dir(id).join(name))
            .await?
            .len())
    }

    /// Whether part `name` of upload `id` is stored.
    pub(super) async fn part_exists(&self, id: &str, name: &str) -> io::Result<bool> {
        tokio::fs::try_exists(self.upload_dir(id).join(name)).await
    }

    /// Copies `parts` of upload `id` in order into its new file `name`,
    /// hashing with `algorithm`; the digest and length of what was read.
    pub(super) async fn concatenate(
        &self,
        id: &str,
        parts: &[String],
        name: &str,
        algorithm: Algorithm,
    ) -> io::Result<(Digest, u64)> {
        let dir = self.upload_dir(id);
        let sources: Vec<PathBuf> = parts.iter().map(|p| dir.join(p)).collect();
        let target = dir.join(name);
        joined(tokio::task::spawn_blocking(move || {
            concatenate(&sources, &target, algorithm)
        }))
        .await
    }

    /// [`super::BlobStore::place`]: a hard link.
    pub(super) async fn place(&self, staged: &Staged) -> io::Result<bool> {
        let target = self.blob_path(&staged.digest);
        let parent = target
            .parent()
            .expect("blob paths have a parent")
            .to_path_buf();
        let source = self.upload_dir(&staged.upload).join(&staged.name);
        joined(tokio::task::spawn_blocking(move || {
            std::fs::create_dir_all(&parent)?;
            match std::fs::hard_link(&source, &target) {
                Ok(()) => std::fs::File::open(&parent)?.sync_all().map(|()| true),
                Err(err) if err.kind() == io::ErrorKind::AlreadyExists => Ok(false),
                Err(err) => Err(err),
            }
        }))
        .await
    }

    /// Removes the directory of upload `id` with everything in it.
    pub(super) async fn discard_upload(&self, id: &str) {
        let _ = tokio::fs::remove_dir_all(self.upload_dir(id)).await;
    }

    /// Whether the bytes of `digest` are present.
    pub(super) async fn exists(&self, digest: &Digest) -> bool {
        tokio::fs::try_exists(self.blob_path(digest))
            .await
            .unwrap_or(false)
    }

    /// [`super::BlobStore::read`].
    pub(super) async fn read(
        &self,
        digest: &Digest,
        start: u64,
        len: u64,
    ) -> io::Result<Option<ByteStream>> {
        let file = match tokio::fs::File::open(self.blob_path(digest)).await {
            Ok(file) => file,
            Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(err) => return Err(err),
        };
        let mut file = file.into_std().await;
        if start > 0 {
            use std::io::Seek;
            file.seek(io::SeekFrom::Start(start))?;
        }
        Ok(Some(Box::pin(file_stream(file, len))))
    }

    /// Where the blobs are.
    pub(super) fn describe(&self) -> String {
        format!("directory {}", self.root.display())
    }

    /// [`super::BlobStore::check`]: the directory exists and is writable.
    pub(super) async fn check(&self) -> Result<(), String> {
        match tokio::fs::metadata(&self.root).await {
            Ok(meta) if meta.is_dir() && !meta.permissions().readonly() => Ok(()),
            Ok(_) => Err("blob storage is not a writable directory".into()),
            Err(_) => Err("blob storage directory is missing".into()),
        }
    }

    /// [`super::BlobStore::capacity`]: `df`'s figures for the filesystem the
    /// directory is on (or will be on, before its first write: its nearest
    /// existing ancestor's).
    pub(super) async fn capacity(&self) -> io::Result<super::Capacity> {
        let root = self.root.clone();
        joined(tokio::task::spawn_blocking(move || {
            let existing = root
                .ancestors()
                .find(|dir| dir.exists())
                .unwrap_or(std::path::Path::new("."));
            let stat = rustix::fs::statvfs(existing)?;
            Ok(super::Capacity {
                total: stat.f_blocks.saturating_mul(stat.f_frsize),
                free: stat.f_bavail.saturating_mul(stat.f_frsize),
            })
        }))
        .await
    }

    /// Hashes the stored bytes of `digest` again (`None`: no file).
    pub(super) async fn rehash(&self, digest: &Digest) -> io::Result<Option<(Digest, u64)>> {
        let path = self.blob_path(digest);
        let algorithm = digest.algorithm();
        joined(tokio::task::spawn_blocking(move || {
            match hash_file(&path, algorithm) {
                Ok(found) => Ok(Some(found)),
                Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(None),
                Err(err) => Err(err),
            }
        }))
        .await
    }

    /// Moves the file of `digest` aside to `quarantine/<algorithm>-<hex>`
    /// (its bytes do not hash to its name), so a push can place the right ones.
    pub(super) async fn quarantine(&self, digest: &Digest) -> io::Result<()> {
        let dir = self.root.join("quarantine");
        tokio::fs::create_dir_all(&dir).await?;
        let target = dir.join(format!("{}-{}", digest.algorithm(), digest.hex()));
        tokio::fs::rename(self.blob_path(digest), target).await
    }

    /// Removes the bytes of `digest` (garbage collection).
    pub(super) async fn remove(&self, digest: &Digest) -> io::Result<()> {
        match tokio::fs::remove_file(self.blob_path(digest)).await {
            Err(err) if err.kind() != io::ErrorKind::NotFound => Err(err),
            _ => Ok(()),
        }
    }

    /// The upload directories, with the newest modification time of anything
    /// in them (the last sign of activity).
    pub(super) async fn upload_dirs(&self) -> io::Result<Vec<(String, std::time::SystemTime)>> {
        let root = self.root.join("uploads");
        joined(tokio::task::spawn_blocking(move || {
            let mut found = Vec::new();
            let entries = match std::fs::read_dir(&root) {
                Ok(entries) => entries,
                Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(found),
                Err(err) => return Err(err),
            };
            // Entries come and go while this runs (uploads finish): one that
            // vanished is simply not listed.
            let gone = |err: &io::Error| err.kind() == io::ErrorKind::NotFound;
            for entry in entries {
                let entry = entry?;
                let mut newest = match entry.metadata().and_then(|m| m.modified()) {
                    Ok(modified) => modified,
                    Err(err) if gone(&err) => continue,
                    Err(err) => return Err(err),
                };
                if entry.file_type()?.is_dir() {
                    let files = match std::fs::read_dir(entry.path()) {
                        Ok(files) => files,
                        Err(err) if gone(&err) => continue,
                        Err(err) => return Err(err),
                    };
                    for file in files {
                        if let Ok(modified) = file?.metadata().and_then(|m| m.modified()) {
                            newest = newest.max(modified);
                        }
                    }
                }
                found.push((entry.file_name().to_string_lossy().into_owned(), newest));
            }
            Ok(found)
        }))
        .await
    }

    /// Removes upload entry `name` found by [`FileBlobs::upload_dirs`], file or directory.
    pub(super) async fn discard_upload_entry(&self, name: &str) {
        let path = self.root.join("uploads").join(name);
        if tokio::fs::remove_dir_all(&path).await.is_err() {
            let _ = tokio::fs::remove_file(&path).await;
        }
    }

    /// Every committed blob file.
    pub(super) async fn committed_files(&self) -> io::Result<Vec<Digest>> {
        let root = self.root.clone();
        joined(tokio::task::spawn_blocking(move || {
            let mut found = Vec::new();
            for algorithm in Algorithm::ALL {
                let prefixes = match std::fs::read_dir(root.join(algorithm.name())) {
                    Ok(dir) => dir,
                    Err(err) if err.kind() == io::ErrorKind::NotFound => continue,
                    Err(err) => return Err(err),
                };
                for prefix in prefixes {
                    let prefix = prefix?;
                    if !prefix.file_type()?.is_dir() {
                        continue;
                    }
                    for file in std::fs::read_dir(prefix.path())? {
                        let name = file?.file_name().to_string_lossy().into_owned();
                        found.extend(digest_named(algorithm, &name));
                    }
                }
            }
            Ok(found)
        }))
        .await
    }
}

/// Copies `sources` in order into a new file `target`, hashing with
/// `algorithm`, and fsyncs it. Returns the digest and the length.
fn concatenate(
    sources: &[PathBuf],
    target: &Path,
    algorithm: Algorithm,
) -> io::Result<(Digest, u64)> {
    // An upload that received no bytes (the empty blob, POST then an empty
    // PUT) has no part, so no directory yet.
    if let Some(dir) = target.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut out = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(target)?;
    let mut hasher = Hasher::new(algorithm);
    let mut buffer = vec![0u8; WRITE_BUFFER];
    let mut total = 0u64;
    for source in sources {
        let mut file = std::fs::File::open(source)?;
        loop {
            let n = file.read(&mut buffer)?;
            if n == 0 {
                break;
            }
            hasher.update(&buffer[..n]);
            out.write_all(&buffer[..n])?;
            total += n as u64;
        }
    }
    out.sync_all()?;
    Ok((hasher.finish(), total))
}

/// The digest (by `algorithm`) and length of the file at `path`.
fn hash_file(path: &Path, algorithm: Algorithm) -> io::Result<(Digest, u64)> {
    let mut file = std::fs::File::open(path)?;
    let mut hasher = Hasher::new(algorithm);
    let mut buffer = vec![0u8; WRITE_BUFFER];
    let mut total = 0u64;
    loop {
        let n = file.read(&mut buffer)?;
        if n == 0 {
            return Ok((hasher.finish(), total));
        }
        hasher.update(&buffer[..n]);
        total += n as u64;
    }
}

/// Makes the entries of directory `dir` durable.
async fn sync_dir(dir: PathBuf) -> io::Result<()> {
    joined(tokio::task::spawn_blocking(move || {
        std::fs::File::open(dir)?.sync_all()
    }))
    .await
}

/// Copies `body` to `file` in large writes, hashing every byte, and returns
/// the count once every byte is durable. On an error no write is left running.
async fn write_hashed<S, E>(
    file: Arc<std::fs::File>,
    hasher: &mut Hasher,
    body: S,
) -> Result<u64, BlobError>
where
    S: Stream<Item = Result<Bytes, E>> + Send,
    E: std::fmt::Display,
{
    let mut writer = StagingWriter {
        file,
        hasher: Some(hasher.clone()),
        hashing: None,
        writing: None,
        syncing: None,
        unsynced: 0,
    };
    let received = receive(&mut writer, body).await;
    let (finished, hashed) = writer.finish().await;
    let total = received?;
    finished?;
    *hasher = hashed?;
    Ok(total)
}

/// Hands `body` to `writer` in batches of at least [`WRITE_BUFFER`] bytes
/// (the chunks as they came, not copied).
async fn receive<S, E>(writer: &mut StagingWriter, body: S) -> Result<u64, BlobError>
where
    S: Stream<Item = Result<Bytes, E>> + Send,
    E: std::fmt::Display,
{
    let mut body = std::pin::pin!(body);
    let mut batch = Vec::new();
    let mut batched = 0;
    let mut total = 0u64;
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(|e| BlobError::Body(e.to_string()))?;
        total += chunk.len() as u64;
        batched += chunk.len();
        batch.push(chunk);
        if batched >= WRITE_BUFFER {
            writer.write(std::mem::take(&mut batch)).await?;
            batched = 0;
        }
    }
    if !batch.is_empty() {
        writer.write(batch).await?;
    }
    Ok(total)
}

/// A staging file written on the blocking pool as a pipeline: while the
/// next batch is received, the one before is hashed on one thread and
/// written on another (hashing one stream cannot be spread, so it runs beside
/// the receiving and the writing rather than after them), and an `fdatasync`
/// runs beside the writes every [`SYNC_EVERY`] bytes.
struct StagingWriter {
    file: Arc<std::fs::File>,
    /// The hash, while no batch is being hashed.
    hasher: Option<Hasher>,
    /// The hashing in progress; it gives the hash back.
    hashing: Option<JoinHandle<Hasher>>,
    /// The write in progress.
    writing: Option<JoinHandle<io::Result<()>>>,
    /// The `fdatasync` in progress.
    syncing: Option<JoinHandle<io::Result<()>>>,
    /// Bytes handed over since the last `fdatasync` began.
    unsynced: u64,
}

impl StagingWriter {
    /// Starts hashing and writing `batch` once the batch before is hashed
    /// and written.
    async fn write(&mut self, batch: Vec<Bytes>) -> io::Result<()> {
        let batch = Arc::new(batch);
        let mut hasher = self.hash().await?;
        let hashed = Arc::clone(&batch);
        self.hashing = Some(tokio::task::spawn_blocking(move || {
            for chunk in hashed.iter() {
                hasher.update(chunk);
            }
            hasher
        }));
        if let Some(writing) = self.writing.take() {
            joined(writing).await?;
        }
        self.unsynced += batch.iter().map(|c| c.len() as u64).sum::<u64>();
        if self.unsynced >= SYNC_EVERY && self.syncing.as_ref().is_none_or(JoinHandle::is_finished)
        {
            if let Some(synced) = self.syncing.take() {
                joined(synced).await?;
            }
            self.unsynced = 0;
            let file = Arc::clone(&self.file);
            self.syncing = Some(tokio::task::spawn_blocking(move || file.sync_data()));
        }
        let file = Arc::clone(&self.file);
        self.writing = Some(tokio::task::spawn_blocking(move || {
            write_all_vectored(&file, &batch)
        }));
        Ok(())
    }

    /// The hash once every batch handed over is hashed.
    async fn hash(&mut self) -> io::Result<Hasher> {
        match (self.hashing.take(), self.hasher.take()) {
            (Some(hashing), _) => hashing.await.map_err(io::Error::other),
            (None, Some(hasher)) => Ok(hasher),
            (None, None) => Err(io::Error::other("the upload's hash was lost")),
        }
    }

    /// Waits for the hashing, the write and the `fdatasync` in progress,
    /// then syncs the file's data; the outcome and the hash of every byte.
    async fn finish(mut self) -> (io::Result<()>, io::Result<Hasher>) {
        let hashed = self.hash().await;
        let written = match self.writing.take() {
            Some(writing) => joined(writing).await,
            None => Ok(()),
        };
        let synced = match self.syncing.take() {
            Some(syncing) => joined(syncing).await,
            None => Ok(()),
        };
        let file = self.file;
        let done = match (written, synced) {
            (Ok(()), Ok(())) => joined(tokio::task::spawn_blocking(move || file.sync_data())).await,
            (Err(err), _) | (_, Err(err)) => Err(err),
        };
        (done, hashed)
    }
}

/// Writes every byte of `chunks` to `file` at its position, in as few
/// `writev` calls as it takes.
fn write_all_vectored(file: &std::fs::File, chunks: &[Bytes]) -> io::Result<()> {
    let mut slices: Vec<io::IoSlice<'_>> = chunks
        .iter()
        .filter(|c| !c.is_empty())
        .map(|c| io::IoSlice::new(c))
        .collect();
    let mut slices = &mut slices[..];
    while !slices.is_empty() {
        match (&*file).write_vectored(slices) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => io::IoSlice::advance_slices(&mut slices, n),
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            Err(err) => return Err(err),
        }
    }
    Ok(())
}

/// The result of a blocking file operation.
async fn joined<T>(task: JoinHandle<io::Result<T>>) -> io::Result<T> {
    task.await.map_err(io::Error::other)?
}

/// Streams `len` bytes of `file` from its current position. Each piece is
/// read on the blocking pool into a fresh, unzeroed buffer, and the next
/// piece is read while the current one is being sent. A file shorter than
/// `len` ends the stream with `UnexpectedEof`.
fn file_stream(
    file: std::fs::File,
    len: u64,
) -> impl Stream<Item = Result<Bytes, io::Error>> + Send {
    type Piece = JoinHandle<io::Result<(std::fs::File, Bytes)>>;
    fn read_piece(mut file: std::fs::File, want: u64) -> Piece {
        tokio::task::spawn_blocking(move || {
            let mut buf = Vec::with_capacity(usize::try_from(want).unwrap_or(0));
            (&mut file).take(want).read_to_end(&mut buf)?;
            if buf.len() as u64 != want {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            Ok((file, Bytes::from(buf)))
        })
    }
    let first = (len > 0).then(|| read_piece(file, len.min(READ_CHUNK)));
    let after_first = len.saturating_sub(READ_CHUNK);
    futures_util::stream::try_unfold(
        (first, after_first),
        |(reading, remaining): (Option<Piece>, u64)| async move {
            let Some(reading) = reading else {
                return Ok(None);
            };
            let (file, piece) = reading.await.map_err(io::Error::other)??;
            let next = (remaining > 0).then(|| read_piece(file, remaining.min(READ_CHUNK)));
            Ok(Some((piece, (next, remaining.saturating_sub(READ_CHUNK)))))
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::blobs::{BlobStore, digest_of};

    fn stream(parts: &[&'static [u8]]) -> impl Stream<Item = Result<Bytes, io::Error>> + Send {
        futures_util::stream::iter(
            parts
                .iter()
                .map(|p| Ok(Bytes::from_static(p)))
                .collect::<Vec<_>>(),
        )
    }

    fn stores(dir: &Path) -> (BlobStore, FileBlobs) {
        let files = FileBlobs::new(dir);
        (BlobStore::Files(files.clone()), files)
    }

    fn sha256(bytes: &[u8]) -> Digest {
        digest_of(Algorithm::Sha256, bytes)
    }

    #[tokio::test]
    async fn parts_resume_from_saved_state_and_assemble() {
        let dir = tempfile::tempdir().unwrap();
        let (store, files) = stores(dir.path());
        let first = store
            .write_part(
                "u1",
                Hasher::new(Algorithm::Sha256),
                // An empty chunk (a body may yield one) writes nothing.
                stream(&[b"hello ", b"", b"wor"]),
            )
            .await
            .unwrap();
        assert_eq!(first.len, 9);
        // A "new process": only the part names and the state survive.
        let hasher = Hasher::restore(Algorithm::Sha256, Some(&first.hash_state)).unwrap();
        let second = BlobStore::new(dir.path())
            .write_part("u1", hasher, stream(&[b"ld"]))
            .await
            .unwrap();
        assert_ne!(first.name, second.name);
        let expected = sha256(b"hello world");
        let parts = [first.name.clone(), second.name.clone()];
        let wrong = store
            .assemble(
                "u1",
                &parts,
                Algorithm::Sha256,
                Some(&second.hash_state),
                &sha256(b"other"),
            )
            .await
            .unwrap_err();
        assert!(matches!(wrong, BlobError::DigestMismatch { .. }));
        let staged = store
            .assemble(
                "u1",
                &parts,
                Algorithm::Sha256,
                Some(&second.hash_state),
                &expected,
            )
            .await
            .unwrap();
        assert_eq!(staged.len, 11);
        store.place(&staged).await.unwrap();
        assert_eq!(
            std::fs::read(files.blob_path(&expected)).unwrap(),
            b"hello world"
        );
        store.discard_upload("u1").await;
        assert!(!files.upload_dir("u1").exists());
        assert_eq!(
            std::fs::read(files.blob_path(&expected)).unwrap(),
            b"hello world"
        );
    }

    #[tokio::test]
    async fn assembly_checks_the_bytes_stored_not_the_saved_state() {
        let dir = tempfile::tempdir().unwrap();
        let (store, files) = stores(dir.path());
        let a = store
            .write_part("u", Hasher::new(Algorithm::Sha256), stream(&[b"good "]))
            .await
            .unwrap();
        let b = store
            .write_part(
                "u",
                Hasher::restore(Algorithm::Sha256, Some(&a.hash_state)).unwrap(),
                stream(&[b"bytes"]),
            )
            .await
            .unwrap();
        // The bytes on disk change behind the state's back.
        std::fs::write(files.upload_dir("u").join(&b.name), b"BYTES").unwrap();
        let claimed = sha256(b"good bytes");
        let err = store
            .assemble(
                "u",
                &[a.name, b.name],
                Algorithm::Sha256,
                Some(&b.hash_state),
                &claimed,
            )
            .await
            .unwrap_err();
        assert!(matches!(err, BlobError::DigestMismatch { .. }));
    }

    #[tokio::test]
    async fn sha512_blobs_and_a_digest_of_another_algorithm_than_the_state() {
        let dir = tempfile::tempdir().unwrap();
        let (store, files) = stores(dir.path());
        let expected = digest_of(Algorithm::Sha512, b"data");
        let staged = store
            .stage("m", &expected, stream(&[b"da", b"ta"]))
            .await
            .unwrap();
        store.place(&staged).await.unwrap();
        assert!(
            files
                .blob_path(&expected)
                .starts_with(dir.path().join("sha512"))
        );
        assert_eq!(
            store.rehash(&expected).await.unwrap(),
            Some((expected.clone(), 4))
        );
        // Hashed as SHA-256 while written, committed as SHA-512: hashed again.
        let part = store
            .write_part("c", Hasher::new(Algorithm::Sha256), stream(&[b"other"]))
            .await
            .unwrap();
        let want = digest_of(Algorithm::Sha512, b"other");
        let staged = store
            .assemble(
                "c",
                &[part.name],
                Algorithm::Sha256,
                Some(&part.hash_state),
                &want,
            )
            .await
            .unwrap();
        assert_eq!(staged.digest, want);
        assert_eq!(store.committed_files().await.unwrap(), vec![expected]);
    }

    #[tokio::test]
    async fn mismatch_and_failing_bodies_store_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let (store, files) = stores(dir.path());
        let claimed = sha256(b"other");
        let err = store
            .stage("u2", &claimed, stream(&[b"data"]))
            .await
            .unwrap_err();
        assert!(matches!(err, BlobError::DigestMismatch { .. }));
        assert!(!store.exists(&claimed).await);
        assert!(!files.upload_dir("u2").exists());
        let failing = futures_util::stream::iter(vec![
            Ok(Bytes::from_static(b"partial")),
            Err(io::Error::other("connection reset")),
        ]);
        let err = store
            .write_part("u4", Hasher::new(Algorithm::Sha256), failing)
            .await
            .unwrap_err();
        assert!(matches!(err, BlobError::Body(_)));
        assert_eq!(
            std::fs::read_dir(files.upload_dir("u4")).unwrap().count(),
            0
        );
        assert!(matches!(
            Hasher::restore(Algorithm::Sha256, Some(b"short")),
            Err(BlobError::BadState)
        ));
    }

    #[tokio::test]
    async fn a_large_upload_goes_through_many_writes_and_syncs() {
        let dir = tempfile::tempdir().unwrap();
        let (store, files) = stores(dir.path());
        // Chunks of odd sizes, more bytes than one sync interval.
        let chunks: Vec<Bytes> = (0..1200u32)
            .map(|i| Bytes::from(vec![(i % 251) as u8; 15_000 + i as usize]))
            .collect();
        let all: Vec<u8> = chunks.iter().flat_map(|c| c.iter().copied()).collect();
        assert!(all.len() as u64 > SYNC_EVERY);
        let body = futures_util::stream::iter(chunks.into_iter().map(Ok::<_, io::Error>));
        let digest = sha256(&all);
        let staged = store.stage("big", &digest, body).await.unwrap();
        assert_eq!(staged.len, all.len() as u64);
        store.place(&staged).await.unwrap();
        assert_eq!(std::fs::read(files.blob_path(&digest)).unwrap(), all);
    }
}
