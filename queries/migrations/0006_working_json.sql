-- The Working is kept as the canonical bytes that were digested, like
-- revision documents: jsonb rewrote number literals (1e2 became 100), so a
-- Working read back no longer matched its digest and every snapshot of an
-- unchanged Working made a new revision.
alter table definitions alter column working type json using working::json;
