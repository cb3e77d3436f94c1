-- A session's usage, as SQLite's migration 0008: the sum of what its ended
-- runs' model requests consumed (contract section 4), and the size of its
-- conversation as its last run left it. A run's end adds its usage in the
-- transaction that writes run.completed, so it is counted once, crash or
-- not. cost_usd is NULL until a run with known prices added to it.
ALTER TABLE sessions
    ADD COLUMN input_tokens       bigint           NOT NULL DEFAULT 0,
    ADD COLUMN output_tokens      bigint           NOT NULL DEFAULT 0,
    ADD COLUMN cache_read_tokens  bigint           NOT NULL DEFAULT 0,
    ADD COLUMN cache_write_tokens bigint           NOT NULL DEFAULT 0,
    ADD COLUMN reasoning_tokens   bigint           NOT NULL DEFAULT 0,
    ADD COLUMN cost_usd           double precision,
    ADD COLUMN context_tokens     bigint           NOT NULL DEFAULT 0;
