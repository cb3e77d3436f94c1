-- The idempotency keys of accepted prompts, as SQLite's migration 0014: a
-- retried prompt whose key its session accepted within the last 24 hours
-- is that run, on whichever node it arrives. Written in the run.accepted's
-- transaction; each write drops the session's keys past 24 hours, and the
-- session's delete takes them all. accepted_at is in Unix milliseconds.
CREATE TABLE prompt_keys (
    session_id  text COLLATE "C" NOT NULL,
    idem_key    text COLLATE "C" NOT NULL,
    run_id      text COLLATE "C" NOT NULL,
    accepted_at bigint           NOT NULL,
    PRIMARY KEY (session_id, idem_key)
);
