-- Harbor's artifact listing shows an artifact unless it is an accessory or an
-- untagged child of an index. Whether it does is kept on the row (`listed`),
-- with the counts it follows from, so that a listing and its total read one
-- index range instead of probing tags and references for every artifact.
-- A repository's artifact count is kept the same way, for repository lists;
-- every transaction that deletes artifacts locks their repository row first,
-- as a push does, so the two never wait for each other in opposite orders.
-- Triggers keep the counts: every write path, present and future, is covered.
-- Keep in step with the other backend's file of the same name.
ALTER TABLE artifacts ADD COLUMN tag_count BIGINT NOT NULL DEFAULT 0;
ALTER TABLE artifacts ADD COLUMN parent_count BIGINT NOT NULL DEFAULT 0;
ALTER TABLE artifacts ADD COLUMN listed BIGINT NOT NULL DEFAULT 1;
ALTER TABLE repositories ADD COLUMN artifact_count BIGINT NOT NULL DEFAULT 0;

UPDATE repositories SET artifact_count = (SELECT COUNT(*) FROM artifacts a WHERE a.repository_id = repositories.id);

UPDATE artifacts SET
    tag_count = (SELECT COUNT(*) FROM tags t WHERE t.artifact_id = artifacts.id),
    parent_count = (SELECT COUNT(*) FROM artifact_references ar WHERE ar.child_id = artifacts.id);
UPDATE artifacts SET listed = CASE
    WHEN accessory_type IS NULL AND (tag_count > 0 OR parent_count = 0) THEN 1 ELSE 0 END;

CREATE INDEX artifacts_listed_idx ON artifacts (repository_id, listed, push_time, id);

CREATE FUNCTION berth_artifact_listed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.listed := CASE
        WHEN NEW.accessory_type IS NULL AND (NEW.tag_count > 0 OR NEW.parent_count = 0) THEN 1 ELSE 0 END;
    RETURN NEW;
END
$$;

CREATE TRIGGER artifacts_listed BEFORE INSERT OR UPDATE OF tag_count, parent_count, accessory_type
ON artifacts FOR EACH ROW EXECUTE FUNCTION berth_artifact_listed();

CREATE FUNCTION berth_count_tags() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        UPDATE artifacts SET tag_count = tag_count + 1 WHERE id = NEW.artifact_id;
    ELSIF TG_OP = 'DELETE' THEN
        UPDATE artifacts SET tag_count = tag_count - 1 WHERE id = OLD.artifact_id;
    ELSIF OLD.artifact_id <> NEW.artifact_id THEN
        -- A moved tag: both artifacts in one statement.
        UPDATE artifacts SET tag_count = tag_count + CASE WHEN id = NEW.artifact_id THEN 1 ELSE -1 END
        WHERE id IN (OLD.artifact_id, NEW.artifact_id);
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER tags_counted AFTER INSERT OR DELETE OR UPDATE OF artifact_id
ON tags FOR EACH ROW EXECUTE FUNCTION berth_count_tags();

CREATE FUNCTION berth_count_references() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        UPDATE artifacts SET parent_count = parent_count + 1 WHERE id = NEW.child_id;
    ELSIF TG_OP = 'DELETE' THEN
        UPDATE artifacts SET parent_count = parent_count - 1 WHERE id = OLD.child_id;
    ELSIF OLD.child_id <> NEW.child_id THEN
        UPDATE artifacts SET parent_count = parent_count + CASE WHEN id = NEW.child_id THEN 1 ELSE -1 END
        WHERE id IN (OLD.child_id, NEW.child_id);
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER references_counted AFTER INSERT OR DELETE OR UPDATE OF child_id
ON artifact_references FOR EACH ROW EXECUTE FUNCTION berth_count_references();

CREATE FUNCTION berth_count_artifacts() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        UPDATE repositories SET artifact_count = artifact_count + 1 WHERE id = NEW.repository_id;
    ELSE
        UPDATE repositories SET artifact_count = artifact_count - 1 WHERE id = OLD.repository_id;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER artifacts_counted AFTER INSERT OR DELETE
ON artifacts FOR EACH ROW EXECUTE FUNCTION berth_count_artifacts();
