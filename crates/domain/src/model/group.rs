//! Directory (LDAP) users and groups as the store onboards them, and the
//! types of user groups.

/// Harbor's `group_type` of an LDAP group.
pub const GROUP_TYPE_LDAP: i64 = 1;
/// Harbor's `group_type` of an HTTP (authproxy) group.
pub const GROUP_TYPE_HTTP: i64 = 2;
/// Harbor's `group_type` of an OIDC group.
pub const GROUP_TYPE_OIDC: i64 = 3;

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
