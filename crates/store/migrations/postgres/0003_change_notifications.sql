-- Change notifications for the in-memory caches of other instances sharing
-- this database (crates/store/src/changes.rs): a statement that changes a
-- topic's tables sends its topic name on channel berth_changes at commit.

CREATE FUNCTION berth_notify_articles() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('berth_changes', 'articles');
    RETURN NULL;
END
$$;

-- Articles themselves, and users, whose name, picture and deletion article views show.
CREATE TRIGGER articles_changed AFTER INSERT OR UPDATE OR DELETE ON articles
    FOR EACH STATEMENT EXECUTE FUNCTION berth_notify_articles();
CREATE TRIGGER users_changed_for_articles AFTER UPDATE ON users
    FOR EACH STATEMENT EXECUTE FUNCTION berth_notify_articles();
