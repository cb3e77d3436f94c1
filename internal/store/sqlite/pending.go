package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/tandem-dev/tandem/internal/store"
)

const pendingCols = `request_id, workspace_id, session_id, run_id, kind, data, created_at, settled, resolved`

func scanPending(s scanner) (store.Pending, error) {
	var (
		p       store.Pending
		data    []byte
		created int64
	)
	if err := s.Scan(&p.RequestID, &p.WorkspaceID, &p.SessionID, &p.RunID, &p.Kind, &data, &created, &p.Settled, &p.Resolved); err != nil {
		return store.Pending{}, err
	}
	if data != nil {
		p.Data = json.RawMessage(data)
	}
	p.CreatedAt = fromMicros(created)
	return p, nil
}

// PutPending implements store.Store as an upsert by request id, so a run can
// rewrite its request (e.g. with more revival state) without a delete first.
// The row is updated in place, keeping its rowid and thus its list position
// among requests created at the same instant.
func (db *DB) PutPending(ctx context.Context, p store.Pending) error {
	if _, err := db.batch.exec(ctx, `
		INSERT INTO pending (`+pendingCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (request_id) DO UPDATE SET
			workspace_id = excluded.workspace_id, session_id = excluded.session_id,
			run_id = excluded.run_id, kind = excluded.kind, data = excluded.data,
			created_at = excluded.created_at, settled = excluded.settled,
			resolved = excluded.resolved`,
		p.RequestID, p.WorkspaceID, p.SessionID, p.RunID, p.Kind, jsonText(p.Data),
		toMicros(p.CreatedAt), p.Settled, p.Resolved); err != nil {
		return fmt.Errorf("put pending %s: %w", p.RequestID, err)
	}
	return nil
}

// ResolvePending implements store.Store: the update's condition decides
// which answer wins, in the writer's one transaction.
func (db *DB) ResolvePending(ctx context.Context, workspaceID, requestID string, data json.RawMessage) (bool, error) {
	res, err := db.batch.exec(ctx, `UPDATE pending SET data = ?, resolved = 1
		WHERE request_id = ? AND workspace_id = ? AND resolved = 0`,
		jsonText(data), requestID, workspaceID)
	var n int64
	if err == nil {
		n, err = res.RowsAffected()
	}
	if err != nil {
		return false, fmt.Errorf("resolve pending %s: %w", requestID, err)
	}
	if n == 1 {
		return true, nil
	}
	return false, db.pendingExists(ctx, workspaceID, requestID)
}

// SettlePending implements store.Store.
func (db *DB) SettlePending(ctx context.Context, workspaceID, requestID string) error {
	res, err := db.batch.exec(ctx, `UPDATE pending SET settled = 1 WHERE request_id = ? AND workspace_id = ?`,
		requestID, workspaceID)
	if err == nil {
		err = rowsAffected(res)
	}
	if err != nil {
		return fmt.Errorf("settle pending %s: %w", requestID, err)
	}
	return nil
}

// pendingExists is nil when the workspace has the request, else
// store.ErrNotFound (or the read's error).
func (db *DB) pendingExists(ctx context.Context, workspaceID, requestID string) error {
	var one int
	err := db.queryRow(ctx, `SELECT 1 FROM pending WHERE request_id = ? AND workspace_id = ?`,
		requestID, workspaceID).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		err = store.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("resolve pending %s: %w", requestID, err)
	}
	return nil
}

// DeletePending implements store.Store.
func (db *DB) DeletePending(ctx context.Context, requestID string) error {
	res, err := db.batch.exec(ctx, `DELETE FROM pending WHERE request_id = ?`, requestID)
	if err == nil {
		err = rowsAffected(res)
	}
	if err != nil {
		return fmt.Errorf("delete pending %s: %w", requestID, err)
	}
	return nil
}

// GetPending implements store.Store.
func (db *DB) GetPending(ctx context.Context, requestID string) (store.Pending, error) {
	p, err := scanPending(db.queryRow(ctx,
		`SELECT `+pendingCols+` FROM pending WHERE request_id = ?`, requestID))
	if errors.Is(err, sql.ErrNoRows) {
		err = store.ErrNotFound
	}
	if err != nil {
		return store.Pending{}, fmt.Errorf("get pending %s: %w", requestID, err)
	}
	return p, nil
}

// ListPending implements store.Store. Equal creation times fall back to
// insertion order (rowid). It reads only unsettled rows, through the
// partial index, however many settled ones the workspace has.
func (db *DB) ListPending(ctx context.Context, workspaceID string) ([]store.Pending, error) {
	out, err := db.listPending(ctx, `SELECT `+pendingCols+` FROM pending
		WHERE workspace_id = ? AND settled = 0 ORDER BY created_at, rowid`, workspaceID)
	if err != nil {
		return nil, fmt.Errorf("list pending %s: %w", workspaceID, err)
	}
	return out, nil
}

// RunPending implements store.Store.
func (db *DB) RunPending(ctx context.Context, runID string) ([]store.Pending, error) {
	out, err := db.listPending(ctx, `SELECT `+pendingCols+` FROM pending
		WHERE run_id = ? ORDER BY created_at, rowid`, runID)
	if err != nil {
		return nil, fmt.Errorf("list pending of run %s: %w", runID, err)
	}
	return out, nil
}

func (db *DB) listPending(ctx context.Context, query string, arg string) ([]store.Pending, error) {
	rows, err := db.query(ctx, query, arg)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanPending)
}

// ApproveForSession implements store.Store.
func (db *DB) ApproveForSession(ctx context.Context, sessionID, kind string) error {
	if _, err := db.batch.exec(ctx,
		`INSERT INTO session_approvals (session_id, kind) VALUES (?, ?) ON CONFLICT DO NOTHING`,
		sessionID, kind); err != nil {
		return fmt.Errorf("approve %s for session %s: %w", kind, sessionID, err)
	}
	return nil
}

// SessionApprovals implements store.Store.
func (db *DB) SessionApprovals(ctx context.Context, sessionID string) ([]string, error) {
	rows, err := db.query(ctx, `SELECT kind FROM session_approvals WHERE session_id = ?`, sessionID)
	var kinds []string
	if err == nil {
		kinds, err = collect(rows, func(s scanner) (k string, err error) { return k, s.Scan(&k) })
	}
	if err != nil {
		return nil, fmt.Errorf("approvals of session %s: %w", sessionID, err)
	}
	return kinds, nil
}
