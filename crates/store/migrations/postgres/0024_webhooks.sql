-- Webhooks (issue #30): a project's policies, Harbor's WebhookPolicy with
-- its targets and event types kept as JSON once checked, and the system's
-- (no project: every project's events, for administrators). Deliveries are jobs
-- (vendor type WEBHOOK or SLACK, vendor id the policy's id), made from the
-- domain events by the 'webhook' subscriber in the transaction that takes
-- the events, so a change that rolled back is never announced and one that
-- committed is announced once it is delivered.
-- Keep in step with the other backend's file of the same name.
CREATE TABLE webhook_policies (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    project_id BIGINT REFERENCES projects (id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    targets TEXT NOT NULL,
    event_types TEXT NOT NULL,
    enabled BIGINT NOT NULL DEFAULT 1 CHECK (enabled IN (0, 1)),
    creator TEXT NOT NULL DEFAULT '',
    creation_time TEXT NOT NULL,
    update_time TEXT NOT NULL
);
CREATE UNIQUE INDEX webhook_policies_name_key ON webhook_policies (project_id, name);
CREATE UNIQUE INDEX webhook_policies_system_name_key ON webhook_policies (name) WHERE project_id IS NULL;

-- The digest of the artifact an event is about (payloads name it beside a
-- tag), and what else its announcement says (a quota event's details).
ALTER TABLE events ADD COLUMN digest TEXT;
ALTER TABLE events ADD COLUMN detail TEXT;

INSERT INTO event_subscribers (name) VALUES ('webhook');

-- Tasks that run in order: a task with a sequence key waits while an older
-- task of the same key is pending (its retry included) or running. Webhook
-- deliveries of one policy's target and repository arrive in order.
ALTER TABLE job_tasks ADD COLUMN sequence_key TEXT;
CREATE INDEX job_tasks_sequence_idx ON job_tasks (sequence_key, id) WHERE sequence_key IS NOT NULL;
