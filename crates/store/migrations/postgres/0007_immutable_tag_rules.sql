-- Immutable tag rules (Harbor's /projects/{p}/immutabletagrules). The selectors
-- are kept as the API gave them (JSON), matched in the domain code.
-- Keep in step with the other backend's file of the same name.
CREATE TABLE immutable_tag_rules (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    project_id BIGINT NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    priority BIGINT NOT NULL DEFAULT 0,
    disabled BIGINT NOT NULL DEFAULT 0,
    tag_selectors TEXT NOT NULL,
    scope_selectors TEXT NOT NULL,
    params TEXT NOT NULL DEFAULT '{}',
    created_at TEXT NOT NULL
);
CREATE INDEX immutable_tag_rules_project_idx ON immutable_tag_rules (project_id, id);
