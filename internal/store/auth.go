package store

import (
	"context"
	"time"
)

// Token is a person's API token as the store keeps it: never the secret,
// only its digest (Hash), so that a copy of the database lets nobody in.
type Token struct {
	ID   string
	Name string
	Role string
	// Hash is the hex SHA-256 of the secret.
	Hash       string
	CreatedAt  time.Time
	ExpiresAt  time.Time // zero: never
	LastUsedAt time.Time // zero: never used
	RevokedAt  time.Time // zero: not revoked
}

// Live reports whether the token lets its holder in at now.
func (t Token) Live(now time.Time) bool {
	return t.RevokedAt.IsZero() && (t.ExpiresAt.IsZero() || now.Before(t.ExpiresAt))
}

// AuditEntry is one line of the audit log (contract section 9). ID is
// given by the store, increasing in the order entries were appended.
type AuditEntry struct {
	ID          int64
	Time        time.Time
	TokenID     string
	Name        string
	ClientID    string
	Action      string
	WorkspaceID string
	SessionID   string
	RunID       string
	Detail      string
}

// Auth is the store's role for people's tokens and the audit log. Both
// live in the store so that every node of a cluster shares them.
type Auth interface {
	// CreateToken inserts t. ErrExists when a live token (not revoked, not
	// expired at t.CreatedAt) already has t.Name; expired tokens of that
	// name are marked revoked in the same transaction.
	CreateToken(ctx context.Context, t Token) error
	// TokenByHash returns the token whose secret hashes to hash, live or
	// not; ErrNotFound when none does.
	TokenByHash(ctx context.Context, hash string) (Token, error)
	// GetToken returns the token with that id, live or not; ErrNotFound.
	GetToken(ctx context.Context, id string) (Token, error)
	// ListTokens returns the tokens live at now, oldest first.
	ListTokens(ctx context.Context, now time.Time) ([]Token, error)
	// RevokeToken marks the token revoked at at; ErrNotFound when there
	// is no such token or it was already revoked.
	RevokeToken(ctx context.Context, id string, at time.Time) error
	// TouchToken records at as the token's last use.
	TouchToken(ctx context.Context, id string, at time.Time) error
	// AppendAudit appends e (its ID ignored) and returns its id.
	AppendAudit(ctx context.Context, e AuditEntry) (int64, error)
	// ListAudit returns at most limit entries with id > after, oldest first.
	ListAudit(ctx context.Context, after int64, limit int) ([]AuditEntry, error)
}
