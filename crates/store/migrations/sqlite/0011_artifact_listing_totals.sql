-- The totals of the common artifact listings, kept on the repository row so
-- that a listing's X-Total-Count reads one row instead of counting an index
-- range: `listed_count` artifacts Harbor's listing shows, `tagged_count` of
-- them with at least one tag (`q=tags=*`; `q=tags=nil` is the difference).
-- `q=tags=*` pages read their own partial index. Triggers keep the counts
-- from each artifact's `listed` and `tag_count` (migration 0010), so every
-- write path is covered. Keep in step with the other backend's file of the same name.
ALTER TABLE repositories ADD COLUMN listed_count BIGINT NOT NULL DEFAULT 0;
ALTER TABLE repositories ADD COLUMN tagged_count BIGINT NOT NULL DEFAULT 0;

UPDATE repositories SET
    listed_count = (SELECT COUNT(*) FROM artifacts a WHERE a.repository_id = repositories.id AND a.listed = 1),
    tagged_count = (SELECT COUNT(*) FROM artifacts a
                    WHERE a.repository_id = repositories.id AND a.listed = 1 AND a.tag_count > 0);

CREATE INDEX artifacts_tagged_idx ON artifacts (repository_id, push_time, id) WHERE listed = 1 AND tag_count > 0;

-- One update of the repository row per artifact written: these triggers keep
-- migration 0010's `artifact_count` too.
DROP TRIGGER artifacts_counted_on_insert;
DROP TRIGGER artifacts_counted_on_delete;

-- An artifact is inserted with no tags, listed unless an accessory (whose
-- row is then updated to unlisted, which the update trigger counts).
CREATE TRIGGER artifacts_listing_counted_on_insert AFTER INSERT ON artifacts
BEGIN
    UPDATE repositories SET artifact_count = artifact_count + 1, listed_count = listed_count + NEW.listed
    WHERE id = NEW.repository_id;
END;

CREATE TRIGGER artifacts_listing_counted_on_update AFTER UPDATE OF listed, tag_count ON artifacts
WHEN OLD.listed <> NEW.listed OR (OLD.tag_count > 0) <> (NEW.tag_count > 0)
BEGIN
    UPDATE repositories SET
        listed_count = listed_count + NEW.listed - OLD.listed,
        tagged_count = tagged_count + (NEW.listed = 1 AND NEW.tag_count > 0) - (OLD.listed = 1 AND OLD.tag_count > 0)
    WHERE id = NEW.repository_id;
END;

CREATE TRIGGER artifacts_listing_counted_on_delete AFTER DELETE ON artifacts
BEGIN
    UPDATE repositories SET
        artifact_count = artifact_count - 1,
        listed_count = listed_count - OLD.listed,
        tagged_count = tagged_count - (OLD.listed = 1 AND OLD.tag_count > 0)
    WHERE id = OLD.repository_id;
END;
