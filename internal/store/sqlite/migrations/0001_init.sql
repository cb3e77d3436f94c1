-- Times are INTEGER unix microseconds in UTC: they sort numerically and
-- round-trip exactly at the precision proto.Time encodes.
-- Tables are STRICT so a wrongly typed bind fails loudly instead of being
-- stored with a surprising affinity.

CREATE TABLE workspaces (
    id           TEXT    NOT NULL PRIMARY KEY,
    path         TEXT    NOT NULL UNIQUE,
    created_at   INTEGER NOT NULL,
    seq_reserved INTEGER NOT NULL DEFAULT 0
) STRICT;

CREATE TABLE sessions (
    id               TEXT    NOT NULL PRIMARY KEY,
    workspace_id     TEXT    NOT NULL REFERENCES workspaces (id),
    title            TEXT    NOT NULL DEFAULT '',
    model            TEXT    NOT NULL DEFAULT '',
    reasoning_effort TEXT    NOT NULL DEFAULT '',
    config           TEXT,   -- JSON, opaque to the store; NULL when empty
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL
) STRICT;

-- Serves ListSessions without a sort step.
CREATE INDEX sessions_by_workspace
    ON sessions (workspace_id, updated_at DESC, created_at DESC, id);

-- ord is the order key: SQLite allows AUTOINCREMENT only on the INTEGER
-- PRIMARY KEY, so the message id is the UNIQUE natural key instead. An upsert
-- on id updates the row in place and keeps ord; AUTOINCREMENT never reuses a
-- value, so a message put after a delete still sorts last.
CREATE TABLE messages (
    ord        INTEGER PRIMARY KEY AUTOINCREMENT,
    id         TEXT    NOT NULL UNIQUE,
    session_id TEXT    NOT NULL,
    data       TEXT    NOT NULL -- the whole proto.Message as JSON
) STRICT;

CREATE INDEX messages_by_session ON messages (session_id, ord);

CREATE TABLE events (
    workspace_id TEXT    NOT NULL,
    seq          INTEGER NOT NULL,
    session_id   TEXT    NOT NULL DEFAULT '', -- '' for workspace-level events
    run_id       TEXT    NOT NULL DEFAULT '',
    type         TEXT    NOT NULL,
    in_history   INTEGER NOT NULL DEFAULT 0,
    envelope     BLOB    NOT NULL,
    PRIMARY KEY (workspace_id, seq)
) STRICT;

CREATE INDEX events_by_session ON events (session_id, seq);

CREATE TABLE pending (
    request_id   TEXT    NOT NULL PRIMARY KEY,
    workspace_id TEXT    NOT NULL,
    session_id   TEXT    NOT NULL DEFAULT '',
    run_id       TEXT    NOT NULL DEFAULT '',
    kind         TEXT    NOT NULL,
    data         TEXT,   -- JSON; NULL when empty
    created_at   INTEGER NOT NULL
) STRICT;

CREATE INDEX pending_by_workspace ON pending (workspace_id, created_at);
CREATE INDEX pending_by_session ON pending (session_id);
