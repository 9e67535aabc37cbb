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
-- the primary key, no name read. Each piece carries the tag's artifact, so
-- that the range alone gives the artifacts. Triggers keep the pieces when a
-- tag is added, renamed, moved to another artifact or deleted. The pieces
-- replace migration 0012's table. Keep in step with the other backend's file
-- of the same name.
CREATE TABLE tag_grams (
    repository_id BIGINT NOT NULL,
    gram TEXT NOT NULL,
    tag_id BIGINT NOT NULL,
    artifact_id BIGINT NOT NULL,
    PRIMARY KEY (repository_id, gram, tag_id)
) WITHOUT ROWID;

-- Where a piece may start in a tag name (at most 128 characters).
INSERT INTO trigram_starts (n) VALUES (127), (128);

INSERT INTO tag_grams (repository_id, gram, tag_id, artifact_id)
SELECT DISTINCT t.repository_id, substr(t.name, s.n, 3), t.id, t.artifact_id
FROM tags t JOIN trigram_starts s ON s.n <= length(t.name);

DROP TRIGGER tag_trigrams_on_insert;
DROP TRIGGER tag_trigrams_on_delete;
DROP TRIGGER tag_trigrams_on_rename;
DROP TABLE tag_trigrams;

CREATE TRIGGER tag_grams_on_insert AFTER INSERT ON tags
BEGIN
    INSERT INTO tag_grams (repository_id, gram, tag_id, artifact_id)
    SELECT DISTINCT NEW.repository_id, substr(NEW.name, s.n, 3), NEW.id, NEW.artifact_id
    FROM trigram_starts s WHERE s.n <= length(NEW.name);
END;

CREATE TRIGGER tag_grams_on_delete AFTER DELETE ON tags
BEGIN
    DELETE FROM tag_grams WHERE repository_id = OLD.repository_id AND tag_id = OLD.id
        AND gram IN (SELECT substr(OLD.name, s.n, 3) FROM trigram_starts s WHERE s.n <= length(OLD.name));
END;

CREATE TRIGGER tag_grams_on_rename AFTER UPDATE OF name, repository_id ON tags
BEGIN
    DELETE FROM tag_grams WHERE repository_id = OLD.repository_id AND tag_id = OLD.id
        AND gram IN (SELECT substr(OLD.name, s.n, 3) FROM trigram_starts s WHERE s.n <= length(OLD.name));
    INSERT INTO tag_grams (repository_id, gram, tag_id, artifact_id)
    SELECT DISTINCT NEW.repository_id, substr(NEW.name, s.n, 3), NEW.id, NEW.artifact_id
    FROM trigram_starts s WHERE s.n <= length(NEW.name);
END;

-- A moved tag (a push of its name onto another manifest). With a rename in
-- the same statement, either order of the two triggers ends the same.
CREATE TRIGGER tag_grams_on_move AFTER UPDATE OF artifact_id ON tags
WHEN OLD.artifact_id <> NEW.artifact_id
BEGIN
    UPDATE tag_grams SET artifact_id = NEW.artifact_id
    WHERE repository_id = NEW.repository_id AND tag_id = NEW.id
        AND gram IN (SELECT substr(NEW.name, s.n, 3) FROM trigram_starts s WHERE s.n <= length(NEW.name));
END;

-- The accessories of a repository (few, next to its artifacts): a listing of
-- a short tag text counts its artifacts from the pieces above and takes the
-- accessories among them away, as accessories are never listed.
CREATE INDEX artifacts_accessory_idx ON artifacts (repository_id, id) WHERE accessory_type IS NOT NULL;

-- A repository's listing version: it changes whenever an artifact enters or
-- leaves one of its listings (Harbor's base set, `tags=*`, `tags=nil`,
-- `base=*`) or moves in their order (a new push time), so that the starts of
-- a listing's deep pages, found once, serve until it changes.
ALTER TABLE repositories ADD COLUMN listing_version BIGINT NOT NULL DEFAULT 0;

DROP TRIGGER artifacts_listing_counted_on_insert;
DROP TRIGGER artifacts_listing_counted_on_update;
DROP TRIGGER artifacts_listing_counted_on_delete;

CREATE TRIGGER artifacts_listing_counted_on_insert AFTER INSERT ON artifacts
BEGIN
    UPDATE repositories SET artifact_count = artifact_count + 1, listed_count = listed_count + NEW.listed,
        listing_version = listing_version + 1
    WHERE id = NEW.repository_id;
END;

CREATE TRIGGER artifacts_listing_counted_on_update AFTER UPDATE OF listed, tag_count ON artifacts
WHEN OLD.listed <> NEW.listed OR (OLD.tag_count > 0) <> (NEW.tag_count > 0)
BEGIN
    UPDATE repositories SET
        listed_count = listed_count + NEW.listed - OLD.listed,
        tagged_count = tagged_count + (NEW.listed = 1 AND NEW.tag_count > 0) - (OLD.listed = 1 AND OLD.tag_count > 0),
        listing_version = listing_version + 1
    WHERE id = NEW.repository_id;
END;

CREATE TRIGGER artifacts_listing_counted_on_delete AFTER DELETE ON artifacts
BEGIN
    UPDATE repositories SET
        artifact_count = artifact_count - 1,
        listed_count = listed_count - OLD.listed,
        tagged_count = tagged_count - (OLD.listed = 1 AND OLD.tag_count > 0),
        listing_version = listing_version + 1
    WHERE id = OLD.repository_id;
END;

CREATE TRIGGER artifacts_listing_reordered AFTER UPDATE OF push_time ON artifacts
WHEN OLD.push_time <> NEW.push_time
BEGIN
    UPDATE repositories SET listing_version = listing_version + 1 WHERE id = NEW.repository_id;
END;
