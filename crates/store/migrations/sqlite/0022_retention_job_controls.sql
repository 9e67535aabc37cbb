-- Tag retention (issue #28): at most one policy per project, Harbor's
-- RetentionPolicy kept as given once checked (its rules, trigger and scope
-- as JSON); the project's `retention_id` metadata names it. Its runs are
-- jobs (vendor type RETENTION, vendor id the policy's id), its schedule a
-- job schedule of the same vendor.
-- Keep in step with the other backend's file of the same name.
CREATE TABLE retention_policies (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    project_id BIGINT NOT NULL UNIQUE REFERENCES projects (id) ON DELETE CASCADE,
    policy TEXT NOT NULL,
    creation_time TEXT NOT NULL,
    update_time TEXT NOT NULL
);

-- A garbage collection asked to stop (`PUT /system/gc/{id}`): the collector
-- stops at its next step (between phases, every hundred blobs) and records
-- its end as done, with `"stopped": true` in its stats.
ALTER TABLE gc_runs ADD COLUMN stop_requested BIGINT NOT NULL DEFAULT 0 CHECK (stop_requested IN (0, 1));

-- The instances whose workers run jobs, as Harbor's job service shows its
-- worker pools: each instance notes itself every few seconds; those not seen
-- for a minute are gone.
CREATE TABLE job_workers (
    owner TEXT PRIMARY KEY,
    started_at TEXT NOT NULL,
    heartbeat_at TEXT NOT NULL
);
