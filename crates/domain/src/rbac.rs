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
    /// The project's audit log (`/projects/{p}/logs`).
    Log,
}

impl Resource {
    /// Every project resource.
    pub const ALL: [Resource; 16] = [
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
        Self::Log,
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
            Self::Log => "log",
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
    /// Stop a running job.
    Stop,
}

impl Action {
    /// Every action.
    pub const ALL: [Action; 8] = [
        Self::Read,
        Self::List,
        Self::Create,
        Self::Update,
        Self::Delete,
        Self::Pull,
        Self::Push,
        Self::Stop,
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
            Self::Stop => "stop",
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
        (Log, List) => pa,
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

/// A system-level resource: what Harbor's system-wide operations are guarded
/// by (`/system/<name>` in its `rbac/const.go`), and what a system robot's
/// `system` permissions name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SystemResource {
    /// The audit log of every project.
    AuditLog,
    /// Projects: `create` (under `adminonly`, with a registry or a quota) and
    /// `list` (every project, private ones included).
    Project,
    /// Replication policies.
    ReplicationPolicy,
    /// Replication executions, their tasks and logs.
    Replication,
    /// The kinds of registry replication can talk to.
    ReplicationAdapter,
    /// Registry endpoints.
    Registry,
    /// Garbage collection: its schedule, runs and logs.
    GarbageCollection,
    /// Audit log purge: its schedule, runs and logs.
    PurgeAuditLog,
    /// The job service's pools, workers, queues and schedules.
    JobServiceMonitor,
    /// Global labels.
    Label,
    /// Project quotas.
    Quota,
    /// Robot accounts of the system.
    Robot,
    /// Users.
    User,
    /// User groups.
    UserGroup,
    /// Users and groups of the LDAP directory: searched and imported.
    LdapUser,
    /// The configuration (and pings of the directory and the identity provider).
    Configuration,
    /// The storage volume's size and free space.
    SystemVolumes,
}

impl SystemResource {
    /// Harbor's name of the resource.
    pub fn name(self) -> &'static str {
        match self {
            Self::AuditLog => "audit-log",
            Self::Project => "project",
            Self::ReplicationPolicy => "replication-policy",
            Self::Replication => "replication",
            Self::ReplicationAdapter => "replication-adapter",
            Self::Registry => "registry",
            Self::GarbageCollection => "garbage-collection",
            Self::PurgeAuditLog => "purge-audit",
            Self::JobServiceMonitor => "jobservice-monitor",
            Self::Label => "label",
            Self::Quota => "quota",
            Self::Robot => "robot",
            Self::User => "user",
            Self::UserGroup => "user-group",
            Self::LdapUser => "ldap-user",
            Self::Configuration => "configuration",
            Self::SystemVolumes => "system-volumes",
        }
    }
}

/// The system permissions a robot account can be given, as Harbor's
/// `getPermissions` lists them (its `rbac` robot policies of the system
/// scope, in Harbor's order), by resource and action names.
pub const ROBOT_SYSTEM_PERMISSIONS: &[(&str, &str)] = &[
    ("audit-log", "list"),
    ("preheat-instance", "read"),
    ("preheat-instance", "create"),
    ("preheat-instance", "delete"),
    ("preheat-instance", "list"),
    ("preheat-instance", "update"),
    ("project", "list"),
    ("project", "create"),
    ("replication-policy", "read"),
    ("replication-policy", "create"),
    ("replication-policy", "delete"),
    ("replication-policy", "list"),
    ("replication-policy", "update"),
    ("replication", "read"),
    ("replication", "create"),
    ("replication", "list"),
    ("replication-adapter", "list"),
    ("registry", "read"),
    ("registry", "create"),
    ("registry", "delete"),
    ("registry", "list"),
    ("registry", "update"),
    ("scan-all", "read"),
    ("scan-all", "update"),
    ("scan-all", "stop"),
    ("scan-all", "create"),
    ("system-volumes", "read"),
    ("garbage-collection", "read"),
    ("garbage-collection", "create"),
    ("garbage-collection", "list"),
    ("garbage-collection", "update"),
    ("garbage-collection", "stop"),
    ("purge-audit", "read"),
    ("purge-audit", "create"),
    ("purge-audit", "list"),
    ("purge-audit", "update"),
    ("purge-audit", "stop"),
    ("jobservice-monitor", "list"),
    ("jobservice-monitor", "stop"),
    ("scanner", "read"),
    ("scanner", "create"),
    ("scanner", "delete"),
    ("scanner", "list"),
    ("scanner", "update"),
    ("label", "read"),
    ("label", "create"),
    ("label", "delete"),
    ("label", "update"),
    ("security-hub", "read"),
    ("security-hub", "list"),
    ("catalog", "read"),
    ("quota", "read"),
    ("quota", "list"),
    ("robot", "create"),
    ("robot", "read"),
    ("robot", "list"),
    ("robot", "delete"),
    ("user", "create"),
    ("user", "read"),
    ("user", "update"),
    ("user", "list"),
    ("user", "delete"),
    ("ldap-user", "create"),
    ("ldap-user", "list"),
    ("quota", "update"),
    ("user-group", "create"),
    ("user-group", "read"),
    ("user-group", "update"),
    ("user-group", "list"),
    ("user-group", "delete"),
];

/// The project permissions a robot account can be given, as Harbor's
/// `getPermissions` lists them (its `rbac` robot policies of the project
/// scope, in Harbor's order). `project` names the project itself.
pub const ROBOT_PROJECT_PERMISSIONS: &[(&str, &str)] = &[
    ("log", "list"),
    ("project", "read"),
    ("project", "delete"),
    ("project", "update"),
    ("metadata", "read"),
    ("metadata", "create"),
    ("metadata", "delete"),
    ("metadata", "list"),
    ("metadata", "update"),
    ("repository", "read"),
    ("repository", "update"),
    ("repository", "delete"),
    ("repository", "list"),
    ("repository", "pull"),
    ("repository", "push"),
    ("artifact", "read"),
    ("artifact", "create"),
    ("artifact", "list"),
    ("artifact", "delete"),
    ("scan", "create"),
    ("scan", "read"),
    ("scan", "stop"),
    ("sbom", "create"),
    ("sbom", "stop"),
    ("sbom", "read"),
    ("tag", "create"),
    ("tag", "list"),
    ("tag", "delete"),
    ("accessory", "list"),
    ("artifact-addition", "read"),
    ("artifact-label", "create"),
    ("artifact-label", "delete"),
    ("scanner", "create"),
    ("scanner", "read"),
    ("preheat-policy", "read"),
    ("preheat-policy", "create"),
    ("preheat-policy", "delete"),
    ("preheat-policy", "list"),
    ("preheat-policy", "update"),
    ("immutable-tag", "create"),
    ("immutable-tag", "delete"),
    ("immutable-tag", "list"),
    ("immutable-tag", "update"),
    ("notification-policy", "read"),
    ("notification-policy", "create"),
    ("notification-policy", "delete"),
    ("notification-policy", "list"),
    ("notification-policy", "update"),
    ("tag-retention", "read"),
    ("tag-retention", "create"),
    ("tag-retention", "delete"),
    ("tag-retention", "list"),
    ("tag-retention", "update"),
    ("label", "read"),
    ("label", "create"),
    ("label", "delete"),
    ("label", "list"),
    ("label", "update"),
    ("quota", "read"),
    ("robot", "create"),
    ("robot", "read"),
    ("robot", "list"),
    ("robot", "delete"),
    ("export-cve", "create"),
    ("export-cve", "read"),
    ("member", "create"),
    ("member", "read"),
    ("member", "update"),
    ("member", "list"),
    ("member", "delete"),
];

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
