package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/tandem-dev/tandem/internal/store"
	"github.com/tandem-dev/tandem/proto"
)

const eventCols = `workspace_id, seq, session_id, run_id, type, in_history, envelope`

func scanEvent(s scanner) (store.Event, error) {
	var e store.Event
	if err := s.Scan(&e.WorkspaceID, &e.Seq, &e.SessionID, &e.RunID, &e.Type, &e.InHistory, &e.Envelope); err != nil {
		return store.Event{}, err
	}
	return e, nil
}

// AppendEvent implements store.Store. A seq already used in the workspace
// yields store.ErrExists: seqs are handed out once and never rewritten.
func (db *DB) AppendEvent(ctx context.Context, e store.Event) error {
	return db.AppendEvents(ctx, []store.Event{e})
}

// AppendEvents implements store.Store. The events are one unit of the group
// commit, so they share its transaction with other writers' units.
func (db *DB) AppendEvents(ctx context.Context, es []store.Event) error {
	if len(es) == 0 {
		return nil
	}
	msgs := store.MessagesToWrite(es)
	var stmts []stmt
	for i, e := range es {
		s, err := eventStmts(e, msgs[i])
		if err != nil {
			return eventError(e, err)
		}
		stmts = append(stmts, s...)
	}
	_, err := db.batch.submitWait(ctx, stmts)
	return eventError(es[0], err)
}

// eventStmts are the statements that write e, with the touch it carries
// and the message of msg (nil for none).
func eventStmts(e store.Event, msg *store.Event) ([]stmt, error) {
	env := e.Envelope
	if env == nil {
		env = []byte{} // the driver binds a nil slice as NULL
	}
	var stmts []stmt
	if msg != nil {
		data, err := store.MessageData(msg)
		if err != nil {
			return nil, err
		}
		stmts = append(stmts, putMessageData(msg.Message.ID, msg.Message.SessionID, data))
	}
	if e.Session != nil {
		stmts = append(stmts, updateSessionStmt(*e.Session))
	}
	if !e.Touch.IsZero() {
		stmts = append(stmts, touchStmt(e.SessionID, e.Touch))
	}
	if e.Usage != nil && e.SessionID != "" {
		stmts = append(stmts, usageStmt(e.SessionID, *e.Usage))
	}
	if a := e.Attachments; a != nil {
		stmts = append(stmts, stmt{`INSERT INTO run_attachments (run_id, message_id, session_id, seq, data) VALUES (?, ?, ?, ?, ?)`,
			[]any{e.RunID, a.MessageID, e.SessionID, e.Seq, nonNilBytes(a.Data)}})
	}
	if e.Type == proto.EventRunCompleted && e.RunID != "" {
		stmts = append(stmts, stmt{`DELETE FROM run_attachments WHERE run_id = ?`, []any{e.RunID}})
	}
	if k := e.PromptKey; k != nil {
		stmts = append(stmts,
			stmt{`DELETE FROM prompt_keys WHERE session_id = ? AND accepted_at < ?`,
				[]any{e.SessionID, k.At.Add(-store.PromptKeyTTL).UnixMilli()}},
			stmt{`INSERT INTO prompt_keys (session_id, idem_key, run_id, accepted_at) VALUES (?, ?, ?, ?)
				ON CONFLICT (session_id, idem_key) DO UPDATE SET run_id = excluded.run_id, accepted_at = excluded.accepted_at`,
				[]any{e.SessionID, k.Key, e.RunID, k.At.UnixMilli()}})
	}
	return append(stmts, stmt{
		`INSERT INTO events (` + eventCols + `) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		[]any{e.WorkspaceID, e.Seq, e.SessionID, e.RunID, e.Type, e.InHistory, env},
	}), nil
}

// eventError wraps err, naming the (first) event it is about.
func eventError(e store.Event, err error) error {
	switch {
	case err == nil:
		return nil
	case isUniqueViolation(err):
		return fmt.Errorf("append event %s/%d: %w: %w", e.WorkspaceID, e.Seq, store.ErrExists, err)
	default:
		return fmt.Errorf("append event %s/%d: %w", e.WorkspaceID, e.Seq, err)
	}
}

// WorkspaceEvents implements store.Store. An open upper bound becomes
// MaxInt64 so the query keeps one shape and stays a primary-key range scan.
func (db *DB) WorkspaceEvents(ctx context.Context, workspaceID string, afterSeq, upToSeq int64, limit int) ([]store.Event, error) {
	if upToSeq <= 0 {
		upToSeq = math.MaxInt64
	}
	rows, err := db.query(ctx, `SELECT `+eventCols+` FROM events
		WHERE workspace_id = ? AND seq > ? AND seq <= ?
		ORDER BY seq LIMIT ?`, workspaceID, afterSeq, upToSeq, noLimit(limit))
	if err != nil {
		return nil, fmt.Errorf("workspace events %s after %d: %w", workspaceID, afterSeq, err)
	}
	out, err := collect(rows, scanEvent)
	if err != nil {
		return nil, fmt.Errorf("workspace events %s after %d: %w", workspaceID, afterSeq, err)
	}
	return out, nil
}

// SessionEvents implements store.Store.
func (db *DB) SessionEvents(ctx context.Context, sessionID string, afterSeq int64, limit int) ([]store.Event, error) {
	rows, err := db.query(ctx, `SELECT `+eventCols+` FROM events
		WHERE session_id = ? AND seq > ? AND in_history = 1
		ORDER BY seq LIMIT ?`, sessionID, afterSeq, noLimit(limit))
	if err != nil {
		return nil, fmt.Errorf("session events %s after %d: %w", sessionID, afterSeq, err)
	}
	out, err := collect(rows, scanEvent)
	if err != nil {
		return nil, fmt.Errorf("session events %s after %d: %w", sessionID, afterSeq, err)
	}
	return out, nil
}

// RunAttachments implements store.Store.
func (db *DB) RunAttachments(ctx context.Context, runID string) ([]store.Attachments, error) {
	rows, err := db.query(ctx, `SELECT message_id, data FROM run_attachments WHERE run_id = ? ORDER BY seq`, runID)
	if err != nil {
		return nil, fmt.Errorf("attachments of run %s: %w", runID, err)
	}
	out, err := collect(rows, func(s scanner) (a store.Attachments, err error) {
		return a, s.Scan(&a.MessageID, &a.Data)
	})
	if err != nil {
		return nil, fmt.Errorf("attachments of run %s: %w", runID, err)
	}
	return out, nil
}

// PromptByKey implements store.Store.
func (db *DB) PromptByKey(ctx context.Context, sessionID, key string, since time.Time) (string, error) {
	var runID string
	err := db.queryRow(ctx, `SELECT run_id FROM prompt_keys WHERE session_id = ? AND idem_key = ? AND accepted_at >= ?`,
		sessionID, key, since.UnixMilli()).Scan(&runID)
	if errors.Is(err, sql.ErrNoRows) {
		err = store.ErrNotFound
	}
	if err != nil {
		return "", fmt.Errorf("prompt of key in session %s: %w", sessionID, err)
	}
	return runID, nil
}

func nonNilBytes(b []byte) []byte {
	if b == nil {
		return []byte{} // the driver binds a nil slice as NULL
	}
	return b
}

// MaxSeq implements store.Store.
func (db *DB) MaxSeq(ctx context.Context, workspaceID string) (int64, error) {
	var seq int64
	if err := db.queryRow(ctx,
		`SELECT COALESCE(MAX(seq), 0) FROM events WHERE workspace_id = ?`, workspaceID).Scan(&seq); err != nil {
		return 0, fmt.Errorf("max seq %s: %w", workspaceID, err)
	}
	return seq, nil
}
