//! Harbor management API (`/api/v2.0`).

mod registry_content;
mod system;
mod users;
