//! Pushing blobs: the one place where blob files and their rows change together.
//!
//! A monolithic upload is staged, checked and installed. A chunked upload is a
//! session; every chunk is recorded with a compare-and-set on the session
//! (`parts`, which every change moves), and the commit ends the session in
//! the transaction that installs the blob, on the same condition.
//!
//! In a blob directory the chunks extend one file in place, each hashed on
//! the fly from the state the session saved after the chunk before: a
//! request first takes the file's lock (a request that finds it taken is
//! refused and changes nothing), then reads the session again, so it writes
//! only after the bytes the session records. The commit uses the file as it
//! is, checked against the carried hash, without reading it again.
//!
//! In a bucket (and for a session begun by an earlier version as separate
//! part files) every request writes a part of its own; of two concurrent
//! requests one records its part and the other removes its own. The commit
//! copies the parts into one blob, hashing them again as they are read.

use std::time::{Duration, Instant};

use berth_domain::oci::Digest;
use bytes::Bytes;
use futures_util::Stream;

use crate::Store;
use crate::blobs::{
    BlobError, BlobStore, FileBlobs, Hasher, HeldFile, IN_PLACE, Staged, WrittenPart,
};
use crate::error::{StoreError, StoreResult};
use crate::repo::registry::{BlobInfo, Installed, Upload, deleting};

/// How often a chunk that is still streaming in marks its session active.
const UPLOAD_HEARTBEAT: Duration = Duration::from_secs(30);
/// How long a push waits for a collector to finish removing the same digest.
const COLLECTION_WAIT: Duration = Duration::from_secs(30);

/// The outcome of a chunk or a commit of an upload session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UploadStep<T> {
    /// Done.
    Done(T),
    /// Another request changed the session first; nothing changed. It now holds this many bytes.
    Conflict(i64),
    /// The session ended (committed, cancelled or expired); nothing changed.
    Gone,
}

/// What a chunked upload's request may do with the session's bytes.
enum Hold<'a> {
    /// Extend the in-place file of the directory, locked for this request.
    InPlace(&'a FileBlobs, HeldFile),
    /// Write a part of its own (a bucket, or a session of part files).
    Parts,
    /// Nothing: the session is being written by another request, moved on,
    /// or ended.
    Refused,
}

/// Blob pushes over a database and a blob directory.
pub struct Content<'a> {
    store: &'a Store,
    blobs: &'a BlobStore,
}

impl Store {
    /// Blob pushes into `blobs`.
    pub fn content<'a>(&'a self, blobs: &'a BlobStore) -> Content<'a> {
        Content { store: self, blobs }
    }
}

impl Content<'_> {
    /// A monolithic upload: `body` becomes blob `expected` of `repository`
    /// (in project `project_id`) if it hashes to it.
    pub async fn put<S, E>(
        &self,
        project_id: i64,
        repository: &str,
        expected: &Digest,
        body: S,
    ) -> StoreResult<BlobInfo>
    where
        S: Stream<Item = Result<Bytes, E>> + Send,
        E: std::fmt::Display,
    {
        let id = uuid::Uuid::new_v4().to_string();
        let staged = self.blobs.stage(&id, expected, body).await?;
        let installed = self.install(&staged, project_id, repository, None).await;
        self.blobs.discard_committed(&id, &[&staged.name]).await;
        match installed? {
            Installed::Done(info) => Ok(info),
            // Without a session there is nothing to change under us.
            Installed::UploadChanged | Installed::Collecting => Err(deleting(expected.as_str())),
        }
    }

    /// Appends `body` to `upload` as its next part; `Done` with the bytes
    /// the session now holds. A body of another length than `declared` (its
    /// `Content-Range`) is refused and changes nothing.
    pub async fn append<S, E>(
        &self,
        upload: &Upload,
        body: S,
        declared: Option<u64>,
    ) -> StoreResult<UploadStep<i64>>
    where
        S: Stream<Item = Result<Bytes, E>> + Send,
        E: std::fmt::Display,
    {
        match self.hold(upload).await? {
            Hold::InPlace(files, held) => {
                return self
                    .append_in_place(files, upload, &held, body, declared)
                    .await;
            }
            Hold::Refused => return self.lost(&upload.id).await,
            Hold::Parts => {}
        }
        let Some(part) = self
            .write_part(upload, upload.hash_state.as_deref(), body, declared)
            .await?
        else {
            return Ok(UploadStep::Gone);
        };
        if self.store.registry().record_part(upload, &part).await? {
            let len = i64::try_from(part.len).unwrap_or(i64::MAX);
            return Ok(UploadStep::Done(upload.bytes_received + len));
        }
        self.blobs.discard_part(&upload.id, &part.name).await;
        self.lost(&upload.id).await
    }

    /// Commits `upload`, with a last chunk `last` (and the length its
    /// `Content-Range` names, if any) when the request carries one, as blob
    /// `expected` of the session's repository. A digest that does not match
    /// the bytes ends the session and stores nothing.
    pub async fn commit<S, E>(
        &self,
        upload: &Upload,
        last: Option<(S, Option<u64>)>,
        expected: &Digest,
    ) -> StoreResult<UploadStep<BlobInfo>>
    where
        S: Stream<Item = Result<Bytes, E>> + Send,
        E: std::fmt::Display,
    {
        match self.hold(upload).await? {
            Hold::InPlace(files, held) => {
                return self
                    .commit_in_place(files, upload, &held, last, expected)
                    .await;
            }
            Hold::Refused => return self.lost(&upload.id).await,
            Hold::Parts => {}
        }
        let registry = self.store.registry();
        let mut parts = registry.upload_parts(&upload.id).await?;
        if i64::try_from(parts.len()) != Ok(upload.parts) {
            return self.lost(&upload.id).await;
        }
        let mut state = upload.hash_state.clone();
        if let Some((body, declared)) = last {
            let Some(part) = self
                .write_part(upload, state.as_deref(), body, declared)
                .await?
            else {
                return Ok(UploadStep::Gone);
            };
            if part.len == 0 {
                // An empty body (no Content-Length): nothing to add, and a
                // single earlier part stays usable as it is.
                self.blobs.discard_part(&upload.id, &part.name).await;
            } else {
                parts.push(part.name);
                state = Some(part.hash_state);
            }
        }
        let staged = match self
            .blobs
            .assemble(
                &upload.id,
                &parts,
                upload.algorithm(),
                state.as_deref(),
                expected,
            )
            .await
        {
            Ok(staged) => staged,
            Err(BlobError::DigestMismatch { expected }) => {
                return Err(self.mismatch(upload, expected).await);
            }
            Err(err) => return Err(err.into()),
        };
        let installed = self.install_upload(upload, &staged).await?;
        match installed {
            Installed::Done(info) => {
                let mut names: Vec<&str> = parts.iter().map(String::as_str).collect();
                names.push(&staged.name);
                names.dedup();
                self.blobs.discard_committed(&upload.id, &names).await;
                Ok(UploadStep::Done(info))
            }
            Installed::UploadChanged | Installed::Collecting => self.lost(&upload.id).await,
        }
    }

    /// Takes `upload`'s in-place file when the blobs are in a directory and
    /// the session keeps its bytes there, and checks under its lock, in one
    /// query, that the session is still as `upload` read it. (A session of
    /// part files gets an empty in-place file it never uses; it goes with
    /// the session's directory.)
    async fn hold(&self, upload: &Upload) -> StoreResult<Hold<'_>> {
        let BlobStore::Files(files) = self.blobs else {
            return Ok(Hold::Parts);
        };
        let Some(held) = files.hold(&upload.id).await? else {
            return Ok(Hold::Refused);
        };
        match self
            .store
            .registry()
            .upload_in_place(&upload.id, IN_PLACE)
            .await?
        {
            Some((_, true)) => Ok(Hold::Parts),
            Some((parts, false)) if parts == upload.parts => Ok(Hold::InPlace(files, held)),
            _ => Ok(Hold::Refused),
        }
    }

    /// [`Content::append`] into the in-place file `held`.
    async fn append_in_place<S, E>(
        &self,
        files: &FileBlobs,
        upload: &Upload,
        held: &HeldFile,
        body: S,
        declared: Option<u64>,
    ) -> StoreResult<UploadStep<i64>>
    where
        S: Stream<Item = Result<Bytes, E>> + Send,
        E: std::fmt::Display,
    {
        let offset = received(upload);
        let mut hasher = Hasher::restore(upload.algorithm(), upload.hash_state.as_deref())?;
        let len = self
            .extend(files, upload, held, &mut hasher, body, declared)
            .await?;
        let chunk = WrittenPart {
            name: IN_PLACE.to_string(),
            len,
            hash_state: hasher.save(),
        };
        if self.store.registry().record_part(upload, &chunk).await? {
            return Ok(UploadStep::Done(
                upload.bytes_received + i64::try_from(len).unwrap_or(i64::MAX),
            ));
        }
        files.cut(held, offset).await?;
        self.lost(&upload.id).await
    }

    /// [`Content::commit`] of the in-place file `held`.
    async fn commit_in_place<S, E>(
        &self,
        files: &FileBlobs,
        upload: &Upload,
        held: &HeldFile,
        last: Option<(S, Option<u64>)>,
        expected: &Digest,
    ) -> StoreResult<UploadStep<BlobInfo>>
    where
        S: Stream<Item = Result<Bytes, E>> + Send,
        E: std::fmt::Display,
    {
        let mut hasher = Hasher::restore(upload.algorithm(), upload.hash_state.as_deref())?;
        let mut len = received(upload);
        match last {
            Some((body, declared)) => {
                len += self
                    .extend(files, upload, held, &mut hasher, body, declared)
                    .await?;
            }
            // Bytes a failed request left past the recorded ones are not the upload's.
            None => files.cut(held, len).await?,
        }
        let digest = if hasher.algorithm() == expected.algorithm() {
            hasher.finish()
        } else {
            files.hash_held(held, expected.algorithm()).await?.0
        };
        if digest != *expected {
            return Err(self.mismatch(upload, expected.clone()).await);
        }
        let staged = Staged {
            upload: upload.id.clone(),
            name: IN_PLACE.to_string(),
            digest,
            len,
        };
        let installed = self.install_upload(upload, &staged).await?;
        match installed {
            Installed::Done(info) => {
                self.blobs.discard_upload(&upload.id).await;
                Ok(UploadStep::Done(info))
            }
            Installed::UploadChanged | Installed::Collecting => {
                files.cut(held, received(upload)).await?;
                self.lost(&upload.id).await
            }
        }
    }

    /// Appends `body` to `held` after `upload`'s recorded bytes while marking
    /// the session active; the bytes added. A body of another length than
    /// `declared` is cut off again and refused.
    async fn extend<S, E>(
        &self,
        files: &FileBlobs,
        upload: &Upload,
        held: &HeldFile,
        hasher: &mut Hasher,
        body: S,
        declared: Option<u64>,
    ) -> StoreResult<u64>
    where
        S: Stream<Item = Result<Bytes, E>> + Send,
        E: std::fmt::Display,
    {
        let offset = received(upload);
        let len = self
            .heartbeat(&upload.id, files.append(held, offset, hasher, body))
            .await?;
        match declared {
            Some(declared) if declared != len => {
                files.cut(held, offset).await?;
                Err(BlobError::RangeMismatch {
                    declared,
                    received: len,
                }
                .into())
            }
            _ => Ok(len),
        }
    }

    /// [`Content::install`] of `staged` as the blob of session `upload`, on
    /// the condition that the session is as `upload` read it.
    async fn install_upload(&self, upload: &Upload, staged: &Staged) -> StoreResult<Installed> {
        self.install(
            staged,
            upload.project_id,
            &upload.repository,
            Some((&upload.id, upload.parts)),
        )
        .await
    }

    /// Ends session `upload`, whose bytes do not hash to `expected`: the
    /// error to answer with (nothing is stored).
    async fn mismatch(&self, upload: &Upload, expected: Digest) -> StoreError {
        match self.store.registry().delete_upload(&upload.id).await {
            Ok(ended) => {
                if ended {
                    self.blobs.discard_upload(&upload.id).await;
                }
                BlobError::DigestMismatch { expected }.into()
            }
            Err(err) => err,
        }
    }

    /// Cancels upload session `id`; `false` when there was none.
    pub async fn cancel(&self, id: &str) -> StoreResult<bool> {
        let ended = self.store.registry().delete_upload(id).await?;
        if ended {
            self.blobs.discard_upload(id).await;
        }
        Ok(ended)
    }

    /// [`crate::repo::registry::Registry::install_blob`], waiting while a
    /// collector removes the same digest (and finishing the removal itself
    /// if that collector died).
    async fn install(
        &self,
        staged: &Staged,
        project_id: i64,
        repository: &str,
        upload: Option<(&str, i64)>,
    ) -> StoreResult<Installed> {
        let deadline = Instant::now() + COLLECTION_WAIT;
        loop {
            let installed = self
                .store
                .registry()
                .install_blob(self.blobs, staged, project_id, repository, upload)
                .await?;
            if installed != Installed::Collecting {
                return Ok(installed);
            }
            if Instant::now() > deadline {
                return Err(deleting(staged.digest.as_str()));
            }
            if !self.store.recover_gc(self.blobs).await? {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }

    /// Writes `body` as a new part of `upload` after the bytes hashed into
    /// `state`; a part of another length than `declared` is removed and
    /// refused. `None` when the session ended meanwhile (a commit or a
    /// cancel removed its directory under the write).
    async fn write_part<S, E>(
        &self,
        upload: &Upload,
        state: Option<&[u8]>,
        body: S,
        declared: Option<u64>,
    ) -> StoreResult<Option<WrittenPart>>
    where
        S: Stream<Item = Result<Bytes, E>> + Send,
        E: std::fmt::Display,
    {
        let hasher = Hasher::restore(upload.algorithm(), state)?;
        let written = self
            .heartbeat(&upload.id, self.blobs.write_part(&upload.id, hasher, body))
            .await;
        let part = match written {
            Ok(part) => part,
            Err(err @ StoreError::Blob(BlobError::Io(_))) => {
                return match self.lost::<()>(&upload.id).await? {
                    UploadStep::Gone => Ok(None),
                    _ => Err(err),
                };
            }
            Err(err) => return Err(err),
        };
        match declared {
            Some(declared) if declared != part.len => {
                self.blobs.discard_part(&upload.id, &part.name).await;
                Err(BlobError::RangeMismatch {
                    declared,
                    received: part.len,
                }
                .into())
            }
            _ => Ok(Some(part)),
        }
    }

    /// Where session `id` stands after a request lost a race for it. An
    /// ended session's directory is removed again: the losing request may
    /// have recreated it.
    async fn lost<T>(&self, id: &str) -> StoreResult<UploadStep<T>> {
        Ok(match self.store.registry().upload(id).await? {
            Some(now) => UploadStep::Conflict(now.bytes_received),
            None => {
                self.blobs.discard_upload(id).await;
                UploadStep::Gone
            }
        })
    }

    /// Runs `work` (a chunk streaming in) while marking session `id` active
    /// every [`UPLOAD_HEARTBEAT`].
    async fn heartbeat<T>(
        &self,
        id: &str,
        work: impl Future<Output = Result<T, BlobError>>,
    ) -> StoreResult<T> {
        let store = self.store.clone();
        let id = id.to_string();
        let beat = tokio::spawn(async move {
            let mut ticks = tokio::time::interval(UPLOAD_HEARTBEAT);
            ticks.tick().await;
            loop {
                ticks.tick().await;
                if let Err(err) = store.registry().touch_upload(&id).await {
                    tracing::warn!(error = %err, "could not mark an upload active");
                }
            }
        });
        let result = work.await;
        beat.abort();
        Ok(result?)
    }
}

/// The bytes `upload` records.
fn received(upload: &Upload) -> u64 {
    u64::try_from(upload.bytes_received).unwrap_or(0)
}
