//! One module per table family. Every query text here runs unchanged on SQLite and PostgreSQL.

pub mod configurations;
pub mod projects;
pub mod users;

/// Reads a 0/1 flag column.
pub(crate) fn flag(value: i64) -> bool {
    value != 0
}

pub mod artifacts;
pub mod filter;
pub mod gc;
pub mod labels;
pub mod manifests;
pub mod registry;
pub mod repositories;
