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
    /// User tokens issued (`iat`, unix seconds) at or before this second are
    /// refused. Moved on with every `auth_version` bump, to now or, if that is
    /// not later, one second past its old value, so it always moves.
    pub tokens_valid_after: i64,
    /// Harbor's `sysadmin_flag`: made a system administrator here (see
    /// [`User::is_sysadmin`] for whether the user acts as one).
    pub sysadmin: bool,
    /// Harbor's `admin_role_in_auth`: a member of the directory's
    /// administrator group (`ldap_group_admin_dn`) at its last sign-in.
    pub admin_role_in_auth: bool,
    /// Where the password is verified.
    pub origin: UserOrigin,
    /// The directory entry of an LDAP user.
    pub ldap_dn: Option<String>,
    /// Creation time, store format.
    pub created_at: String,
    /// Last update time, store format.
    pub updated_at: String,
}

impl User {
    /// Whether the user acts as a system administrator (generator-rest
    /// `role=admin`): by the flag, or by the role the directory gives.
    pub fn is_sysadmin(&self) -> bool {
        self.sysadmin || self.admin_role_in_auth
    }
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

/// Characters Harbor forbids in usernames and real names.
const ILLEGAL_NAME_CHARS: &[char] = &[',', '"', '~', '#', '%', '$'];

/// Harbor's password rule: 8–128 characters with an upper-case letter, a
/// lower-case letter and a digit.
pub fn validate_password(password: &str) -> Result<(), crate::DomainError> {
    let len = password.chars().count();
    let ok = (8..=128).contains(&len)
        && password.chars().any(|c| c.is_ascii_uppercase())
        && password.chars().any(|c| c.is_ascii_lowercase())
        && password.chars().any(|c| c.is_ascii_digit());
    if ok {
        Ok(())
    } else {
        Err(crate::DomainError::invalid(
            "password",
            "the password or secret must be 8-128, inclusively, characters long with at least 1 uppercase letter, 1 lowercase letter and 1 number",
        ))
    }
}

/// Harbor's profile rules for e-mail, real name and comment.
pub fn validate_profile(
    email: &str,
    realname: &str,
    comment: &str,
) -> Result<(), crate::DomainError> {
    use crate::DomainError;
    if email.is_empty() {
        return Err(DomainError::invalid("email", "email can't be empty"));
    }
    let well_formed = email.len() <= 255
        && email.split_once('@').is_some_and(|(local, domain)| {
            !local.is_empty()
                && !domain.is_empty()
                && !domain.contains('@')
                && !email.chars().any(char::is_whitespace)
        });
    if !well_formed {
        return Err(DomainError::invalid("email", "email with illegal format"));
    }
    let name_len = realname.chars().count();
    if name_len == 0 || name_len > 255 {
        return Err(DomainError::invalid(
            "realname",
            "realname with illegal length",
        ));
    }
    if realname.contains(ILLEGAL_NAME_CHARS) {
        return Err(DomainError::invalid(
            "realname",
            "realname contains illegal characters",
        ));
    }
    if comment.chars().count() > 30 {
        return Err(DomainError::invalid(
            "comment",
            "comment with illegal length",
        ));
    }
    Ok(())
}

/// The name replication acts under in audit logs and events: pushes under
/// it start no event-based replication. No user may take it.
pub const REPLICATION_ACTOR: &str = "berth-replication";

/// Whether `username` is a name Berth acts under itself (any case): a user
/// by that name would pass for it in audit logs and events.
pub fn is_reserved_username(username: &str) -> bool {
    username.trim().eq_ignore_ascii_case(REPLICATION_ACTOR)
}

/// Harbor's username rule: 1–255 characters without `,"~#%$`; and none of
/// the names Berth acts under itself ([`is_reserved_username`]).
pub fn validate_username(username: &str) -> Result<(), crate::DomainError> {
    let len = username.chars().count();
    if len == 0 || len > 255 {
        return Err(crate::DomainError::invalid(
            "username",
            "username with illegal length",
        ));
    }
    if username.contains(ILLEGAL_NAME_CHARS) {
        return Err(crate::DomainError::invalid(
            "username",
            "username contains illegal characters",
        ));
    }
    if is_reserved_username(username) {
        return Err(crate::DomainError::invalid(
            "username",
            format!("username {username} is reserved"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod validation_tests {
    use super::*;

    #[test]
    fn harbor_user_rules() {
        assert!(validate_password("Passw0rd").is_ok());
        for bad in ["short1A", "alllower1", "ALLUPPER1", "NoDigitsHere"] {
            assert!(validate_password(bad).is_err(), "{bad}");
        }
        assert!(validate_profile("a@b.c", "Alice", "").is_ok());
        assert!(validate_profile("", "Alice", "").is_err());
        assert!(validate_profile("nope", "Alice", "").is_err());
        assert!(validate_profile("a@b.c", "", "").is_err());
        assert!(validate_profile("a@b.c", "a#b", "").is_err());
        assert!(validate_profile("a@b.c", "A", &"x".repeat(31)).is_err());
        assert!(validate_username("bob").is_ok());
        assert!(validate_username("b$b").is_err());
        assert!(validate_username("").is_err());
        for reserved in ["berth-replication", "Berth-Replication"] {
            assert!(validate_username(reserved).is_err(), "{reserved}");
        }
        assert!(validate_username("berth-replication2").is_ok());
    }
}
