//! Harbor management API (`/api/v2.0`).

mod system;
mod users;

mod compat;
mod configurations;
mod fixtures;
mod members;
mod metadata;
mod projects;
mod search_statistics;
mod users_api;
