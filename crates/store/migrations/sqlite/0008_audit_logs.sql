-- Audit logs (Harbor's /audit-logs and /projects/{p}/logs): who did what when.
-- Rows are only ever added (and pruned by age); project_id is NULL for
-- system-level operations (users, configuration).
-- Keep in step with the other backend's file of the same name.
CREATE TABLE audit_logs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    project_id BIGINT REFERENCES projects (id) ON DELETE SET NULL,
    operation TEXT NOT NULL,
    resource_type TEXT NOT NULL,
    resource TEXT NOT NULL,
    username TEXT NOT NULL,
    op_time TEXT NOT NULL
);
CREATE INDEX audit_logs_time_idx ON audit_logs (op_time, id);
CREATE INDEX audit_logs_project_idx ON audit_logs (project_id, op_time, id);
CREATE INDEX audit_logs_username_idx ON audit_logs (username, op_time);
CREATE INDEX audit_logs_operation_idx ON audit_logs (operation, op_time);
