//! Berth's persistence.
//!
//! One SQL text serves SQLite and PostgreSQL through sqlx's `Any` driver; the
//! portable-schema rules are in `migrations/`. SQL lives in `repo/` and nowhere
//! else in the workspace.

pub mod blobs;
pub mod changes;
mod db;
mod error;
pub mod repo;
mod wal;

pub use blobs::{BlobError, BlobStore, UploadProgress};
pub use changes::{Changes, Topic};
pub use db::{Backend, Store};
pub use error::StoreError;
