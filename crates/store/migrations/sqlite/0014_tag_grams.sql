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
