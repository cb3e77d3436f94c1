-- The store's tables, as SQLite's migrations 0001 to 0007 left them.
-- Keys and names use the "C" collation, so they compare and sort byte by
-- byte, as in SQLite, whatever the database's locale.
-- ord columns are insertion order, the tie-break of lists SQLite gets from
-- its rowid.

CREATE TABLE workspaces (
    id                text COLLATE "C" NOT NULL PRIMARY KEY,
    path              text COLLATE "C" NOT NULL UNIQUE,
    created_at        timestamptz      NOT NULL,
    seq_reserved      bigint           NOT NULL DEFAULT 0,
    recovered_through bigint           NOT NULL DEFAULT 0,
    ord               bigint           GENERATED ALWAYS AS IDENTITY
);

CREATE TABLE sessions (
    id               text COLLATE "C" NOT NULL PRIMARY KEY,
    workspace_id     text COLLATE "C" NOT NULL REFERENCES workspaces (id),
    title            text             NOT NULL DEFAULT '',
    model            text             NOT NULL DEFAULT '',
    reasoning_effort text             NOT NULL DEFAULT '',
    config           text,            -- JSON, opaque to the store; NULL when empty
    created_at       timestamptz      NOT NULL,
    updated_at       timestamptz      NOT NULL,
    -- Kept by the messages triggers, so reading a session costs the same
    -- however long its conversation is.
    message_count    integer          NOT NULL DEFAULT 0
);

-- A workspace has few sessions: ListSessions sorts them. Keeping
-- updated_at out of the index spares every touch an index update.
CREATE INDEX sessions_by_workspace ON sessions (workspace_id);

-- A message's session never changes (PutMessage leaves session_id alone).
-- data is text, not jsonb: it comes back byte for byte as it was put.
CREATE TABLE messages (
    ord        bigint           GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id         text COLLATE "C" NOT NULL UNIQUE,
    session_id text COLLATE "C" NOT NULL,
    data       text             NOT NULL -- the whole proto.Message as JSON
);

CREATE INDEX messages_by_session ON messages (session_id, ord);

CREATE FUNCTION tandem_count_messages() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        UPDATE sessions SET message_count = message_count + 1 WHERE id = NEW.session_id;
    ELSE
        UPDATE sessions SET message_count = message_count - 1 WHERE id = OLD.session_id;
    END IF;
    RETURN NULL;
END
$$;

-- An upsert that updates fires no AFTER INSERT trigger: only new rows count.
CREATE TRIGGER messages_count AFTER INSERT OR DELETE ON messages
    FOR EACH ROW EXECUTE FUNCTION tandem_count_messages();

CREATE TABLE events (
    workspace_id text COLLATE "C" NOT NULL,
    seq          bigint           NOT NULL,
    session_id   text COLLATE "C" NOT NULL DEFAULT '', -- '' for workspace-level events
    run_id       text COLLATE "C" NOT NULL DEFAULT '',
    type         text             NOT NULL,
    in_history   boolean          NOT NULL DEFAULT false,
    envelope     bytea            NOT NULL,
    PRIMARY KEY (workspace_id, seq)
);

CREATE INDEX events_by_session ON events (session_id, seq);

-- A settled request stays (a late answer learns it was resolved) but is no
-- longer the workspace's pending work.
CREATE TABLE pending (
    request_id   text COLLATE "C" NOT NULL PRIMARY KEY,
    workspace_id text COLLATE "C" NOT NULL,
    session_id   text COLLATE "C" NOT NULL DEFAULT '',
    run_id       text COLLATE "C" NOT NULL DEFAULT '',
    kind         text             NOT NULL,
    data         text,            -- JSON; NULL when empty
    created_at   timestamptz      NOT NULL,
    settled      boolean          NOT NULL DEFAULT false,
    ord          bigint           GENERATED ALWAYS AS IDENTITY
);

CREATE INDEX pending_open_by_workspace ON pending (workspace_id, created_at, ord) WHERE NOT settled;
CREATE INDEX pending_by_run ON pending (run_id);
CREATE INDEX pending_by_session ON pending (session_id);

CREATE TABLE session_approvals (
    session_id text COLLATE "C" NOT NULL,
    kind       text COLLATE "C" NOT NULL,
    PRIMARY KEY (session_id, kind)
);
