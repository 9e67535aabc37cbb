//! Users: one table for Harbor, the registry and the generator-rest API.

/// Where a user's password is verified.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UserOrigin {
    /// A local password hash in the store.
    Local,
    /// A bind against the configured LDAP directory.
    Ldap,
}

impl UserOrigin {
    /// The store's text for this origin.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Local => "local",
            Self::Ldap => "ldap",
        }
    }

    /// Parses the store's text; anything unknown is treated as local.
    pub fn parse(text: &str) -> Self {
        if text == "ldap" {
            Self::Ldap
        } else {
            Self::Local
        }
    }
}

/// A stored, non-deleted user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    /// Harbor `user_id`; the generator-rest `id` as a decimal string.
    pub id: i64,
    /// Harbor login name (generator-rest users get their e-mail).
    pub username: String,
    /// E-mail address, lower-cased for generator-rest users.
    pub email: Option<String>,
    /// Harbor `realname`, generator-rest `name`.
    pub realname: Option<String>,
    /// Avatar URL (generator-rest `picture`).
    pub picture: Option<String>,
    /// Harbor comment.
    pub comment: Option<String>,
    /// PHC string of the password, if the user has a local password.
    pub password_hash: Option<String>,
    /// Bumped on every password, admin-flag or delete change.
    pub auth_version: i64,
    /// Harbor system administrator, generator-rest `role=admin`.
    pub sysadmin: bool,
    /// Where the password is verified.
    pub origin: UserOrigin,
    /// The directory entry of an LDAP user.
    pub ldap_dn: Option<String>,
    /// Creation time, store format.
    pub created_at: String,
    /// Last update time, store format.
    pub updated_at: String,
}

/// A user about to be created.
#[derive(Debug, Clone, Default)]
pub struct NewUser {
    /// Login name.
    pub username: String,
    /// E-mail address.
    pub email: Option<String>,
    /// Real name.
    pub realname: Option<String>,
    /// Avatar URL.
    pub picture: Option<String>,
    /// Harbor comment.
    pub comment: Option<String>,
    /// Ready-made PHC string (hashing happens in the auth crate).
    pub password_hash: Option<String>,
    /// Administrator flag.
    pub sysadmin: bool,
    /// Search keywords for generator-rest's `q`.
    pub keywords: String,
}

/// The id of the built-in system administrator `admin`.
pub const ADMIN_USER_ID: i64 = 1;
