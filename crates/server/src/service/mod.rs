//! The services beneath the surfaces: each operation takes the acting
//! principal and domain input, and owns its permission check, its write (whose
//! transaction records the change's event), the delivery of that event and the
//! cache evictions it needs. `harbor/`, `registry/`, `rest/` and `portal/`
//! extract requests, call these and render the answers in their own wire
//! shape; no surface calls another.

pub mod artifacts;
pub mod audit_purge;
pub mod chart;
pub mod configuration;
pub mod content;
pub mod gc;
pub mod health;
pub mod jobservice;
pub mod ldap_ping;
pub mod members;
pub mod oidc;
pub mod projects;
pub mod registries;
pub mod registry_state;
pub mod replication;
pub mod repositories;
pub mod retention;
pub mod robots;
pub mod statistics;
pub mod users;
pub mod webhooks;
