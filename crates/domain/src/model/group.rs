//! Directory (LDAP) users and groups as the store onboards them.

/// Harbor's `group_type` of an LDAP group.
pub const GROUP_TYPE_LDAP: i64 = 1;

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
