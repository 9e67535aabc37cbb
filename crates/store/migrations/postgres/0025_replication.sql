-- Replication (issue #30): Harbor's replication policies. One side is this
-- registry (NULL), the other a stored registry, which cannot be deleted
-- while a policy names it. The filters and the trigger are kept as JSON once
-- checked. Runs are jobs (vendor type REPLICATION, vendor id the policy's);
-- event-based runs are made from the domain events by the 'replication'
-- subscriber in the transaction that takes the events.
-- Keep in step with the other backend's file of the same name.
CREATE TABLE replication_policies (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    src_registry_id BIGINT REFERENCES registries (id) ON DELETE RESTRICT,
    dest_registry_id BIGINT REFERENCES registries (id) ON DELETE RESTRICT,
    dest_namespace TEXT NOT NULL DEFAULT '',
    dest_namespace_replace_count BIGINT NOT NULL DEFAULT -1,
    trigger_type TEXT NOT NULL,
    trigger_json TEXT NOT NULL,
    filters TEXT NOT NULL DEFAULT '[]',
    replicate_deletion BIGINT NOT NULL DEFAULT 0 CHECK (replicate_deletion IN (0, 1)),
    override BIGINT NOT NULL DEFAULT 0 CHECK (override IN (0, 1)),
    enabled BIGINT NOT NULL DEFAULT 1 CHECK (enabled IN (0, 1)),
    speed BIGINT NOT NULL DEFAULT 0,
    copy_by_chunk BIGINT NOT NULL DEFAULT 0 CHECK (copy_by_chunk IN (0, 1)),
    single_active BIGINT NOT NULL DEFAULT 0 CHECK (single_active IN (0, 1)),
    creator TEXT NOT NULL DEFAULT '',
    creation_time TEXT NOT NULL,
    update_time TEXT NOT NULL
);
CREATE UNIQUE INDEX replication_policies_name_key ON replication_policies (name);
CREATE INDEX replication_policies_src_idx ON replication_policies (src_registry_id);
CREATE INDEX replication_policies_dest_idx ON replication_policies (dest_registry_id);
CREATE INDEX replication_policies_trigger_idx ON replication_policies (trigger_type, enabled);

INSERT INTO event_subscribers (name) VALUES ('replication');
CREATE INDEX job_executions_type_idx ON job_executions (vendor_type, id);

-- An event is delivered to the webhooks only when an enabled webhook policy
-- exists and the event is of a kind they announce, and to replication only
-- when an enabled event-based policy exists and the event is a push or a
-- delete: a registry without such policies writes no deliveries for them
-- (a retention run's 100,000 deletes included). A policy hears of what
-- happens after it is made, so nothing it could hear is left out.
CREATE OR REPLACE FUNCTION berth_deliver_event() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO event_deliveries (subscriber, event_id) SELECT name, NEW.id FROM event_subscribers
    WHERE name NOT IN ('webhook', 'replication')
       OR (name = 'webhook'
           AND NEW.kind IN ('artifact.pushed', 'artifact.pulled', 'artifact.deleted', 'retention.finished',
                            'quota.exceeded', 'quota.warned', 'replication.finished')
           AND EXISTS (SELECT 1 FROM webhook_policies WHERE enabled = 1))
       OR (name = 'replication'
           AND NEW.kind IN ('artifact.pushed', 'artifact.deleted')
           AND EXISTS (SELECT 1 FROM replication_policies WHERE trigger_type = 'event_based' AND enabled = 1));
    RETURN NULL;
END
$$;
