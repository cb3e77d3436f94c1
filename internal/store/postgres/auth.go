package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tandem-dev/tandem/internal/store"
)

var _ store.Auth = (*DB)(nil)

const tokenCols = `id, name, role, hash, created_at, expires_at, last_used_at, revoked_at`

// nullTime maps the zero time to NULL.
func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return micro(t)
}

func scanToken(r pgx.Row) (store.Token, error) {
	var t store.Token
	var expires, used, revoked *time.Time
	if err := r.Scan(&t.ID, &t.Name, &t.Role, &t.Hash, &t.CreatedAt, &expires, &used, &revoked); err != nil {
		return store.Token{}, err
	}
	t.CreatedAt = utc(t.CreatedAt)
	for _, p := range []struct {
		from *time.Time
		to   *time.Time
	}{{expires, &t.ExpiresAt}, {used, &t.LastUsedAt}, {revoked, &t.RevokedAt}} {
		if p.from != nil {
			*p.to = utc(*p.from)
		}
	}
	return t, nil
}

// CreateToken implements store.Auth.
func (db *DB) CreateToken(ctx context.Context, t store.Token) error {
	err := pgx.BeginFunc(ctx, db.pool, func(tx pgx.Tx) error {
		// A name held only by expired tokens is free again.
		if _, err := tx.Exec(ctx, `UPDATE tokens SET revoked_at = $2
			WHERE name = $1 AND revoked_at IS NULL AND expires_at <= $2`, t.Name, micro(t.CreatedAt)); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO tokens (id, name, role, hash, created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6)`,
			t.ID, t.Name, t.Role, t.Hash, micro(t.CreatedAt), nullTime(t.ExpiresAt))
		return err
	})
	if isUniqueViolation(err) {
		err = fmt.Errorf("%w: %w", store.ErrExists, err)
	}
	if err != nil {
		return fmt.Errorf("create token %s: %w", t.Name, classify(err))
	}
	return nil
}

func (db *DB) tokenWhere(ctx context.Context, what, where string, arg any) (store.Token, error) {
	t, err := scanToken(db.queryRow(ctx, `SELECT `+tokenCols+` FROM tokens WHERE `+where, arg))
	if errors.Is(err, pgx.ErrNoRows) {
		err = store.ErrNotFound
	}
	if err != nil {
		return store.Token{}, fmt.Errorf("%s: %w", what, classify(err))
	}
	return t, nil
}

// TokenByHash implements store.Auth.
func (db *DB) TokenByHash(ctx context.Context, hash string) (store.Token, error) {
	return db.tokenWhere(ctx, "find token", `hash = $1`, hash)
}

// GetToken implements store.Auth.
func (db *DB) GetToken(ctx context.Context, id string) (store.Token, error) {
	return db.tokenWhere(ctx, "get token "+id, `id = $1`, id)
}

// ListTokens implements store.Auth.
func (db *DB) ListTokens(ctx context.Context, now time.Time) ([]store.Token, error) {
	rows, err := db.query(ctx, `SELECT `+tokenCols+` FROM tokens
		WHERE revoked_at IS NULL AND (expires_at IS NULL OR expires_at > $1) ORDER BY created_at, id`, micro(now))
	out, err := collect(rows, err, func(r pgx.Rows) (store.Token, error) { return scanToken(r) })
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	return out, nil
}

// RevokeToken implements store.Auth.
func (db *DB) RevokeToken(ctx context.Context, id string, at time.Time) error {
	tag, err := db.exec(ctx, `UPDATE tokens SET revoked_at = $2 WHERE id = $1 AND revoked_at IS NULL`, id, micro(at))
	if err == nil && tag.RowsAffected() == 0 {
		err = store.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("revoke token %s: %w", id, classify(err))
	}
	return nil
}

// TouchToken implements store.Auth.
func (db *DB) TouchToken(ctx context.Context, id string, at time.Time) error {
	if _, err := db.exec(ctx, `UPDATE tokens SET last_used_at = $2 WHERE id = $1`, id, micro(at)); err != nil {
		return fmt.Errorf("touch token %s: %w", id, classify(err))
	}
	return nil
}

// AppendAudit implements store.Auth.
func (db *DB) AppendAudit(ctx context.Context, e store.AuditEntry) (int64, error) {
	var id int64
	err := db.execRow(ctx, `INSERT INTO audit (time, token_id, name, client_id, action, workspace_id, session_id, run_id, detail)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING id`,
		[]any{micro(e.Time), e.TokenID, e.Name, e.ClientID, e.Action, e.WorkspaceID, e.SessionID, e.RunID, e.Detail}, &id)
	if err != nil {
		return 0, fmt.Errorf("append audit entry: %w", classify(err))
	}
	return id, nil
}

// ListAudit implements store.Auth.
func (db *DB) ListAudit(ctx context.Context, after int64, limit int) ([]store.AuditEntry, error) {
	rows, err := db.query(ctx, `SELECT id, time, token_id, name, client_id, action, workspace_id, session_id, run_id, detail
		FROM audit WHERE id > $1 ORDER BY id LIMIT $2`, after, limit)
	out, err := collect(rows, err, func(r pgx.Rows) (store.AuditEntry, error) {
		var e store.AuditEntry
		err := r.Scan(&e.ID, &e.Time, &e.TokenID, &e.Name, &e.ClientID, &e.Action, &e.WorkspaceID, &e.SessionID, &e.RunID, &e.Detail)
		e.Time = utc(e.Time)
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("list audit: %w", err)
	}
	return out, nil
}
