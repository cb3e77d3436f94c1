package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/tandem-dev/tandem/internal/store"
	"github.com/tandem-dev/tandem/proto"
)

var _ store.Rewinds = (*DB)(nil)

// PutCheckpoint implements store.Rewinds. An update keeps the row's seq,
// which orders a session's checkpoints. A session deleted meanwhile (its
// run's end recorded late) gets no checkpoint back: ErrNotFound.
func (v *view) PutCheckpoint(ctx context.Context, c store.Checkpoint) error {
	n, err := v.write(ctx, stmt{sql: `
		INSERT INTO checkpoints (id, workspace_id, session_id, run_id, message_id, commit_hash, end_hash, created_at)
		SELECT $1::text, $2::text, $3::text, $4::text, $5::text, $6::text, $7::text, $8::timestamptz
		WHERE EXISTS (SELECT 1 FROM sessions WHERE id = $3::text)
		ON CONFLICT (id) DO UPDATE SET message_id = excluded.message_id,
			commit_hash = excluded.commit_hash, end_hash = excluded.end_hash`,
		args: []any{c.ID, c.WorkspaceID, c.SessionID, c.RunID, c.MessageID, c.Commit, c.End, micro(c.CreatedAt)}})
	if err == nil && n == 0 {
		err = fmt.Errorf("session %s: %w", c.SessionID, store.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("put checkpoint %s: %w", c.ID, err)
	}
	return nil
}

// ListCheckpoints implements store.Rewinds.
func (v *view) ListCheckpoints(ctx context.Context, sessionID string) ([]store.Checkpoint, error) {
	rows, err := v.db.query(ctx, `
		SELECT id, workspace_id, session_id, run_id, message_id, commit_hash, end_hash, created_at
		FROM checkpoints WHERE session_id = $1 ORDER BY seq`, sessionID)
	out, err := collect(rows, err, func(r pgx.Rows) (store.Checkpoint, error) {
		var c store.Checkpoint
		err := r.Scan(&c.ID, &c.WorkspaceID, &c.SessionID, &c.RunID, &c.MessageID, &c.Commit, &c.End, &c.CreatedAt)
		c.CreatedAt = utc(c.CreatedAt)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("list checkpoints of %s: %w", sessionID, err)
	}
	return out, nil
}

// AllMessages implements store.Rewinds.
func (v *view) AllMessages(ctx context.Context, sessionID string) ([]proto.Message, error) {
	rows, err := v.db.query(ctx, `SELECT data, rewound FROM messages WHERE session_id = $1 ORDER BY ord`, sessionID)
	out, err := collect(rows, err, func(r pgx.Rows) (proto.Message, error) {
		var (
			data    []byte
			rewound bool
			m       proto.Message
		)
		if err := r.Scan(&data, &rewound); err != nil {
			return m, err
		}
		err := json.Unmarshal(data, &m)
		m.Rewound = rewound
		return m, err
	})
	if err != nil {
		return nil, fmt.Errorf("list messages %s: %w", sessionID, err)
	}
	return out, nil
}

// Rewind implements store.Rewinds, in one statement: the messages marked,
// the session's count lowered by as many, the later checkpoints deleted
// and keep's end set.
func (v *view) Rewind(ctx context.Context, sessionID, fromMessageID string, keep store.Checkpoint) (int, error) {
	var one int
	err := v.db.queryRow(ctx, `SELECT 1 FROM checkpoints WHERE id = $1 AND session_id = $2`, keep.ID, sessionID).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("rewind session %s: checkpoint %s: %w", sessionID, keep.ID, store.ErrNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("rewind session %s: %w", sessionID, classify(err))
	}
	if fromMessageID == "" {
		_, err := v.write(ctx, stmt{sql: `UPDATE checkpoints SET end_hash = $1 WHERE id = $2`, args: []any{keep.End, keep.ID}})
		if err != nil {
			return 0, fmt.Errorf("rewind session %s: %w", sessionID, err)
		}
		return 0, nil
	}
	err = v.db.queryRow(ctx, `SELECT 1 FROM messages WHERE id = $1 AND session_id = $2`, fromMessageID, sessionID).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("rewind session %s: message %s: %w", sessionID, fromMessageID, store.ErrNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("rewind session %s: %w", sessionID, classify(err))
	}
	n, err := v.write(ctx, stmt{sql: `
		WITH start AS (SELECT ord FROM messages WHERE id = $2 AND session_id = $1),
		k AS (SELECT seq FROM checkpoints WHERE id = $3),
		d AS (DELETE FROM checkpoints WHERE session_id = $1 AND seq > (SELECT seq FROM k)),
		e AS (UPDATE checkpoints SET end_hash = $4 WHERE id = $3),
		c AS (UPDATE sessions SET message_count = message_count - (
			SELECT count(*) FROM messages WHERE session_id = $1 AND ord >= (SELECT ord FROM start) AND NOT rewound) WHERE id = $1)
		UPDATE messages SET rewound = true
		WHERE session_id = $1 AND ord >= (SELECT ord FROM start) AND NOT rewound`,
		args: []any{sessionID, fromMessageID, keep.ID, keep.End}})
	if err != nil {
		return 0, fmt.Errorf("rewind session %s: %w", sessionID, err)
	}
	return int(n), nil
}
