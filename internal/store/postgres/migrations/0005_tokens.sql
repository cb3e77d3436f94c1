-- People's tokens and the audit log, as SQLite's migration 0010: only the
-- SHA-256 of a secret is kept; a name is unique among tokens not revoked.
CREATE TABLE tokens (
    id           text COLLATE "C" PRIMARY KEY,
    name         text COLLATE "C" NOT NULL,
    role         text COLLATE "C" NOT NULL,
    hash         text COLLATE "C" NOT NULL UNIQUE,
    created_at   timestamptz NOT NULL,
    expires_at   timestamptz,
    last_used_at timestamptz,
    revoked_at   timestamptz
);

CREATE UNIQUE INDEX tokens_live_name ON tokens (name) WHERE revoked_at IS NULL;

CREATE TABLE audit (
    id           bigserial PRIMARY KEY,
    time         timestamptz NOT NULL,
    token_id     text COLLATE "C" NOT NULL,
    name         text COLLATE "C" NOT NULL,
    client_id    text COLLATE "C" NOT NULL,
    action       text COLLATE "C" NOT NULL,
    workspace_id text COLLATE "C" NOT NULL,
    session_id   text COLLATE "C" NOT NULL,
    run_id       text COLLATE "C" NOT NULL,
    detail       text NOT NULL
);
