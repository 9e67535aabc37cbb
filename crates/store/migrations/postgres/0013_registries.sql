-- Upstream registries (Harbor's /registries) and proxy-cache projects: a
-- project with a registry_id pulls through that registry and takes no pushes.
-- The access secret is sealed (berth_domain::sealing) with the context
-- 'registries/<id>/access_secret'; empty when there is none. A registry a
-- project still uses cannot be deleted (the store answers 412 first; the
-- foreign key is the backstop against a race).
-- projects.registry_id existed since 0001 without a reference and was never
-- written; here it gets its constraint in place (the SQLite file, which cannot
-- add one to a column, drops the column and adds it again).
-- Keep in step with the other backend's file of the same name.
CREATE TABLE registries (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name TEXT NOT NULL,
    url TEXT NOT NULL,
    type TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    insecure BIGINT NOT NULL DEFAULT 0 CHECK (insecure IN (0, 1)),
    ca_certificate TEXT NOT NULL DEFAULT '',
    credential_type TEXT NOT NULL DEFAULT '',
    access_key TEXT NOT NULL DEFAULT '',
    access_secret TEXT NOT NULL DEFAULT '',
    status TEXT NOT NULL DEFAULT '',
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE UNIQUE INDEX registries_name_key ON registries (name);

UPDATE projects SET registry_id = NULL WHERE registry_id IS NOT NULL;
ALTER TABLE projects ADD CONSTRAINT projects_registry_fk
    FOREIGN KEY (registry_id) REFERENCES registries (id) ON DELETE RESTRICT;
CREATE INDEX projects_registry_idx ON projects (registry_id);
