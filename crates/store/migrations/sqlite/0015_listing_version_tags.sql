-- The totals of tag-text listings (`q=tags=~7`) are remembered under the
-- repository's listing_version (migration 0014). A text's total changes when
-- an artifact gains or loses any tag, not only its first or last one, and
-- when a tag is renamed, so the version now changes then too.
DROP TRIGGER artifacts_listing_counted_on_update;
CREATE TRIGGER artifacts_listing_counted_on_update AFTER UPDATE OF listed, tag_count ON artifacts
WHEN OLD.listed <> NEW.listed OR OLD.tag_count <> NEW.tag_count
BEGIN
    UPDATE repositories SET
        listed_count = listed_count + NEW.listed - OLD.listed,
        tagged_count = tagged_count + (NEW.listed = 1 AND NEW.tag_count > 0) - (OLD.listed = 1 AND OLD.tag_count > 0),
        listing_version = listing_version + 1
    WHERE id = NEW.repository_id;
END;

CREATE TRIGGER tags_renamed AFTER UPDATE OF name ON tags
WHEN OLD.name <> NEW.name
BEGIN
    UPDATE repositories SET listing_version = listing_version + 1 WHERE id = NEW.repository_id;
END;
