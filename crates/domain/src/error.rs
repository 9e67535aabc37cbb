//! The error every layer below the HTTP edge speaks.

/// A rule of the domain was broken; the server maps each variant to a status once.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DomainError {
    /// The addressed entity does not exist (or is not visible to the caller).
    #[error("{0}")]
    NotFound(String),
    /// The write collides with an existing entity (a unique key).
    #[error("{0}")]
    Conflict(String),
    /// The input is malformed; `field` names the offending input when one does.
    #[error("{message}")]
    Invalid {
        /// The parameter or body field at fault, if any.
        field: Option<String>,
        /// A human-readable reason.
        message: String,
    },
    /// A login is required and missing or wrong.
    #[error("{0}")]
    Unauthorized(String),
    /// The caller is known but lacks the permission.
    #[error("{0}")]
    Forbidden(String),
    /// The state of the entity forbids the operation (Harbor's 412).
    #[error("{0}")]
    Precondition(String),
    /// An immutable tag rule protects tag `tag` of `repository` (its full
    /// name) from `change` (Harbor's 412).
    #[error("tag {repository}:{tag} is immutable")]
    Immutable {
        /// The repository's full name.
        repository: String,
        /// The protected tag.
        tag: String,
        /// What was refused.
        change: TagChange,
    },
    /// Storing `adding` bytes more would take a project past its storage
    /// quota: `used` of `hard` bytes are taken.
    #[error("quota exceeded: {adding} bytes more over {used} of {hard} bytes")]
    QuotaExceeded {
        /// The bytes the write would add.
        adding: i64,
        /// The bytes the project uses now.
        used: i64,
        /// The project's limit.
        hard: i64,
    },
}

/// What a refused change would have done to a protected tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TagChange {
    /// A push moves it onto another manifest.
    Push,
    /// A copy moves it onto another artifact.
    Update,
    /// A delete (of the tag, its artifact or its repository) removes it.
    Delete,
}

impl DomainError {
    /// An `Invalid` error about a named field.
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self::Invalid {
            field: Some(field.into()),
            message: message.into(),
        }
    }

    /// An `Invalid` error that names no field.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::Invalid {
            field: None,
            message: message.into(),
        }
    }
}
