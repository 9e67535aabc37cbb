-- Change notifications of what a manifest GET reads (crates/store/src/changes.rs,
-- Topic::Registry), for the manifest lookups other instances keep in memory:
-- a statement that changes projects, their metadata, repositories, artifacts,
-- tags or index references sends 'registry' on channel berth_changes at commit.
-- Pull bookkeeping (pull_time, pull_count) and the listing counts the triggers
-- of 0010 keep are left out by the column lists: they change nothing a lookup
-- returns, and pulls must not empty the caches.

CREATE FUNCTION berth_notify_registry() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('berth_changes', 'registry');
    RETURN NULL;
END
$$;

CREATE TRIGGER projects_changed_for_registry AFTER INSERT OR UPDATE OR DELETE ON projects
    FOR EACH STATEMENT EXECUTE FUNCTION berth_notify_registry();
CREATE TRIGGER project_metadata_changed_for_registry AFTER INSERT OR UPDATE OR DELETE ON project_metadata
    FOR EACH STATEMENT EXECUTE FUNCTION berth_notify_registry();
CREATE TRIGGER repositories_changed_for_registry AFTER INSERT OR DELETE ON repositories
    FOR EACH STATEMENT EXECUTE FUNCTION berth_notify_registry();
CREATE TRIGGER artifacts_changed_for_registry AFTER INSERT OR DELETE ON artifacts
    FOR EACH STATEMENT EXECUTE FUNCTION berth_notify_registry();
CREATE TRIGGER artifacts_updated_for_registry
    AFTER UPDATE OF digest, manifest_blob_id, manifest_media_type, repository_id, subject_digest, accessory_type ON artifacts
    FOR EACH STATEMENT EXECUTE FUNCTION berth_notify_registry();
CREATE TRIGGER tags_changed_for_registry AFTER INSERT OR DELETE ON tags
    FOR EACH STATEMENT EXECUTE FUNCTION berth_notify_registry();
CREATE TRIGGER tags_updated_for_registry AFTER UPDATE OF artifact_id, name, repository_id ON tags
    FOR EACH STATEMENT EXECUTE FUNCTION berth_notify_registry();
CREATE TRIGGER artifact_references_changed_for_registry AFTER INSERT OR UPDATE OR DELETE ON artifact_references
    FOR EACH STATEMENT EXECUTE FUNCTION berth_notify_registry();
