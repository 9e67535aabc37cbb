-- Change notifications of who holds which role in a project (Topic::Registry,
-- crates/store/src/changes.rs): instances keep users' roles in memory for
-- pulls with Basic credentials, and must forget them when a membership
-- changes anywhere.

CREATE TRIGGER project_members_changed_for_registry AFTER INSERT OR UPDATE OR DELETE ON project_members
    FOR EACH STATEMENT EXECUTE FUNCTION berth_notify_registry();
CREATE TRIGGER user_group_members_changed_for_registry AFTER INSERT OR UPDATE OR DELETE ON user_group_members
    FOR EACH STATEMENT EXECUTE FUNCTION berth_notify_registry();
