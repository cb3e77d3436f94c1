-- A session's usage: the sum of what its ended runs' model requests
-- consumed (contract section 4), and the size of its conversation as its
-- last run left it. A run's end adds its usage in the transaction that
-- writes run.completed, so it is counted once, crash or not. cost_usd is
-- NULL until a run with known prices added to it.
ALTER TABLE sessions ADD COLUMN input_tokens       INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN output_tokens      INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN cache_read_tokens  INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN cache_write_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN reasoning_tokens   INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN cost_usd           REAL;
ALTER TABLE sessions ADD COLUMN context_tokens     INTEGER NOT NULL DEFAULT 0;
