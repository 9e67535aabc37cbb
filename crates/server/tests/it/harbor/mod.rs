//! Harbor management API (`/api/v2.0`).

mod ldap;
mod system;
mod users;
