-- A request's answer is decided in the store, as SQLite's migration 0013:
-- the first answer sets resolved by a conditional update (WHERE NOT
-- resolved), so of answers racing on one request exactly one wins,
-- whichever node gives it.
ALTER TABLE pending ADD COLUMN resolved boolean NOT NULL DEFAULT false;

-- Rows written before this column: the broker's record says "resolved"
-- when it was. Data that is not JSON is not that record, and must not
-- stop the migration.
DO $$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT request_id, data FROM pending WHERE data LIKE '%"resolved":true%' LOOP
        BEGIN
            IF (r.data::jsonb ->> 'resolved') = 'true' THEN
                UPDATE pending SET resolved = true WHERE request_id = r.request_id;
            END IF;
        EXCEPTION WHEN invalid_text_representation THEN
            NULL;
        END;
    END LOOP;
END
$$;
