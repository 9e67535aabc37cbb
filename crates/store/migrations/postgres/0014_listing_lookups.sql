-- Two lookups for artifact listings: the pieces of tag names for
-- `q=tags=~<text>` of any length, and a listing version for page starts.
--
-- `q=tags=~<text>` for texts of every length reads an index: the pieces of
-- each tag name kept by migration 0012 (its trigrams) serve texts of three or
-- more characters only. This table keeps, for each position of a name, the
-- piece of up to three characters that starts there: the trigrams, then the
-- name's last two characters and its last one (a name shorter than three
-- keeps itself and its last character). A text of one or two characters is
-- in a name exactly when one of these pieces starts with it: one range of
-- the primary key, no name read. Each piece carries the tag's artifact (in
-- the key's index, for index-only scans), so that the range alone gives the
-- artifacts. Triggers keep the pieces when a tag is added, renamed, moved to
-- another artifact or deleted. The pieces replace migration 0012's table.
-- Keep in step with the other backend's file of the same name.
CREATE TABLE tag_grams (
    repository_id BIGINT NOT NULL,
    gram TEXT COLLATE "C" NOT NULL,
    tag_id BIGINT NOT NULL,
    artifact_id BIGINT NOT NULL,
    PRIMARY KEY (repository_id, gram, tag_id) INCLUDE (artifact_id)
);

INSERT INTO tag_grams (repository_id, gram, tag_id, artifact_id)
SELECT DISTINCT t.repository_id, substr(t.name, s.n, 3), t.id, t.artifact_id
FROM tags t CROSS JOIN LATERAL generate_series(1, length(t.name)) AS s(n);

DROP TRIGGER tag_trigrams_kept ON tags;
DROP FUNCTION berth_tag_trigrams();
DROP TABLE tag_trigrams;

CREATE FUNCTION berth_tag_grams() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' OR (TG_OP = 'UPDATE'
        AND (OLD.name <> NEW.name OR OLD.repository_id <> NEW.repository_id)) THEN
        DELETE FROM tag_grams WHERE repository_id = OLD.repository_id AND tag_id = OLD.id
            AND gram IN (SELECT substr(OLD.name, n, 3) FROM generate_series(1, length(OLD.name)) AS n);
    ELSIF TG_OP = 'UPDATE' THEN
        -- A moved tag (a push of its name onto another manifest).
        IF OLD.artifact_id <> NEW.artifact_id THEN
            UPDATE tag_grams SET artifact_id = NEW.artifact_id
            WHERE repository_id = NEW.repository_id AND tag_id = NEW.id
                AND gram IN (SELECT substr(NEW.name, n, 3) FROM generate_series(1, length(NEW.name)) AS n);
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

CREATE TRIGGER tag_grams_kept AFTER INSERT OR DELETE OR UPDATE OF name, repository_id, artifact_id
ON tags FOR EACH ROW EXECUTE FUNCTION berth_tag_grams();

-- The accessories of a repository (few, next to its artifacts): a listing of
-- a short tag text counts its artifacts from the pieces above and takes the
-- accessories among them away, as accessories are never listed.
CREATE INDEX artifacts_accessory_idx ON artifacts (repository_id, id) WHERE accessory_type IS NOT NULL;

-- A repository's listing version: it changes whenever an artifact enters or
-- leaves one of its listings (Harbor's base set, `tags=*`, `tags=nil`,
-- `base=*`) or moves in their order (a new push time), so that the starts of
-- a listing's deep pages, found once, serve until it changes.
ALTER TABLE repositories ADD COLUMN listing_version BIGINT NOT NULL DEFAULT 0;

CREATE OR REPLACE FUNCTION berth_count_listing() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        UPDATE repositories SET
            artifact_count = artifact_count + 1,
            listed_count = listed_count + NEW.listed,
            tagged_count = tagged_count + berth_artifact_tagged(NEW.listed, NEW.tag_count),
            listing_version = listing_version + 1
        WHERE id = NEW.repository_id;
    ELSIF TG_OP = 'DELETE' THEN
        UPDATE repositories SET
            artifact_count = artifact_count - 1,
            listed_count = listed_count - OLD.listed,
            tagged_count = tagged_count - berth_artifact_tagged(OLD.listed, OLD.tag_count),
            listing_version = listing_version + 1
        WHERE id = OLD.repository_id;
    ELSE
        UPDATE repositories SET
            listed_count = listed_count + NEW.listed - OLD.listed,
            tagged_count = tagged_count + berth_artifact_tagged(NEW.listed, NEW.tag_count)
                - berth_artifact_tagged(OLD.listed, OLD.tag_count),
            listing_version = listing_version + 1
        WHERE id = NEW.repository_id;
    END IF;
    RETURN NULL;
END
$$;

CREATE FUNCTION berth_listing_reordered() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE repositories SET listing_version = listing_version + 1 WHERE id = NEW.repository_id;
    RETURN NULL;
END
$$;

CREATE TRIGGER artifacts_listing_reordered AFTER UPDATE OF push_time ON artifacts
FOR EACH ROW WHEN (OLD.push_time <> NEW.push_time) EXECUTE FUNCTION berth_listing_reordered();
