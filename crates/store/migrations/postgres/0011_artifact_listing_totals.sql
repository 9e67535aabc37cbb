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
DROP TRIGGER artifacts_counted ON artifacts;
DROP FUNCTION berth_count_artifacts();

-- 1 when an artifact row counts towards `tagged_count`.
CREATE FUNCTION berth_artifact_tagged(listed BIGINT, tag_count BIGINT) RETURNS BIGINT
LANGUAGE sql IMMUTABLE AS $$ SELECT CASE WHEN listed = 1 AND tag_count > 0 THEN 1 ELSE 0 END $$;

CREATE FUNCTION berth_count_listing() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        UPDATE repositories SET
            artifact_count = artifact_count + 1,
            listed_count = listed_count + NEW.listed,
            tagged_count = tagged_count + berth_artifact_tagged(NEW.listed, NEW.tag_count)
        WHERE id = NEW.repository_id;
    ELSIF TG_OP = 'DELETE' THEN
        UPDATE repositories SET
            artifact_count = artifact_count - 1,
            listed_count = listed_count - OLD.listed,
            tagged_count = tagged_count - berth_artifact_tagged(OLD.listed, OLD.tag_count)
        WHERE id = OLD.repository_id;
    ELSE
        UPDATE repositories SET
            listed_count = listed_count + NEW.listed - OLD.listed,
            tagged_count = tagged_count + berth_artifact_tagged(NEW.listed, NEW.tag_count)
                - berth_artifact_tagged(OLD.listed, OLD.tag_count)
        WHERE id = NEW.repository_id;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER artifacts_listing_counted AFTER INSERT OR DELETE ON artifacts
FOR EACH ROW EXECUTE FUNCTION berth_count_listing();

-- `listed` is set by a BEFORE trigger, which a column list would not see: the
-- WHEN clause compares the rows as stored.
CREATE TRIGGER artifacts_listing_recounted AFTER UPDATE ON artifacts
FOR EACH ROW WHEN (OLD.listed <> NEW.listed OR (OLD.tag_count > 0) <> (NEW.tag_count > 0))
EXECUTE FUNCTION berth_count_listing();
