-- The attachments of accepted prompts, as SQLite's migration 0009: as read
-- when each was accepted, kept until their run ends (the transaction that
-- writes run.completed deletes them), so a run queued on an owner that died
-- runs with them on the next. seq is the run.accepted event's, for their
-- order; the session's delete takes them too.
CREATE TABLE run_attachments (
    run_id     text COLLATE "C" NOT NULL,
    message_id text COLLATE "C" NOT NULL, -- '' for the run's own prompt, else a steered prompt's message
    session_id text COLLATE "C" NOT NULL,
    seq        bigint           NOT NULL,
    data       bytea            NOT NULL,
    PRIMARY KEY (run_id, message_id)
);

CREATE INDEX run_attachments_by_session ON run_attachments (session_id);
