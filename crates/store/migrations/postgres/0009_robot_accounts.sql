-- Robot accounts (Harbor's /robots). project_id is set for project-level
-- robots, which go with their project; a system robot's permissions on a
-- project go with that project. A permission row with kind 'project' and no
-- project_id covers every project ('*'); kind 'system' is the system scope.
-- The secret is kept as a PHC hash only.
-- Keep in step with the other backend's file of the same name.
CREATE TABLE robots (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    project_id BIGINT REFERENCES projects (id) ON DELETE CASCADE,
    secret_hash TEXT NOT NULL,
    duration BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    disabled BIGINT NOT NULL DEFAULT 0,
    creator_type TEXT NOT NULL,
    creator_ref BIGINT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE UNIQUE INDEX robots_name_idx ON robots (name);
CREATE INDEX robots_project_idx ON robots (project_id, id);

CREATE TABLE robot_permissions (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    robot_id BIGINT NOT NULL REFERENCES robots (id) ON DELETE CASCADE,
    kind TEXT NOT NULL,
    project_id BIGINT REFERENCES projects (id) ON DELETE CASCADE,
    resource TEXT NOT NULL,
    action TEXT NOT NULL,
    effect TEXT NOT NULL DEFAULT ''
);
CREATE INDEX robot_permissions_robot_idx ON robot_permissions (robot_id, id);
CREATE INDEX robot_permissions_project_idx ON robot_permissions (project_id, robot_id);
