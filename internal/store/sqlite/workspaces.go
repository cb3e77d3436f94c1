package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/tandem-dev/tandem/internal/store"
)

const workspaceCols = `id, path, created_at, seq_reserved, recovered_through`

func scanWorkspace(s scanner) (store.Workspace, error) {
	var w store.Workspace
	var created int64
	if err := s.Scan(&w.ID, &w.Path, &created, &w.SeqReserved, &w.RecoveredThrough); err != nil {
		return store.Workspace{}, err
	}
	w.CreatedAt = fromMicros(created)
	return w, nil
}

// EnsureWorkspace implements store.Store. The insert and the read-back share
// one transaction on the single writer connection, so concurrent callers for
// the same path serialize: the first inserts, the others get its row.
// An id already used by a different path yields store.ErrExists.
func (db *DB) EnsureWorkspace(ctx context.Context, w store.Workspace) (store.Workspace, bool, error) {
	var (
		got     store.Workspace
		created bool
	)
	err := inTx(ctx, db.writer, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `
			INSERT INTO workspaces (id, path, created_at, seq_reserved) VALUES (?, ?, ?, ?)
			ON CONFLICT (path) DO NOTHING`,
			w.ID, w.Path, toMicros(w.CreatedAt), w.SeqReserved)
		if err != nil {
			if isUniqueViolation(err) {
				return fmt.Errorf("%w: %w", store.ErrExists, err)
			}
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		created = n == 1
		got, err = scanWorkspace(tx.QueryRowContext(ctx,
			`SELECT `+workspaceCols+` FROM workspaces WHERE path = ?`, w.Path))
		return err
	})
	if err != nil {
		return store.Workspace{}, false, fmt.Errorf("ensure workspace %s (%s): %w", w.ID, w.Path, err)
	}
	return got, created, nil
}

// GetWorkspace implements store.Store.
func (db *DB) GetWorkspace(ctx context.Context, id string) (store.Workspace, error) {
	w, err := scanWorkspace(db.queryRow(ctx,
		`SELECT `+workspaceCols+` FROM workspaces WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		err = store.ErrNotFound
	}
	if err != nil {
		return store.Workspace{}, fmt.Errorf("get workspace %s: %w", id, err)
	}
	return w, nil
}

// ListWorkspaces implements store.Store. Equal creation times fall back to
// insertion order (rowid).
func (db *DB) ListWorkspaces(ctx context.Context) ([]store.Workspace, error) {
	rows, err := db.query(ctx,
		`SELECT `+workspaceCols+` FROM workspaces ORDER BY created_at, rowid`)
	if err != nil {
		return nil, fmt.Errorf("list workspaces: %w", err)
	}
	out, err := collect(rows, scanWorkspace)
	if err != nil {
		return nil, fmt.Errorf("list workspaces: %w", err)
	}
	return out, nil
}

// ReserveSeq implements store.Store; store.ErrNotFound when the workspace does
// not exist.
func (db *DB) ReserveSeq(ctx context.Context, workspaceID string, upTo int64) error {
	if err := db.raise(ctx, `UPDATE workspaces SET seq_reserved = MAX(seq_reserved, ?) WHERE id = ?`, workspaceID, upTo); err != nil {
		return fmt.Errorf("reserve seq %s/%d: %w", workspaceID, upTo, err)
	}
	return nil
}

// SetRecoveredThrough implements store.Store; store.ErrNotFound when the
// workspace does not exist.
func (db *DB) SetRecoveredThrough(ctx context.Context, workspaceID string, seq int64) error {
	if err := db.raise(ctx, `UPDATE workspaces SET recovered_through = MAX(recovered_through, ?) WHERE id = ?`, workspaceID, seq); err != nil {
		return fmt.Errorf("set recovered through %s/%d: %w", workspaceID, seq, err)
	}
	return nil
}

// raise runs update, which raises one of the workspace's marks to v. SQLite
// counts a matched row as changed even when MAX leaves the value as it was,
// so the not-found check stays exact.
func (db *DB) raise(ctx context.Context, update, workspaceID string, v int64) error {
	res, err := db.batch.exec(ctx, update, v, workspaceID)
	if err != nil {
		return err
	}
	return rowsAffected(res)
}

// collect scans every row with scan and closes rows. The result is non-nil
// so callers encoding it to JSON get [] rather than null.
func collect[T any](rows *sql.Rows, scan func(scanner) (T, error)) ([]T, error) {
	defer rows.Close()
	out := []T{}
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, classify(err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, classify(err)
	}
	return out, nil
}

// DeleteWorkspace implements store.Store. One transaction, like
// DeleteSession: a crash leaves the workspace whole or gone.
func (db *DB) DeleteWorkspace(ctx context.Context, id string) error {
	err := inTx(ctx, db.writer, func(tx *sql.Tx) error {
		// The session-keyed rows first, while the sessions still say
		// which are the workspace's.
		const ofSessions = `(SELECT id FROM sessions WHERE workspace_id = ?)`
		for _, q := range []string{
			`DELETE FROM messages WHERE session_id IN ` + ofSessions,
			`DELETE FROM session_approvals WHERE session_id IN ` + ofSessions,
			`DELETE FROM run_attachments WHERE session_id IN ` + ofSessions,
			`DELETE FROM prompt_keys WHERE session_id IN ` + ofSessions,
			`DELETE FROM events WHERE workspace_id = ?`,
			`DELETE FROM pending WHERE workspace_id = ?`,
			`DELETE FROM checkpoints WHERE workspace_id = ?`,
			`DELETE FROM sessions WHERE workspace_id = ?`,
		} {
			if _, err := tx.ExecContext(ctx, q, id); err != nil {
				return err
			}
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM workspaces WHERE id = ?`, id)
		if err != nil {
			return err
		}
		return rowsAffected(res)
	})
	if err != nil {
		return fmt.Errorf("delete workspace %s: %w", id, err)
	}
	return nil
}
