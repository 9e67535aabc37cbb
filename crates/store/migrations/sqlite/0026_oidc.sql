-- Single sign-on (issue #31): Harbor's oidc_auth mode.
--
-- oidc_users links a Berth user to the provider's account (Harbor's subiss:
-- the ID token's sub followed by its iss) and keeps the user's CLI secret and
-- the provider's refresh token, both sealed. The refresh token is used at
-- most once per check interval to learn whether the provider still knows the
-- user; checked_ms (unix milliseconds) is when it was last asked. An instance
-- claims a check by moving checked_ms on (by a millisecond at least) from the
-- value it read, so one instance asks at a time: providers that rotate
-- refresh tokens refuse a token used twice.
-- token_expires_at is when the last access token ends: without a refresh
-- token, the CLI secret works until then.
--
-- oidc_logins holds a sign-in between the redirect to the provider and its
-- return (state, nonce, PKCE verifier), keyed by the hash of the browser's
-- cookie so that a callback from another browser is refused; once the
-- provider has answered and the user must still choose a username, pending
-- holds the verified identity (sealed JSON) until they do.
-- Keep in step with the other backend's file of the same name.
CREATE TABLE oidc_users (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id BIGINT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    subiss TEXT NOT NULL,
    secret TEXT NOT NULL,
    refresh_token TEXT NOT NULL DEFAULT '',
    token_expires_at BIGINT NOT NULL DEFAULT 0,
    checked_ms BIGINT NOT NULL DEFAULT 0,
    creation_time TEXT NOT NULL,
    update_time TEXT NOT NULL
);
CREATE UNIQUE INDEX oidc_users_user_key ON oidc_users (user_id);
CREATE UNIQUE INDEX oidc_users_subiss_key ON oidc_users (subiss);

CREATE TABLE oidc_logins (
    id_hash TEXT PRIMARY KEY,
    state TEXT NOT NULL,
    nonce TEXT NOT NULL,
    verifier TEXT NOT NULL,
    redirect TEXT NOT NULL DEFAULT '',
    pending TEXT NOT NULL DEFAULT '',
    created_at BIGINT NOT NULL
);
CREATE INDEX oidc_logins_created_idx ON oidc_logins (created_at);
