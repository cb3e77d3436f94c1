package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tandem-dev/tandem/internal/store"
)

// Every read is bounded by the read timeout, whatever its caller's
// context: a database whose connections hang (a partition with no reset,
// a frozen server) answers the request that reads it with
// store.ErrUnavailable (503 storage_unavailable) within seconds, not when
// TCP gives up. A read changes nothing, so giving up on one is safe.

// errReadTimeout marks a read that got no answer within the read timeout.
var errReadTimeout = fmt.Errorf("%w: no answer from the database in time", store.ErrUnavailable)

// query is pool.Query within the read timeout.
func (db *DB) query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	rctx, cancel := context.WithTimeout(ctx, db.readTimeout)
	rows, err := db.pool.Query(rctx, sql, args...)
	if err != nil {
		cancel()
		return nil, readError(ctx, rctx, err)
	}
	return &timedRows{Rows: rows, parent: ctx, ctx: rctx, cancel: cancel}, nil
}

// queryRow is pool.QueryRow within the read timeout.
func (db *DB) queryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	rctx, cancel := context.WithTimeout(ctx, db.readTimeout)
	return &timedRow{row: db.pool.QueryRow(rctx, sql, args...), parent: ctx, ctx: rctx, cancel: cancel}
}

// readError is err, marked as the read timeout's when that ended the read
// (rctx) and not its caller (parent).
func readError(parent, rctx context.Context, err error) error {
	if err != nil && parent.Err() == nil && errors.Is(rctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("%w: %w", errReadTimeout, err)
	}
	return err
}

// timedRows are rows read within the read timeout, released with them.
type timedRows struct {
	pgx.Rows
	parent, ctx context.Context
	cancel      context.CancelFunc
}

func (r *timedRows) Close() {
	r.Rows.Close()
	r.cancel()
}

func (r *timedRows) Err() error { return readError(r.parent, r.ctx, r.Rows.Err()) }

// timedRow is a row read within the read timeout, released by its Scan.
type timedRow struct {
	row         pgx.Row
	parent, ctx context.Context
	cancel      context.CancelFunc
}

func (r *timedRow) Scan(dest ...any) error {
	defer r.cancel()
	return readError(r.parent, r.ctx, r.row.Scan(dest...))
}

// exec is pool.Exec within the write timeout, for the few writes outside
// the group commit that a request waits for (tokens, audit, blobs). As
// with the group commit's, a write cut off by the timeout may have
// committed: it fails as unavailable either way.
func (db *DB) exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	wctx, cancel := context.WithTimeout(ctx, db.writeTimeout)
	defer cancel()
	tag, err := db.pool.Exec(wctx, sql, args...)
	return tag, writeError(ctx, wctx, err)
}

// execRow is pool.QueryRow of a write that returns a row, within the
// write timeout (see exec).
func (db *DB) execRow(ctx context.Context, sql string, args []any, dest ...any) error {
	wctx, cancel := context.WithTimeout(ctx, db.writeTimeout)
	defer cancel()
	return writeError(ctx, wctx, db.pool.QueryRow(wctx, sql, args...).Scan(dest...))
}

func writeError(parent, wctx context.Context, err error) error {
	if err != nil && parent.Err() == nil && errors.Is(wctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("%w: %w", errWriteTimeout, err)
	}
	return err
}
