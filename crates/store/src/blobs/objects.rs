//! Blobs in an S3-compatible bucket: parts and staged blobs are objects,
//! placing is a server-side copy.
//!
//! A part streams to its own object without touching local disk: the body is
//! cut into [`PART_SIZE`] pieces sent as the parts of a multipart upload (at
//! most [`PARTS_IN_FLIGHT`] at once, while the next piece fills), each with
//! its `Content-MD5` so the server checks the bytes it keeps; a body that ends
//! within the first piece is one `PutObject`. The buffers of pieces sent are
//! filled again, so an upload allocates at most `(PARTS_IN_FLIGHT + 1) *
//! PART_SIZE` bytes (24 MiB), whatever its size.
//! Request parts are objects rather than parts of one multipart upload per
//! session: they can have any size (a client's 1 KiB chunk included), and a
//! request that loses a race never touches the winner's bytes. Several parts
//! are assembled by reading them back through the hash, so the digest is
//! checked against the stored bytes, as on disk.
//!
//! A multipart upload left open by a process that died holds storage until
//! the bucket's `AbortIncompleteMultipartUpload` lifecycle rule ends it (see
//! `docs/deployment.md`).

use std::collections::{HashMap, VecDeque};
use std::io;
use std::time::{Duration, SystemTime};

use berth_domain::oci::{Algorithm, Digest};
use bytes::{Bytes, BytesMut};
use futures_util::{Stream, StreamExt, TryStreamExt};
use tokio::task::JoinHandle;

use super::{BlobError, ByteStream, Hasher, Staged, digest_named};
use crate::s3::{S3Client, S3Error};

/// The size of the pieces an object is sent in (S3's minimum is 5 MiB; at
/// most 10,000 pieces, so one request can send up to 80 GiB).
const PART_SIZE: usize = 8 << 20;
/// Pieces sent at once while the next one fills.
const PARTS_IN_FLIGHT: usize = 2;
/// The largest object one `CopyObject` copies; larger ones are copied by
/// streaming them through.
const COPY_LIMIT: u64 = 5 << 30;
/// How long a presigned blob URL stays valid.
const DIRECT_URL_LIFETIME: Duration = Duration::from_secs(20 * 60);

/// The bucket (and key prefix) blobs are kept in.
#[derive(Clone)]
pub struct ObjectBlobs {
    client: S3Client,
}

impl std::fmt::Debug for ObjectBlobs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("ObjectBlobs")
            .field(&self.client.describe())
            .finish()
    }
}

impl From<S3Error> for BlobError {
    fn from(err: S3Error) -> Self {
        Self::Io(storage(err))
    }
}

/// An object store failure as an I/O error.
fn storage(err: S3Error) -> io::Error {
    io::Error::other(err)
}

/// The key of blob `digest`.
fn blob_key(digest: &Digest) -> String {
    let hex = digest.hex();
    format!("{}/{}/{hex}", digest.algorithm().name(), &hex[..2])
}

/// The key prefix of upload `id`.
fn upload_prefix(id: &str) -> String {
    format!("uploads/{id}/")
}

impl ObjectBlobs {
    /// Blobs kept through `client`.
    pub fn new(client: S3Client) -> Self {
        Self { client }
    }

    /// Where the blobs are.
    pub(super) fn describe(&self) -> String {
        self.client.describe()
    }

    /// [`super::BlobStore::check`]: the bucket answers to the credentials.
    pub(super) async fn check(&self) -> Result<(), String> {
        self.client
            .head_bucket()
            .await
            .map_err(|e| format!("the bucket does not answer: {e}"))
    }

    /// [`super::BlobStore::write_part`] into the new object `name`: its length.
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
        let key = format!("{}{name}", upload_prefix(id));
        let body = body.map_err(|e| BlobError::Body(e.to_string()));
        self.write_object(&key, hasher, body).await
    }

    /// Streams `body` to object `key`, hashing every byte; its length.
    /// Nothing is left at `key` (nor an open multipart upload) on an error.
    async fn write_object<S>(
        &self,
        key: &str,
        hasher: &mut Hasher,
        body: S,
    ) -> Result<u64, BlobError>
    where
        S: Stream<Item = Result<Bytes, BlobError>> + Send,
    {
        let mut body = std::pin::pin!(body);
        let mut buffer = BytesMut::with_capacity(PART_SIZE);
        let mut total = 0u64;
        let mut multipart: Option<Multipart> = None;
        let sent = async {
            while let Some(chunk) = body.next().await {
                let chunk = chunk?;
                hasher.update(&chunk);
                total += chunk.len() as u64;
                let mut rest: &[u8] = &chunk;
                while !rest.is_empty() {
                    let (now, later) = rest.split_at(rest.len().min(PART_SIZE - buffer.len()));
                    buffer.extend_from_slice(now);
                    rest = later;
                    if buffer.len() < PART_SIZE {
                        continue;
                    }
                    if multipart.is_none() {
                        let upload_id = self.client.create_multipart(key).await?;
                        multipart = Some(Multipart::new(self.client.clone(), key, upload_id));
                    }
                    let parts = multipart.as_mut().expect("started above");
                    parts.send(std::mem::take(&mut buffer).freeze()).await?;
                    buffer = parts.spare_buffer();
                }
            }
            match multipart.as_mut() {
                None => self.client.put_object(key, buffer.split().freeze()).await?,
                Some(parts) => {
                    if !buffer.is_empty() {
                        parts.send(buffer.split().freeze()).await?;
                    }
                    parts.complete().await?;
                }
            }
            Ok::<_, BlobError>(())
        }
        .await;
        if let Err(err) = sent {
            if let Some(parts) = multipart {
                parts.abort().await;
            }
            return Err(err);
        }
        Ok(total)
    }

    /// Whether part `name` of upload `id` is stored.
    pub(super) async fn part_exists(&self, id: &str, name: &str) -> io::Result<bool> {
        let key = format!("{}{name}", upload_prefix(id));
        Ok(self
            .client
            .head_object(&key)
            .await
            .map_err(storage)?
            .is_some())
    }

    /// The length of part `name` of upload `id`.
    pub(super) async fn part_len(&self, id: &str, name: &str) -> io::Result<u64> {
        let key = format!("{}{name}", upload_prefix(id));
        self.client
            .head_object(&key)
            .await
            .map_err(storage)?
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("no object {key}")))
    }

    /// [`super::BlobStore::discard_part`].
    pub(super) async fn discard_part(&self, id: &str, name: &str) {
        let key = format!("{}{name}", upload_prefix(id));
        if let Err(err) = self.client.delete_object(&key).await {
            tracing::warn!(error = %err, key, "could not remove an upload part");
        }
    }

    /// Reads `parts` of upload `id` in order into its new object `name`,
    /// hashing with `algorithm`; the digest and length of what was read.
    pub(super) async fn concatenate(
        &self,
        id: &str,
        parts: &[String],
        name: &str,
        algorithm: Algorithm,
    ) -> io::Result<(Digest, u64)> {
        let prefix = upload_prefix(id);
        let sources: Vec<String> = parts.iter().map(|p| format!("{prefix}{p}")).collect();
        let mut hasher = Hasher::new(algorithm);
        let len = self
            .write_object(
                &format!("{prefix}{name}"),
                &mut hasher,
                self.read_all(sources),
            )
            .await
            .map_err(into_io)?;
        Ok((hasher.finish(), len))
    }

    /// The objects `keys` one after the other, as one stream.
    fn read_all(
        &self,
        keys: Vec<String>,
    ) -> impl Stream<Item = Result<Bytes, BlobError>> + Send + 'static {
        let client = self.client.clone();
        futures_util::stream::iter(keys)
            .then(move |key| {
                let client = client.clone();
                async move {
                    match client.get_object(&key, None).await? {
                        Some(object) => Ok(object.stream.map_err(BlobError::Io)),
                        None => Err(BlobError::Io(io::Error::new(
                            io::ErrorKind::NotFound,
                            format!("no object {key}"),
                        ))),
                    }
                }
            })
            .try_flatten()
    }

    /// [`super::BlobStore::place`]: a server-side copy, unless the blob is there.
    pub(super) async fn place(&self, staged: &Staged) -> io::Result<bool> {
        let target = blob_key(&staged.digest);
        if self
            .client
            .head_object(&target)
            .await
            .map_err(storage)?
            .is_some()
        {
            return Ok(false);
        }
        let source = format!("{}{}", upload_prefix(&staged.upload), staged.name);
        if staged.len <= COPY_LIMIT {
            self.client
                .copy_object(&source, &target)
                .await
                .map_err(storage)?;
        } else {
            let mut hasher = Hasher::new(staged.digest.algorithm());
            self.write_object(&target, &mut hasher, self.read_all(vec![source]))
                .await
                .map_err(into_io)?;
        }
        Ok(true)
    }

    /// [`super::BlobStore::discard_upload`].
    pub(super) async fn discard_upload(&self, id: &str) {
        self.discard_prefix(&upload_prefix(id)).await;
    }

    /// Removes every object under `prefix`.
    async fn discard_prefix(&self, prefix: &str) {
        let objects = match self.client.list(prefix).await {
            Ok(objects) => objects,
            Err(err) => {
                tracing::warn!(error = %err, prefix, "could not list upload objects to remove");
                return;
            }
        };
        for object in objects {
            if let Err(err) = self.client.delete_object(&object.key).await {
                tracing::warn!(error = %err, key = object.key, "could not remove an upload object");
            }
        }
    }

    /// [`super::BlobStore::exists`].
    pub(super) async fn exists(&self, digest: &Digest) -> bool {
        matches!(
            self.client.head_object(&blob_key(digest)).await,
            Ok(Some(_))
        )
    }

    /// [`super::BlobStore::read`].
    pub(super) async fn read(
        &self,
        digest: &Digest,
        start: u64,
        len: u64,
    ) -> io::Result<Option<ByteStream>> {
        if len == 0 {
            let empty = self
                .client
                .head_object(&blob_key(digest))
                .await
                .map_err(storage)?;
            return Ok(empty.map(|_| Box::pin(futures_util::stream::empty()) as ByteStream));
        }
        let object = self
            .client
            .get_object(&blob_key(digest), Some((start, len)))
            .await
            .map_err(storage)?;
        Ok(object.map(|o| o.stream))
    }

    /// [`super::BlobStore::direct_url`]: a presigned GET.
    /// `None` when there are no keys to sign it with (the caller streams instead).
    pub(super) async fn direct_url(&self, digest: &Digest) -> Option<String> {
        self.client
            .presign_get(&blob_key(digest), DIRECT_URL_LIFETIME)
            .await
            .inspect_err(|err| tracing::warn!(error = %err, "cannot presign a blob URL"))
            .ok()
    }

    /// [`super::BlobStore::rehash`].
    pub(super) async fn rehash(&self, digest: &Digest) -> io::Result<Option<(Digest, u64)>> {
        let Some(object) = self
            .client
            .get_object(&blob_key(digest), None)
            .await
            .map_err(storage)?
        else {
            return Ok(None);
        };
        let mut hasher = Hasher::new(digest.algorithm());
        let mut total = 0u64;
        let mut stream = object.stream;
        while let Some(chunk) = stream.next().await {
            let chunk = chunk?;
            hasher.update(&chunk);
            total += chunk.len() as u64;
        }
        Ok(Some((hasher.finish(), total)))
    }

    /// [`super::BlobStore::quarantine`]: copied aside, then removed.
    pub(super) async fn quarantine(&self, digest: &Digest) -> io::Result<()> {
        let target = format!("quarantine/{}-{}", digest.algorithm(), digest.hex());
        self.client
            .copy_object(&blob_key(digest), &target)
            .await
            .map_err(storage)?;
        self.remove(digest).await
    }

    /// [`super::BlobStore::remove`].
    pub(super) async fn remove(&self, digest: &Digest) -> io::Result<()> {
        self.client
            .delete_object(&blob_key(digest))
            .await
            .map_err(storage)
    }

    /// [`super::BlobStore::upload_dirs`]: upload prefixes with their newest object.
    pub(super) async fn upload_dirs(&self) -> io::Result<Vec<(String, SystemTime)>> {
        let objects = self.client.list("uploads/").await.map_err(storage)?;
        let mut newest: HashMap<String, SystemTime> = HashMap::new();
        for object in objects {
            let Some(rest) = object.key.strip_prefix("uploads/") else {
                continue;
            };
            let id = rest.split('/').next().unwrap_or(rest).to_string();
            let entry = newest.entry(id).or_insert(object.last_modified);
            *entry = (*entry).max(object.last_modified);
        }
        Ok(newest.into_iter().collect())
    }

    /// [`super::BlobStore::discard_upload_entry`].
    pub(super) async fn discard_upload_entry(&self, name: &str) {
        self.discard_prefix(&upload_prefix(name)).await;
        let _ = self.client.delete_object(&format!("uploads/{name}")).await;
    }

    /// [`super::BlobStore::committed_files`].
    pub(super) async fn committed_files(&self) -> io::Result<Vec<Digest>> {
        let mut found = Vec::new();
        for algorithm in Algorithm::ALL {
            let prefix = format!("{}/", algorithm.name());
            for object in self.client.list(&prefix).await.map_err(storage)? {
                let name = object.key.rsplit('/').next().unwrap_or_default();
                found.extend(digest_named(algorithm, name));
            }
        }
        Ok(found)
    }
}

/// A blob error as an I/O error (for the store's I/O-shaped operations).
fn into_io(err: BlobError) -> io::Error {
    match err {
        BlobError::Io(err) => err,
        other => io::Error::other(other),
    }
}

/// A piece sent: its number, its ETag, and its bytes (to reuse the buffer).
type SentPiece = (u32, String, Bytes);

/// An open multipart upload with its pieces in flight. The buffers of pieces
/// sent are filled again, so an upload allocates at most three.
struct Multipart {
    client: S3Client,
    key: String,
    upload_id: String,
    sending: VecDeque<JoinHandle<Result<SentPiece, S3Error>>>,
    sent: Vec<(u32, String)>,
    spare: Vec<BytesMut>,
    next: u32,
}

impl Multipart {
    fn new(client: S3Client, key: &str, upload_id: String) -> Self {
        Self {
            client,
            key: key.to_string(),
            upload_id,
            sending: VecDeque::new(),
            sent: Vec::new(),
            spare: Vec::new(),
            next: 1,
        }
    }

    /// Starts sending `piece` as the next part, once fewer than
    /// [`PARTS_IN_FLIGHT`] are on their way.
    async fn send(&mut self, piece: Bytes) -> Result<(), BlobError> {
        if self.next > 10_000 {
            return Err(BlobError::Io(io::Error::other(
                "the body is larger than one object upload may be (10,000 parts)",
            )));
        }
        while self.sending.len() >= PARTS_IN_FLIGHT {
            self.finish_one().await?;
        }
        let (client, key, upload_id, number) = (
            self.client.clone(),
            self.key.clone(),
            self.upload_id.clone(),
            self.next,
        );
        self.next += 1;
        self.sending.push_back(tokio::spawn(async move {
            let etag = client
                .upload_part(&key, &upload_id, number, piece.clone())
                .await?;
            Ok((number, etag, piece))
        }));
        Ok(())
    }

    /// An empty buffer for the next piece: one whose piece was sent, or a new one.
    fn spare_buffer(&mut self) -> BytesMut {
        self.spare
            .pop()
            .unwrap_or_else(|| BytesMut::with_capacity(PART_SIZE))
    }

    /// Waits for the oldest part on its way and keeps its buffer.
    async fn finish_one(&mut self) -> Result<(), BlobError> {
        if let Some(sending) = self.sending.pop_front() {
            let (number, etag, piece) = sending.await.map_err(io::Error::other)??;
            self.sent.push((number, etag));
            if let Ok(mut buffer) = piece.try_into_mut() {
                buffer.clear();
                self.spare.push(buffer);
            }
        }
        Ok(())
    }

    /// Waits for every part, then completes the object.
    async fn complete(&mut self) -> Result<(), BlobError> {
        while !self.sending.is_empty() {
            self.finish_one().await?;
        }
        self.client
            .complete_multipart(&self.key, &self.upload_id, &self.sent)
            .await?;
        Ok(())
    }

    /// Gives up the upload (the server drops its parts).
    async fn abort(self) {
        for sending in &self.sending {
            sending.abort();
        }
        if let Err(err) = self
            .client
            .abort_multipart(&self.key, &self.upload_id)
            .await
        {
            tracing::warn!(error = %err, key = self.key, "could not abort a multipart upload");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::blobs::{BlobStore, digest_of};
    use crate::s3::S3Config;

    /// A store on a fresh prefix of the test bucket (`BERTH_TEST_S3_URL`).
    fn store() -> (BlobStore, ObjectBlobs) {
        let url = std::env::var("BERTH_TEST_S3_URL").expect(
            "BERTH_TEST_S3_URL is not set: run `bash scripts/test` (it starts an S3 server)",
        );
        // Short: s3s-fs keeps a file named after the whole key (base64), and
        // a sha512 key under a long prefix passes the 255-byte name limit.
        let prefix = format!("u{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
        let url = match url.split_once('?') {
            Some((base, query)) => format!("{}/{prefix}?{query}", base.trim_end_matches('/')),
            None => format!("{}/{prefix}", url.trim_end_matches('/')),
        };
        let config = S3Config::parse(&url, |name| std::env::var(name).ok()).unwrap();
        let objects = ObjectBlobs::new(S3Client::new(config).unwrap());
        (BlobStore::Objects(objects.clone()), objects)
    }

    fn chunks(
        all: &[u8],
        size: usize,
    ) -> impl Stream<Item = Result<Bytes, io::Error>> + Send + use<> {
        let pieces: Vec<Result<Bytes, io::Error>> = all
            .chunks(size)
            .map(|c| Ok(Bytes::copy_from_slice(c)))
            .collect();
        futures_util::stream::iter(pieces)
    }

    async fn read_all(store: &BlobStore, digest: &Digest, start: u64, len: u64) -> Vec<u8> {
        let mut stream = store.read(digest, start, len).await.unwrap().unwrap();
        let mut out = Vec::new();
        while let Some(piece) = stream.next().await {
            out.extend_from_slice(&piece.unwrap());
        }
        out
    }

    #[tokio::test]
    async fn small_parts_assemble_into_a_multipart_blob_with_ranges() {
        let (store, _) = store();
        // 3 MiB parts (below S3's 5 MiB minimum) making 21 MiB: assembled in
        // three 8 MiB pieces.
        let all: Vec<u8> = (0..21u32 << 20).map(|i| (i % 253) as u8).collect();
        let mut hasher = Hasher::new(Algorithm::Sha256);
        let mut names = Vec::new();
        for part in all.chunks(3 << 20) {
            let written = store
                .write_part("up", hasher.clone(), chunks(part, 100_000))
                .await
                .unwrap();
            hasher = Hasher::restore(Algorithm::Sha256, Some(&written.hash_state)).unwrap();
            names.push(written.name);
        }
        let digest = digest_of(Algorithm::Sha256, &all);
        let state = hasher.save();
        let staged = store
            .assemble("up", &names, Algorithm::Sha256, Some(&state), &digest)
            .await
            .unwrap();
        assert_eq!(staged.len, all.len() as u64);
        assert!(store.place(&staged).await.unwrap());
        assert!(!store.place(&staged).await.unwrap(), "placed once");
        store.discard_upload("up").await;
        assert!(store.upload_dirs().await.unwrap().is_empty());
        assert_eq!(read_all(&store, &digest, 0, all.len() as u64).await, all);
        let middle = read_all(&store, &digest, (8 << 20) - 5, 10).await;
        assert_eq!(middle, all[(8 << 20) - 5..(8 << 20) + 5]);
        assert_eq!(
            store.rehash(&digest).await.unwrap(),
            Some((digest.clone(), all.len() as u64))
        );
        assert_eq!(store.committed_files().await.unwrap(), vec![digest.clone()]);
        store.remove(&digest).await.unwrap();
        assert!(!store.exists(&digest).await);
        assert!(store.read(&digest, 0, 1).await.unwrap().is_none());
    }

    #[tokio::test]
    async fn a_failing_or_mismatching_body_leaves_nothing() {
        let (store, objects) = store();
        let mut pieces: Vec<Result<Bytes, io::Error>> = (0..3)
            .map(|i| Ok(Bytes::from(vec![i as u8; 7 << 20])))
            .collect();
        pieces.push(Err(io::Error::other("connection reset")));
        let err = store
            .write_part(
                "broken",
                Hasher::new(Algorithm::Sha256),
                futures_util::stream::iter(pieces),
            )
            .await
            .unwrap_err();
        assert!(matches!(err, BlobError::Body(_)), "{err}");
        assert!(objects.client.list("").await.unwrap().is_empty());
        let claimed = digest_of(Algorithm::Sha256, b"other");
        let err = store
            .stage("m", &claimed, chunks(b"data", 2))
            .await
            .unwrap_err();
        assert!(matches!(err, BlobError::DigestMismatch { .. }));
        assert!(objects.client.list("").await.unwrap().is_empty());
        assert!(!store.exists(&claimed).await);
    }
}
