-- Workspace ownership for clusters (contract section 8). A lease is held
-- while expires_at is in the future by the database's clock; NULL is a
-- released lease. epoch grows by one with each new owner.
CREATE TABLE workspace_leases (
    workspace_id text COLLATE "C" NOT NULL PRIMARY KEY,
    owner        text             NOT NULL,
    epoch        bigint           NOT NULL,
    expires_at   timestamptz
);

-- tandem_fence is the first statement of every fenced write: it fails the
-- transaction (SQLSTATE TD001) unless the lease is still held at that
-- epoch. FOR SHARE keeps the row locked until the write commits, so a
-- takeover (an UPDATE of the row) waits for writes already past the check,
-- and a check that waited for a takeover sees its new epoch and fails.
CREATE FUNCTION tandem_fence(ws text, ep bigint, holder text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM workspace_leases
        WHERE workspace_id = ws AND epoch = ep AND owner = holder AND expires_at > now()
        FOR SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'lease of workspace % at epoch % is not held by %', ws, ep, holder
            USING ERRCODE = 'TD001';
    END IF;
END
$$;
