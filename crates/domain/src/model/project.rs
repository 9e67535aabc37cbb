//! Projects: named containers of repositories, with members and metadata.

/// How a path addresses a project (`{project_name_or_id}`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProjectRef {
    /// By numeric id.
    Id(i64),
    /// By exact name.
    Name(String),
}

impl ProjectRef {
    /// Harbor's rule: a name when `is_resource_name`, else an id if it parses as one, else a name.
    pub fn parse(text: &str, is_resource_name: bool) -> Self {
        if !is_resource_name && let Ok(id) = text.parse::<i64>() {
            return Self::Id(id);
        }
        Self::Name(text.to_string())
    }
}

impl std::fmt::Display for ProjectRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Id(id) => write!(f, "{id}"),
            Self::Name(name) => f.write_str(name),
        }
    }
}

/// A stored project.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Project {
    /// Harbor `project_id`.
    pub id: i64,
    /// Unique name.
    pub name: String,
    /// The creator.
    pub owner_id: i64,
    /// Whether anyone may read and pull.
    pub public: bool,
    /// The upstream registry of a proxy-cache project, which takes no pushes.
    pub registry_id: Option<i64>,
    /// Creation time, store format.
    pub created_at: String,
    /// Last update time, store format.
    pub updated_at: String,
}

/// The largest storage limit a project may have: 1024 TB, in bytes.
pub const MAX_STORAGE_LIMIT: i64 = 1_125_899_906_842_624;

/// Checks a project name against Harbor's rule: 1–255 characters matching
/// `^[a-z0-9]+(?:[._-][a-z0-9]+)*$`.
pub fn validate_project_name(name: &str) -> Result<(), crate::DomainError> {
    if name.is_empty() || name.len() > 255 {
        return Err(crate::DomainError::invalid(
            "project_name",
            format!("Project name {name} is illegal in length. (greater than 255 or less than 1)"),
        ));
    }
    let bytes = name.as_bytes();
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    let separator = |b: u8| matches!(b, b'.' | b'_' | b'-');
    let valid = bytes.iter().enumerate().all(|(i, &b)| {
        alnum(b)
            || (separator(b)
                && i > 0
                && i + 1 < bytes.len()
                && alnum(bytes[i - 1])
                && alnum(bytes[i + 1]))
    });
    if valid {
        Ok(())
    } else {
        Err(crate::DomainError::invalid(
            "project_name",
            "project name is not in lower case or contains illegal characters",
        ))
    }
}

/// A project about to be created, with everything its creation transaction writes.
#[derive(Debug, Clone)]
pub struct NewProject {
    /// Unique, valid name.
    pub name: String,
    /// The creator, who also becomes its projectAdmin.
    pub owner_id: i64,
    /// Validated metadata, `public` included.
    pub metadata: Vec<(String, String)>,
    /// Storage quota in bytes (`-1` = unlimited).
    pub storage_limit: i64,
    /// The upstream registry of a proxy-cache project.
    pub registry_id: Option<i64>,
}

impl NewProject {
    /// Whether the metadata makes the project public.
    pub fn public(&self) -> bool {
        self.metadata
            .iter()
            .any(|(k, v)| k == "public" && v == "true")
    }
}

/// A project's CVE allowlist.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CveAllowlist {
    /// Unix seconds after which it no longer applies; `None` = never.
    pub expires_at: Option<i64>,
    /// CVE ids.
    pub items: Vec<String>,
}

/// What a project summary counts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProjectCounts {
    /// Repositories in the project.
    pub repo_count: i64,
    /// Members per role id, `(role_id, count)`.
    pub members_by_role: Vec<(i64, i64)>,
    /// Storage quota `(hard, used)`, if the project has a quota row.
    pub quota: Option<(i64, i64)>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn project_names() {
        for ok in ["a", "library", "my-proj.1_x", "0", "a1-b2"] {
            assert!(validate_project_name(ok).is_ok(), "{ok}");
        }
        for bad in ["", "A", "-a", "a-", "a--b", "a b", "a/b", "é", "a..b", "_a"] {
            assert!(validate_project_name(bad).is_err(), "{bad}");
        }
        assert!(validate_project_name(&"a".repeat(255)).is_ok());
        let long = validate_project_name(&"a".repeat(256)).unwrap_err();
        assert!(long.to_string().contains("illegal in length"));
    }
}
