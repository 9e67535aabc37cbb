//! Harbor management API (`/api/v2.0`).

mod system;
mod users;

mod compat;
mod fixtures;
mod members;
mod metadata;
mod projects;
