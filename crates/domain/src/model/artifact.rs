//! Registry content as the management API shows it: repositories, artifacts,
//! tags, index references and labels.

/// A stored repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repository {
    /// `repository_id`.
    pub id: i64,
    /// Its project.
    pub project_id: i64,
    /// Full name with the project prefix (`library/nginx`).
    pub name: String,
    /// Description (stored HTML-escaped).
    pub description: String,
    /// Artifacts in the repository (computed).
    pub artifact_count: i64,
    /// Pulls so far.
    pub pull_count: i64,
    /// Creation time, store format.
    pub created_at: String,
    /// Last push or update, store format.
    pub updated_at: String,
}

/// A stored artifact (a manifest or index of a repository).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Artifact {
    /// Id.
    pub id: i64,
    /// Project id.
    pub project_id: i64,
    /// Repository id.
    pub repository_id: i64,
    /// Full repository name.
    pub repository_name: String,
    /// Manifest digest.
    pub digest: String,
    /// Manifest media type.
    pub manifest_media_type: String,
    /// Config media type (Harbor's `media_type`).
    pub media_type: String,
    /// OCI artifact type.
    pub artifact_type: String,
    /// Harbor `type`: IMAGE, CHART ...
    pub kind: String,
    /// Size in bytes (Harbor's rule).
    pub size: i64,
    /// Digest of the type's icon, if set.
    pub icon: String,
    /// Subject digest of a referrer.
    pub subject_digest: Option<String>,
    /// Accessory type, for referrers.
    pub accessory_type: Option<String>,
    /// Last push, store format.
    pub push_time: String,
    /// Last pull, store format (zero date if never).
    pub pull_time: String,
    /// Type-specific attributes, JSON.
    pub extra_attrs: String,
    /// Annotations, JSON.
    pub annotations: Option<String>,
}

/// A tag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tag {
    /// Id.
    pub id: i64,
    /// Repository id.
    pub repository_id: i64,
    /// Artifact id.
    pub artifact_id: i64,
    /// Name.
    pub name: String,
    /// Last push, store format.
    pub push_time: String,
    /// Last pull, store format.
    pub pull_time: String,
}

/// A child of an index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArtifactReference {
    /// The index.
    pub parent_id: i64,
    /// The child artifact.
    pub child_id: i64,
    /// The child's digest.
    pub child_digest: String,
    /// Platform JSON, if given.
    pub platform: Option<String>,
    /// URLs JSON, if given.
    pub urls: Option<String>,
    /// Annotations JSON, if given.
    pub annotations: Option<String>,
}

/// Harbor's rule for a label's name: 1 to 128 bytes once trimmed.
pub fn validate_label_name(name: &str) -> Result<(), crate::DomainError> {
    if name.is_empty() || name.len() > 128 {
        return Err(crate::DomainError::bad_request(
            "the label name must have 1 to 128 characters",
        ));
    }
    Ok(())
}

/// A label (global, or of one project).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Label {
    /// Id.
    pub id: i64,
    /// Name.
    pub name: String,
    /// Description.
    pub description: String,
    /// Display color.
    pub color: String,
    /// `g` global or `p` project.
    pub scope: String,
    /// The project of a project label.
    pub project_id: Option<i64>,
    /// Creation time, store format.
    pub created_at: String,
    /// Update time, store format.
    pub updated_at: String,
}
