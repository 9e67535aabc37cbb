//! Store functions, on both backends.

mod migrations;
mod projects;
mod rest;
mod users;
