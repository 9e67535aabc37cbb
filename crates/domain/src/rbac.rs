//! Harbor's project role model: roles, the permissions each role holds, and
//! the set every caller gets on a public project (harbor-api.md §6).

/// A project role. The ids are fixed by Harbor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// 1: full control of the project.
    ProjectAdmin,
    /// 2: push and pull, manage tags.
    Developer,
    /// 3: pull and read.
    Guest,
    /// 4: developer plus deletes and labels (`master` before Harbor 2.1).
    Maintainer,
    /// 5: pull, without member listing.
    LimitedGuest,
}

impl Role {
    /// Every role, by id.
    pub const ALL: [Role; 5] = [
        Role::ProjectAdmin,
        Role::Developer,
        Role::Guest,
        Role::Maintainer,
        Role::LimitedGuest,
    ];

    /// The role with Harbor id `id`.
    pub fn from_id(id: i64) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.id() == id)
    }

    /// Harbor's role id.
    pub fn id(self) -> i64 {
        match self {
            Self::ProjectAdmin => 1,
            Self::Developer => 2,
            Self::Guest => 3,
            Self::Maintainer => 4,
            Self::LimitedGuest => 5,
        }
    }

    /// Harbor's role name on the wire.
    pub fn name(self) -> &'static str {
        match self {
            Self::ProjectAdmin => "projectAdmin",
            Self::Developer => "developer",
            Self::Guest => "guest",
            Self::Maintainer => "maintainer",
            Self::LimitedGuest => "limitedGuest",
        }
    }

    /// Rank for "highest role": projectAdmin > maintainer > developer > guest > limitedGuest.
    pub fn rank(self) -> u8 {
        match self {
            Self::ProjectAdmin => 5,
            Self::Maintainer => 4,
            Self::Developer => 3,
            Self::Guest => 2,
            Self::LimitedGuest => 1,
        }
    }
}

/// What a permission is about (Harbor's rbac resources in scope).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resource {
    /// The project itself (`(self)`).
    Project,
    /// Project members.
    Member,
    /// Project metadata.
    Metadata,
    /// Repositories (and, with pull/push, their content over `/v2`).
    Repository,
    /// Artifacts.
    Artifact,
    /// Tags.
    Tag,
    /// Project labels.
    Label,
    /// Labels attached to artifacts.
    ArtifactLabel,
    /// Quota and usage.
    Quota,
    /// Artifact additions (build history ...).
    ArtifactAddition,
    /// Accessories (signatures, SBOMs).
    Accessory,
    /// Immutable tag rules.
    ImmutableTag,
    /// Robot accounts of the project.
    Robot,
    /// The project's tag retention policy and its runs.
    TagRetention,
    /// The project's webhook policies and their executions.
    NotificationPolicy,
}

impl Resource {
    /// Every project resource.
    pub const ALL: [Resource; 15] = [
        Self::Project,
        Self::Member,
        Self::Metadata,
        Self::Repository,
        Self::Artifact,
        Self::Tag,
        Self::Label,
        Self::ArtifactLabel,
        Self::Quota,
        Self::ArtifactAddition,
        Self::Accessory,
        Self::ImmutableTag,
        Self::Robot,
        Self::TagRetention,
        Self::NotificationPolicy,
    ];

    /// Harbor's name of the resource in robot permissions (`rbac/const.go`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Project => "project",
            Self::Member => "member",
            Self::Metadata => "metadata",
            Self::Repository => "repository",
            Self::Artifact => "artifact",
            Self::Tag => "tag",
            Self::Label => "label",
            Self::ArtifactLabel => "artifact-label",
            Self::Quota => "quota",
            Self::ArtifactAddition => "artifact-addition",
            Self::Accessory => "accessory",
            Self::ImmutableTag => "immutable-tag",
            Self::Robot => "robot",
            Self::TagRetention => "tag-retention",
            Self::NotificationPolicy => "notification-policy",
        }
    }
}

/// What is done to the resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Read one.
    Read,
    /// List many.
    List,
    /// Create.
    Create,
    /// Update.
    Update,
    /// Delete.
    Delete,
    /// Pull content.
    Pull,
    /// Push content.
    Push,
}

impl Action {
    /// Every action.
    pub const ALL: [Action; 7] = [
        Self::Read,
        Self::List,
        Self::Create,
        Self::Update,
        Self::Delete,
        Self::Pull,
        Self::Push,
    ];

    /// Harbor's name of the action.
    pub fn name(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::List => "list",
            Self::Create => "create",
            Self::Update => "update",
            Self::Delete => "delete",
            Self::Pull => "pull",
            Self::Push => "push",
        }
    }
}

/// Whether `role` holds `action` on `resource`.
pub fn role_allows(role: Role, resource: Resource, action: Action) -> bool {
    use Action::*;
    use Resource::*;
    use Role::*;
    let all = true;
    let pa = role == ProjectAdmin;
    let pa_m = matches!(role, ProjectAdmin | Maintainer);
    let pa_m_d = matches!(role, ProjectAdmin | Maintainer | Developer);
    let not_limited = role != LimitedGuest;
    match (resource, action) {
        (Project, Read) => all,
        (Project, Update | Delete) => pa,
        (Member, List | Read) => not_limited,
        (Member, Create | Update | Delete) => pa,
        (Metadata, Read) => pa_m,
        (Metadata, Create | Update | Delete) => pa,
        (Repository, List | Read | Pull) => all,
        (Repository, Update | Push) => pa_m_d,
        (Repository, Delete) => pa_m,
        (Artifact, List | Read) => all,
        (Artifact, Create) => pa_m_d,
        (Artifact, Delete) => pa_m,
        (Tag, List) => all,
        (Tag, Create) => pa_m_d,
        (Tag, Delete) => pa_m,
        (Label, Read | List) => all,
        (Label, Create | Update | Delete) => pa_m,
        (ArtifactLabel, Create | Delete) => pa_m_d,
        (Quota, Read) => all,
        (ArtifactAddition, Read) => all,
        (Accessory, List) => all,
        (ImmutableTag, List | Create | Update | Delete) => pa_m,
        (Robot, Read | List) => not_limited,
        (Robot, Create | Update | Delete) => pa,
        (TagRetention, _) => pa_m_d,
        (NotificationPolicy, List) => pa_m,
        (NotificationPolicy, Read | Create | Update | Delete) => pa,
        _ => false,
    }
}

/// Whether some role holds `action` on `resource` (the project policies
/// Harbor lists).
pub fn project_policy(resource: Resource, action: Action) -> bool {
    Role::ALL
        .into_iter()
        .any(|role| role_allows(role, resource, action))
}

/// The system-level resources and actions a system administrator holds, by
/// Harbor's names (`rbac/const.go`), for those Berth serves.
pub const SYSTEM_POLICIES: &[(&str, &[&str])] = &[
    ("audit-log", &["list"]),
    ("project", &["list", "create"]),
    (
        "replication-policy",
        &["read", "create", "delete", "list", "update"],
    ),
    ("replication", &["read", "create", "list"]),
    ("replication-adapter", &["list"]),
    ("registry", &["read", "create", "delete", "list", "update"]),
    (
        "garbage-collection",
        &["read", "create", "list", "update", "stop"],
    ),
    ("purge-audit", &["read", "create", "list", "update", "stop"]),
    ("jobservice-monitor", &["list", "stop"]),
    ("label", &["read", "create", "delete", "list", "update"]),
    ("catalog", &["read"]),
    ("user", &["read", "create", "delete", "list", "update"]),
    (
        "user-group",
        &["read", "create", "delete", "list", "update"],
    ),
    ("robot", &["read", "create", "delete", "list", "update"]),
    ("quota", &["read", "list", "update"]),
    ("ldap-user", &["create", "list"]),
    ("configuration", &["read", "update"]),
    (
        "notification-policy",
        &["read", "create", "delete", "list", "update"],
    ),
];

/// Whether every caller (anonymous included) holds `action` on `resource` of a public project.
pub fn public_allows(resource: Resource, action: Action) -> bool {
    use Action::*;
    use Resource::*;
    matches!(
        (resource, action),
        (Project, Read)
            | (Label, Read | List)
            | (Repository, List | Pull)
            | (Tag, List)
            | (Artifact, Read | List)
            | (ArtifactAddition, Read)
            | (Accessory, List)
    )
}

/// The highest of `roles`, if any.
pub fn highest(roles: &[Role]) -> Option<Role> {
    roles.iter().copied().max_by_key(|r| r.rank())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip() {
        for role in Role::ALL {
            assert_eq!(Role::from_id(role.id()), Some(role));
        }
        assert_eq!(Role::from_id(0), None);
        assert_eq!(Role::from_id(6), None);
    }

    #[test]
    fn matrix_samples_from_harbor() {
        use Action::*;
        use Resource::*;
        assert!(role_allows(Role::Guest, Repository, Pull));
        assert!(!role_allows(Role::Guest, Repository, Push));
        assert!(role_allows(Role::Developer, Repository, Push));
        assert!(!role_allows(Role::Developer, Repository, Delete));
        assert!(role_allows(Role::Maintainer, Repository, Delete));
        assert!(!role_allows(Role::LimitedGuest, Member, List));
        assert!(
            !role_allows(Role::ProjectAdmin, Metadata, List),
            "sysadmin only"
        );
        assert!(role_allows(Role::Maintainer, Metadata, Read));
        assert!(!role_allows(Role::Maintainer, Project, Update));
        assert!(public_allows(Repository, Pull));
        assert!(!public_allows(Repository, Read));
        assert!(!public_allows(Repository, Push));
    }

    #[test]
    fn highest_role() {
        assert_eq!(
            highest(&[Role::Guest, Role::Maintainer, Role::Developer]),
            Some(Role::Maintainer)
        );
        assert_eq!(highest(&[]), None);
    }
}
