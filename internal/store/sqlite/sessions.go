package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/tandem-dev/tandem/internal/store"
)

// sessionCols reads MessageCount from the column the messages table's
// triggers keep (migration 0002), so reading a session costs the same
// however long its conversation is.
const sessionCols = `s.id, s.workspace_id, s.title, s.model, s.reasoning_effort, s.config,
	s.created_at, s.updated_at, s.message_count,
	s.input_tokens, s.output_tokens, s.cache_read_tokens, s.cache_write_tokens, s.reasoning_tokens,
	s.cost_usd, s.context_tokens`

func scanSession(sc scanner) (store.Session, error) {
	var (
		s                store.Session
		config           []byte
		created, updated int64
		cost             sql.NullFloat64
		u                = &s.Usage
	)
	if err := sc.Scan(&s.ID, &s.WorkspaceID, &s.Title, &s.Model, &s.ReasoningEffort, &config,
		&created, &updated, &s.MessageCount,
		&u.InputTokens, &u.OutputTokens, &u.CacheReadTokens, &u.CacheWriteTokens, &u.ReasoningTokens,
		&cost, &s.ContextTokens); err != nil {
		return store.Session{}, err
	}
	if cost.Valid {
		u.CostUSD = &cost.Float64
	}
	if config != nil {
		s.Config = json.RawMessage(config)
	}
	s.CreatedAt = fromMicros(created)
	s.UpdatedAt = fromMicros(updated)
	return s, nil
}

// CreateSession implements store.Store: store.ErrExists when the id is taken,
// store.ErrNotFound when the workspace does not exist. Like every small
// write of a session, it goes through the group commit rather than taking
// the writer's one connection away from it for a transaction of its own.
func (db *DB) CreateSession(ctx context.Context, s store.Session) error {
	_, err := db.batch.exec(ctx, `
		INSERT INTO sessions (id, workspace_id, title, model, reasoning_effort, config, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		s.ID, s.WorkspaceID, s.Title, s.Model, s.ReasoningEffort, jsonText(s.Config),
		toMicros(s.CreatedAt), toMicros(s.UpdatedAt))
	switch {
	case err == nil:
		return nil
	case isUniqueViolation(err):
		return fmt.Errorf("create session %s: %w", s.ID, store.ErrExists)
	case isForeignKeyViolation(err):
		return fmt.Errorf("create session %s: workspace %s: %w", s.ID, s.WorkspaceID, store.ErrNotFound)
	default:
		return fmt.Errorf("create session %s: %w", s.ID, err)
	}
}

// GetSession implements store.Store. A session of another workspace is
// reported as not found, so one workspace cannot reach into another.
func (db *DB) GetSession(ctx context.Context, workspaceID, id string) (store.Session, error) {
	s, err := scanSession(db.queryRow(ctx,
		`SELECT `+sessionCols+` FROM sessions s WHERE s.workspace_id = ? AND s.id = ?`, workspaceID, id))
	if errors.Is(err, sql.ErrNoRows) {
		err = store.ErrNotFound
	}
	if err != nil {
		return store.Session{}, fmt.Errorf("get session %s: %w", id, err)
	}
	return s, nil
}

// ListSessions implements store.Store. Ties on updated_at are broken by
// created_at (newest first), then id, so the order is total and stable.
func (db *DB) ListSessions(ctx context.Context, workspaceID string) ([]store.Session, error) {
	rows, err := db.query(ctx, `SELECT `+sessionCols+` FROM sessions s
		WHERE s.workspace_id = ?
		ORDER BY s.updated_at DESC, s.created_at DESC, s.id`, workspaceID)
	if err != nil {
		return nil, fmt.Errorf("list sessions %s: %w", workspaceID, err)
	}
	out, err := collect(rows, scanSession)
	if err != nil {
		return nil, fmt.Errorf("list sessions %s: %w", workspaceID, err)
	}
	return out, nil
}

// UpdateSession implements store.Store. It writes the mutable fields (title,
// model, reasoning effort, config, updated_at); the id, workspace and
// creation time are fixed. store.ErrNotFound when no such session exists.
func (db *DB) UpdateSession(ctx context.Context, s store.Session) error {
	res, err := db.batch.submitWait(ctx, []stmt{updateSessionStmt(s)})
	if err == nil {
		err = rowsAffected(res)
	}
	if err != nil {
		return fmt.Errorf("update session %s: %w", s.ID, err)
	}
	return nil
}

func updateSessionStmt(s store.Session) stmt {
	return stmt{`
		UPDATE sessions SET title = ?, model = ?, reasoning_effort = ?, config = ?, updated_at = ?
		WHERE workspace_id = ? AND id = ?`,
		[]any{s.Title, s.Model, s.ReasoningEffort, jsonText(s.Config), toMicros(s.UpdatedAt), s.WorkspaceID, s.ID}}
}

// DeleteSession implements store.Store. Everything goes in one transaction so
// a crash cannot leave orphaned messages or events of a session that is gone.
func (db *DB) DeleteSession(ctx context.Context, workspaceID, id string) error {
	err := inTx(ctx, db.writer, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx,
			`DELETE FROM sessions WHERE workspace_id = ? AND id = ?`, workspaceID, id)
		if err != nil {
			return err
		}
		if err := rowsAffected(res); err != nil {
			return err
		}
		for _, q := range []string{
			`DELETE FROM messages WHERE session_id = ?`,
			`DELETE FROM events WHERE session_id = ?`,
			`DELETE FROM pending WHERE session_id = ?`,
			`DELETE FROM session_approvals WHERE session_id = ?`,
			`DELETE FROM run_attachments WHERE session_id = ?`,
			`DELETE FROM prompt_keys WHERE session_id = ?`,
			`DELETE FROM checkpoints WHERE session_id = ?`,
		} {
			if _, err := tx.ExecContext(ctx, q, id); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("delete session %s: %w", id, err)
	}
	return nil
}

// TouchSession implements store.Store.
func (db *DB) TouchSession(ctx context.Context, id string, at time.Time) error {
	res, err := db.batch.submitWait(ctx, []stmt{touchStmt(id, at)})
	if err != nil {
		return fmt.Errorf("touch session %s: %w", id, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("touch session %s: %w", id, err)
	} else if n == 0 {
		return fmt.Errorf("touch session %s: %w", id, store.ErrNotFound)
	}
	return nil
}

func touchStmt(id string, at time.Time) stmt {
	return stmt{`UPDATE sessions SET updated_at = MAX(updated_at, ?) WHERE id = ?`, []any{toMicros(at), id}}
}

// usageStmt adds a run's usage to its session (store.SessionUsage).
func usageStmt(sessionID string, su store.SessionUsage) stmt {
	u := su.Add
	var cost any // NULL adds nothing, and keeps an unknown cost unknown
	if u.CostUSD != nil {
		cost = *u.CostUSD
	}
	return stmt{`UPDATE sessions SET
		input_tokens = input_tokens + ?1, output_tokens = output_tokens + ?2,
		cache_read_tokens = cache_read_tokens + ?3, cache_write_tokens = cache_write_tokens + ?4,
		reasoning_tokens = reasoning_tokens + ?5,
		cost_usd = CASE WHEN ?6 IS NULL THEN cost_usd ELSE COALESCE(cost_usd, 0) + ?6 END,
		context_tokens = CASE WHEN ?7 > 0 THEN ?7 ELSE context_tokens END
		WHERE id = ?8`,
		[]any{u.InputTokens, u.OutputTokens, u.CacheReadTokens, u.CacheWriteTokens, u.ReasoningTokens,
			cost, su.ContextTokens, sessionID}}
}
