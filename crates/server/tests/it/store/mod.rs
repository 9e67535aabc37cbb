//! Store functions, on both backends.

mod migrations;
mod users;
