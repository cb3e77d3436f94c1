package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/tandem-dev/tandem/internal/store"
	"github.com/tandem-dev/tandem/proto"
)

var _ store.Rewinds = (*DB)(nil)

// PutCheckpoint implements store.Rewinds. An update keeps the row's rowid,
// which orders a session's checkpoints. A session deleted meanwhile (its
// run's end recorded late) gets no checkpoint back: ErrNotFound.
func (db *DB) PutCheckpoint(ctx context.Context, c store.Checkpoint) error {
	err := inTx(ctx, db.writer, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `
			INSERT INTO checkpoints (id, workspace_id, session_id, run_id, message_id, commit_hash, end_hash, created_at)
			SELECT ?, ?, ?, ?, ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM sessions WHERE id = ?)
			ON CONFLICT (id) DO UPDATE SET message_id = excluded.message_id,
				commit_hash = excluded.commit_hash, end_hash = excluded.end_hash`,
			c.ID, c.WorkspaceID, c.SessionID, c.RunID, c.MessageID, c.Commit, c.End, toMicros(c.CreatedAt), c.SessionID)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return cmp.Or(err, fmt.Errorf("session %s: %w", c.SessionID, store.ErrNotFound))
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("put checkpoint %s: %w", c.ID, err)
	}
	return nil
}

// ListCheckpoints implements store.Rewinds.
func (db *DB) ListCheckpoints(ctx context.Context, sessionID string) ([]store.Checkpoint, error) {
	rows, err := db.query(ctx, `
		SELECT id, workspace_id, session_id, run_id, message_id, commit_hash, end_hash, created_at
		FROM checkpoints WHERE session_id = ? ORDER BY rowid`, sessionID)
	if err != nil {
		return nil, fmt.Errorf("list checkpoints of %s: %w", sessionID, err)
	}
	out, err := collect(rows, func(s scanner) (store.Checkpoint, error) {
		var (
			c  store.Checkpoint
			at int64
		)
		err := s.Scan(&c.ID, &c.WorkspaceID, &c.SessionID, &c.RunID, &c.MessageID, &c.Commit, &c.End, &at)
		c.CreatedAt = fromMicros(at)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("list checkpoints of %s: %w", sessionID, err)
	}
	return out, nil
}

// AllMessages implements store.Rewinds.
func (db *DB) AllMessages(ctx context.Context, sessionID string) ([]proto.Message, error) {
	rows, err := db.query(ctx,
		`SELECT data, rewound FROM messages WHERE session_id = ? ORDER BY ord`, sessionID)
	if err != nil {
		return nil, fmt.Errorf("list messages %s: %w", sessionID, err)
	}
	out, err := collect(rows, func(s scanner) (proto.Message, error) {
		var (
			data    []byte
			rewound int64
			m       proto.Message
		)
		if err := s.Scan(&data, &rewound); err != nil {
			return m, err
		}
		err := json.Unmarshal(data, &m)
		m.Rewound = rewound != 0
		return m, err
	})
	if err != nil {
		return nil, fmt.Errorf("list messages %s: %w", sessionID, err)
	}
	return out, nil
}

// Rewind implements store.Rewinds.
func (db *DB) Rewind(ctx context.Context, sessionID, fromMessageID string, keep store.Checkpoint) (int, error) {
	removed := 0
	err := inTx(ctx, db.writer, func(tx *sql.Tx) error {
		if fromMessageID != "" {
			var ord int64
			err := tx.QueryRowContext(ctx, `SELECT ord FROM messages WHERE id = ? AND session_id = ?`, fromMessageID, sessionID).Scan(&ord)
			if errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("message %s: %w", fromMessageID, store.ErrNotFound)
			}
			if err != nil {
				return err
			}
			res, err := tx.ExecContext(ctx,
				`UPDATE messages SET rewound = 1 WHERE session_id = ? AND ord >= ? AND rewound = 0`, sessionID, ord)
			if err != nil {
				return err
			}
			n, err := res.RowsAffected()
			if err != nil {
				return err
			}
			removed = int(n)
			// The count is of the history's messages, which rewound ones leave.
			if _, err := tx.ExecContext(ctx, `UPDATE sessions SET message_count = message_count - ? WHERE id = ?`, n, sessionID); err != nil {
				return err
			}
		}
		var rowid int64
		err := tx.QueryRowContext(ctx, `SELECT rowid FROM checkpoints WHERE id = ? AND session_id = ?`, keep.ID, sessionID).Scan(&rowid)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("checkpoint %s: %w", keep.ID, store.ErrNotFound)
		}
		if err != nil {
			return err
		}
		if fromMessageID != "" {
			if _, err := tx.ExecContext(ctx, `DELETE FROM checkpoints WHERE session_id = ? AND rowid > ?`, sessionID, rowid); err != nil {
				return err
			}
		}
		_, err = tx.ExecContext(ctx, `UPDATE checkpoints SET end_hash = ? WHERE rowid = ?`, keep.End, rowid)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("rewind session %s: %w", sessionID, err)
	}
	return removed, nil
}
