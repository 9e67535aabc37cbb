-- The totals of tag-text listings (`q=tags=~7`) are remembered under the
-- repository's listing_version (migration 0014). A text's total changes when
-- an artifact gains or loses any tag, not only its first or last one, and
-- when a tag is renamed, so the version now changes then too.
DROP TRIGGER artifacts_listing_recounted ON artifacts;
CREATE TRIGGER artifacts_listing_recounted AFTER UPDATE ON artifacts
FOR EACH ROW WHEN (OLD.listed <> NEW.listed OR OLD.tag_count <> NEW.tag_count)
EXECUTE FUNCTION berth_count_listing();

CREATE TRIGGER tags_renamed AFTER UPDATE OF name ON tags
FOR EACH ROW WHEN (OLD.name <> NEW.name) EXECUTE FUNCTION berth_listing_reordered();
