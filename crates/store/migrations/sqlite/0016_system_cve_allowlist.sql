-- The system CVE allowlist (Harbor's /system/CVEAllowlist): one row at most,
-- written by the first putSystemCVEAllowlist; none means an empty list.
-- Project allowlists stay in cve_allowlists, keyed by their project.
-- Keep in step with the other backend's file of the same name.
CREATE TABLE system_cve_allowlist (
    id BIGINT PRIMARY KEY CHECK (id = 1),
    expires_at BIGINT,
    items TEXT NOT NULL DEFAULT '[]',
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
