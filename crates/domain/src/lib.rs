//! Berth's pure types and rules: models, validation and query grammars.
//!
//! Nothing here does I/O: no tokio, axum or sqlx. The store and the server both
//! depend on this crate, never the other way round.

pub mod cron;
pub mod error;
pub mod glob;
pub mod model;
pub mod oci;
pub mod query;
pub mod rbac;
pub mod rest_query;
pub mod sealing;
pub mod time;

pub use error::{DomainError, TagChange};
