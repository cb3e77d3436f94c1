-- The idempotency keys of accepted prompts: a retried prompt whose key its
-- session accepted within the last 24 hours is that run, not a second one.
-- Written in the run.accepted's transaction, so a run is never on disk
-- without its key; each write drops the session's keys past 24 hours, and
-- the session's delete takes them all. accepted_at is in Unix milliseconds.
CREATE TABLE prompt_keys (
    session_id  TEXT    NOT NULL,
    idem_key    TEXT    NOT NULL,
    run_id      TEXT    NOT NULL,
    accepted_at INTEGER NOT NULL,
    PRIMARY KEY (session_id, idem_key)
) STRICT;
