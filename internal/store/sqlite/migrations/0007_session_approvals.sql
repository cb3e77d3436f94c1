-- The kinds of permission a client approved for the rest of a session
-- (approve_session). The contract says that kind is not asked again in that
-- session; kept in memory only, a restart asked again.
CREATE TABLE session_approvals (
    session_id TEXT NOT NULL,
    kind       TEXT NOT NULL,
    PRIMARY KEY (session_id, kind)
) STRICT, WITHOUT ROWID;
