-- Checkpoints and rewound history (contract section 11), as SQLite's
-- migration 0011. A rewound message stays for audit but leaves the
-- history the model and the default message list read. A checkpoint's
-- files are in the owner's shadow repository; commit_hash names them
-- there. seq orders a session's checkpoints.
ALTER TABLE messages ADD COLUMN rewound boolean NOT NULL DEFAULT false;

CREATE TABLE checkpoints (
    seq          bigint           GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id           text COLLATE "C" NOT NULL UNIQUE,
    workspace_id text COLLATE "C" NOT NULL,
    session_id   text COLLATE "C" NOT NULL,
    run_id       text COLLATE "C" NOT NULL,
    message_id   text COLLATE "C" NOT NULL DEFAULT '',
    commit_hash  text             NOT NULL,
    end_hash     text             NOT NULL DEFAULT '',
    created_at   timestamptz      NOT NULL
);

CREATE INDEX checkpoints_by_session ON checkpoints (session_id, seq);
