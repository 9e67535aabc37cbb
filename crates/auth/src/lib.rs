//! Berth's secrets: password hashing, signed tokens, key comparison and the
//! credential cache that keeps slow hashes off the hot path.
//!
//! This crate is built with `opt-level = 3` even in test builds (see the
//! workspace `Cargo.toml`): hashing code is instantiated here.

pub mod cache;
pub mod ldap;
pub mod password;
pub mod registry_token;
pub mod sealing;
pub mod secret;
pub mod token;

pub use cache::{CredentialCache, TimedCache};
pub use registry_token::RegistryTokenKeys;
pub use sealing::SecretBox;
pub use token::{TokenError, TokenKeys, VerifiedUserToken};
