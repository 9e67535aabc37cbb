-- The grams of a deleted or moved tag are found by the tag's id. Migration
-- 0014 found them through its key (repository_id, gram, tag_id) with the
-- tag's grams; PostgreSQL's generic plan inside the trigger read every gram
-- of the repository instead (1 ms a tag at 3,000 tags, growing with the
-- repository), and tag retention deletes tags by the hundred. Keep in step
-- with the other backend's file of the same name.
CREATE INDEX tag_grams_tag_idx ON tag_grams (tag_id);

CREATE OR REPLACE FUNCTION berth_tag_grams() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' OR (TG_OP = 'UPDATE'
        AND (OLD.name <> NEW.name OR OLD.repository_id <> NEW.repository_id)) THEN
        DELETE FROM tag_grams WHERE tag_id = OLD.id;
    ELSIF TG_OP = 'UPDATE' THEN
        -- A moved tag (a push of its name onto another manifest).
        IF OLD.artifact_id <> NEW.artifact_id THEN
            UPDATE tag_grams SET artifact_id = NEW.artifact_id WHERE tag_id = NEW.id;
        END IF;
        RETURN NULL;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        INSERT INTO tag_grams (repository_id, gram, tag_id, artifact_id)
        SELECT DISTINCT NEW.repository_id, substr(NEW.name, n, 3), NEW.id, NEW.artifact_id
        FROM generate_series(1, length(NEW.name)) AS n;
    END IF;
    RETURN NULL;
END
$$;
