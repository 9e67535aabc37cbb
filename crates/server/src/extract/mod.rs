//! Request extractors shared by the surfaces.

pub mod harbor;
pub mod principal;

pub use principal::Principal;
