package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/internal/store"
	"github.com/tandem-dev/tandem/internal/store/postgres/pgtest"
)

var (
	bg = context.Background()
	t0 = time.Date(2025, 3, 14, 15, 9, 26, 535897000, time.UTC)
)

// openTest opens a store on a new database and returns it with the
// database's URL.
func openTest(t testing.TB) (*DB, string) {
	t.Helper()
	u := pgtest.Database(t)
	db, err := Open(bg, u, Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return db, u
}

func admin(t testing.TB, u string) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(bg, u)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close(bg) })
	return c
}

func mustWorkspace(t testing.TB, s store.Store, id string) {
	t.Helper()
	_, created, err := s.EnsureWorkspace(bg, store.Workspace{ID: id, Path: "/src/" + id, CreatedAt: t0})
	require.NoError(t, err)
	require.True(t, created)
}

func ev(ws string, seq int64) store.Event {
	return store.Event{WorkspaceID: ws, Seq: seq, Type: "session.log", InHistory: true, Envelope: fmt.Appendf(nil, `{"seq":%d}`, seq)}
}

func TestMigrationsIdempotent(t *testing.T) {
	db, u := openTest(t)
	require.NoError(t, db.Close())
	names, err := fs.Glob(migrationsFS, "migrations/*.sql")
	require.NoError(t, err)
	for range 2 {
		db, err := Open(bg, u, Options{})
		require.NoError(t, err)
		var n int
		require.NoError(t, db.pool.QueryRow(bg, `SELECT count(*) FROM schema_migrations`).Scan(&n))
		require.Equal(t, len(names), n)
		require.NoError(t, db.Close())
	}
}

// Nodes starting together on a new database apply each migration once.
func TestMigrationsConcurrentOpen(t *testing.T) {
	u := pgtest.Database(t)
	const nodes = 6
	var wg sync.WaitGroup
	errs := make([]error, nodes)
	for i := range nodes {
		wg.Go(func() {
			db, err := Open(bg, u, Options{})
			if err == nil {
				err = db.Close()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
}

func TestMigrationUnknownToBinary(t *testing.T) {
	db, u := openTest(t)
	_, err := db.pool.Exec(bg, `INSERT INTO schema_migrations (version) VALUES ('9999_future.sql')`)
	require.NoError(t, err)
	require.NoError(t, db.Close())
	_, err = Open(bg, u, Options{})
	require.ErrorContains(t, err, "9999_future.sql")
}

// A bad URL fails Open without echoing the password it may hold.
func TestOpenBadURL(t *testing.T) {
	_, err := Open(bg, "postgres://u:s3cret@127.0.0.1:1/db?sslmode=bogus", Options{})
	require.Error(t, err)
	require.NotContains(t, err.Error(), "s3cret")
	_, err = Open(bg, "postgres://u:s3cret@127.0.0.1:1/db?sslmode=disable&connect_timeout=2", Options{})
	require.ErrorIs(t, err, store.ErrUnavailable, "nothing listens there")
	require.NotContains(t, err.Error(), "s3cret")
}

// Two nodes on one database see each other's writes, and their racing
// writes keep the interface's promises (one workspace per path, one
// writer per seq).
func TestTwoNodesOneDatabase(t *testing.T) {
	a, u := openTest(t)
	b, err := Open(bg, u, Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })

	var wg sync.WaitGroup
	ids := make([]string, 2)
	for i, db := range []*DB{a, b} {
		wg.Go(func() {
			w, _, err := db.EnsureWorkspace(bg, store.Workspace{ID: fmt.Sprintf("w%d", i), Path: "/same", CreatedAt: t0})
			assert.NoError(t, err)
			ids[i] = w.ID
		})
	}
	wg.Wait()
	require.Equal(t, ids[0], ids[1])
	ws := ids[0]

	wins := make([]int, 2)
	for i, db := range []*DB{a, b} {
		wg.Go(func() {
			for seq := int64(1); seq <= 100; seq++ {
				err := db.AppendEvent(bg, ev(ws, seq))
				if err == nil {
					wins[i]++
				} else {
					assert.ErrorIs(t, err, store.ErrExists)
				}
			}
		})
	}
	wg.Wait()
	require.Equal(t, 100, wins[0]+wins[1])
	for _, db := range []*DB{a, b} {
		n, err := db.MaxSeq(bg, ws)
		require.NoError(t, err)
		require.EqualValues(t, 100, n)
	}
}

// The failures a server reports about itself or the way to it are
// store.ErrUnavailable; those about the request are not.
func TestClassify(t *testing.T) {
	for code, want := range map[string]bool{
		"53100": true, // disk full
		"53200": true, // out of memory
		"53300": true, // too many connections
		"57P01": true, // admin shutdown
		"57P02": true, // crash shutdown
		"57P03": true, // cannot connect now
		"08006": true, // connection failure
		"58030": true, // I/O error
		"40001": true, // serialization failure
		"40P01": true, // deadlock
		"25006": true, // read-only transaction: a standby
		"23505": false,
		"23503": false,
		"22P02": false,
		"42P01": false,
	} {
		err := classify(fmt.Errorf("wrapped: %w", &pgconn.PgError{Code: code}))
		assert.Equal(t, want, errors.Is(err, store.ErrUnavailable), code)
	}
	for name, err := range map[string]error{
		"refused":    &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED},
		"reset":      syscall.ECONNRESET,
		"eof":        io.ErrUnexpectedEOF,
		"conn closd": pgconn.ErrConnClosed,
	} {
		assert.ErrorIs(t, classify(err), store.ErrUnavailable, name)
	}
	for name, err := range map[string]error{
		"canceled": context.Canceled,
		"deadline": context.DeadlineExceeded,
		"lease":    ErrLeaseLost,
		"other":    errors.New("a bug"),
	} {
		assert.NotErrorIs(t, classify(err), store.ErrUnavailable, name)
	}
}

// An administrator ending the store's connections (a restart, a
// failover) fails what was on them with store.ErrUnavailable at worst;
// the store reconnects by itself.
func TestAdminShutdownOfConnections(t *testing.T) {
	db, u := openTest(t)
	mustWorkspace(t, db, "w")
	require.NoError(t, db.AppendEvent(bg, ev("w", 1)))
	c := admin(t, u)
	for seq := int64(2); seq <= 6; seq++ {
		_, err := c.Exec(bg, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid()`)
		require.NoError(t, err)
		err = db.AppendEvent(bg, ev("w", seq))
		if err != nil {
			require.ErrorIs(t, err, store.ErrUnavailable)
			require.NoError(t, db.AppendEvent(bg, ev("w", seq)), "the next write reconnects")
		}
		_, err = db.GetWorkspace(bg, "w")
		if err != nil {
			require.ErrorIs(t, err, store.ErrUnavailable)
		}
	}
	n, err := db.MaxSeq(bg, "w")
	require.NoError(t, err)
	require.EqualValues(t, 6, n)
}

// A write the database does not answer in time fails as unavailable, and
// it is not committed later.
func TestWriteTimeout(t *testing.T) {
	u := pgtest.Database(t)
	db, err := Open(bg, u, Options{WriteTimeout: 300 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	mustWorkspace(t, db, "w")

	locker := admin(t, u)
	tx, err := locker.Begin(bg)
	require.NoError(t, err)
	_, err = tx.Exec(bg, `LOCK TABLE events IN ACCESS EXCLUSIVE MODE`)
	require.NoError(t, err)
	start := time.Now()
	err = db.AppendEvent(bg, ev("w", 1))
	require.ErrorIs(t, err, store.ErrUnavailable)
	require.Less(t, time.Since(start), 5*time.Second)
	require.NoError(t, tx.Rollback(bg))

	require.NoError(t, db.AppendEvent(bg, ev("w", 2)))
	es, err := db.WorkspaceEvents(bg, "w", 0, 0, 0)
	require.NoError(t, err)
	require.Len(t, es, 1)
	require.EqualValues(t, 2, es[0].Seq, "the timed-out write was rolled back")
}

// Migration 0008 marks resolved the requests whose answer the broker had
// recorded in their data, and only those; data that is no JSON does not
// stop it.
func TestPendingResolvedBackfilled(t *testing.T) {
	db, u := openTest(t)
	put := func(id, data string) {
		p := store.Pending{RequestID: id, WorkspaceID: "w", RunID: "r", Kind: "permission", CreatedAt: t0}
		if data != "" {
			p.Data = []byte(data)
		}
		require.NoError(t, db.PutPending(bg, p))
	}
	put("resolved", `{"permission":{"kind":"shell"},"resolved":true,"answer":{"result":"approved"}}`)
	put("waiting", `{"answer":{}}`)
	put("odd", `not json "resolved":true`)
	put("empty", "")
	require.NoError(t, db.Close())
	// Undo migration 0008 to get the table as the ones before left it.
	c := admin(t, u)
	for _, q := range []string{
		`ALTER TABLE pending DROP COLUMN resolved`,
		`DELETE FROM schema_migrations WHERE version = '0008_pending_resolved.sql'`,
	} {
		_, err := c.Exec(bg, q)
		require.NoError(t, err, q)
	}
	db, err := Open(bg, u, Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	for id, want := range map[string]bool{"resolved": true, "waiting": false, "odd": false, "empty": false} {
		got, err := db.GetPending(bg, id)
		require.NoError(t, err)
		require.Equal(t, want, got.Resolved, id)
	}
	won, err := db.ResolvePending(bg, "w", "resolved", []byte(`{}`))
	require.NoError(t, err)
	require.False(t, won, "an answer recorded before the column still wins over later ones")
}
