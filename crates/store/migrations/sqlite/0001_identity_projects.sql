-- Identity, projects, configuration and generator-rest articles.
-- Portable rules: INTEGER/BIGINT, TEXT, BLOB only; flags 0/1; timestamps as
-- fixed-width RFC 3339 UTC text with milliseconds. Keep in step with
-- ../postgres/0001_identity_projects.sql.

CREATE TABLE users (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    username TEXT NOT NULL,
    email TEXT,
    realname TEXT,
    picture TEXT,
    password_hash TEXT,
    auth_version BIGINT NOT NULL DEFAULT 0,
    sysadmin BIGINT NOT NULL DEFAULT 0 CHECK (sysadmin IN (0, 1)),
    comment TEXT,
    origin TEXT NOT NULL DEFAULT 'local' CHECK (origin IN ('local', 'ldap')),
    ldap_dn TEXT,
    keywords TEXT NOT NULL DEFAULT '',
    deleted BIGINT NOT NULL DEFAULT 0 CHECK (deleted IN (0, 1)),
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE UNIQUE INDEX users_username_key ON users (username) WHERE deleted = 0;
CREATE UNIQUE INDEX users_email_key ON users (LOWER(email)) WHERE deleted = 0;
CREATE UNIQUE INDEX users_ldap_dn_key ON users (ldap_dn) WHERE deleted = 0;
CREATE INDEX users_created_idx ON users (created_at, id);

CREATE TABLE user_identities (
    provider TEXT NOT NULL CHECK (provider IN ('github', 'google', 'facebook')),
    subject TEXT NOT NULL,
    user_id BIGINT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    created_at TEXT NOT NULL,
    PRIMARY KEY (provider, subject)
);
CREATE INDEX user_identities_user_idx ON user_identities (user_id);

CREATE TABLE user_groups (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    group_name TEXT NOT NULL,
    group_type BIGINT NOT NULL CHECK (group_type IN (1, 2, 3)),
    ldap_group_dn TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE UNIQUE INDEX user_groups_dn_key ON user_groups (ldap_group_dn);
CREATE UNIQUE INDEX user_groups_name_key ON user_groups (group_type, group_name);

CREATE TABLE user_group_members (
    user_id BIGINT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    group_id BIGINT NOT NULL REFERENCES user_groups (id) ON DELETE CASCADE,
    synced_at TEXT NOT NULL,
    PRIMARY KEY (user_id, group_id)
);
CREATE INDEX user_group_members_group_idx ON user_group_members (group_id);

CREATE TABLE password_resets (
    token_hash TEXT PRIMARY KEY,
    user_id BIGINT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    created_at TEXT NOT NULL,
    expires_at TEXT NOT NULL
);
CREATE INDEX password_resets_user_idx ON password_resets (user_id);
CREATE INDEX password_resets_expiry_idx ON password_resets (expires_at);

CREATE TABLE projects (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL,
    owner_id BIGINT NOT NULL REFERENCES users (id) ON DELETE RESTRICT,
    public BIGINT NOT NULL DEFAULT 0 CHECK (public IN (0, 1)),
    registry_id BIGINT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE UNIQUE INDEX projects_name_key ON projects (name);
CREATE INDEX projects_public_name_idx ON projects (public, name);
CREATE INDEX projects_owner_idx ON projects (owner_id);
CREATE INDEX projects_created_idx ON projects (created_at, id);

CREATE TABLE project_metadata (
    project_id BIGINT NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    value TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (project_id, name)
);

CREATE TABLE project_members (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    project_id BIGINT NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    user_id BIGINT REFERENCES users (id) ON DELETE CASCADE,
    group_id BIGINT REFERENCES user_groups (id) ON DELETE CASCADE,
    role BIGINT NOT NULL CHECK (role BETWEEN 1 AND 5),
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    CHECK ((user_id IS NULL) <> (group_id IS NULL))
);
CREATE UNIQUE INDEX project_members_user_key ON project_members (project_id, user_id);
CREATE UNIQUE INDEX project_members_group_key ON project_members (project_id, group_id);
CREATE INDEX project_members_user_idx ON project_members (user_id, project_id);
CREATE INDEX project_members_group_idx ON project_members (group_id, project_id);
CREATE INDEX project_members_role_idx ON project_members (project_id, role);

CREATE TABLE project_quotas (
    project_id BIGINT PRIMARY KEY REFERENCES projects (id) ON DELETE CASCADE,
    hard BIGINT NOT NULL,
    used BIGINT NOT NULL DEFAULT 0,
    updated_at TEXT NOT NULL
);

CREATE TABLE cve_allowlists (
    project_id BIGINT PRIMARY KEY REFERENCES projects (id) ON DELETE CASCADE,
    expires_at BIGINT,
    items TEXT NOT NULL DEFAULT '[]',
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);

CREATE TABLE configurations (
    name TEXT PRIMARY KEY,
    value TEXT NOT NULL,
    updated_at TEXT NOT NULL
);

CREATE TABLE articles (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id BIGINT NOT NULL REFERENCES users (id) ON DELETE RESTRICT,
    title TEXT,
    content TEXT,
    keywords TEXT NOT NULL DEFAULT '',
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE INDEX articles_created_idx ON articles (created_at, id);
CREATE INDEX articles_user_idx ON articles (user_id);

-- Install-time data, as Harbor has it: the system administrator `admin` (id 1,
-- its password is set at first start) and the public project `library` (id 1).
INSERT INTO users (username, email, realname, comment, sysadmin, created_at, updated_at)
VALUES ('admin', 'admin@example.com', 'system admin', 'admin user', 1,
        strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), strftime('%Y-%m-%dT%H:%M:%fZ', 'now'));
INSERT INTO projects (name, owner_id, public, created_at, updated_at)
VALUES ('library', 1, 1, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), strftime('%Y-%m-%dT%H:%M:%fZ', 'now'));
INSERT INTO project_metadata (project_id, name, value, created_at, updated_at)
VALUES (1, 'public', 'true', strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), strftime('%Y-%m-%dT%H:%M:%fZ', 'now'));
INSERT INTO project_members (project_id, user_id, role, created_at, updated_at)
VALUES (1, 1, 1, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), strftime('%Y-%m-%dT%H:%M:%fZ', 'now'));
INSERT INTO project_quotas (project_id, hard, used, updated_at)
VALUES (1, -1, 0, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'));
INSERT INTO cve_allowlists (project_id, items, created_at, updated_at)
VALUES (1, '[]', strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), strftime('%Y-%m-%dT%H:%M:%fZ', 'now'));
