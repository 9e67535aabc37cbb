//! Robot accounts (Harbor 2.x): callers for automation that hold exactly the
//! permissions they were granted, signing in with a generated secret.
//!
//! A robot is *system* level (no project; its permissions may name projects,
//! all projects `*`, or the system `/`) or *project* level (one project, one
//! permission naming it). Its sign-in name is the configured prefix
//! (`robot$`) followed by its stored name: `<project>+<name>` for project
//! robots, `<name>` for system ones.

use crate::DomainError;
use crate::rbac::{Action, Resource};

/// `level` of a robot without a project.
pub const LEVEL_SYSTEM: &str = "system";
/// `level` of a robot of one project.
pub const LEVEL_PROJECT: &str = "project";
/// The `effect` that takes a permission away.
pub const EFFECT_DENY: &str = "deny";

/// Actions a robot permission may name (Harbor's `rbac/const.go`).
const ACTIONS: &[&str] = &[
    "*",
    "pull",
    "push",
    "create",
    "read",
    "update",
    "delete",
    "list",
    "operate",
    "scanner-pull",
    "stop",
];

/// One granted (or, with effect `deny`, withheld) action on a resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RobotAccess {
    /// `repository`, `artifact`, `tag` ... (`*`: every resource).
    pub resource: String,
    /// `pull`, `push`, `read` ... (`*`: every action).
    pub action: String,
    /// `allow` (or empty) or `deny`.
    pub effect: String,
}

impl RobotAccess {
    fn matches(&self, resource: &str, action: &str) -> bool {
        (self.resource == "*" || self.resource == resource)
            && (self.action == "*"
                || self.action == action
                // Harbor gives a push permission its pull.
                || (action == "pull" && self.action == "push"))
    }

    fn denies(&self) -> bool {
        self.effect == EFFECT_DENY
    }

    /// Whether this (allowing) access gives everything `wanted` names, its
    /// wildcards included: `*` is covered only by `*`.
    fn covers(&self, wanted: &Self) -> bool {
        (self.resource == "*" || self.resource == wanted.resource)
            && (self.action == "*"
                || self.action == wanted.action
                || (wanted.action == "pull" && self.action == "push"))
    }

    /// Whether this (denying) access takes away any part of what `wanted`
    /// names: a deny of `member:*` overlaps a wanted `*:*`, and a deny of
    /// `pull` overlaps a wanted `push` (which brings pull).
    fn overlaps(&self, wanted: &Self) -> bool {
        let resources =
            self.resource == "*" || wanted.resource == "*" || self.resource == wanted.resource;
        let actions = self.action == "*"
            || wanted.action == "*"
            || self.action == wanted.action
            || (self.action == "pull" && wanted.action == "push");
        resources && actions
    }
}

/// Where a permission applies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RobotScope {
    /// System resources (`kind: system`, `namespace: /`).
    System,
    /// Every project (`kind: project`, `namespace: *`).
    AllProjects,
    /// One project (`kind: project`, `namespace: <name>`).
    Project {
        /// Its id.
        id: i64,
        /// Its name.
        name: String,
    },
}

impl RobotScope {
    /// Harbor's `kind`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::System => LEVEL_SYSTEM,
            Self::AllProjects | Self::Project { .. } => LEVEL_PROJECT,
        }
    }

    /// Harbor's `namespace`.
    pub fn namespace(&self) -> &str {
        match self {
            Self::System => "/",
            Self::AllProjects => "*",
            Self::Project { name, .. } => name,
        }
    }

    fn covers(&self, project_id: i64) -> bool {
        match self {
            Self::System => false,
            Self::AllProjects => true,
            Self::Project { id, .. } => *id == project_id,
        }
    }

    /// Whether a permission here applies wherever `other` does: the system
    /// only to the system, every project to every project and to each one.
    fn includes(&self, other: &RobotScope) -> bool {
        match (self, other) {
            (Self::System, Self::System) | (Self::AllProjects, Self::AllProjects) => true,
            (_, Self::Project { id, .. }) => self.covers(*id),
            _ => false,
        }
    }
}

/// The accesses granted in one scope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RobotPermission {
    /// Where.
    pub scope: RobotScope,
    /// What.
    pub access: Vec<RobotAccess>,
}

/// A stored robot account.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Robot {
    /// Row id.
    pub id: i64,
    /// The name without the sign-in prefix: `<project>+<name>` or `<name>`.
    pub name: String,
    /// Free text.
    pub description: String,
    /// The project of a project-level robot.
    pub project_id: Option<i64>,
    /// PHC string of the secret.
    pub secret_hash: String,
    /// Lifetime in days; -1: never expires.
    pub duration: i64,
    /// Expiry, unix seconds; -1: never.
    pub expires_at: i64,
    /// Refused at sign-in while set.
    pub disabled: bool,
    /// `local` (a user made it) or `robot`.
    pub creator_type: String,
    /// The id of the user or robot that made it.
    pub creator_ref: i64,
    /// Creation time, store format.
    pub created_at: String,
    /// Last update time, store format.
    pub updated_at: String,
    /// What it may do.
    pub permissions: Vec<RobotPermission>,
}

impl Robot {
    /// `system` or `project`.
    pub fn level(&self) -> &'static str {
        if self.project_id.is_some() {
            LEVEL_PROJECT
        } else {
            LEVEL_SYSTEM
        }
    }

    /// Whether it may sign in at `now` (unix seconds): enabled and not expired.
    pub fn usable_at(&self, now: i64) -> bool {
        !self.disabled && (self.expires_at < 0 || now < self.expires_at)
    }

    /// Whether it may do `action` on `resource` in project `project_id`: an
    /// allowing access there and no denying one. Any permission in a project
    /// lets it read the project itself.
    pub fn allows(&self, project_id: i64, resource: Resource, action: Action) -> bool {
        self.allows_named(project_id, resource.name(), action.name())
            || (resource == Resource::Project
                && action == Action::Read
                && self.in_project(project_id))
    }

    /// [`Robot::allows`] by Harbor's resource and action names.
    pub fn allows_named(&self, project_id: i64, resource: &str, action: &str) -> bool {
        self.decide(|scope| scope.covers(project_id), resource, action)
    }

    /// Whether a system permission allows `action` on `resource` (`project`
    /// `create`, ...).
    pub fn allows_system(&self, resource: &str, action: &str) -> bool {
        self.decide(|scope| *scope == RobotScope::System, resource, action)
    }

    /// Allowed by an access in a scope `applies` picks, and denied by none there.
    fn decide(&self, applies: impl Fn(&RobotScope) -> bool, resource: &str, action: &str) -> bool {
        let mut matching = self
            .permissions
            .iter()
            .filter(|p| applies(&p.scope))
            .flat_map(|p| &p.access)
            .filter(|a| a.matches(resource, action))
            .peekable();
        matching.peek().is_some() && matching.all(|a| !a.denies())
    }

    /// Whether it holds the whole of `wanted` in project `project_id`, so
    /// that it may grant it (or act on a robot that has it): an allowing
    /// access there covers it, wildcards included, and no denying access there
    /// takes any part of it away. A deny is held by anyone: it only takes away.
    pub fn holds(&self, project_id: i64, wanted: &RobotAccess) -> bool {
        self.holds_where(|scope| scope.covers(project_id), wanted)
    }

    /// [`Robot::holds`] for a permission in `scope` (the system, every
    /// project or one project): what a robot may grant to a system robot
    /// it makes, or must hold to act on one.
    pub fn holds_in(&self, scope: &RobotScope, wanted: &RobotAccess) -> bool {
        self.holds_where(|mine| mine.includes(scope), wanted)
    }

    fn holds_where(&self, applies: impl Fn(&RobotScope) -> bool, wanted: &RobotAccess) -> bool {
        if wanted.denies() {
            return true;
        }
        let here = || {
            self.permissions
                .iter()
                .filter(|p| applies(&p.scope))
                .flat_map(|p| &p.access)
        };
        here().any(|a| !a.denies() && a.covers(wanted))
            && !here().any(|a| a.denies() && a.overlaps(wanted))
    }

    /// Whether a robot it made, or acts on, that expires at `expires_at`
    /// (unix seconds, -1: never) would outlive it.
    pub fn outlived_by(&self, expires_at: i64) -> bool {
        self.expires_at >= 0 && (expires_at < 0 || expires_at > self.expires_at)
    }

    /// Whether any permission applies in project `project_id`.
    pub fn in_project(&self, project_id: i64) -> bool {
        self.permissions.iter().any(|p| p.scope.covers(project_id))
    }
}

/// A permission as a request gives it, before its namespace is resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestedPermission {
    /// `system` or `project`.
    pub kind: String,
    /// `/`, `*` or a project name.
    pub namespace: String,
    /// What.
    pub access: Vec<RobotAccess>,
}

/// Where a requested permission points, before project names are looked up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequestedScope {
    /// `system` `/`.
    System,
    /// `project` `*`.
    AllProjects,
    /// `project` `<name>`.
    Project(String),
}

impl RequestedPermission {
    /// Where it points; 400 with Harbor's message for an unknown kind or namespace.
    pub fn scope(&self) -> Result<RequestedScope, DomainError> {
        match (self.kind.as_str(), self.namespace.as_str()) {
            (LEVEL_SYSTEM, "/") => Ok(RequestedScope::System),
            (LEVEL_SYSTEM, _) => Err(bad("unknown namespace")),
            (LEVEL_PROJECT, "*") => Ok(RequestedScope::AllProjects),
            (LEVEL_PROJECT, name) => Ok(RequestedScope::Project(name.to_string())),
            _ => Err(bad("unknown robot kind")),
        }
    }
}

fn bad(message: impl Into<String>) -> DomainError {
    DomainError::Invalid {
        field: None,
        message: message.into(),
    }
}

/// Harbor's rules for a robot's own name: lower-case letters and digits,
/// separated by single `.`, `_` or `-` (so never a `+`), at most 255 bytes.
pub fn validate_name(name: &str) -> Result<(), DomainError> {
    let separators = |c: char| matches!(c, '.' | '_' | '-');
    let legal = !name.is_empty()
        && name.len() <= 255
        && name.split(separators).all(|part| {
            !part.is_empty()
                && part
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        });
    if legal {
        Ok(())
    } else {
        Err(bad(
            "robot name is not in lower case or contains illegal characters",
        ))
    }
}

/// Harbor's rule for a secret chosen by the caller: 8 to 128 characters with
/// a lower-case letter, an upper-case letter and a digit.
pub fn validate_secret(secret: &str) -> Result<(), DomainError> {
    let len = secret.chars().count();
    if (8..=128).contains(&len)
        && secret.chars().any(|c| c.is_ascii_lowercase())
        && secret.chars().any(|c| c.is_ascii_uppercase())
        && secret.chars().any(|c| c.is_ascii_digit())
    {
        Ok(())
    } else {
        Err(bad(
            "the secret must be 8 to 128 characters long with at least 1 uppercase letter, 1 lowercase letter and 1 number",
        ))
    }
}

/// The checks Harbor makes of a robot's level, duration and permissions.
pub fn validate_grant(
    duration: i64,
    level: &str,
    permissions: &[RequestedPermission],
) -> Result<(), DomainError> {
    if !(-1..i64::from(i32::MAX)).contains(&duration) {
        return Err(bad(format!("bad request error duration input: {duration}")));
    }
    if level != LEVEL_SYSTEM && level != LEVEL_PROJECT {
        return Err(bad(format!("bad request error level input: {level}")));
    }
    if permissions.is_empty() {
        return Err(bad("bad request empty permission"));
    }
    for permission in permissions {
        if permission.access.is_empty() {
            return Err(bad("bad request empty access"));
        }
        for access in &permission.access {
            if access.resource.trim().is_empty() || !ACTIONS.contains(&access.action.as_str()) {
                return Err(bad(format!(
                    "bad request permission: {}:{}",
                    access.resource, access.action
                )));
            }
            if !matches!(access.effect.as_str(), "" | "allow" | EFFECT_DENY) {
                return Err(bad(format!("bad request effect: {}", access.effect)));
            }
        }
        permission.scope()?;
    }
    if level == LEVEL_PROJECT
        && (permissions.len() > 1 || !matches!(permissions[0].scope()?, RequestedScope::Project(_)))
    {
        return Err(bad("bad request permission"));
    }
    Ok(())
}

/// The expiry (unix seconds, -1: never) of a robot of `duration` days made at
/// `created` (unix seconds).
pub fn expiry(created: i64, duration: i64) -> i64 {
    if duration < 0 {
        -1
    } else {
        created.saturating_add(duration.saturating_mul(86_400))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn access(resource: &str, action: &str, effect: &str) -> RobotAccess {
        RobotAccess {
            resource: resource.into(),
            action: action.into(),
            effect: effect.into(),
        }
    }

    fn robot(permissions: Vec<RobotPermission>) -> Robot {
        Robot {
            id: 1,
            name: "library+ci".into(),
            description: String::new(),
            project_id: Some(7),
            secret_hash: String::new(),
            duration: -1,
            expires_at: -1,
            disabled: false,
            creator_type: "local".into(),
            creator_ref: 1,
            created_at: String::new(),
            updated_at: String::new(),
            permissions,
        }
    }

    #[test]
    fn grants_exactly_what_it_names_in_its_scope() {
        let r = robot(vec![RobotPermission {
            scope: RobotScope::Project {
                id: 7,
                name: "library".into(),
            },
            access: vec![
                access("repository", "push", ""),
                access("artifact", "read", "allow"),
            ],
        }]);
        assert!(r.allows(7, Resource::Repository, Action::Push));
        assert!(
            r.allows(7, Resource::Repository, Action::Pull),
            "push brings pull"
        );
        assert!(r.allows(7, Resource::Artifact, Action::Read));
        assert!(r.allows(7, Resource::Project, Action::Read));
        assert!(!r.allows(7, Resource::Repository, Action::Delete));
        assert!(!r.allows(7, Resource::Artifact, Action::Delete));
        assert!(
            !r.allows(8, Resource::Repository, Action::Pull),
            "another project"
        );
        assert!(!r.allows(8, Resource::Project, Action::Read));
        assert!(!r.allows_system("project", "create"));
    }

    #[test]
    fn deny_wins_and_all_projects_covers_every_project() {
        let r = robot(vec![
            RobotPermission {
                scope: RobotScope::AllProjects,
                access: vec![access("repository", "*", "")],
            },
            RobotPermission {
                scope: RobotScope::Project {
                    id: 3,
                    name: "secret".into(),
                },
                access: vec![access("repository", "pull", "deny")],
            },
            RobotPermission {
                scope: RobotScope::System,
                access: vec![access("project", "create", "")],
            },
        ]);
        assert!(r.allows(99, Resource::Repository, Action::Delete));
        assert!(!r.allows(3, Resource::Repository, Action::Pull));
        assert!(r.allows(3, Resource::Repository, Action::Push));
        assert!(
            r.allows(12_345, Resource::Repository, Action::Pull),
            "every project"
        );
        assert!(r.allows_system("project", "create"));
    }

    #[test]
    fn holds_only_what_no_deny_takes_away() {
        let r = robot(vec![RobotPermission {
            scope: RobotScope::Project {
                id: 7,
                name: "library".into(),
            },
            access: vec![
                access("*", "*", ""),
                access("member", "*", "deny"),
                access("repository", "pull", "deny"),
            ],
        }]);
        assert!(r.holds(7, &access("artifact", "delete", "")));
        assert!(!r.holds(7, &access("*", "*", "")), "member:* is denied");
        assert!(!r.holds(7, &access("member", "create", "")));
        assert!(
            !r.holds(7, &access("*", "create", "")),
            "member:create is in it"
        );
        assert!(
            !r.holds(7, &access("repository", "push", "")),
            "push brings the denied pull"
        );
        assert!(
            r.holds(7, &access("member", "create", "deny")),
            "a deny is always held"
        );
        assert!(
            !r.holds(8, &access("artifact", "read", "")),
            "another project"
        );
        let narrow = robot(vec![RobotPermission {
            scope: RobotScope::Project {
                id: 7,
                name: "library".into(),
            },
            access: vec![access("repository", "push", ""), access("robot", "*", "")],
        }]);
        assert!(narrow.holds(7, &access("repository", "pull", "")));
        assert!(
            !narrow.holds(7, &access("*", "*", "")),
            "* is covered only by *"
        );
        assert!(!narrow.holds(7, &access("repository", "*", "")));
    }

    #[test]
    fn holds_in_a_scope_only_what_applies_there() {
        let r = robot(vec![
            RobotPermission {
                scope: RobotScope::System,
                access: vec![access("robot", "create", "")],
            },
            RobotPermission {
                scope: RobotScope::AllProjects,
                access: vec![access("repository", "pull", "")],
            },
        ]);
        let one = RobotScope::Project {
            id: 3,
            name: "p".into(),
        };
        assert!(r.holds_in(&RobotScope::System, &access("robot", "create", "")));
        assert!(!r.holds_in(&RobotScope::System, &access("repository", "pull", "")));
        assert!(r.holds_in(&RobotScope::AllProjects, &access("repository", "pull", "")));
        assert!(r.holds_in(&one, &access("repository", "pull", "")));
        assert!(!r.holds_in(&one, &access("robot", "create", "")));
        assert!(!r.holds_in(&RobotScope::AllProjects, &access("robot", "create", "")));
    }

    #[test]
    fn a_child_never_outlives_its_maker() {
        let mut r = robot(Vec::new());
        assert!(!r.outlived_by(-1), "a maker that never expires");
        r.expires_at = 1000;
        assert!(r.outlived_by(-1));
        assert!(r.outlived_by(1001));
        assert!(!r.outlived_by(1000));
    }

    #[test]
    fn usable_until_disabled_or_expired() {
        let mut r = robot(Vec::new());
        assert!(r.usable_at(i64::MAX - 1));
        r.expires_at = 100;
        assert!(r.usable_at(99));
        assert!(!r.usable_at(100));
        r.expires_at = -1;
        r.disabled = true;
        assert!(!r.usable_at(0));
    }

    #[test]
    fn names_secrets_and_grants() {
        for good in ["ci", "a1", "build.bot-2_x"] {
            assert!(validate_name(good).is_ok(), "{good}");
        }
        for bad in ["", "CI", "a+b", "-a", "a..b", "a b", "a$"] {
            assert!(validate_name(bad).is_err(), "{bad}");
        }
        assert!(validate_secret("Secret123").is_ok());
        assert!(validate_secret("secret123").is_err());
        assert!(validate_secret("Sec1").is_err());
        let push = |ns: &str| RequestedPermission {
            kind: "project".into(),
            namespace: ns.into(),
            access: vec![access("repository", "push", "")],
        };
        assert!(validate_grant(30, "project", &[push("library")]).is_ok());
        assert!(validate_grant(-2, "project", &[push("library")]).is_err());
        assert!(validate_grant(30, "global", &[push("library")]).is_err());
        assert!(validate_grant(30, "project", &[]).is_err());
        assert!(validate_grant(30, "project", &[push("a"), push("b")]).is_err());
        assert!(validate_grant(30, "project", &[push("*")]).is_err());
        assert!(validate_grant(30, "system", &[push("*"), push("a")]).is_ok());
        let mut odd = push("a");
        odd.access[0].action = "fly".into();
        assert!(validate_grant(30, "system", &[odd]).is_err());
        assert_eq!(expiry(1000, -1), -1);
        assert_eq!(expiry(1000, 1), 1000 + 86_400);
    }
}
