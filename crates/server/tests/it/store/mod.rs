//! Store functions, on both backends.

mod migrations;
mod projects;
mod registry;
mod rest;
mod users;
