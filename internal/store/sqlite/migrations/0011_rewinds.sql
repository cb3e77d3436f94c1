-- Checkpoints and rewound history (contract section 11). A rewound
-- message stays for audit but leaves the history the model and the
-- default message list read. A checkpoint's files are in the workspace's
-- shadow repository in the data dir; commit names them there.
ALTER TABLE messages ADD COLUMN rewound INTEGER NOT NULL DEFAULT 0;

CREATE TABLE checkpoints (
    id           TEXT    NOT NULL PRIMARY KEY,
    workspace_id TEXT    NOT NULL,
    session_id   TEXT    NOT NULL,
    run_id       TEXT    NOT NULL,
    message_id   TEXT    NOT NULL DEFAULT '',
    commit_hash  TEXT    NOT NULL,
    end_hash     TEXT    NOT NULL DEFAULT '', -- the files as the run left them
    created_at   INTEGER NOT NULL
) STRICT;

CREATE INDEX checkpoints_by_session ON checkpoints (session_id, created_at);
