//! Content-addressed blob storage and staged uploads, on a directory
//! ([`files`]) or an S3-compatible bucket ([`objects`]).
//!
//! Both keep the same layout: `<algorithm>/<2 hex>/<hex>` for committed blobs
//! (`sha256/ab/ab12...`), and one directory (key prefix) `uploads/<id>/` per
//! upload session or monolithic push.
//!
//! In a bucket, every request that sends bytes writes them to a part of its
//! own (an object), created for it and never written by anyone else; the part
//! is hashed as it is written and durable before the database records it. A
//! request that loses a race for the upload only ever removes its own part.
//! In a directory, a chunked upload's chunks extend one file in place under a
//! lock instead (see [`files`]); monolithic pushes write a part of their own.
//! A blob is committed by assembling its parts (a single part is used as it
//! is) into a staged blob whose digest is checked, then placing it at the
//! blob's path (a hard link, or a server-side copy): a reader never sees a
//! partial blob, and nothing is stored under a digest its bytes do not hash
//! to. The database decides when a blob exists (see
//! `repo::registry::install_blob`); this module only moves bytes.

pub mod files;
pub mod objects;

use std::io;
use std::pin::Pin;

use berth_domain::oci::{Algorithm, Digest};
use bytes::Bytes;
use futures_util::Stream;
use sha2::digest::common::hazmat::{SerializableState, SerializedState};
use sha2::{Digest as _, Sha256, Sha512};

pub use files::{FileBlobs, HeldFile, IN_PLACE};
pub use objects::ObjectBlobs;

/// The bytes of a blob as they are read.
pub type ByteStream = Pin<Box<dyn Stream<Item = Result<Bytes, io::Error>> + Send>>;

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
    /// A chunk's length differs from the length its `Content-Range` names.
    #[error("the chunk has {received} bytes where its Content-Range names {declared}")]
    RangeMismatch {
        /// Bytes the range names.
        declared: u64,
        /// Bytes the body had.
        received: u64,
    },
    /// The saved hash state could not be restored.
    #[error("the upload's hash state is corrupt")]
    BadState,
    /// The filesystem or the object store failed.
    #[error("blob storage: {0}")]
    Io(#[from] io::Error),
}

/// A running hash of one of the supported algorithms.
#[derive(Clone)]
pub enum Hasher {
    /// SHA-256.
    Sha256(Sha256),
    /// SHA-512.
    Sha512(Sha512),
}

impl Hasher {
    /// A fresh hash of `algorithm`.
    pub fn new(algorithm: Algorithm) -> Self {
        match algorithm {
            Algorithm::Sha256 => Self::Sha256(Sha256::new()),
            Algorithm::Sha512 => Self::Sha512(Sha512::new()),
        }
    }

    /// The hash of `algorithm` saved by [`Hasher::save`]; fresh for `None`.
    pub fn restore(algorithm: Algorithm, state: Option<&[u8]>) -> Result<Self, BlobError> {
        let Some(bytes) = state else {
            return Ok(Self::new(algorithm));
        };
        match algorithm {
            Algorithm::Sha256 => SerializedState::<Sha256>::try_from(bytes)
                .ok()
                .and_then(|s| Sha256::deserialize(&s).ok())
                .map(Self::Sha256),
            Algorithm::Sha512 => SerializedState::<Sha512>::try_from(bytes)
                .ok()
                .and_then(|s| Sha512::deserialize(&s).ok())
                .map(Self::Sha512),
        }
        .ok_or(BlobError::BadState)
    }

    /// The algorithm.
    pub fn algorithm(&self) -> Algorithm {
        match self {
            Self::Sha256(_) => Algorithm::Sha256,
            Self::Sha512(_) => Algorithm::Sha512,
        }
    }

    /// Hashes `bytes`.
    pub fn update(&mut self, bytes: &[u8]) {
        match self {
            Self::Sha256(h) => h.update(bytes),
            Self::Sha512(h) => h.update(bytes),
        }
    }

    /// The serialized state, to resume from later.
    pub fn save(&self) -> Vec<u8> {
        match self {
            Self::Sha256(h) => h.serialize().to_vec(),
            Self::Sha512(h) => h.serialize().to_vec(),
        }
    }

    /// The digest of everything hashed.
    pub fn finish(self) -> Digest {
        match self {
            Self::Sha256(h) => Digest::from_hash(Algorithm::Sha256, &h.finalize()),
            Self::Sha512(h) => Digest::from_hash(Algorithm::Sha512, &h.finalize()),
        }
    }
}

/// The digest of `bytes` by `algorithm`.
pub fn digest_of(algorithm: Algorithm, bytes: &[u8]) -> Digest {
    let mut hasher = Hasher::new(algorithm);
    hasher.update(bytes);
    hasher.finish()
}

/// A part file just written, not yet recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WrittenPart {
    /// The file name inside the upload's directory.
    pub name: String,
    /// Bytes in the part.
    pub len: u64,
    /// The hash state after the upload's earlier parts and this one.
    pub hash_state: Vec<u8>,
}

/// A complete blob whose bytes hash to `digest`, kept in an upload's
/// directory (prefix) until it is placed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Staged {
    /// The upload (or monolithic push) it belongs to.
    pub upload: String,
    /// Its name inside the upload's directory.
    pub name: String,
    /// What its bytes hash to.
    pub digest: Digest,
    /// Its size.
    pub len: u64,
}

/// The size of a storage and what is free on it, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capacity {
    /// The whole size.
    pub total: u64,
    /// What an unprivileged writer can still use.
    pub free: u64,
}

/// Where blobs are kept.
#[derive(Debug, Clone)]
pub enum BlobStore {
    /// A local (or shared) directory.
    Files(FileBlobs),
    /// An S3-compatible bucket.
    Objects(ObjectBlobs),
}

/// Runs the same call on whichever backend `self` is.
macro_rules! each {
    ($self:expr, $blobs:ident => $call:expr) => {
        match $self {
            BlobStore::Files($blobs) => $call,
            BlobStore::Objects($blobs) => $call,
        }
    };
}

impl BlobStore {
    /// A store on the directory `root` (created on first write).
    pub fn new(root: impl Into<std::path::PathBuf>) -> Self {
        Self::Files(FileBlobs::new(root))
    }

    /// Where the blobs are, for messages (no secrets).
    pub fn describe(&self) -> String {
        each!(self, b => b.describe())
    }

    /// The capacity of the storage: the filesystem of a blob directory;
    /// `None` for a bucket, which has no size to report.
    pub async fn capacity(&self) -> io::Result<Option<Capacity>> {
        match self {
            Self::Files(blobs) => blobs.capacity().await.map(Some),
            Self::Objects(_) => Ok(None),
        }
    }

    /// Whether the storage answers (the health check); the reason when not.
    pub async fn check(&self) -> Result<(), String> {
        each!(self, b => b.check().await)
    }

    /// Writes `body` to a new part of upload `id`, continuing `hasher` (the
    /// state after the upload's earlier parts). Every byte is durable when
    /// this returns. On an error the part is removed.
    pub async fn write_part<S, E>(
        &self,
        id: &str,
        mut hasher: Hasher,
        body: S,
    ) -> Result<WrittenPart, BlobError>
    where
        S: Stream<Item = Result<Bytes, E>> + Send,
        E: std::fmt::Display,
    {
        let name = format!("part-{}", uuid::Uuid::new_v4().simple());
        let len = each!(self, b => b.write_part(id, &name, &mut hasher, body).await)?;
        Ok(WrittenPart {
            name,
            len,
            hash_state: hasher.save(),
        })
    }

    /// Whether part `name` of upload `id` is stored.
    pub async fn part_exists(&self, id: &str, name: &str) -> io::Result<bool> {
        each!(self, b => b.part_exists(id, name).await)
    }

    /// Removes part `name` of upload `id` (a part that lost its race).
    pub async fn discard_part(&self, id: &str, name: &str) {
        each!(self, b => b.discard_part(id, name).await)
    }

    /// Stages upload `id`'s blob from its `parts` (in order) for `expected`.
    /// `hash_state` (of `algorithm`) covers all the parts: a single part whose
    /// state is of `expected`'s algorithm is used as it is; otherwise the
    /// parts are copied into one new blob and hashed again as they are read.
    pub async fn assemble(
        &self,
        id: &str,
        parts: &[String],
        algorithm: Algorithm,
        hash_state: Option<&[u8]>,
        expected: &Digest,
    ) -> Result<Staged, BlobError> {
        if let [only] = parts
            && algorithm == expected.algorithm()
        {
            let digest = Hasher::restore(algorithm, hash_state)?.finish();
            if digest != *expected {
                return Err(BlobError::DigestMismatch {
                    expected: expected.clone(),
                });
            }
            let len = each!(self, b => b.part_len(id, only).await)?;
            return Ok(Staged {
                upload: id.to_string(),
                name: only.clone(),
                digest,
                len,
            });
        }
        let name = format!("blob-{}", uuid::Uuid::new_v4().simple());
        let (digest, len) =
            each!(self, b => b.concatenate(id, parts, &name, expected.algorithm()).await)?;
        if digest != *expected {
            self.discard_part(id, &name).await;
            return Err(BlobError::DigestMismatch {
                expected: expected.clone(),
            });
        }
        Ok(Staged {
            upload: id.to_string(),
            name,
            digest,
            len,
        })
    }

    /// Streams a whole blob into a new staging directory `id` and checks it
    /// against `expected` (a monolithic upload).
    pub async fn stage<S, E>(
        &self,
        id: &str,
        expected: &Digest,
        body: S,
    ) -> Result<Staged, BlobError>
    where
        S: Stream<Item = Result<Bytes, E>> + Send,
        E: std::fmt::Display,
    {
        let staged = async {
            let part = self
                .write_part(id, Hasher::new(expected.algorithm()), body)
                .await?;
            self.assemble(
                id,
                std::slice::from_ref(&part.name),
                expected.algorithm(),
                Some(&part.hash_state),
                expected,
            )
            .await
        }
        .await;
        if staged.is_err() {
            self.discard_upload(id).await;
        }
        staged
    }

    /// Makes `staged` the blob of its digest unless that exists (same
    /// digest, same bytes); `true` when it stored it. The staged blob stays
    /// until the upload is discarded, so this can be repeated.
    pub async fn place(&self, staged: &Staged) -> io::Result<bool> {
        each!(self, b => b.place(staged).await)
    }

    /// Removes the upload `id` whose objects are `names` once it has been
    /// committed: a directory goes whole; a bucket's known objects are
    /// deleted without listing the prefix (anything else there, such as a
    /// part a crashed request left, goes with upload expiry).
    pub async fn discard_committed(&self, id: &str, names: &[&str]) {
        match self {
            Self::Files(b) => b.discard_upload(id).await,
            Self::Objects(b) => {
                for name in names {
                    b.discard_part(id, name).await;
                }
            }
        }
    }

    /// Removes the directory of upload `id` with everything in it.
    pub async fn discard_upload(&self, id: &str) {
        each!(self, b => b.discard_upload(id).await)
    }

    /// Whether the bytes of `digest` are present.
    pub async fn exists(&self, digest: &Digest) -> bool {
        each!(self, b => b.exists(digest).await)
    }

    /// `len` bytes of blob `digest` from byte `start`; `None` when its bytes
    /// are not stored. A blob shorter than asked ends the stream with an error.
    pub async fn read(
        &self,
        digest: &Digest,
        start: u64,
        len: u64,
    ) -> io::Result<Option<ByteStream>> {
        each!(self, b => b.read(digest, start, len).await)
    }

    /// A URL the client may fetch blob `digest` from directly for a while
    /// (a presigned object URL); `None` when the store has none.
    pub async fn direct_url(&self, digest: &Digest) -> Option<String> {
        match self {
            Self::Files(_) => None,
            Self::Objects(b) => b.direct_url(digest).await,
        }
    }

    /// Hashes the stored bytes of `digest` again (`None`: not stored).
    pub async fn rehash(&self, digest: &Digest) -> io::Result<Option<(Digest, u64)>> {
        each!(self, b => b.rehash(digest).await)
    }

    /// Moves the bytes of `digest` aside to `quarantine/<algorithm>-<hex>`
    /// (they do not hash to their name), so a push can place the right ones.
    pub async fn quarantine(&self, digest: &Digest) -> io::Result<()> {
        each!(self, b => b.quarantine(digest).await)
    }

    /// Removes the bytes of `digest` (garbage collection).
    pub async fn remove(&self, digest: &Digest) -> io::Result<()> {
        each!(self, b => b.remove(digest).await)
    }

    /// The upload directories, with the newest modification time of anything
    /// in them (the last sign of activity).
    pub async fn upload_dirs(&self) -> io::Result<Vec<(String, std::time::SystemTime)>> {
        each!(self, b => b.upload_dirs().await)
    }

    /// Removes upload entry `name` found by [`BlobStore::upload_dirs`], file or directory.
    pub async fn discard_upload_entry(&self, name: &str) {
        each!(self, b => b.discard_upload_entry(name).await)
    }

    /// Every committed blob.
    pub async fn committed_files(&self) -> io::Result<Vec<Digest>> {
        each!(self, b => b.committed_files().await)
    }
}

/// The digest of a committed blob named by `algorithm` and the last segment
/// `name` of its path; `None` for anything else.
pub(crate) fn digest_named(algorithm: Algorithm, name: &str) -> Option<Digest> {
    Digest::parse(&format!("{algorithm}:{name}")).ok()
}
