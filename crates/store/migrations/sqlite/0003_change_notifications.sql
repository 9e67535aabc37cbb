-- Nothing to do on SQLite: one process owns the database, and the store bumps
-- its change counters in process (crates/store/src/changes.rs). This file keeps
-- the version numbers of both dialects in step.
SELECT 1;
