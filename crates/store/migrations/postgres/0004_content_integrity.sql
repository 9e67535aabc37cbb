-- Content integrity: blobs visible per repository, upload sessions made of
-- parts written by one request each, and the digest algorithm of an upload.
-- Keep in step with the other backend's file of the same name.

-- A blob is addressable in a repository only through a row here; the row goes
-- with the project link it belongs to (GC drops project links).
CREATE TABLE repository_blobs (
    project_id BIGINT NOT NULL,
    blob_id BIGINT NOT NULL,
    repository TEXT COLLATE "C" NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (repository, blob_id),
    FOREIGN KEY (project_id, blob_id) REFERENCES project_blobs (project_id, blob_id) ON DELETE CASCADE
);
CREATE INDEX repository_blobs_link_idx ON repository_blobs (project_id, blob_id);

-- Existing content stays visible where a manifest of the repository uses it.
INSERT INTO repository_blobs (project_id, blob_id, repository, created_at)
SELECT a.project_id, ab.blob_id, r.name, MIN(a.push_time)
FROM artifact_blobs ab
JOIN artifacts a ON a.id = ab.artifact_id
JOIN repositories r ON r.id = a.repository_id
WHERE EXISTS (SELECT 1 FROM project_blobs pb WHERE pb.project_id = a.project_id AND pb.blob_id = ab.blob_id)
GROUP BY a.project_id, ab.blob_id, r.name;

-- Sessions of the old single-file layout cannot be continued; clients start again.
DELETE FROM uploads;
ALTER TABLE uploads ADD COLUMN algorithm TEXT NOT NULL DEFAULT 'sha256';
ALTER TABLE uploads ADD COLUMN parts BIGINT NOT NULL DEFAULT 0;

-- The parts of an upload, in order; each names a file in the upload's directory.
CREATE TABLE upload_parts (
    upload_id TEXT NOT NULL REFERENCES uploads (id) ON DELETE CASCADE,
    number BIGINT NOT NULL,
    name TEXT NOT NULL,
    size BIGINT NOT NULL,
    PRIMARY KEY (upload_id, number)
);
