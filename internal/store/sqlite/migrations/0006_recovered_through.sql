-- Every run accepted at or below this seq of the workspace's log has
-- completed, so recovery after a crash reads only the log above it instead
-- of the whole log at every start.
ALTER TABLE workspaces ADD COLUMN recovered_through INTEGER NOT NULL DEFAULT 0;
