-- A request's answer is decided in the store: the first answer sets
-- resolved by a conditional update (WHERE resolved = 0), so of answers
-- racing on one request exactly one wins, whichever process or node gives
-- it, and no lock in memory has to be held while it is written.
ALTER TABLE pending ADD COLUMN resolved INTEGER NOT NULL DEFAULT 0;

-- Rows written before this column: the broker's record says "resolved"
-- when it was.
UPDATE pending SET resolved = 1
WHERE CASE WHEN json_valid(data) THEN json_extract(data, '$.resolved') = 1 ELSE 0 END;
