//! Store functions, on both backends.

mod changes;
mod migrations;
mod projects;
mod rest;
mod users;
