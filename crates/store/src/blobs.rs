//! Content-addressed blob files and staged uploads.
//!
//! Layout under the blob directory: `sha256/<2 hex>/<hex>` for committed blobs
//! and `uploads/<id>` for upload sessions. Uploads are hashed while they are
//! written; the running SHA-256 state is returned after every chunk so the
//! caller can persist it (a restarted server resumes from it). A blob is
//! committed by fsync then rename, so a reader never sees a partial file, and a
//! digest mismatch leaves nothing behind.

use std::io::{self, Seek, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use berth_domain::oci::Digest;
use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use sha2::digest::common::hazmat::{SerializableState, SerializedState};
use sha2::{Digest as _, Sha256};
use tokio::task::JoinHandle;

/// How many bytes are gathered before one write to the staging file.
const WRITE_BUFFER: usize = 1 << 20;
/// Bytes written between two `fdatasync`s while an upload streams in: the
/// disk writes during the transfer, and the final `fsync` waits for the tail
/// only (a single one at the end waited ~80 ms for 100 MB here).
const SYNC_EVERY: u64 = 16 << 20;

/// Why an upload operation failed.
#[derive(Debug, thiserror::Error)]
pub enum BlobError {
    /// The request body failed while it was read.
    #[error("reading the upload body failed: {0}")]
    Body(String),
    /// The bytes do not hash to the digest the client named.
    #[error("the content does not match digest {expected}")]
    DigestMismatch {
        /// What the client said.
        expected: Digest,
    },
    /// The saved hash state could not be restored.
    #[error("the upload's hash state is corrupt")]
    BadState,
    /// The filesystem failed.
    #[error("blob storage: {0}")]
    Io(#[from] io::Error),
}

/// The durable state of an upload after a chunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UploadProgress {
    /// Bytes durable in the staging file.
    pub len: u64,
    /// The serialized SHA-256 state after `len` bytes.
    pub hash_state: Vec<u8>,
}

/// The blob directory.
#[derive(Debug, Clone)]
pub struct BlobStore {
    root: PathBuf,
}

impl BlobStore {
    /// A store rooted at `root` (created on first write).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// Where the bytes of `digest` live.
    pub fn blob_path(&self, digest: &Digest) -> PathBuf {
        let hex = digest.hex();
        self.root.join("sha256").join(&hex[..2]).join(hex)
    }

    /// The staging file of upload `id` (an id the server generated: a UUID).
    pub fn upload_path(&self, id: &str) -> PathBuf {
        self.root.join("uploads").join(id)
    }

    /// Creates an empty staging file for upload `id`.
    pub async fn create_upload(&self, id: &str) -> io::Result<()> {
        let path = self.upload_path(id);
        if let Some(parent) = path.parent() {
            tokio::fs::create_dir_all(parent).await?;
        }
        tokio::fs::File::create(&path).await?.sync_all().await
    }

    /// Appends `body` to upload `id` at `offset` (the durable length so far, whose
    /// hash state is `state`), fsyncs, and returns the new length and state.
    /// Bytes past `offset` left by a crash are cut off first.
    pub async fn append<S, E>(
        &self,
        id: &str,
        offset: u64,
        state: Option<&[u8]>,
        body: S,
    ) -> Result<UploadProgress, BlobError>
    where
        S: Stream<Item = Result<Bytes, E>> + Send,
        E: std::fmt::Display,
    {
        let mut hasher = restore(state)?;
        let path = self.upload_path(id);
        let file = joined(tokio::task::spawn_blocking(move || {
            let mut file = std::fs::OpenOptions::new().write(true).open(path)?;
            file.set_len(offset)?;
            file.seek(io::SeekFrom::Start(offset))?;
            Ok(file)
        }))
        .await?;
        let written = write_hashed(file, &mut hasher, body).await?;
        Ok(UploadProgress {
            len: offset + written,
            hash_state: save(&hasher),
        })
    }

    /// Checks that upload `id` (complete, with hash `state`) hashes to `expected`
    /// and renames it into place. On a mismatch the staging file is removed and
    /// nothing is stored.
    pub async fn commit_upload(
        &self,
        id: &str,
        state: Option<&[u8]>,
        expected: &Digest,
    ) -> Result<(), BlobError> {
        let hasher = restore(state)?;
        let staged = self.upload_path(id);
        if Digest::from_sha256_bytes(&hasher.finalize()) != *expected {
            let _ = tokio::fs::remove_file(&staged).await;
            return Err(BlobError::DigestMismatch {
                expected: expected.clone(),
            });
        }
        self.install(&staged, expected).await
    }

    /// Streams a whole blob to a fresh staging file, checks it against
    /// `expected` and commits it (a monolithic upload). Returns its size.
    pub async fn put<S, E>(&self, id: &str, expected: &Digest, body: S) -> Result<u64, BlobError>
    where
        S: Stream<Item = Result<Bytes, E>> + Send,
        E: std::fmt::Display,
    {
        self.create_upload(id).await?;
        let progress = match self.append(id, 0, None, body).await {
            Ok(p) => p,
            Err(err) => {
                self.discard_upload(id).await;
                return Err(err);
            }
        };
        self.commit_upload(id, Some(&progress.hash_state), expected)
            .await?;
        Ok(progress.len)
    }

    /// Removes the staging file of upload `id`, if any.
    pub async fn discard_upload(&self, id: &str) {
        let _ = tokio::fs::remove_file(self.upload_path(id)).await;
    }

    /// Whether the bytes of `digest` are present.
    pub async fn exists(&self, digest: &Digest) -> bool {
        tokio::fs::try_exists(self.blob_path(digest))
            .await
            .unwrap_or(false)
    }

    /// Opens the bytes of `digest` for reading.
    pub async fn open(&self, digest: &Digest) -> io::Result<tokio::fs::File> {
        tokio::fs::File::open(self.blob_path(digest)).await
    }

    /// Removes the bytes of `digest` (garbage collection).
    pub async fn remove(&self, digest: &Digest) -> io::Result<()> {
        match tokio::fs::remove_file(self.blob_path(digest)).await {
            Err(err) if err.kind() != io::ErrorKind::NotFound => Err(err),
            _ => Ok(()),
        }
    }

    /// The staging files whose names are upload ids, with their modification times.
    pub async fn staged_uploads(&self) -> io::Result<Vec<(String, std::time::SystemTime)>> {
        let mut found = Vec::new();
        let mut dir = match tokio::fs::read_dir(self.root.join("uploads")).await {
            Ok(dir) => dir,
            Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(found),
            Err(err) => return Err(err),
        };
        while let Some(entry) = dir.next_entry().await? {
            let modified = entry.metadata().await?.modified()?;
            found.push((entry.file_name().to_string_lossy().into_owned(), modified));
        }
        Ok(found)
    }

    /// Every committed blob file, with its modification time.
    pub async fn committed_files(&self) -> io::Result<Vec<(Digest, std::time::SystemTime)>> {
        let mut found = Vec::new();
        let mut prefixes = match tokio::fs::read_dir(self.root.join("sha256")).await {
            Ok(dir) => dir,
            Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(found),
            Err(err) => return Err(err),
        };
        while let Some(prefix) = prefixes.next_entry().await? {
            if !prefix.file_type().await?.is_dir() {
                continue;
            }
            let mut files = tokio::fs::read_dir(prefix.path()).await?;
            while let Some(file) = files.next_entry().await? {
                let name = file.file_name().to_string_lossy().into_owned();
                if let Ok(digest) = Digest::parse(&format!("sha256:{name}")) {
                    found.push((digest, file.metadata().await?.modified()?));
                }
            }
        }
        Ok(found)
    }

    /// Renames a complete, fsynced staging file to the blob path of `digest`.
    async fn install(&self, staged: &Path, digest: &Digest) -> Result<(), BlobError> {
        let target = self.blob_path(digest);
        let parent = target.parent().expect("blob paths have a parent");
        if tokio::fs::try_exists(&target).await.unwrap_or(false) {
            // Same digest, same bytes: keep the existing file.
            let _ = tokio::fs::remove_file(staged).await;
            return Ok(());
        }
        tokio::fs::create_dir_all(parent).await?;
        tokio::fs::rename(staged, &target).await?;
        // Make the rename itself durable.
        let parent = parent.to_path_buf();
        tokio::task::spawn_blocking(move || std::fs::File::open(parent)?.sync_all())
            .await
            .map_err(io::Error::other)??;
        Ok(())
    }
}

fn restore(state: Option<&[u8]>) -> Result<Sha256, BlobError> {
    match state {
        None => Ok(Sha256::new()),
        Some(bytes) => {
            let serialized =
                SerializedState::<Sha256>::try_from(bytes).map_err(|_| BlobError::BadState)?;
            Sha256::deserialize(&serialized).map_err(|_| BlobError::BadState)
        }
    }
}

fn save(hasher: &Sha256) -> Vec<u8> {
    hasher.serialize().to_vec()
}

/// Copies `body` to `file` in large writes, hashing every byte, and returns
/// the count once every byte is durable. On an error no write is left running.
async fn write_hashed<S, E>(
    file: std::fs::File,
    hasher: &mut Sha256,
    body: S,
) -> Result<u64, BlobError>
where
    S: Stream<Item = Result<Bytes, E>> + Send,
    E: std::fmt::Display,
{
    let mut writer = StagingWriter {
        file: Arc::new(file),
        writing: None,
        syncing: None,
        unsynced: 0,
    };
    let received = receive(&mut writer, hasher, body).await;
    let finished = writer.finish().await;
    let total = received?;
    finished?;
    Ok(total)
}

/// Hashes `body` and hands it to `writer` in buffers of [`WRITE_BUFFER`] bytes.
async fn receive<S, E>(
    writer: &mut StagingWriter,
    hasher: &mut Sha256,
    body: S,
) -> Result<u64, BlobError>
where
    S: Stream<Item = Result<Bytes, E>> + Send,
    E: std::fmt::Display,
{
    let mut body = std::pin::pin!(body);
    let mut buffer = Vec::with_capacity(WRITE_BUFFER);
    let mut total = 0u64;
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(|e| BlobError::Body(e.to_string()))?;
        hasher.update(&chunk);
        total += chunk.len() as u64;
        buffer.extend_from_slice(&chunk);
        if buffer.len() >= WRITE_BUFFER {
            buffer = writer.write(buffer).await?;
        }
    }
    if !buffer.is_empty() {
        writer.write(buffer).await?;
    }
    Ok(total)
}

/// A staging file written on the blocking pool: one buffer is written while
/// the next fills, and an `fdatasync` runs beside the writes every
/// [`SYNC_EVERY`] bytes.
struct StagingWriter {
    file: Arc<std::fs::File>,
    /// The write in progress; it gives its buffer back.
    writing: Option<JoinHandle<io::Result<Vec<u8>>>>,
    /// The `fdatasync` in progress.
    syncing: Option<JoinHandle<io::Result<()>>>,
    /// Bytes handed over since the last `fdatasync` began.
    unsynced: u64,
}

impl StagingWriter {
    /// Starts writing `buffer` once the previous write is done, and returns an
    /// empty buffer to fill next.
    async fn write(&mut self, buffer: Vec<u8>) -> io::Result<Vec<u8>> {
        let mut spare = match self.writing.take() {
            Some(writing) => joined(writing).await?,
            None => Vec::with_capacity(WRITE_BUFFER),
        };
        spare.clear();
        self.unsynced += buffer.len() as u64;
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
            (&*file).write_all(&buffer)?;
            Ok(buffer)
        }));
        Ok(spare)
    }

    /// Waits for the write and the `fdatasync` in progress, then `fsync`s.
    async fn finish(mut self) -> io::Result<()> {
        let written = match self.writing.take() {
            Some(writing) => joined(writing).await.map(drop),
            None => Ok(()),
        };
        let synced = match self.syncing.take() {
            Some(syncing) => joined(syncing).await,
            None => Ok(()),
        };
        written?;
        synced?;
        joined(tokio::task::spawn_blocking(move || self.file.sync_all())).await
    }
}

/// The result of a blocking file operation.
async fn joined<T>(task: JoinHandle<io::Result<T>>) -> io::Result<T> {
    task.await.map_err(io::Error::other)?
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream(parts: &[&'static [u8]]) -> impl Stream<Item = Result<Bytes, io::Error>> + Send {
        futures_util::stream::iter(
            parts
                .iter()
                .map(|p| Ok(Bytes::from_static(p)))
                .collect::<Vec<_>>(),
        )
    }

    fn digest_of(bytes: &[u8]) -> Digest {
        Digest::from_sha256_bytes(&Sha256::digest(bytes))
    }

    #[tokio::test]
    async fn chunked_upload_resumes_from_saved_state() {
        let dir = tempfile::tempdir().unwrap();
        let store = BlobStore::new(dir.path());
        store.create_upload("u1").await.unwrap();
        let first = store
            .append("u1", 0, None, stream(&[b"hello ", b"wor"]))
            .await
            .unwrap();
        assert_eq!(first.len, 9);
        // A "new process": only the length and the state survive. Garbage past
        // the durable length (a crash between write and bookkeeping) is cut.
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(store.upload_path("u1"))
            .unwrap();
        std::io::Write::write_all(&mut f, b"GARBAGE").unwrap();
        let second = BlobStore::new(dir.path())
            .append("u1", first.len, Some(&first.hash_state), stream(&[b"ld"]))
            .await
            .unwrap();
        assert_eq!(second.len, 11);
        let expected = digest_of(b"hello world");
        store
            .commit_upload("u1", Some(&second.hash_state), &expected)
            .await
            .unwrap();
        assert_eq!(
            std::fs::read(store.blob_path(&expected)).unwrap(),
            b"hello world"
        );
        assert!(!store.upload_path("u1").exists());
    }

    #[tokio::test]
    async fn mismatch_stores_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let store = BlobStore::new(dir.path());
        let claimed = digest_of(b"other");
        let err = store
            .put("u2", &claimed, stream(&[b"data"]))
            .await
            .unwrap_err();
        assert!(matches!(err, BlobError::DigestMismatch { .. }));
        assert!(!store.exists(&claimed).await);
        assert!(!store.upload_path("u2").exists());
        let right = digest_of(b"data");
        assert_eq!(
            store
                .put("u3", &right, stream(&[b"da", b"ta"]))
                .await
                .unwrap(),
            4
        );
        assert!(store.exists(&right).await);
        assert!(matches!(restore(Some(b"short")), Err(BlobError::BadState)));
    }

    #[tokio::test]
    async fn a_failing_body_is_an_error_and_the_upload_can_go_on() {
        let dir = tempfile::tempdir().unwrap();
        let store = BlobStore::new(dir.path());
        store.create_upload("u4").await.unwrap();
        let failing = futures_util::stream::iter(vec![
            Ok(Bytes::from_static(b"partial")),
            Err(io::Error::other("connection reset")),
        ]);
        let err = store.append("u4", 0, None, failing).await.unwrap_err();
        assert!(matches!(err, BlobError::Body(_)));
        let done = store
            .append("u4", 0, None, stream(&[b"whole"]))
            .await
            .unwrap();
        assert_eq!(done.len, 5);
        let expected = digest_of(b"whole");
        store
            .commit_upload("u4", Some(&done.hash_state), &expected)
            .await
            .unwrap();
        assert_eq!(std::fs::read(store.blob_path(&expected)).unwrap(), b"whole");
    }

    #[tokio::test]
    async fn a_large_upload_goes_through_many_writes_and_syncs() {
        let dir = tempfile::tempdir().unwrap();
        let store = BlobStore::new(dir.path());
        // Chunks of odd sizes, more bytes than one sync interval.
        let chunks: Vec<Bytes> = (0..1200u32)
            .map(|i| Bytes::from(vec![(i % 251) as u8; 15_000 + i as usize]))
            .collect();
        let all: Vec<u8> = chunks.iter().flat_map(|c| c.iter().copied()).collect();
        assert!(all.len() as u64 > SYNC_EVERY);
        let body = futures_util::stream::iter(chunks.into_iter().map(Ok::<_, io::Error>));
        let digest = digest_of(&all);
        let size = store.put("big", &digest, body).await.unwrap();
        assert_eq!(size, all.len() as u64);
        assert_eq!(std::fs::read(store.blob_path(&digest)).unwrap(), all);
    }
}
