// Package postgres is the PostgreSQL implementation of store.Store, for
// Tandem clusters (contract section 8): several nodes share one database,
// through github.com/jackc/pgx/v5 and its pool.
//
// # Semantics
//
// It keeps SQLite's exactly; the conformance suite (store/storetest) checks
// both. Every write is committed when its call returns; AppendEvents writes
// its events, with the messages, touches and session records they carry,
// in one transaction; a seq is unique per workspace (the primary key), so a
// second write of it fails with store.ErrExists.
//
// Small writes (events, messages, sessions, pending rows, approvals, marks)
// go through a group commit, as in SQLite: one goroutine takes whatever
// writes are queued and sends them as one pipelined batch in one
// transaction, then its COMMIT once they answered: two round trips and one
// WAL flush for many callers. A write that fails (a duplicate seq) is taken out and the
// others are sent again, so it never fails its neighbours. Units commit in
// the order they were queued. Once a write is queued it is carried out
// whatever becomes of its caller's context until its deadline (the write
// timeout), and a batch past it is never committed, however late its
// statements reach the server: a caller told "failed" never finds its
// write committed later. The exception every networked database shares is
// a connection lost while a COMMIT was under way, whose outcome is
// unknown: it is reported as store.ErrUnavailable.
//
// Failures of the database rather than of the request (a lost or refused
// connection, an administrator shutdown, too many connections, a full disk
// (53100), out of memory, an I/O error, a read-only standby, a
// serialization failure or deadlock, a write that timed out) wrap
// store.ErrUnavailable.
//
// # What a cluster needs next
//
// The store is built for the cluster of section 8, beyond store.Store, with
// three interfaces a *DB implements:
//
//   - Seq blocks (SeqBlocks): an owner takes its seqs in blocks reserved in
//     PostgreSQL before use, with an atomic increment of the workspace's
//     seq_reserved, so blocks handed to successive (or, briefly, rival)
//     owners never overlap and seqs keep increasing across owners.
//
//   - Leases (Leaser): a workspace's owner holds a lease row with an epoch,
//     acquired when free or expired (the epoch then grows by one), renewed
//     before it expires, released on a clean stop. Time is the database's
//     clock, so nodes' clocks do not matter. Fenced(lease) returns a store
//     whose every write first checks, inside its own transaction and with
//     the lease row locked FOR SHARE, that the lease still has that epoch
//     and has not expired: a paused or partitioned old owner that wakes up
//     writes nothing (its writes fail with ErrLeaseLost), and a takeover
//     waits for a write already past the check to commit, so the new owner
//     reads every write of the old one.
//
//   - First answer wins (PendingSwapper): SwapPending replaces a pending
//     row only if it still holds what the caller read, so of many nodes
//     answering one request, exactly one succeeds.
package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tandem-dev/tandem/internal/store"
)

//go:embed migrations/*.sql
var migrationsFS embed.FS

// DefaultWriteTimeout bounds each write once it is sent: a database that
// stops answering (a partition with no reset) fails writes with
// store.ErrUnavailable instead of holding them forever.
const DefaultWriteTimeout = 5 * time.Second

// DefaultReadTimeout bounds each read (see read.go).
const DefaultReadTimeout = 5 * time.Second

// migrationLock is the advisory lock key that serializes migrations of
// nodes starting together ("tandem" in ASCII).
const migrationLock = 0x74616e64656d

// Options tune Open. The zero value is the defaults.
type Options struct {
	// WriteTimeout bounds a write, queued then sent
	// (DefaultWriteTimeout when 0).
	WriteTimeout time.Duration
	// ReadTimeout bounds a read (DefaultReadTimeout when 0).
	ReadTimeout time.Duration
}

// DB is a Tandem store in a PostgreSQL database. It is safe for
// concurrent use, by one process or by many.
type DB struct {
	view
	pool         *pgxpool.Pool
	batch        *batcher
	writeTimeout time.Duration
	readTimeout  time.Duration
	// health is shared with the group commit (see read.go).
	health *health
}

var (
	_ store.Store    = (*DB)(nil)
	_ Leaser         = (*DB)(nil)
	_ PendingSwapper = (*DB)(nil)
	_ SeqBlocks      = (*DB)(nil)
)

// Open connects to the database at url (a postgres:// URL or a key=value
// connection string; pool settings such as pool_max_conns go there too),
// applies the migrations it lacks and returns the store.
func Open(ctx context.Context, url string, opts Options) (*DB, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		// The URL may hold a password; pgx's parse errors leave it out.
		return nil, fmt.Errorf("open store: %w", err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open store: %w", classify(err))
	}
	if err := migrate(ctx, pool); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open store: %w", err)
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = DefaultWriteTimeout
	}
	if opts.ReadTimeout <= 0 {
		opts.ReadTimeout = DefaultReadTimeout
	}
	db := &DB{pool: pool, writeTimeout: opts.WriteTimeout, readTimeout: opts.ReadTimeout, health: &health{}}
	db.batch = newBatcher(pool, opts.WriteTimeout, db.health)
	db.view = view{db: db}
	return db, nil
}

// Close stops the group commit, after committing what was queued, and
// closes the pool. Later calls do nothing.
func (db *DB) Close() error {
	db.batch.close()
	db.pool.Close()
	return nil
}

// migrate applies, in name order, the embedded migrations not yet recorded
// in schema_migrations, in one transaction under an advisory lock, so
// nodes starting together apply each once and a failing migration leaves
// the schema as it was.
func migrate(ctx context.Context, pool *pgxpool.Pool) error {
	names, err := fs.Glob(migrationsFS, "migrations/*.sql")
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	sort.Strings(names)
	known := make(map[string]bool, len(names))
	for _, n := range names {
		known[strings.TrimPrefix(n, "migrations/")] = true
	}
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(migrationLock)); err != nil {
			return fmt.Errorf("migrate: lock: %w", err)
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			version    text        NOT NULL PRIMARY KEY,
			applied_at timestamptz NOT NULL DEFAULT now()
		)`); err != nil {
			return fmt.Errorf("migrate: create schema_migrations: %w", err)
		}
		rows, err := tx.Query(ctx, `SELECT version FROM schema_migrations`)
		if err != nil {
			return fmt.Errorf("migrate: read schema_migrations: %w", err)
		}
		applied, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return fmt.Errorf("migrate: read schema_migrations: %w", err)
		}
		done := map[string]bool{}
		for _, v := range applied {
			// An older binary must not write to a schema it does not know.
			if !known[v] {
				return fmt.Errorf("migrate: database has migration %s unknown to this binary (downgrade?)", v)
			}
			done[v] = true
		}
		for _, name := range names {
			version := strings.TrimPrefix(name, "migrations/")
			if done[version] {
				continue
			}
			body, err := migrationsFS.ReadFile(name)
			if err != nil {
				return fmt.Errorf("migrate %s: %w", version, err)
			}
			// Without arguments pgx uses the simple protocol, which takes
			// a script of several statements.
			if _, err := tx.Exec(ctx, string(body)); err != nil {
				return fmt.Errorf("migrate %s: %w", version, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version) VALUES ($1)`, version); err != nil {
				return fmt.Errorf("migrate %s: record: %w", version, err)
			}
		}
		return nil
	})
	return classify(err)
}

// SQLSTATEs the store gives a meaning to.
const (
	codeUniqueViolation     = "23505"
	codeForeignKeyViolation = "23503"
	// codeLeaseLost is raised by tandem_fence (migration 0002) when a
	// fenced write's lease is no longer held.
	codeLeaseLost = "TD001"
)

// classify wraps err with store.ErrUnavailable when it is a failure of the
// database or of the way to it rather than of the request. The caller's
// own cancellation is left as it is.
func classify(err error) error {
	if err == nil || errors.Is(err, store.ErrUnavailable) || errors.Is(err, ErrLeaseLost) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		// A write's own timeout is classified where it is set (batch.go).
		return err
	}
	if unavailable(err) {
		return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	return err
}

func unavailable(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code[:2] {
		case "08", // connection exception
			"53", // insufficient resources: disk full, out of memory, too many connections
			"58": // system error: I/O error
			return true
		}
		switch pe.Code {
		case "57P01", "57P02", "57P03", // admin shutdown, crash shutdown, cannot connect now
			"57P05",          // idle session timeout
			"40001", "40P01", // serialization failure, deadlock detected
			"55P03", // lock not available
			"25006": // read-only transaction (a standby after a failover)
			return true
		}
		// Other server errors are the request's, even when they come
		// with a failed connection attempt (a wrong password is not
		// retried into success).
		var ce *pgconn.ConnectError
		return errors.As(err, &ce) && pe.Code[:2] != "28" && pe.Code[:2] != "3D"
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	return errors.As(err, &ce) || errors.As(err, &ne) || pgconn.Timeout(err) ||
		errors.Is(err, pgconn.ErrConnClosed) || pgconn.SafeToRetry(err) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, net.ErrClosed)
}

func sqlState(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

func isUniqueViolation(err error) bool     { return sqlState(err) == codeUniqueViolation }
func isForeignKeyViolation(err error) bool { return sqlState(err) == codeForeignKeyViolation }

// utc normalizes a time read back to what SQLite gives: UTC, microseconds.
func utc(t time.Time) time.Time { return time.UnixMicro(t.UnixMicro()).UTC() }

// micro truncates a time to what the column keeps, so the zero time and
// times before 1970 round the same way as SQLite's.
func micro(t time.Time) time.Time { return time.UnixMicro(t.UnixMicro()) }

// jsonText maps an empty JSON value to NULL.
func jsonText(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return string(b)
}

// nonNil turns a nil slice into an empty one: pgx sends nil as NULL.
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// noLimit turns "<= 0 means no limit" into a LIMIT argument (NULL is none).
func noLimit(limit int) any {
	if limit <= 0 {
		return nil
	}
	return limit
}

// collect reads every row with scan; the result is non-nil so callers
// encoding it to JSON get [] rather than null.
func collect[T any](rows pgx.Rows, err error, scan func(pgx.Rows) (T, error)) ([]T, error) {
	if err != nil {
		return nil, classify(err)
	}
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
