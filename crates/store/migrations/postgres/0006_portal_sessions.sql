-- Web portal sessions. The cookie carries a random id; only its SHA-256 is
-- stored, so a copy of the database does not let anyone sign in. The CSRF token
-- is sent back in forms and `X-Harbor-CSRF-Token` on every state-changing
-- request the cookie authenticates. A session ends when the user's
-- `auth_version` moves (password, administrator flag, deletion). Times are the store's RFC 3339 text.
-- Keep in step with the other backend's file of the same name.
CREATE TABLE portal_sessions (
    id_hash TEXT PRIMARY KEY,
    user_id BIGINT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    auth_version BIGINT NOT NULL,
    csrf_token TEXT NOT NULL,
    created_at TEXT NOT NULL,
    expires_at TEXT NOT NULL
);
CREATE INDEX portal_sessions_user_idx ON portal_sessions (user_id);
CREATE INDEX portal_sessions_expiry_idx ON portal_sessions (expires_at);
