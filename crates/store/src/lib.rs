//! Berth's persistence.
//!
//! One SQL text serves SQLite and PostgreSQL through sqlx's `Any` driver; the
//! portable-schema rules are in `migrations/`. SQL lives in `repo/` and nowhere
//! else in the workspace.

pub mod blobs;
pub mod changes;
pub mod content;
mod db;
mod error;
mod gc_lock;
mod pool;
pub mod repo;
pub mod s3;
mod sealed;
mod wal;

pub use blobs::{
    BlobError, BlobStore, ByteStream, Capacity, FileBlobs, Hasher, ObjectBlobs, Staged, WrittenPart,
};
pub use changes::{Changes, Topic};
pub use db::{Backend, Store};
pub use error::StoreError;
pub use gc_lock::GcLock;
pub use pool::PoolStatus;
