//! Harbor management API (`/api/v2.0`).

mod additions;
mod artifact_copy;
mod audit_forward;
mod audit_logs;
mod compat;
mod configurations;
pub mod fixtures;
mod immutable;
mod input_edges;
mod jobservice;
pub(crate) mod ldap;
mod members;
mod metadata;
mod projects;
mod purge;
mod quotas;
mod read_only;
mod registries;
mod registry_content;
mod retention;
mod robots;
mod search_statistics;
mod signin_security;
mod system;
mod users;
mod users_api;
mod webhooks;
