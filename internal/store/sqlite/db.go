// Package sqlite is the SQLite implementation of store.Store, built on the
// pure-Go modernc.org/sqlite driver so Tandem stays a single static binary.
//
// Writes go through one dedicated connection and reads through a separate
// pool. SQLite admits a single writer at a time; funnelling every write
// through one connection queues writers in Go (where they honour their
// context) instead of letting them race for the file lock and fail with
// SQLITE_BUSY. WAL mode lets the reader pool run concurrently with that
// writer, each read seeing the last committed state.
package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/tandem-dev/tandem/internal/store"
)

//go:embed migrations/*.sql
var migrationsFS embed.FS

var _ store.Store = (*DB)(nil)

// DB is a Tandem store kept in one SQLite file. It is safe for concurrent use.
type DB struct {
	writer *sql.DB // exactly one connection: all writes are serialized here
	reader *sql.DB // read-only pool
	batch  *batcher
	reads  *stmtCache
	// checkpoints moves the WAL into the database file in the background.
	checkpoints *checkpointer
}

// basePragmas are applied to every connection of both pools through the DSN,
// because database/sql opens connections lazily and a PRAGMA executed once on
// the *sql.DB would only reach whichever connection happened to run it.
func basePragmas() []string {
	return []string{
		// Wait for locks held by other processes (a second Tandem, the sqlite3
		// CLI) instead of failing at once; in-process writers never contend.
		"busy_timeout(5000)",
		// WAL lets readers proceed while the writer commits.
		"journal_mode(WAL)",
		// NORMAL skips the fsync on each commit. In WAL mode a commit is still
		// atomic and survives a crash of the process (the WAL is in the OS page
		// cache), and commits stay in order; only an OS crash or power loss can
		// drop the last few transactions, never corrupt the file. Full durability
		// would cost an fsync per streamed event, which the event log can't afford.
		"synchronous(NORMAL)",
		// SQLite leaves foreign keys off per connection unless asked.
		"foreign_keys(ON)",
	}
}

// Open opens (creating when missing) the database file at path, applies the
// pending migrations and returns the store. The parent directory is created
// with mode 0700 since the database holds session transcripts.
func Open(ctx context.Context, path string) (*DB, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o700); err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	if err := protectFiles(abs); err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}

	writer, err := sql.Open("sqlite", dsn(abs, false))
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	writer.SetMaxOpenConns(1)
	writer.SetMaxIdleConns(1)
	writer.SetConnMaxLifetime(0)
	writer.SetConnMaxIdleTime(0)

	// Migrate before the reader pool exists: the writer's first connection is
	// also what switches a new file to WAL, which must happen before readers
	// rely on it.
	if err := migrate(ctx, writer); err != nil {
		writer.Close()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}

	reader, err := sql.Open("sqlite", dsn(abs, true))
	if err != nil {
		writer.Close()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	n := max(4, runtime.GOMAXPROCS(0))
	reader.SetMaxOpenConns(n)
	reader.SetMaxIdleConns(n)
	reader.SetConnMaxIdleTime(5 * time.Minute)
	if err := reader.PingContext(ctx); err != nil {
		reader.Close()
		writer.Close()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	db := &DB{writer: writer, reader: reader, batch: newBatcher(writer), reads: &stmtCache{db: reader}}
	db.checkpoints = newCheckpointer(abs)
	return db, nil
}

// protectFiles makes the database file and its companions readable by their
// owner only: they hold session transcripts. SQLite creates the -wal, -shm
// and -journal files with the mode of the database file, so creating that
// file 0600 before SQLite does covers them; files a looser umask or an older
// version left are tightened.
func protectFiles(abs string) error {
	f, err := os.OpenFile(abs, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	for _, suffix := range []string{"", "-wal", "-shm", "-journal"} {
		err := os.Chmod(abs+suffix, 0o600)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("protect %s: %w", filepath.Base(abs+suffix), err)
		}
	}
	return nil
}

// dsn builds a file: URI so that any character in path ('?', '#', '%') is
// escaped rather than taken for the start of the query string.
func dsn(absPath string, readOnly bool) string {
	q := url.Values{}
	for _, p := range basePragmas() {
		q.Add("_pragma", p)
	}
	if readOnly {
		// Guards against a write slipping onto the reader pool, where it
		// would contend with the writer connection and could hit SQLITE_BUSY.
		q.Add("_pragma", "query_only(1)")
	} else {
		// Take the write lock at BEGIN so a transaction can never fail
		// midway upgrading from a read lock.
		q.Set("_txlock", "immediate")
		// Checkpoints (which fsync) run on their own connection in the
		// background, not inside whichever commit crosses the threshold.
		q.Add("_pragma", "wal_autocheckpoint(0)")
		// Under a steady stream of commits the background checkpoints cannot
		// rewind the WAL (frames keep arriving during each), so it grows
		// until the load pauses; when it is rewound, the next commit
		// truncates the file back to this size instead of keeping it large.
		q.Add("_pragma", "journal_size_limit(67108864)")
	}
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(absPath), RawQuery: q.Encode()}
	return u.String()
}

// Close closes the reader pool, then the writer. Closing the last connection
// checkpoints the WAL into the main file.
func (db *DB) Close() error {
	db.checkpoints.close()
	db.batch.close()
	db.batch.stmts.close()
	db.reads.close()
	return errors.Join(db.reader.Close(), db.writer.Close())
}

// migrate applies, in name order, the embedded migrations not yet recorded in
// schema_migrations. Everything runs in one immediate transaction so two
// processes opening a fresh file cannot both apply the same migration, and a
// failing migration leaves the schema as it was.
func migrate(ctx context.Context, w *sql.DB) error {
	names, err := fs.Glob(migrationsFS, "migrations/*.sql")
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	sort.Strings(names)
	known := make(map[string]bool, len(names))
	for _, n := range names {
		known[strings.TrimPrefix(n, "migrations/")] = true
	}

	return inTx(ctx, w, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			version    TEXT    NOT NULL PRIMARY KEY,
			applied_at INTEGER NOT NULL
		) STRICT`); err != nil {
			return fmt.Errorf("migrate: create schema_migrations: %w", err)
		}
		applied := map[string]bool{}
		rows, err := tx.QueryContext(ctx, `SELECT version FROM schema_migrations`)
		if err != nil {
			return fmt.Errorf("migrate: read schema_migrations: %w", err)
		}
		for rows.Next() {
			var v string
			if err := rows.Scan(&v); err != nil {
				rows.Close()
				return fmt.Errorf("migrate: read schema_migrations: %w", err)
			}
			applied[v] = true
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return fmt.Errorf("migrate: read schema_migrations: %w", err)
		}
		// An older binary must not write to a schema it does not know.
		for v := range applied {
			if !known[v] {
				return fmt.Errorf("migrate: database has migration %s unknown to this binary (downgrade?)", v)
			}
		}

		for _, name := range names {
			version := strings.TrimPrefix(name, "migrations/")
			if applied[version] {
				continue
			}
			body, err := migrationsFS.ReadFile(name)
			if err != nil {
				return fmt.Errorf("migrate %s: %w", version, err)
			}
			if _, err := tx.ExecContext(ctx, string(body)); err != nil {
				return fmt.Errorf("migrate %s: %w", version, err)
			}
			if _, err := tx.ExecContext(ctx,
				`INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)`,
				version, toMicros(time.Now())); err != nil {
				return fmt.Errorf("migrate %s: record: %w", version, err)
			}
		}
		return nil
	})
}

// inTx runs fn in a transaction on the writer and commits, so the caller
// returns only once the write is durable in the WAL. A failure of the
// storage comes back wrapping store.ErrUnavailable (see classify).
func inTx(ctx context.Context, w *sql.DB, fn func(tx *sql.Tx) error) error {
	tx, err := w.BeginTx(ctx, nil)
	if err != nil {
		return classify(err)
	}
	if err := fn(tx); err != nil {
		return classify(errors.Join(err, ignoreDone(tx.Rollback())))
	}
	return classify(tx.Commit())
}

// classify wraps err with store.ErrUnavailable when SQLite reports a
// failure of the storage rather than of the statement: the disk full
// (SQLITE_FULL; a write past a file size limit shows as SQLITE_IOERR_WRITE),
// any I/O error, the database locked past busy_timeout, a file that cannot
// be opened or written, a database out of memory. SQLite rolls back what
// failed; the same write succeeds once the storage recovers.
func classify(err error) error {
	if err == nil || errors.Is(err, store.ErrUnavailable) {
		return err
	}
	switch sqliteCode(err) & 0xff {
	case sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED,
		sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_NOMEM, sqlite3.SQLITE_PROTOCOL:
		return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	return err
}

// ignoreDone drops sql.ErrTxDone, which Rollback reports when a cancelled
// context already rolled the transaction back; that is not a second failure.
func ignoreDone(err error) error {
	if errors.Is(err, sql.ErrTxDone) {
		return nil
	}
	return err
}

// sqliteCode returns the extended SQLite result code carried by err, or 0.
func sqliteCode(err error) int {
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code()
	}
	return 0
}

// isUniqueViolation reports whether err is a PRIMARY KEY or UNIQUE conflict.
func isUniqueViolation(err error) bool {
	switch sqliteCode(err) {
	case sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY, sqlite3.SQLITE_CONSTRAINT_UNIQUE:
		return true
	}
	return false
}

// isForeignKeyViolation reports whether err is a FOREIGN KEY failure.
func isForeignKeyViolation(err error) bool {
	return sqliteCode(err) == sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY
}

// toMicros and fromMicros fix the on-disk time format: unix microseconds, the
// precision proto.Time encodes, read back in UTC so values compare equal
// after a round trip.
func toMicros(t time.Time) int64 { return t.UnixMicro() }

func fromMicros(us int64) time.Time { return time.UnixMicro(us).UTC() }

// jsonText maps an empty JSON value to NULL and anything else to TEXT; binding
// the []byte directly would store a BLOB, which the STRICT TEXT column refuses.
func jsonText(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return string(b)
}

// rowsAffected turns "no row matched" into store.ErrNotFound.
func rowsAffected(res sql.Result) error {
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		return store.ErrNotFound
	}
	return nil
}

// noLimit converts the interface's "<= 0 means no limit" into SQLite's, which
// treats a negative LIMIT as unbounded.
func noLimit(limit int) int {
	if limit <= 0 {
		return -1
	}
	return limit
}

// scanner is what *sql.Row and *sql.Rows have in common.
type scanner interface {
	Scan(dest ...any) error
}
