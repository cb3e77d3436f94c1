-- messages.ord was AUTOINCREMENT, which made every new message also rewrite
-- its row in sqlite_sequence: one more page in each commit of a run. A plain
-- INTEGER PRIMARY KEY orders messages the same way: a new row gets the
-- largest ord plus one, so it still sorts after every message there is. It
-- can reuse the ord of a deleted last message, and no other row holds that.
CREATE TABLE messages_new (
    ord        INTEGER PRIMARY KEY,
    id         TEXT    NOT NULL UNIQUE,
    session_id TEXT    NOT NULL,
    data       TEXT    NOT NULL -- the whole proto.Message as JSON
) STRICT;

INSERT INTO messages_new (ord, id, session_id, data)
SELECT ord, id, session_id, data FROM messages;

-- Takes the old table's index and triggers with it.
DROP TABLE messages;
DELETE FROM sqlite_sequence WHERE name = 'messages';
ALTER TABLE messages_new RENAME TO messages;

CREATE INDEX messages_by_session ON messages (session_id, ord);

CREATE TRIGGER messages_count_insert AFTER INSERT ON messages
BEGIN
    UPDATE sessions SET message_count = message_count + 1 WHERE id = NEW.session_id;
END;

CREATE TRIGGER messages_count_delete AFTER DELETE ON messages
BEGIN
    UPDATE sessions SET message_count = message_count - 1 WHERE id = OLD.session_id;
END;
