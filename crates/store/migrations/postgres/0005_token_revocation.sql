-- Revocation of user tokens: a token whose `iat` (unix seconds) is at or
-- before `tokens_valid_after` is refused. Every `auth_version` bump (password,
-- administrator flag, deletion) moves it to now, or one second past its old
-- value when that is not earlier, so it moves on every change. It is a JWT
-- NumericDate compared with `iat`, hence seconds rather than the store's text
-- timestamps. 0: every token of the user is accepted, as before this migration.
-- Keep in step with the other backend's file of the same name.
ALTER TABLE users ADD COLUMN tokens_valid_after BIGINT NOT NULL DEFAULT 0;
