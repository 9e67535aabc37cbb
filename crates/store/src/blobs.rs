//! Content-addressed blob files and staged uploads.
//!
//! Layout under the blob directory: `sha256/<2 hex>/<hex>` for committed blobs
//! and `uploads/<id>` for upload sessions. Uploads are hashed while they are
//! written; the running SHA-256 state is returned after every chunk so the
//! caller can persist it (a restarted server resumes from it). A blob is
//! committed by fsync then rename, so a reader never sees a partial file, and a
//! digest mismatch leaves nothing behind.

use std::io;
use std::path::{Path, PathBuf};

use berth_domain::oci::Digest;
use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use sha2::digest::common::hazmat::{SerializableState, SerializedState};
use sha2::{Digest as _, Sha256};
use tokio::io::{AsyncSeekExt, AsyncWriteExt};

/// How many bytes are gathered before one write to the staging file.
const WRITE_BUFFER: usize = 1 << 20;

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
        let mut file = tokio::fs::OpenOptions::new()
            .write(true)
            .open(self.upload_path(id))
            .await?;
        file.set_len(offset).await?;
        file.seek(io::SeekFrom::Start(offset)).await?;
        let written = write_hashed(&mut file, &mut hasher, body).await?;
        file.sync_all().await?;
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

/// Copies `body` to `file` in large writes, hashing every byte; returns the count.
async fn write_hashed<S, E>(
    file: &mut tokio::fs::File,
    hasher: &mut Sha256,
    body: S,
) -> Result<u64, BlobError>
where
    S: Stream<Item = Result<Bytes, E>> + Send,
    E: std::fmt::Display,
{
    let mut body = std::pin::pin!(body);
    let mut buffer: Vec<u8> = Vec::with_capacity(WRITE_BUFFER);
    let mut total = 0u64;
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(|e| BlobError::Body(e.to_string()))?;
        hasher.update(&chunk);
        total += chunk.len() as u64;
        if buffer.is_empty() && chunk.len() >= WRITE_BUFFER {
            file.write_all(&chunk).await?;
            continue;
        }
        buffer.extend_from_slice(&chunk);
        if buffer.len() >= WRITE_BUFFER {
            file.write_all(&buffer).await?;
            buffer.clear();
        }
    }
    if !buffer.is_empty() {
        file.write_all(&buffer).await?;
    }
    file.flush().await?;
    Ok(total)
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
}
