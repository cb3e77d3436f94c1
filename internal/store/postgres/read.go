package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tandem-dev/tandem/internal/store"
)

// Every read is bounded by the read timeout, whatever its caller's
// context: a database whose connections hang (a partition with no reset,
// a frozen server) answers the request that reads it with
// store.ErrUnavailable (503 storage_unavailable) within seconds, not when
// TCP gives up. A read changes nothing, so giving up on one is safe.

//
// A request makes several calls, one after the other: once one got no
// answer in time the database is taken for hung (health), and the calls
// after it wait hungTimeout at most, until one gets an answer; so a
// request answers within seconds, not within the sum of its calls'
// timeouts.

// errReadTimeout marks a read that got no answer within the read timeout.
var errReadTimeout = fmt.Errorf("%w: no answer from the database in time", store.ErrUnavailable)

// hungTimeout bounds each call while the database is taken for hung:
// ample for a database that answers.
const hungTimeout = time.Second

// health is whether the database answered the last call that ended.
type health struct{ hung atomic.Bool }

// bound is timeout, or hungTimeout when shorter while the database is
// taken for hung.
func (h *health) bound(timeout time.Duration) time.Duration {
	if h.hung.Load() {
		return min(timeout, hungTimeout)
	}
	return timeout
}

// settle records how a call bounded by ctx (its caller's being parent)
// ended, and returns err marked with timeoutErr when the bound ended it.
func (h *health) settle(parent, ctx context.Context, err, timeoutErr error) error {
	if err != nil && parent.Err() == nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		h.hung.Store(true)
		return fmt.Errorf("%w: %w", timeoutErr, err)
	}
	if parent.Err() == nil {
		h.hung.Store(false)
	}
	return err
}

// query is pool.Query within the read timeout.
func (db *DB) query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	rctx, cancel := context.WithTimeout(ctx, db.health.bound(db.readTimeout))
	rows, err := db.pool.Query(rctx, sql, args...)
	if err != nil {
		cancel()
		return nil, db.health.settle(ctx, rctx, err, errReadTimeout)
	}
	return &timedRows{Rows: rows, db: db, parent: ctx, ctx: rctx, cancel: cancel}, nil
}

// queryRow is pool.QueryRow within the read timeout.
func (db *DB) queryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	rctx, cancel := context.WithTimeout(ctx, db.health.bound(db.readTimeout))
	return &timedRow{row: db.pool.QueryRow(rctx, sql, args...), db: db, parent: ctx, ctx: rctx, cancel: cancel}
}

// timedRows are rows read within the read timeout, released with them.
type timedRows struct {
	pgx.Rows
	db          *DB
	parent, ctx context.Context
	cancel      context.CancelFunc
}

func (r *timedRows) Close() {
	r.Rows.Close()
	r.cancel()
}

func (r *timedRows) Err() error {
	return r.db.health.settle(r.parent, r.ctx, r.Rows.Err(), errReadTimeout)
}

// timedRow is a row read within the read timeout, released by its Scan.
type timedRow struct {
	row         pgx.Row
	db          *DB
	parent, ctx context.Context
	cancel      context.CancelFunc
}

func (r *timedRow) Scan(dest ...any) error {
	defer r.cancel()
	return r.db.health.settle(r.parent, r.ctx, r.row.Scan(dest...), errReadTimeout)
}

// exec is pool.Exec within the write timeout, for the few writes outside
// the group commit that a request waits for (tokens, audit, blobs). As
// with the group commit's, a write cut off by the timeout may have
// committed: it fails as unavailable either way.
func (db *DB) exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	wctx, cancel := context.WithTimeout(ctx, db.health.bound(db.writeTimeout))
	defer cancel()
	tag, err := db.pool.Exec(wctx, sql, args...)
	return tag, db.health.settle(ctx, wctx, err, errWriteTimeout)
}

// execRow is pool.QueryRow of a write that returns a row, within the
// write timeout (see exec).
func (db *DB) execRow(ctx context.Context, sql string, args []any, dest ...any) error {
	wctx, cancel := context.WithTimeout(ctx, db.health.bound(db.writeTimeout))
	defer cancel()
	return db.health.settle(ctx, wctx, db.pool.QueryRow(wctx, sql, args...).Scan(dest...), errWriteTimeout)
}
