-- People's tokens (contract section 9): the secret is never kept, only
-- its SHA-256 (hash). A name is unique among tokens not revoked; an
-- expired one is marked revoked when its name is taken again. Times are
-- microseconds since the epoch, 0 for none.
CREATE TABLE tokens (
    id           TEXT    PRIMARY KEY,
    name         TEXT    NOT NULL,
    role         TEXT    NOT NULL,
    hash         TEXT    NOT NULL UNIQUE,
    created_at   INTEGER NOT NULL,
    expires_at   INTEGER NOT NULL DEFAULT 0,
    last_used_at INTEGER NOT NULL DEFAULT 0,
    revoked_at   INTEGER NOT NULL DEFAULT 0
) STRICT;

CREATE UNIQUE INDEX tokens_live_name ON tokens (name) WHERE revoked_at = 0;

-- The audit log: who did what, refusals included, in the order it happened.
CREATE TABLE audit (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    time         INTEGER NOT NULL,
    token_id     TEXT    NOT NULL,
    name         TEXT    NOT NULL,
    client_id    TEXT    NOT NULL,
    action       TEXT    NOT NULL,
    workspace_id TEXT    NOT NULL,
    session_id   TEXT    NOT NULL,
    run_id       TEXT    NOT NULL,
    detail       TEXT    NOT NULL
) STRICT;
