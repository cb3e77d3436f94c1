-- A session's message count, kept by triggers: counting on every read of a
-- session grew with its conversation and was the larger part of the read a
-- prompt's accept path makes. Triggers keep it exact whoever writes messages.
-- A message's session never changes (PutMessage does not update session_id),
-- so inserts and deletes are the only changes to count.
ALTER TABLE sessions ADD COLUMN message_count INTEGER NOT NULL DEFAULT 0;

UPDATE sessions
SET message_count = (SELECT COUNT(*) FROM messages m WHERE m.session_id = sessions.id);

CREATE TRIGGER messages_count_insert AFTER INSERT ON messages
BEGIN
    UPDATE sessions SET message_count = message_count + 1 WHERE id = NEW.session_id;
END;

CREATE TRIGGER messages_count_delete AFTER DELETE ON messages
BEGIN
    UPDATE sessions SET message_count = message_count - 1 WHERE id = OLD.session_id;
END;
