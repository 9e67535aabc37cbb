//! Errors of the store: a broken domain rule, or the database itself failing.

use berth_domain::DomainError;

/// What a store call can fail with.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A rule of the domain (a conflict, a missing row) surfaced by the store.
    #[error(transparent)]
    Domain(#[from] DomainError),
    /// The database failed or could not be reached.
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    /// The schema could not be brought up to date.
    #[error("migration error: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// Blob storage (the filesystem) failed.
    #[error("blob storage error: {0}")]
    Io(#[from] std::io::Error),
    /// An upload's bytes were refused (digest mismatch, broken body) or could not be stored.
    #[error(transparent)]
    Blob(#[from] crate::blobs::BlobError),
    /// A secret kept in the database could not be sealed or opened.
    #[error("the stored secret {name} cannot be used: {source}")]
    Secret {
        /// Where the secret is kept (e.g. `configurations/ldap_search_password`).
        name: String,
        /// Why.
        source: berth_domain::sealing::SealError,
    },
}

/// Result of a store call.
pub type StoreResult<T> = Result<T, StoreError>;

/// Turns a unique-key violation into `Conflict(message)`, leaving other errors as they are.
pub(crate) fn conflict_on_unique(err: sqlx::Error, message: impl FnOnce() -> String) -> StoreError {
    match &err {
        sqlx::Error::Database(db) if db.kind() == sqlx::error::ErrorKind::UniqueViolation => {
            StoreError::Domain(DomainError::Conflict(message()))
        }
        _ => StoreError::Database(err),
    }
}
