-- `q=tags=~<text>` finds the tags of a repository whose name contains a text.
-- A scan of every tag name of the repository costs in proportion to its tags;
-- instead every three-character piece of each name (a trigram) is kept with
-- the tag, by repository, so that a text of three or more characters reads
-- only the tags holding its trigrams, which are then checked whole.
-- Triggers keep the pieces for every write path.
-- Keep in step with the other backend's file of the same name.
CREATE TABLE tag_trigrams (
    repository_id BIGINT NOT NULL,
    trigram TEXT COLLATE "C" NOT NULL,
    tag_id BIGINT NOT NULL,
    PRIMARY KEY (repository_id, trigram, tag_id)
);

INSERT INTO tag_trigrams (repository_id, trigram, tag_id)
SELECT DISTINCT t.repository_id, substr(t.name, s.n, 3), t.id
FROM tags t CROSS JOIN LATERAL generate_series(1, length(t.name) - 2) AS s(n);

CREATE FUNCTION berth_tag_trigrams() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('DELETE', 'UPDATE') THEN
        DELETE FROM tag_trigrams WHERE repository_id = OLD.repository_id AND tag_id = OLD.id
            AND trigram IN (SELECT substr(OLD.name, n, 3) FROM generate_series(1, length(OLD.name) - 2) AS n);
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        INSERT INTO tag_trigrams (repository_id, trigram, tag_id)
        SELECT DISTINCT NEW.repository_id, substr(NEW.name, n, 3), NEW.id
        FROM generate_series(1, length(NEW.name) - 2) AS n;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER tag_trigrams_kept AFTER INSERT OR DELETE OR UPDATE OF name, repository_id
ON tags FOR EACH ROW EXECUTE FUNCTION berth_tag_trigrams();
