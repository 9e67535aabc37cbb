//! A client for the LDAP directory Harbor's `ldap_*` configuration points at.
//!
//! Every operation opens a fresh connection (as Harbor does), honours the
//! configured timeout on connect and on each operation, and never hangs.
//! Values put into filters are escaped; DNs and filters from configuration
//! are checked before use so that a typo is a clear client error.

use std::time::Duration;

use ldap3::{LdapConnAsync, LdapConnSettings, LdapError, Scope, SearchEntry, ldap_escape};

/// The directory settings (Harbor's `ldap_*` configuration items).
#[derive(Clone, Default)]
pub struct LdapSettings {
    /// `ldap://host:port`, `ldaps://host:port`, or `host:port` (plain LDAP).
    pub url: String,
    /// DN of the service account used to search.
    pub search_dn: String,
    /// Password of the service account.
    pub search_password: String,
    /// Where users are searched.
    pub base_dn: String,
    /// Extra filter users must match, e.g. `(objectClass=person)`.
    pub filter: String,
    /// The attribute holding the login name (`uid`, `cn`, `sAMAccountName` ...).
    pub uid_attribute: String,
    /// 0 base, 1 one level, 2 subtree.
    pub scope: i64,
    /// Connect and per-operation timeout.
    pub timeout: Duration,
    /// Verify the server certificate on `ldaps://` and StartTLS.
    pub verify_cert: bool,
    /// Upgrade a plain `ldap://` connection with StartTLS (a Berth extension).
    pub starttls: bool,
    /// Where groups are searched.
    pub group_base_dn: String,
    /// Extra filter groups must match, e.g. `(objectClass=groupOfNames)`.
    pub group_filter: String,
    /// The attribute holding a group's name (default `cn`).
    pub group_name_attribute: String,
    /// 0 base, 1 one level, 2 subtree.
    pub group_scope: i64,
    /// Members of this group are system administrators.
    pub group_admin_dn: String,
    /// The user attribute listing the user's groups (default `memberof`).
    pub membership_attribute: String,
}

impl std::fmt::Debug for LdapSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LdapSettings")
            .field("url", &self.url)
            .field("search_dn", &self.search_dn)
            .field("base_dn", &self.base_dn)
            .finish_non_exhaustive()
    }
}

/// A person entry of the directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirectoryUser {
    /// The entry's DN.
    pub dn: String,
    /// The value of the uid attribute.
    pub username: String,
    /// `displayName`, else `cn`.
    pub realname: String,
    /// `mail` (or `email`), possibly empty.
    pub email: String,
    /// DNs listed in the membership attribute.
    pub groups: Vec<String>,
}

/// A group entry of the directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirectoryGroup {
    /// The entry's DN.
    pub dn: String,
    /// The value of the group name attribute.
    pub name: String,
}

/// Why a directory operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DirectoryError {
    /// The configuration or input is malformed (a client mistake).
    #[error("{0}")]
    Invalid(String),
    /// The service account or user credentials were refused.
    #[error("invalid credential")]
    InvalidCredentials,
    /// The directory could not be reached or did not answer in time.
    #[error("{0}")]
    Unreachable(String),
    /// The directory answered with an error.
    #[error("{0}")]
    Failed(String),
}

impl From<LdapError> for DirectoryError {
    fn from(err: LdapError) -> Self {
        match err {
            LdapError::Timeout { .. } => {
                Self::Unreachable("the LDAP server did not answer in time".into())
            }
            LdapError::Io { source } => {
                Self::Unreachable(format!("cannot reach the LDAP server: {source}"))
            }
            LdapError::FilterParsing => Self::Invalid("invalid LDAP filter".into()),
            LdapError::UrlParsing { .. } | LdapError::UnknownScheme(_) => {
                Self::Invalid("invalid LDAP URL".into())
            }
            LdapError::LdapResult { result } if result.rc == 49 => Self::InvalidCredentials,
            LdapError::LdapResult { result } if result.rc == 34 => {
                Self::Invalid("invalid DN syntax".into())
            }
            LdapError::LdapResult { result } if result.rc == 32 => {
                Self::Failed("no such object".into())
            }
            LdapError::LdapResult { result } => {
                Self::Failed(format!("LDAP error {}: {}", result.rc, result.text))
            }
            other => Self::Unreachable(other.to_string()),
        }
    }
}

type Result<T> = std::result::Result<T, DirectoryError>;

/// Checks that `dn` looks like a distinguished name: `attr=value` pairs separated by commas.
pub fn validate_dn(dn: &str) -> Result<()> {
    let invalid = || DirectoryError::Invalid(format!("invalid DN: {dn}"));
    if dn.trim().is_empty() {
        return Err(invalid());
    }
    let mut escaped = false;
    let mut component = String::new();
    let mut components = Vec::new();
    for ch in dn.chars() {
        match ch {
            _ if escaped => {
                escaped = false;
                component.push(ch);
            }
            '\\' => {
                escaped = true;
                component.push(ch);
            }
            ',' => components.push(std::mem::take(&mut component)),
            _ => component.push(ch),
        }
    }
    components.push(component);
    let ok = components.iter().all(|c| {
        c.split_once('=').is_some_and(|(attr, value)| {
            let attr = attr.trim();
            !attr.is_empty()
                && attr
                    .chars()
                    .all(|ch| ch.is_ascii_alphanumeric() || ch == '-' || ch == '.')
                && !value.trim().is_empty()
        })
    });
    if ok { Ok(()) } else { Err(invalid()) }
}

/// Wraps a configured filter in parentheses when it lacks them and checks its syntax.
pub fn normalize_filter(filter: &str) -> Result<String> {
    let filter = filter.trim();
    if filter.is_empty() {
        return Ok(String::new());
    }
    let wrapped = if filter.starts_with('(') {
        filter.to_string()
    } else {
        format!("({filter})")
    };
    ldap3::parse_filter(&wrapped)
        .map_err(|()| DirectoryError::Invalid(format!("invalid LDAP filter: {filter}")))?;
    Ok(wrapped)
}

/// Checks and normalizes an LDAP URL: `ldap://` or `ldaps://`, or a bare `host[:port]` (plain LDAP).
pub fn normalize_url(url: &str) -> Result<String> {
    let url = url.trim();
    let invalid = || DirectoryError::Invalid(format!("invalid LDAP URL: {url}"));
    let full = if url.contains("://") {
        url.to_string()
    } else {
        format!("ldap://{url}")
    };
    let (scheme, rest) = full.split_once("://").ok_or_else(invalid)?;
    let host = rest.split('/').next().unwrap_or("");
    if !matches!(scheme, "ldap" | "ldaps") || host.is_empty() || host.contains(char::is_whitespace)
    {
        return Err(invalid());
    }
    Ok(full)
}

fn scope(value: i64) -> Result<Scope> {
    match value {
        0 => Ok(Scope::Base),
        1 => Ok(Scope::OneLevel),
        2 => Ok(Scope::Subtree),
        _ => Err(DirectoryError::Invalid(
            "invalid scope, should be 0, 1 or 2".into(),
        )),
    }
}

fn combine(filter: &str, clause: &str) -> String {
    if filter.is_empty() {
        clause.to_string()
    } else {
        format!("(&{filter}{clause})")
    }
}

fn first(entry: &SearchEntry, names: &[&str]) -> String {
    names
        .iter()
        .find_map(|name| {
            entry
                .attrs
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .and_then(|(_, v)| v.first().cloned())
        })
        .unwrap_or_default()
}

fn all_values(entry: &SearchEntry, name: &str) -> Vec<String> {
    entry
        .attrs
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.clone())
        .unwrap_or_default()
}

/// An open connection to the directory.
struct Session {
    ldap: ldap3::Ldap,
    timeout: Duration,
}

impl Session {
    async fn open(settings: &LdapSettings) -> Result<Self> {
        let url = normalize_url(&settings.url)?;
        let timeout = if settings.timeout.is_zero() {
            Duration::from_secs(5)
        } else {
            settings.timeout
        };
        let conn_settings = LdapConnSettings::new()
            .set_conn_timeout(timeout)
            .set_starttls(settings.starttls && url.starts_with("ldap://"))
            .set_no_tls_verify(!settings.verify_cert);
        // The connect timeout covers TCP only; the TLS handshake gets the same bound here.
        let (conn, ldap) =
            tokio::time::timeout(timeout, LdapConnAsync::with_settings(conn_settings, &url))
                .await
                .map_err(|_| {
                    DirectoryError::Unreachable("the LDAP server did not answer in time".into())
                })??;
        ldap3::drive!(conn);
        Ok(Self { ldap, timeout })
    }

    async fn bind(&mut self, dn: &str, password: &str) -> Result<()> {
        if password.is_empty() {
            // An empty password is an unauthenticated bind that always "succeeds".
            return Err(DirectoryError::InvalidCredentials);
        }
        self.ldap
            .with_timeout(self.timeout)
            .simple_bind(dn, password)
            .await?
            .success()?;
        Ok(())
    }

    async fn search(
        &mut self,
        base: &str,
        scope: Scope,
        filter: &str,
        attrs: &[&str],
    ) -> Result<Vec<SearchEntry>> {
        let (entries, _) = self
            .ldap
            .with_timeout(self.timeout)
            .search(base, scope, filter, attrs.to_vec())
            .await?
            .success()?;
        Ok(entries.into_iter().map(SearchEntry::construct).collect())
    }

    async fn close(mut self) {
        let _ = self.ldap.unbind().await;
    }
}

/// Opens a session bound as the service account.
async fn service_session(settings: &LdapSettings) -> Result<Session> {
    if settings.search_dn.trim().is_empty() {
        return Err(DirectoryError::Invalid("empty search dn".into()));
    }
    if settings.search_password.is_empty() {
        return Err(DirectoryError::Invalid("empty password".into()));
    }
    validate_dn(&settings.search_dn)?;
    let mut session = Session::open(settings).await?;
    session
        .bind(&settings.search_dn, &settings.search_password)
        .await?;
    Ok(session)
}

/// Connects and binds as the service account: Harbor's pingLdap.
pub async fn ping(settings: &LdapSettings) -> Result<()> {
    service_session(settings).await?.close().await;
    Ok(())
}

fn uid_attribute(settings: &LdapSettings) -> &str {
    let uid = settings.uid_attribute.trim();
    if uid.is_empty() { "cn" } else { uid }
}

/// Users whose uid attribute equals `username` (every user when `None` or empty).
pub async fn search_users(
    settings: &LdapSettings,
    username: Option<&str>,
) -> Result<Vec<DirectoryUser>> {
    let mut session = service_session(settings).await?;
    let result = search_users_in(&mut session, settings, username).await;
    session.close().await;
    result
}

async fn search_users_in(
    session: &mut Session,
    settings: &LdapSettings,
    username: Option<&str>,
) -> Result<Vec<DirectoryUser>> {
    search_users_by(session, settings, uid_attribute(settings), username).await
}

/// Users whose attribute `by` equals `value` (every user when `None` or empty).
async fn search_users_by(
    session: &mut Session,
    settings: &LdapSettings,
    by: &str,
    value: Option<&str>,
) -> Result<Vec<DirectoryUser>> {
    validate_dn(&settings.base_dn)?;
    let uid = uid_attribute(settings);
    let value = match value.map(str::trim).filter(|u| !u.is_empty()) {
        Some(name) => ldap_escape(name).into_owned(),
        None => "*".to_string(),
    };
    let filter = combine(
        &normalize_filter(&settings.filter)?,
        &format!("({by}={value})"),
    );
    let membership = membership_attribute(settings);
    let attrs = [uid, "cn", "displayName", "mail", "email", membership];
    let entries = session
        .search(&settings.base_dn, scope(settings.scope)?, &filter, &attrs)
        .await?;
    Ok(entries
        .into_iter()
        .map(|entry| DirectoryUser {
            username: first(&entry, &[uid]),
            realname: first(&entry, &["displayName", "cn"]),
            email: first(&entry, &["mail", "email"]),
            groups: all_values(&entry, membership),
            dn: entry.dn,
        })
        .filter(|u| !u.username.is_empty())
        .collect())
}

fn membership_attribute(settings: &LdapSettings) -> &str {
    let attr = settings.membership_attribute.trim();
    if attr.is_empty() { "memberof" } else { attr }
}

/// The user whose uid attribute is exactly `username`; `None` when there is none.
/// More than one match is refused, as Harbor does.
pub async fn find_user(settings: &LdapSettings, username: &str) -> Result<Option<DirectoryUser>> {
    if username.trim().is_empty() {
        return Ok(None);
    }
    let mut users = search_users(settings, Some(username)).await?;
    match users.len() {
        0 => Ok(None),
        1 => Ok(users.pop()),
        _ => Err(DirectoryError::Failed(format!(
            "more than one user found for {username}"
        ))),
    }
}

/// Verifies `password` for `login`: search as the service account, then bind
/// as the user's DN. `login` is the uid attribute's value or, when no entry has
/// that uid and it looks like an address, the `mail` attribute's value.
/// `Ok(None)` for an unknown user, an ambiguous login or a wrong password.
/// The user's groups come from the membership attribute (see [`GroupSide`]).
pub async fn authenticate(
    settings: &LdapSettings,
    login: &str,
    password: &str,
) -> Result<Option<DirectoryUser>> {
    let login = login.trim();
    if login.is_empty() || password.is_empty() {
        return Ok(None);
    }
    let mut session = service_session(settings).await?;
    let result = authenticate_in(&mut session, settings, login, password).await;
    session.close().await;
    result
}

async fn authenticate_in(
    session: &mut Session,
    settings: &LdapSettings,
    login: &str,
    password: &str,
) -> Result<Option<DirectoryUser>> {
    let mut users = search_users_in(session, settings, Some(login)).await?;
    if users.is_empty() && login.contains('@') {
        users = search_users_by(session, settings, "mail", Some(login)).await?;
    }
    if users.len() != 1 {
        return Ok(None);
    }
    let mut user = users.pop().expect("one user");
    let mut as_user = Session::open(settings).await?;
    let bound = as_user.bind(&user.dn, password).await;
    as_user.close().await;
    match bound {
        Ok(()) => {}
        Err(DirectoryError::InvalidCredentials) => return Ok(None),
        Err(other) => return Err(other),
    }
    if let Some(side) = GroupSide::of(settings) {
        user.groups = groups_listing(session, settings, side, &user).await?;
    }
    Ok(Some(user))
}

/// A membership attribute that groups carry rather than users, for
/// directories without a `memberOf` overlay: `member` and `uniqueMember` list
/// member DNs, `memberUid` member uids (posixGroup). Any other attribute is
/// read from the user's own entry, as Harbor does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupSide {
    /// `member` or `uniqueMember`: the user's DN.
    Dn(&'static str),
    /// `memberUid`: the user's uid.
    Uid,
}

impl GroupSide {
    /// The group-side kind of the configured membership attribute, if it is one.
    pub fn of(settings: &LdapSettings) -> Option<Self> {
        match membership_attribute(settings).to_ascii_lowercase().as_str() {
            "member" => Some(Self::Dn("member")),
            "uniquemember" => Some(Self::Dn("uniqueMember")),
            "memberuid" => Some(Self::Uid),
            _ => None,
        }
    }
}

/// DNs of the groups (under the group base DN, matching the group filter) that
/// list `user` in the group-side membership attribute; none when no group
/// base DN is configured.
async fn groups_listing(
    session: &mut Session,
    settings: &LdapSettings,
    side: GroupSide,
    user: &DirectoryUser,
) -> Result<Vec<String>> {
    if settings.group_base_dn.trim().is_empty() {
        return Ok(Vec::new());
    }
    validate_dn(&settings.group_base_dn)?;
    let clause = match side {
        GroupSide::Dn(attr) => format!("({attr}={})", ldap_escape(&user.dn)),
        GroupSide::Uid => format!("(memberUid={})", ldap_escape(&user.username)),
    };
    let filter = combine(&normalize_filter(&settings.group_filter)?, &clause);
    let found = session
        .search(
            &settings.group_base_dn,
            scope(settings.group_scope)?,
            &filter,
            &["1.1"],
        )
        .await;
    let entries = match found {
        Err(DirectoryError::Failed(message)) if message == "no such object" => Vec::new(),
        other => other?,
    };
    Ok(entries.into_iter().map(|entry| entry.dn).collect())
}

/// Groups by name (under the group base DN) or, when no name is given, by DN.
pub async fn search_groups(
    settings: &LdapSettings,
    name: Option<&str>,
    dn: Option<&str>,
) -> Result<Vec<DirectoryGroup>> {
    let name_attr = {
        let attr = settings.group_name_attribute.trim();
        if attr.is_empty() { "cn" } else { attr }
    };
    let filter = normalize_filter(&settings.group_filter)?;
    let (base, scope_value, clause) = match (
        name.map(str::trim).filter(|n| !n.is_empty()),
        dn.map(str::trim),
    ) {
        (Some(name), _) => {
            validate_dn(&settings.group_base_dn).map_err(|_| {
                DirectoryError::Invalid("ldap_group_base_dn is not configured or invalid".into())
            })?;
            let clause = format!("({name_attr}={})", ldap_escape(name));
            (settings.group_base_dn.clone(), settings.group_scope, clause)
        }
        (None, Some(dn)) if !dn.is_empty() => {
            validate_dn(dn)?;
            (dn.to_string(), 0, format!("({name_attr}=*)"))
        }
        _ => {
            return Err(DirectoryError::Invalid(
                "either groupname or groupdn is required".into(),
            ));
        }
    };
    let mut session = service_session(settings).await?;
    let result = session
        .search(
            &base,
            scope(scope_value)?,
            &combine(&filter, &clause),
            &[name_attr],
        )
        .await;
    session.close().await;
    let entries = match result {
        Err(DirectoryError::Failed(message)) if message == "no such object" => Vec::new(),
        other => other?,
    };
    Ok(entries
        .into_iter()
        .map(|entry| DirectoryGroup {
            name: first(&entry, &[name_attr]),
            dn: entry.dn,
        })
        .collect())
}

/// Normalizes a DN for comparison: lower case, no blanks around `,` and `=`.
pub fn normalize_dn(dn: &str) -> String {
    dn.split(',')
        .map(|rdn| {
            let (attr, value) = rdn.split_once('=').unwrap_or((rdn, ""));
            format!("{}={}", attr.trim(), value.trim())
        })
        .collect::<Vec<_>>()
        .join(",")
        .to_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns() {
        assert!(validate_dn("dc=berth,dc=test").is_ok());
        assert!(validate_dn("cn=a\\,b,ou=people, dc=x").is_ok());
        assert!(validate_dn("").is_err());
        assert!(validate_dn("not a dn").is_err());
        assert!(validate_dn("cn=,dc=x").is_err());
        assert_eq!(
            normalize_dn("CN=Developers, OU=Groups ,DC=Berth"),
            "cn=developers,ou=groups,dc=berth"
        );
    }

    #[test]
    fn filters() {
        assert_eq!(
            normalize_filter("objectClass=person").unwrap(),
            "(objectClass=person)"
        );
        assert_eq!(normalize_filter("").unwrap(), "");
        assert!(normalize_filter("(&(a=b)").is_err());
        assert_eq!(
            combine("(objectClass=person)", "(uid=x)"),
            "(&(objectClass=person)(uid=x))"
        );
        assert_eq!(combine("", "(uid=x)"), "(uid=x)");
    }

    #[test]
    fn group_side_membership_attributes() {
        let side = |attr: &str| {
            GroupSide::of(&LdapSettings {
                membership_attribute: attr.into(),
                ..LdapSettings::default()
            })
        };
        assert_eq!(side("memberof"), None);
        assert_eq!(side(""), None, "the default is memberof");
        assert_eq!(side("isMemberOf"), None);
        assert_eq!(side("member"), Some(GroupSide::Dn("member")));
        assert_eq!(side("uniqueMember"), Some(GroupSide::Dn("uniqueMember")));
        assert_eq!(side(" UNIQUEMEMBER "), Some(GroupSide::Dn("uniqueMember")));
        assert_eq!(side("memberUid"), Some(GroupSide::Uid));
    }

    #[test]
    fn urls() {
        assert_eq!(
            normalize_url("ldap.example.com:389").unwrap(),
            "ldap://ldap.example.com:389"
        );
        assert_eq!(normalize_url("ldaps://h:636").unwrap(), "ldaps://h:636");
        assert!(normalize_url("http://h").is_err());
        assert!(normalize_url("ldap://").is_err());
        assert!(normalize_url("").is_err());
    }
}
