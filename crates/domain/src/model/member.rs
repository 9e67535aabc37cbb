//! Project members: a user or a group holding a role in a project.

/// Whether a member is a user or a group (`entity_type` `u` / `g`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberEntity {
    /// A user member; the id is the user's.
    User(i64),
    /// A group member; the id is the user group's.
    Group(i64),
}

impl MemberEntity {
    /// Harbor's `entity_type`.
    pub fn kind(self) -> &'static str {
        match self {
            Self::User(_) => "u",
            Self::Group(_) => "g",
        }
    }

    /// Harbor's `entity_id`.
    pub fn id(self) -> i64 {
        match self {
            Self::User(id) | Self::Group(id) => id,
        }
    }
}

/// A stored membership.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// Member id (`mid`).
    pub id: i64,
    /// The project.
    pub project_id: i64,
    /// Who.
    pub entity: MemberEntity,
    /// Username or group name.
    pub entity_name: String,
    /// Harbor role id (1–5).
    pub role_id: i64,
}

/// A stored user group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserGroup {
    /// `UserGroup.id`.
    pub id: i64,
    /// Display name.
    pub group_name: String,
    /// 1 LDAP, 2 HTTP, 3 OIDC.
    pub group_type: i64,
    /// The directory entry of an LDAP group.
    pub ldap_group_dn: Option<String>,
}
