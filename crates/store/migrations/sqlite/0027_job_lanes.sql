-- Job lanes (issue #44): each instance runs every job kind in a lane of its
-- own with a bounded number of workers (`BERTH_JOB_WORKERS`). An instance
-- notes its lanes with its heartbeat (`webhook=10,replication=4,...`), so
-- Harbor's job service dashboard shows every instance's workers.
-- Keep in step with the other backend's file of the same name.
ALTER TABLE job_workers ADD COLUMN lanes TEXT NOT NULL DEFAULT '';
