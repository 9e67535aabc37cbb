//! Berth's HTTP edge: the three surfaces over one store and one identity.
//!
//! `main.rs` is a thin command line over this library, so the integration
//! tests build exactly the application the binary serves.

pub mod access;
pub mod app;
pub mod audit;
pub mod backup;
pub mod bootstrap;
pub mod config;
pub mod directory;
pub mod error;
pub mod events;
pub mod extract;
pub mod harbor;
pub mod headers;
pub mod identity;
pub mod kept;
pub mod logging;
pub mod metrics;
pub mod oidc;
pub mod openapi;
pub mod operations;
pub mod outbound;
pub mod page_cache;
pub mod portal;
pub mod probes;
pub mod read_only;
pub mod registry;
pub mod rest;
pub mod secrets;
pub mod serve;
pub mod service;
pub mod session;
pub mod settings_file;
pub mod signin;
pub mod state;
pub mod tls;
pub mod units;
pub mod upstream;
pub mod workers;
