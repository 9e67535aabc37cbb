-- Registry content: repositories, blobs, manifests, artifacts, tags, labels,
-- upload sessions and GC runs. Keep in step with ../postgres/0002_registry_content.sql.

CREATE TABLE repositories (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    project_id BIGINT NOT NULL REFERENCES projects (id) ON DELETE RESTRICT,
    name TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    pull_count BIGINT NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE UNIQUE INDEX repositories_name_key ON repositories (name);
CREATE INDEX repositories_project_idx ON repositories (project_id, created_at, id);
CREATE INDEX repositories_created_idx ON repositories (created_at, id);

CREATE TABLE blobs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    digest TEXT NOT NULL,
    size BIGINT NOT NULL,
    media_type TEXT NOT NULL DEFAULT '',
    version BIGINT NOT NULL DEFAULT 0,
    deleting BIGINT NOT NULL DEFAULT 0 CHECK (deleting IN (0, 1)),
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE UNIQUE INDEX blobs_digest_key ON blobs (digest);

CREATE TABLE manifest_bodies (
    blob_id BIGINT PRIMARY KEY REFERENCES blobs (id) ON DELETE CASCADE,
    body BLOB NOT NULL
);

CREATE TABLE project_blobs (
    project_id BIGINT NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    blob_id BIGINT NOT NULL REFERENCES blobs (id) ON DELETE RESTRICT,
    version BIGINT NOT NULL DEFAULT 0,
    pending_since TEXT,
    created_at TEXT NOT NULL,
    PRIMARY KEY (project_id, blob_id)
);
CREATE INDEX project_blobs_blob_idx ON project_blobs (blob_id);

CREATE TABLE artifacts (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    project_id BIGINT NOT NULL REFERENCES projects (id) ON DELETE RESTRICT,
    repository_id BIGINT NOT NULL REFERENCES repositories (id) ON DELETE RESTRICT,
    digest TEXT NOT NULL,
    manifest_blob_id BIGINT NOT NULL REFERENCES blobs (id) ON DELETE RESTRICT,
    manifest_media_type TEXT NOT NULL,
    media_type TEXT NOT NULL,
    artifact_type TEXT NOT NULL,
    type TEXT NOT NULL,
    size BIGINT NOT NULL,
    icon TEXT NOT NULL DEFAULT '',
    subject_digest TEXT,
    accessory_type TEXT,
    push_time TEXT NOT NULL,
    pull_time TEXT NOT NULL DEFAULT '0001-01-01T00:00:00.000Z',
    extra_attrs TEXT NOT NULL DEFAULT '{}',
    annotations TEXT
);
CREATE UNIQUE INDEX artifacts_repository_digest_key ON artifacts (repository_id, digest);
CREATE INDEX artifacts_repository_push_idx ON artifacts (repository_id, push_time, id);
CREATE INDEX artifacts_subject_idx ON artifacts (repository_id, subject_digest) WHERE subject_digest IS NOT NULL;
CREATE INDEX artifacts_manifest_blob_idx ON artifacts (manifest_blob_id);

CREATE TABLE artifact_blobs (
    artifact_id BIGINT NOT NULL REFERENCES artifacts (id) ON DELETE CASCADE,
    blob_id BIGINT NOT NULL REFERENCES blobs (id) ON DELETE RESTRICT,
    PRIMARY KEY (artifact_id, blob_id)
);
CREATE INDEX artifact_blobs_blob_idx ON artifact_blobs (blob_id);

CREATE TABLE artifact_references (
    parent_id BIGINT NOT NULL REFERENCES artifacts (id) ON DELETE CASCADE,
    child_id BIGINT NOT NULL REFERENCES artifacts (id) ON DELETE RESTRICT,
    child_digest TEXT NOT NULL,
    platform TEXT,
    urls TEXT,
    annotations TEXT,
    PRIMARY KEY (parent_id, child_id)
);
CREATE INDEX artifact_references_child_idx ON artifact_references (child_id);

CREATE TABLE tags (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    repository_id BIGINT NOT NULL REFERENCES repositories (id) ON DELETE RESTRICT,
    artifact_id BIGINT NOT NULL REFERENCES artifacts (id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    push_time TEXT NOT NULL,
    pull_time TEXT NOT NULL DEFAULT '0001-01-01T00:00:00.000Z'
);
CREATE UNIQUE INDEX tags_repository_name_key ON tags (repository_id, name);
CREATE INDEX tags_artifact_idx ON tags (artifact_id);

CREATE TABLE labels (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    color TEXT NOT NULL DEFAULT '',
    scope TEXT NOT NULL CHECK (scope IN ('g', 'p')),
    project_id BIGINT REFERENCES projects (id) ON DELETE CASCADE,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    CHECK ((scope = 'g') = (project_id IS NULL))
);
CREATE UNIQUE INDEX labels_name_key ON labels (name, scope, COALESCE(project_id, 0));
CREATE INDEX labels_project_idx ON labels (project_id);

CREATE TABLE label_references (
    label_id BIGINT NOT NULL REFERENCES labels (id) ON DELETE CASCADE,
    artifact_id BIGINT NOT NULL REFERENCES artifacts (id) ON DELETE CASCADE,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (artifact_id, label_id)
);
CREATE INDEX label_references_label_idx ON label_references (label_id);

CREATE TABLE uploads (
    id TEXT PRIMARY KEY,
    project_id BIGINT NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    repository TEXT NOT NULL,
    bytes_received BIGINT NOT NULL DEFAULT 0,
    hash_state BLOB,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE INDEX uploads_updated_idx ON uploads (updated_at);

CREATE TABLE gc_runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    status TEXT NOT NULL CHECK (status IN ('running', 'done', 'failed')),
    started_at TEXT NOT NULL,
    heartbeat_at TEXT NOT NULL,
    finished_at TEXT,
    stats TEXT NOT NULL DEFAULT '{}'
);
CREATE UNIQUE INDEX gc_runs_running_key ON gc_runs (status) WHERE status = 'running';
