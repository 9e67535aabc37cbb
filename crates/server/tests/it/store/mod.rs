//! Store functions, on both backends.

mod changes;
mod jobs;
mod migrations;
mod oidc;
mod projects;
mod registries;
mod registry;
mod rest;
mod sessions;
mod users;
