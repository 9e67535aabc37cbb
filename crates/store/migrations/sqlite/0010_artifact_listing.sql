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

CREATE TRIGGER artifacts_listed_on_insert AFTER INSERT ON artifacts
WHEN NEW.accessory_type IS NOT NULL
BEGIN
    UPDATE artifacts SET listed = 0 WHERE id = NEW.id;
END;

CREATE TRIGGER artifacts_listed_on_count AFTER UPDATE OF tag_count, parent_count, accessory_type ON artifacts
BEGIN
    UPDATE artifacts SET listed = CASE
        WHEN NEW.accessory_type IS NULL AND (NEW.tag_count > 0 OR NEW.parent_count = 0) THEN 1 ELSE 0 END
    WHERE id = NEW.id;
END;

CREATE TRIGGER tags_counted_on_insert AFTER INSERT ON tags
BEGIN
    UPDATE artifacts SET tag_count = tag_count + 1 WHERE id = NEW.artifact_id;
END;

CREATE TRIGGER tags_counted_on_delete AFTER DELETE ON tags
BEGIN
    UPDATE artifacts SET tag_count = tag_count - 1 WHERE id = OLD.artifact_id;
END;

-- A moved tag: both artifacts in one statement (rows taken in index order).
CREATE TRIGGER tags_counted_on_move AFTER UPDATE OF artifact_id ON tags
WHEN OLD.artifact_id <> NEW.artifact_id
BEGIN
    UPDATE artifacts SET tag_count = tag_count + CASE WHEN id = NEW.artifact_id THEN 1 ELSE -1 END
    WHERE id IN (OLD.artifact_id, NEW.artifact_id);
END;

CREATE TRIGGER references_counted_on_insert AFTER INSERT ON artifact_references
BEGIN
    UPDATE artifacts SET parent_count = parent_count + 1 WHERE id = NEW.child_id;
END;

CREATE TRIGGER references_counted_on_delete AFTER DELETE ON artifact_references
BEGIN
    UPDATE artifacts SET parent_count = parent_count - 1 WHERE id = OLD.child_id;
END;

CREATE TRIGGER references_counted_on_move AFTER UPDATE OF child_id ON artifact_references
WHEN OLD.child_id <> NEW.child_id
BEGIN
    UPDATE artifacts SET parent_count = parent_count + CASE WHEN id = NEW.child_id THEN 1 ELSE -1 END
    WHERE id IN (OLD.child_id, NEW.child_id);
END;

CREATE TRIGGER artifacts_counted_on_insert AFTER INSERT ON artifacts
BEGIN
    UPDATE repositories SET artifact_count = artifact_count + 1 WHERE id = NEW.repository_id;
END;

CREATE TRIGGER artifacts_counted_on_delete AFTER DELETE ON artifacts
BEGIN
    UPDATE repositories SET artifact_count = artifact_count - 1 WHERE id = OLD.repository_id;
END;
