package sqlite

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/tandem-dev/tandem/proto"
)

// PutMessage implements store.Store. ON CONFLICT DO UPDATE rewrites the row in
// place, so ord (and with it the message's position) is kept; INSERT OR
// REPLACE would delete and reinsert, moving the message to the end.
// A message stays in the session it was first put in: the update leaves
// session_id alone, which is what keeps the sessions' message counts exact.
func (db *DB) PutMessage(ctx context.Context, m proto.Message) error {
	s, err := putMessageStmt(m)
	if err == nil {
		_, err = db.batch.submitWait(ctx, []stmt{s})
	}
	if err != nil {
		return fmt.Errorf("put message %s: %w", m.ID, err)
	}
	return nil
}

// putMessagesChunk is how many messages PutMessages writes per commit:
// large enough that the commits' cost is spread thin, small enough that
// one commit holds the writer (and grows the WAL) only briefly.
const putMessagesChunk = 1000

// PutMessages implements store.MessageWriter: each chunk is one unit of
// the group commit, so one transaction.
func (db *DB) PutMessages(ctx context.Context, msgs []proto.Message) error {
	for len(msgs) > 0 {
		chunk := msgs[:min(len(msgs), putMessagesChunk)]
		msgs = msgs[len(chunk):]
		stmts, err := putMessageRows(chunk)
		if err != nil {
			return err
		}
		if _, err := db.batch.submitWait(ctx, stmts); err != nil {
			return fmt.Errorf("put messages of session %s: %w", chunk[0].SessionID, err)
		}
	}
	return nil
}

// rowsPerInsert is how many messages one INSERT of PutMessages writes: a
// statement per message cost more than the rows themselves.
const rowsPerInsert = 100

// putMessageRows are the statements that upsert msgs, in order,
// rowsPerInsert to a statement (the rest one each, so few distinct
// statements are prepared).
func putMessageRows(msgs []proto.Message) ([]stmt, error) {
	var out []stmt
	for len(msgs) >= rowsPerInsert {
		args := make([]any, 0, 3*rowsPerInsert)
		for _, m := range msgs[:rowsPerInsert] {
			data, err := json.Marshal(m)
			if err != nil {
				return nil, fmt.Errorf("put message %s: %w", m.ID, err)
			}
			args = append(args, m.ID, m.SessionID, string(data))
		}
		out = append(out, stmt{putRowsQuery, args})
		msgs = msgs[rowsPerInsert:]
	}
	for _, m := range msgs {
		s, err := putMessageStmt(m)
		if err != nil {
			return nil, fmt.Errorf("put message %s: %w", m.ID, err)
		}
		out = append(out, s)
	}
	return out, nil
}

// putRowsQuery upserts rowsPerInsert messages, as putMessageData does one.
var putRowsQuery = `INSERT INTO messages (id, session_id, data) VALUES ` +
	strings.TrimSuffix(strings.Repeat("(?, ?, ?), ", rowsPerInsert), ", ") +
	` ON CONFLICT (id) DO UPDATE SET data = excluded.data`

func putMessageStmt(m proto.Message) (stmt, error) {
	data, err := json.Marshal(m)
	if err != nil {
		return stmt{}, err
	}
	return putMessageData(m.ID, m.SessionID, data), nil
}

// putMessageData upserts a message already encoded as JSON.
func putMessageData(id, sessionID string, data []byte) stmt {
	return stmt{`
		INSERT INTO messages (id, session_id, data) VALUES (?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET data = excluded.data`,
		[]any{id, sessionID, string(data)}}
}

// ListMessages implements store.Store.
func (db *DB) ListMessages(ctx context.Context, sessionID string) ([]proto.Message, error) {
	rows, err := db.query(ctx,
		`SELECT data FROM messages WHERE session_id = ? AND rewound = 0 ORDER BY ord`, sessionID)
	if err != nil {
		return nil, fmt.Errorf("list messages %s: %w", sessionID, err)
	}
	out, err := collect(rows, func(s scanner) (proto.Message, error) {
		var (
			data []byte
			m    proto.Message
		)
		if err := s.Scan(&data); err != nil {
			return m, err
		}
		return m, json.Unmarshal(data, &m)
	})
	if err != nil {
		return nil, fmt.Errorf("list messages %s: %w", sessionID, err)
	}
	return out, nil
}
