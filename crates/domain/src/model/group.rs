//! User groups (LDAP first), addressed as project members.

/// Harbor's `group_type` of an LDAP group.
pub const GROUP_TYPE_LDAP: i64 = 1;

/// A stored user group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserGroup {
    /// Harbor `UserGroup.id`.
    pub id: i64,
    /// Display name.
    pub group_name: String,
    /// 1 LDAP, 2 HTTP, 3 OIDC.
    pub group_type: i64,
    /// The directory entry of an LDAP group (normalized).
    pub ldap_group_dn: Option<String>,
}

/// A user as a directory describes it, to be onboarded or refreshed locally.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirectoryProfile {
    /// Login name (the directory's uid attribute).
    pub username: String,
    /// E-mail address, if the directory has one.
    pub email: Option<String>,
    /// Display name.
    pub realname: String,
    /// The entry's DN.
    pub dn: String,
}
