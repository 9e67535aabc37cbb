-- `q=tags=~<text>` finds the tags of a repository whose name contains a text.
-- A scan of every tag name of the repository costs in proportion to its tags;
-- instead every three-character piece of each name (a trigram) is kept with
-- the tag, by repository, so that a text of three or more characters reads
-- only the tags holding its trigrams, which are then checked whole.
-- Triggers keep the pieces for every write path.
-- Keep in step with the other backend's file of the same name.
CREATE TABLE tag_trigrams (
    repository_id BIGINT NOT NULL,
    trigram TEXT NOT NULL,
    tag_id BIGINT NOT NULL,
    PRIMARY KEY (repository_id, trigram, tag_id)
) WITHOUT ROWID;

-- Where a trigram may start in a tag name (at most 128 characters).
CREATE TABLE trigram_starts (n INTEGER PRIMARY KEY);
INSERT INTO trigram_starts (n)
SELECT a.d + 10 * b.d + 1 FROM
    (SELECT 0 AS d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4
     UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) a,
    (SELECT 0 AS d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4
     UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9
     UNION ALL SELECT 10 UNION ALL SELECT 11 UNION ALL SELECT 12) b
WHERE a.d + 10 * b.d + 1 <= 126;

INSERT INTO tag_trigrams (repository_id, trigram, tag_id)
SELECT DISTINCT t.repository_id, substr(t.name, s.n, 3), t.id
FROM tags t JOIN trigram_starts s ON s.n <= length(t.name) - 2;

CREATE TRIGGER tag_trigrams_on_insert AFTER INSERT ON tags
BEGIN
    INSERT INTO tag_trigrams (repository_id, trigram, tag_id)
    SELECT DISTINCT NEW.repository_id, substr(NEW.name, s.n, 3), NEW.id
    FROM trigram_starts s WHERE s.n <= length(NEW.name) - 2;
END;

CREATE TRIGGER tag_trigrams_on_delete AFTER DELETE ON tags
BEGIN
    DELETE FROM tag_trigrams WHERE repository_id = OLD.repository_id AND tag_id = OLD.id
        AND trigram IN (SELECT substr(OLD.name, s.n, 3) FROM trigram_starts s WHERE s.n <= length(OLD.name) - 2);
END;

CREATE TRIGGER tag_trigrams_on_rename AFTER UPDATE OF name, repository_id ON tags
BEGIN
    DELETE FROM tag_trigrams WHERE repository_id = OLD.repository_id AND tag_id = OLD.id
        AND trigram IN (SELECT substr(OLD.name, s.n, 3) FROM trigram_starts s WHERE s.n <= length(OLD.name) - 2);
    INSERT INTO tag_trigrams (repository_id, trigram, tag_id)
    SELECT DISTINCT NEW.repository_id, substr(NEW.name, s.n, 3), NEW.id
    FROM trigram_starts s WHERE s.n <= length(NEW.name) - 2;
END;
