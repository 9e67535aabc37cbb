-- Jobs (issue #28): work the registry does on its own (garbage collection,
-- tag retention, audit purge, and later webhooks and replication), as rows
-- every instance's workers take from. An execution is one run of a job
-- (Harbor's execution: manual, scheduled or started by an event); its tasks
-- are the units a worker takes, one at a time, under a lease it renews: a
-- task whose worker died (kill -9) is taken again once its lease ends, or
-- marked failed when it has had its attempts. A failed attempt waits
-- (`run_after`) before the next, longer each time.
-- Keep in step with the other backend's file of the same name.
CREATE TABLE job_executions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    -- Harbor's vendor type: GARBAGE_COLLECTION, RETENTION, PURGE_AUDIT_LOG, ...
    vendor_type TEXT NOT NULL,
    -- What the job is of (a retention policy's id); 0 for the system's jobs.
    vendor_id BIGINT NOT NULL DEFAULT 0,
    -- MANUAL, SCHEDULE or EVENT.
    job_trigger TEXT NOT NULL,
    -- Pending, Running, Stopped, Error or Success: from its tasks'.
    status TEXT NOT NULL,
    status_message TEXT NOT NULL DEFAULT '',
    -- The run's parameters and results (JSON), as Harbor's extra_attrs.
    extra_attrs TEXT NOT NULL DEFAULT '{}',
    start_time TEXT NOT NULL,
    update_time TEXT NOT NULL,
    end_time TEXT
);
CREATE INDEX job_executions_vendor_idx ON job_executions (vendor_type, vendor_id, id);

CREATE TABLE job_tasks (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    execution_id BIGINT NOT NULL REFERENCES job_executions (id) ON DELETE CASCADE,
    -- The execution's vendor type, so workers pick what they run.
    vendor_type TEXT NOT NULL,
    -- Pending, Running, Stopped, Error or Success.
    status TEXT NOT NULL,
    status_message TEXT NOT NULL DEFAULT '',
    -- What the task does (JSON), and what it found (JSON).
    parameters TEXT NOT NULL DEFAULT '{}',
    extra_attrs TEXT NOT NULL DEFAULT '{}',
    attempts BIGINT NOT NULL DEFAULT 0,
    max_attempts BIGINT NOT NULL,
    -- Not taken before this instant (a retry's backoff).
    run_after TEXT NOT NULL,
    -- The instance running it, and until when it holds it.
    owner TEXT,
    lease_until TEXT,
    -- Asked to stop (PUT .../stop): the worker stops at its next renewal.
    stop_requested BIGINT NOT NULL DEFAULT 0 CHECK (stop_requested IN (0, 1)),
    creation_time TEXT NOT NULL,
    start_time TEXT,
    update_time TEXT NOT NULL,
    end_time TEXT
);
CREATE INDEX job_tasks_execution_idx ON job_tasks (execution_id, id);
-- What a worker looks for: pending tasks due, and running ones whose lease ended.
CREATE INDEX job_tasks_ready_idx ON job_tasks (status, run_after);
CREATE INDEX job_tasks_lease_idx ON job_tasks (status, lease_until);

CREATE TABLE job_task_logs (
    task_id BIGINT NOT NULL REFERENCES job_tasks (id) ON DELETE CASCADE,
    seq BIGINT NOT NULL,
    logged_at TEXT NOT NULL,
    line TEXT NOT NULL,
    PRIMARY KEY (task_id, seq)
);

-- When jobs run on their own: one schedule per job (per vendor type and id).
-- Every instance looks for due schedules; the one whose compare-and-set of
-- `next_fire_at` succeeds starts the execution, in the same transaction, so
-- each tick fires once whatever the number of instances.
CREATE TABLE job_schedules (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    vendor_type TEXT NOT NULL,
    vendor_id BIGINT NOT NULL DEFAULT 0,
    -- Harbor's schedule type: Hourly, Daily, Weekly or Custom.
    schedule_type TEXT NOT NULL,
    -- Six fields, seconds first (crates/domain/src/cron.rs).
    cron TEXT NOT NULL,
    -- The parameters each execution it starts gets (JSON).
    parameters TEXT NOT NULL DEFAULT '{}',
    next_fire_at TEXT NOT NULL,
    creation_time TEXT NOT NULL,
    update_time TEXT NOT NULL,
    UNIQUE (vendor_type, vendor_id)
);
CREATE INDEX job_schedules_due_idx ON job_schedules (next_fire_at);

-- Job types whose schedules are paused (Harbor's /schedules/{job_type}/paused).
CREATE TABLE job_pauses (
    vendor_type TEXT PRIMARY KEY
);

-- What started each garbage collection: MANUAL (the API, the portal, `berth gc`)
-- or SCHEDULE (its schedule above).
ALTER TABLE gc_runs ADD COLUMN job_trigger TEXT NOT NULL DEFAULT 'MANUAL';
