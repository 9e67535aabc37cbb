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
    /// Proxy-cache upstream (reserved).
    pub registry_id: Option<i64>,
    /// Creation time, store format.
    pub created_at: String,
    /// Last update time, store format.
    pub updated_at: String,
}
