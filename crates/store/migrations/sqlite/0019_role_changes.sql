-- Nothing to do on SQLite: one process owns the database, and the server bumps
-- the registry's change counter in process after every change of memberships
-- (crates/store/src/changes.rs, Topic::Registry). This file keeps the version
-- numbers of both dialects in step.
SELECT 1;
