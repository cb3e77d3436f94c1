package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tandem-dev/tandem/internal/store"
)

// The lease types are the store package's, so the cluster depends on
// what a store offers and not on this one; these names keep this
// package's API.
var (
	// ErrLeaseHeld is store.ErrLeaseHeld.
	ErrLeaseHeld = store.ErrLeaseHeld
	// ErrLeaseLost is store.ErrLeaseLost.
	ErrLeaseLost = store.ErrLeaseLost
)

type (
	// Lease is store.Lease.
	Lease = store.Lease
	// HeldError is store.HeldError.
	HeldError = store.HeldError
)

// Leaser is workspace ownership kept in the database. Lease calls go
// straight to the pool, never behind the group commit's queue: a renewal
// must not wait for other writes and miss its deadline.
type Leaser interface {
	// AcquireLease makes owner the workspace's owner for ttl when no live
	// lease is held (none yet, released, or expired: a takeover), with the
	// next epoch. A live lease, even owner's own, yields a *HeldError.
	AcquireLease(ctx context.Context, workspaceID, owner string, ttl time.Duration) (Lease, error)
	// RenewLease extends a lease to ttl from now while it is l: held by
	// l's owner at l's epoch, not released. One that expired but that
	// nobody took since is renewed too: its owner takes it back with no
	// other owner in between (a database restart outlasted the lease).
	// ErrLeaseLost when it was released or changed hands.
	RenewLease(ctx context.Context, l Lease, ttl time.Duration) (Lease, error)
	// ReleaseLease gives the workspace up at once, so another node can take
	// it without waiting for the expiry (a clean stop hands over this way).
	// Releasing a lease no longer held does nothing.
	ReleaseLease(ctx context.Context, l Lease) error
	// GetLease returns the workspace's lease as it stands, expired or
	// released ones included; store.ErrNotFound when it never had one.
	GetLease(ctx context.Context, workspaceID string) (Lease, error)
	// Fenced returns a store for the workspace's owner: each of its writes
	// checks, inside its transaction, that l is still held (see the package
	// doc), and fails with ErrLeaseLost otherwise. Reads are not fenced.
	Fenced(l Lease) FencedStore
}

// FencedStore is a store whose writes hold only while its lease does.
type FencedStore interface {
	store.Store
	PendingSwapper
	SeqBlocks
	// Lease is the lease the writes are fenced on.
	Lease() Lease
}

// PendingSwapper is a conditional update of pending requests, for "first
// answer wins" across nodes.
type PendingSwapper interface {
	// SwapPending replaces the request's row with p only if it still holds
	// old's data and settled flag, as read: of several callers swapping from
	// the same row, one gets true and the others false. store.ErrNotFound
	// when the request does not exist.
	SwapPending(ctx context.Context, old, p store.Pending) (swapped bool, err error)
}

// SeqBlocks reserves seqs for an owner to hand out.
type SeqBlocks interface {
	// ReserveBlock reserves the next n seqs of the workspace, above every
	// seq reserved or persisted so far, and returns the first and last of
	// them. Blocks never overlap, whoever asks, so seqs keep increasing
	// across owners. store.ErrNotFound when the workspace does not exist.
	ReserveBlock(ctx context.Context, workspaceID string, n int64) (first, last int64, err error)
}

// fenceSQL checks a fenced write's lease first in its transaction; see
// tandem_fence in migration 0002.
const fenceSQL = `SELECT tandem_fence($1, $2, $3)`

const leaseCols = `workspace_id, owner, epoch, expires_at`

func scanLease(r pgx.Row) (Lease, error) {
	var (
		l       Lease
		expires *time.Time
	)
	if err := r.Scan(&l.WorkspaceID, &l.Owner, &l.Epoch, &expires); err != nil {
		return Lease{}, err
	}
	if expires != nil {
		l.Expires = utc(*expires)
	}
	return l, nil
}

// leaseCtx bounds a lease call by the write timeout, as writes are.
func (db *DB) leaseCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, db.writeTimeout)
}

// AcquireLease implements Leaser.
func (db *DB) AcquireLease(ctx context.Context, workspaceID, owner string, ttl time.Duration) (Lease, error) {
	if owner == "" || ttl <= 0 {
		return Lease{}, fmt.Errorf("acquire lease of %s: an owner and a positive ttl are needed", workspaceID)
	}
	ctx, cancel := db.leaseCtx(ctx)
	defer cancel()
	l, err := scanLease(db.pool.QueryRow(ctx, `
		INSERT INTO workspace_leases (workspace_id, owner, epoch, expires_at)
		VALUES ($1, $2, 1, now() + $3 * interval '1 microsecond')
		ON CONFLICT (workspace_id) DO UPDATE SET
			owner = excluded.owner, epoch = workspace_leases.epoch + 1, expires_at = excluded.expires_at
		WHERE workspace_leases.expires_at IS NULL OR workspace_leases.expires_at <= now()
		RETURNING `+leaseCols, workspaceID, owner, ttl.Microseconds()))
	if errors.Is(err, pgx.ErrNoRows) {
		held, gerr := db.GetLease(ctx, workspaceID)
		if gerr != nil {
			return Lease{}, fmt.Errorf("acquire lease of %s: %w", workspaceID, gerr)
		}
		return Lease{}, fmt.Errorf("acquire lease of %s: %w", workspaceID, &HeldError{Held: held})
	}
	if err != nil {
		return Lease{}, fmt.Errorf("acquire lease of %s: %w", workspaceID, classify(err))
	}
	return l, nil
}

// RenewLease implements Leaser.
func (db *DB) RenewLease(ctx context.Context, l Lease, ttl time.Duration) (Lease, error) {
	ctx, cancel := db.leaseCtx(ctx)
	defer cancel()
	got, err := scanLease(db.pool.QueryRow(ctx, `
		UPDATE workspace_leases SET expires_at = now() + $4 * interval '1 microsecond'
		WHERE workspace_id = $1 AND owner = $2 AND epoch = $3 AND expires_at IS NOT NULL
		RETURNING `+leaseCols, l.WorkspaceID, l.Owner, l.Epoch, ttl.Microseconds()))
	if errors.Is(err, pgx.ErrNoRows) {
		err = ErrLeaseLost
	}
	if err != nil {
		return Lease{}, fmt.Errorf("renew lease of %s (epoch %d): %w", l.WorkspaceID, l.Epoch, classify(err))
	}
	return got, nil
}

// ReleaseLease implements Leaser.
func (db *DB) ReleaseLease(ctx context.Context, l Lease) error {
	ctx, cancel := db.leaseCtx(ctx)
	defer cancel()
	if _, err := db.pool.Exec(ctx, `UPDATE workspace_leases SET expires_at = NULL
		WHERE workspace_id = $1 AND owner = $2 AND epoch = $3`, l.WorkspaceID, l.Owner, l.Epoch); err != nil {
		return fmt.Errorf("release lease of %s (epoch %d): %w", l.WorkspaceID, l.Epoch, classify(err))
	}
	return nil
}

// GetLease implements Leaser.
func (db *DB) GetLease(ctx context.Context, workspaceID string) (Lease, error) {
	l, err := scanLease(db.queryRow(ctx, `SELECT `+leaseCols+` FROM workspace_leases WHERE workspace_id = $1`, workspaceID))
	if errors.Is(err, pgx.ErrNoRows) {
		err = store.ErrNotFound
	}
	if err != nil {
		return Lease{}, fmt.Errorf("get lease of %s: %w", workspaceID, classify(err))
	}
	return l, nil
}

// Fenced implements Leaser.
func (db *DB) Fenced(l Lease) FencedStore {
	return &fenced{view: view{db: db, fence: &l}}
}

// fenced is a view whose writes check its lease.
type fenced struct{ view }

func (f *fenced) Lease() Lease { return *f.fence }

// Close does nothing: the store it is a view of owns the pool.
func (f *fenced) Close() error { return nil }

// Leases returns every workspace's lease as it stands, expired and
// released ones included: what a node watching for workspaces to take
// over reads, in one query however many workspaces there are.
func (db *DB) Leases(ctx context.Context) ([]Lease, error) {
	rows, err := db.query(ctx, `SELECT `+leaseCols+` FROM workspace_leases ORDER BY workspace_id`)
	if err != nil {
		return nil, fmt.Errorf("list leases: %w", classify(err))
	}
	defer rows.Close()
	var out []Lease
	for rows.Next() {
		l, err := scanLease(rows)
		if err != nil {
			return nil, fmt.Errorf("list leases: %w", classify(err))
		}
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list leases: %w", classify(err))
	}
	return out, nil
}
