-- Every accepted prompt and every finished run moves its session's
-- updated_at. With updated_at in the index, each move also rewrote an index
-- page in the commit a 202 waits for. A workspace has few sessions, so
-- ListSessions sorts them instead.
DROP INDEX sessions_by_workspace;
CREATE INDEX sessions_by_workspace ON sessions (workspace_id);
