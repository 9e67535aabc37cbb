//! One module per table family. Every query text here runs unchanged on SQLite and PostgreSQL.

pub mod configurations;
pub mod groups;
pub mod projects;
pub mod users;

/// Reads a 0/1 flag column.
pub(crate) fn flag(value: i64) -> bool {
    value != 0
}

pub mod articles;
pub mod artifacts;
pub mod audit_logs;
pub mod events;
pub mod fsck;
pub mod gc;
pub mod identities;
pub(crate) mod image_put;
pub mod immutable;
pub mod jobs;
pub mod labels;
pub mod manifests;
pub mod members;
pub mod metadata;
pub mod oidc;
pub(crate) mod page_starts;
pub mod password_resets;
pub mod quotas;
pub mod registries;
pub mod registry;
pub mod replication;
pub mod repositories;
mod rest_list;
pub mod retention;
pub mod robots;
pub mod sessions;
pub(crate) mod sql;
pub mod statistics;
pub mod system_cve_allowlist;
pub(crate) mod versioned;
pub mod webhooks;
