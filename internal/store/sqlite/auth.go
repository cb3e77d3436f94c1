package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/tandem-dev/tandem/internal/store"
)

var _ store.Auth = (*DB)(nil)

const tokenCols = `id, name, role, hash, created_at, expires_at, last_used_at, revoked_at`

// micros0 maps the zero time to 0, the columns' "none".
func micros0(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return toMicros(t)
}

func time0(us int64) time.Time {
	if us == 0 {
		return time.Time{}
	}
	return fromMicros(us)
}

func scanToken(s scanner) (store.Token, error) {
	var t store.Token
	var created, expires, used, revoked int64
	if err := s.Scan(&t.ID, &t.Name, &t.Role, &t.Hash, &created, &expires, &used, &revoked); err != nil {
		return store.Token{}, err
	}
	t.CreatedAt, t.ExpiresAt, t.LastUsedAt, t.RevokedAt = fromMicros(created), time0(expires), time0(used), time0(revoked)
	return t, nil
}

// CreateToken implements store.Auth.
func (db *DB) CreateToken(ctx context.Context, t store.Token) error {
	now := toMicros(t.CreatedAt)
	err := inTx(ctx, db.writer, func(tx *sql.Tx) error {
		// A name held only by expired tokens is free again.
		if _, err := tx.ExecContext(ctx, `UPDATE tokens SET revoked_at = ?
			WHERE name = ? AND revoked_at = 0 AND expires_at != 0 AND expires_at <= ?`, now, t.Name, now); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO tokens (`+tokenCols+`) VALUES (?, ?, ?, ?, ?, ?, 0, 0)`,
			t.ID, t.Name, t.Role, t.Hash, now, micros0(t.ExpiresAt))
		if isUniqueViolation(err) {
			return fmt.Errorf("%w: %w", store.ErrExists, err)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("create token %s: %w", t.Name, err)
	}
	return nil
}

// TokenByHash implements store.Auth.
func (db *DB) TokenByHash(ctx context.Context, hash string) (store.Token, error) {
	t, err := scanToken(db.queryRow(ctx, `SELECT `+tokenCols+` FROM tokens WHERE hash = ?`, hash))
	if errors.Is(err, sql.ErrNoRows) {
		err = store.ErrNotFound
	}
	if err != nil {
		return store.Token{}, fmt.Errorf("find token: %w", err)
	}
	return t, nil
}

// GetToken implements store.Auth.
func (db *DB) GetToken(ctx context.Context, id string) (store.Token, error) {
	t, err := scanToken(db.queryRow(ctx, `SELECT `+tokenCols+` FROM tokens WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		err = store.ErrNotFound
	}
	if err != nil {
		return store.Token{}, fmt.Errorf("get token %s: %w", id, err)
	}
	return t, nil
}

// ListTokens implements store.Auth.
func (db *DB) ListTokens(ctx context.Context, now time.Time) ([]store.Token, error) {
	rows, err := db.query(ctx, `SELECT `+tokenCols+` FROM tokens
		WHERE revoked_at = 0 AND (expires_at = 0 OR expires_at > ?) ORDER BY created_at, rowid`, toMicros(now))
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	out, err := collect(rows, scanToken)
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	return out, nil
}

// RevokeToken implements store.Auth.
func (db *DB) RevokeToken(ctx context.Context, id string, at time.Time) error {
	var n int64
	err := inTx(ctx, db.writer, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE tokens SET revoked_at = ? WHERE id = ? AND revoked_at = 0`, toMicros(at), id)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err == nil && n == 0 {
		err = store.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("revoke token %s: %w", id, err)
	}
	return nil
}

// TouchToken implements store.Auth.
func (db *DB) TouchToken(ctx context.Context, id string, at time.Time) error {
	err := inTx(ctx, db.writer, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE tokens SET last_used_at = ? WHERE id = ?`, toMicros(at), id)
		return err
	})
	if err != nil {
		return fmt.Errorf("touch token %s: %w", id, err)
	}
	return nil
}

const auditCols = `id, time, token_id, name, client_id, action, workspace_id, session_id, run_id, detail`

func scanAudit(s scanner) (store.AuditEntry, error) {
	var e store.AuditEntry
	var at int64
	if err := s.Scan(&e.ID, &at, &e.TokenID, &e.Name, &e.ClientID, &e.Action, &e.WorkspaceID, &e.SessionID, &e.RunID, &e.Detail); err != nil {
		return store.AuditEntry{}, err
	}
	e.Time = fromMicros(at)
	return e, nil
}

// AppendAudit implements store.Auth.
func (db *DB) AppendAudit(ctx context.Context, e store.AuditEntry) (int64, error) {
	// Through the group commit, as the event log's writes: an audited
	// request (every prompt) would otherwise take the write lock for a
	// commit of its own, and 16 posters' prompts queue behind each other's.
	res, err := db.batch.exec(ctx, `INSERT INTO audit (time, token_id, name, client_id, action, workspace_id, session_id, run_id, detail)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		toMicros(e.Time), e.TokenID, e.Name, e.ClientID, e.Action, e.WorkspaceID, e.SessionID, e.RunID, e.Detail)
	if err != nil {
		return 0, fmt.Errorf("append audit entry: %w", err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		return 0, fmt.Errorf("append audit entry: %w", err)
	}
	return id, nil
}

// ListAudit implements store.Auth.
func (db *DB) ListAudit(ctx context.Context, after int64, limit int) ([]store.AuditEntry, error) {
	rows, err := db.query(ctx, `SELECT `+auditCols+` FROM audit WHERE id > ? ORDER BY id LIMIT ?`, after, limit)
	if err != nil {
		return nil, fmt.Errorf("list audit: %w", err)
	}
	out, err := collect(rows, scanAudit)
	if err != nil {
		return nil, fmt.Errorf("list audit: %w", err)
	}
	return out, nil
}
