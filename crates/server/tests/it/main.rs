//! Berth's one integration test binary. Every store and API test runs on SQLite
//! and again on PostgreSQL (see `backend_test!`).

#[allow(
    dead_code,
    unused_imports,
    reason = "shared helpers: not every test module uses each one"
)]
mod util;

mod cli;
mod connections;
mod harbor;
mod headers;
mod metrics;
mod openapi;
mod portal;
mod registry;
mod request_ids;
mod rest;
mod store;
