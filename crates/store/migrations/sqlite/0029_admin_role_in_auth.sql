-- Harbor's admin_role_in_auth (issue 45): a directory user's administrator
-- role comes from the directory (membership of ldap_group_admin_dn at the
-- last sign-in), apart from the sysadmin flag an administrator sets. Until
-- now a sign-in wrote the role into the flag, so a directory user's flag is
-- its role: it moves across.
-- Keep in step with the other backend's file of the same name.
ALTER TABLE users ADD COLUMN admin_role_in_auth BIGINT NOT NULL DEFAULT 0 CHECK (admin_role_in_auth IN (0, 1));
UPDATE users SET admin_role_in_auth = sysadmin, sysadmin = 0 WHERE origin = 'ldap';
