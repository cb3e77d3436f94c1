-- The attachments of accepted prompts, as read when each was accepted
-- (a file's content, not its path), kept until their run ends: the
-- transaction that writes run.completed deletes them. A run queued when
-- its server died thus runs, or ends, with them. seq is the run.accepted
-- event's, for their order; the session's delete takes them too.
CREATE TABLE run_attachments (
    run_id     TEXT    NOT NULL,
    message_id TEXT    NOT NULL, -- '' for the run's own prompt, else a steered prompt's message
    session_id TEXT    NOT NULL,
    seq        INTEGER NOT NULL,
    data       BLOB    NOT NULL,
    PRIMARY KEY (run_id, message_id)
) STRICT;

CREATE INDEX run_attachments_by_session ON run_attachments (session_id);
