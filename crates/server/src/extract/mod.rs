//! Request extractors shared by the surfaces.

pub mod principal;

pub use principal::Principal;
