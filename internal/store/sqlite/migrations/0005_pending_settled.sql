-- A pending request is settled once its answer reached its run (or the run
-- gave it up). Settled rows stay so that a late answer still gets
-- 409 already_resolved, but they are no longer work: without this column
-- every permission request, approve_session answer, listing and resume read
-- and decoded every request the workspace ever had.
ALTER TABLE pending ADD COLUMN settled INTEGER NOT NULL DEFAULT 0;

-- Rows written before this column: the broker's record says "applied" when
-- the answer reached the run, which is what settled means. This is the one
-- place the store reads inside data.
UPDATE pending SET settled = 1 WHERE json_extract(data, '$.applied') = 1;

-- Listing a workspace's open requests reads only those.
DROP INDEX pending_by_workspace;
CREATE INDEX pending_open_by_workspace ON pending (workspace_id, created_at) WHERE settled = 0;

-- A run asking again for a tool call it asked before (a revived run replays
-- its step) finds that request among its own.
CREATE INDEX pending_by_run ON pending (run_id);
