-- Quota usage follows what the project's artifacts still use (issue #33).
-- A project link stays while its blob is addressable (until garbage
-- collection, as before), but it is charged to the project's quota only
-- while an artifact of the project uses the blob, or a push of it (upload or
-- mount) awaits its manifest: a delete that leaves a link neither uncharges
-- it and releases its size in the same transaction, and a later push that
-- uses the link charges it again, within the limit. Usage is the sum of the
-- sizes of the project's charged links.
-- Keep in step with the other backend's file of the same name.
ALTER TABLE project_blobs ADD COLUMN charged BIGINT NOT NULL DEFAULT 1 CHECK (charged IN (0, 1));

-- Links that deletes before this version left charged are uncharged, and
-- every project's usage is recounted from its charged links.
UPDATE project_blobs SET charged = 0
WHERE pending_since IS NULL AND NOT EXISTS (
    SELECT 1 FROM artifact_blobs ab JOIN artifacts a ON a.id = ab.artifact_id
    WHERE a.project_id = project_blobs.project_id AND ab.blob_id = project_blobs.blob_id
);
UPDATE project_quotas SET used = (
    SELECT CAST(COALESCE(SUM(b.size), 0) AS BIGINT) FROM project_blobs pb JOIN blobs b ON b.id = pb.blob_id
    WHERE pb.project_id = project_quotas.project_id AND pb.charged = 1
);
