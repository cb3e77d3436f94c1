package sqlite

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/internal/store"
	"github.com/tandem-dev/tandem/proto"
)

// t0 carries sub-second digits so the tests notice truncation or time-zone
// drift in the round trip.
var t0 = time.Date(2025, 3, 14, 15, 9, 26, 535897000, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

func openTest(t testing.TB) (*DB, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "nested", "dir", "tandem.db")
	db, err := Open(context.Background(), path)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return db, path
}

func mustWorkspace(t testing.TB, db *DB, id string) store.Workspace {
	t.Helper()
	w, created, err := db.EnsureWorkspace(context.Background(),
		store.Workspace{ID: id, Path: "/src/" + id, CreatedAt: t0})
	require.NoError(t, err)
	require.True(t, created)
	return w
}

func mustSession(t testing.TB, db *DB, ws, id string, updated time.Time) store.Session {
	t.Helper()
	s := store.Session{
		ID: id, WorkspaceID: ws, Title: "title " + id, Model: "m", ReasoningEffort: "high",
		Config: json.RawMessage(`{"permission_mode":"ask"}`), CreatedAt: t0, UpdatedAt: updated,
	}
	require.NoError(t, db.CreateSession(context.Background(), s))
	return s
}

func msg(id, sid, text string) proto.Message {
	return proto.Message{
		ID: id, SessionID: sid, RunID: "r1", Role: proto.RoleAssistant,
		Parts: []proto.Part{
			{Type: proto.PartText, Text: text},
			{Type: proto.PartToolCall, ID: "c1", Name: "bash", Arguments: json.RawMessage(`{"cmd":"ls"}`)},
		},
		Model:     "m",
		CreatedAt: proto.Time{Time: t0},
		UpdatedAt: proto.Time{Time: t0},
	}
}

func ev(ws, sid string, seq int64, inHistory bool) store.Event {
	return store.Event{
		Seq: seq, WorkspaceID: ws, SessionID: sid, RunID: "run", Type: "message.delta",
		InHistory: inHistory, Envelope: []byte(fmt.Sprintf(`{"seq":%d}`, seq)),
	}
}

func TestOpenCreatesParentDirPrivate(t *testing.T) {
	_, path := openTest(t)
	fi, err := os.Stat(filepath.Dir(path))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), fi.Mode().Perm())
}

func TestOpenPathNeedingEscape(t *testing.T) {
	path := filepath.Join(t.TempDir(), "we?ird #dir%20", "t.db")
	db, err := Open(context.Background(), path)
	require.NoError(t, err)
	mustWorkspace(t, db, "w1")
	require.NoError(t, db.Close())
	_, err = os.Stat(path)
	require.NoError(t, err, "the file must be at the literal path")
}

func TestPragmas(t *testing.T) {
	db, _ := openTest(t)
	ctx := context.Background()
	check := func(name string, q func(string) (string, error)) {
		mode, err := q("PRAGMA journal_mode")
		require.NoError(t, err, name)
		require.Equal(t, "wal", mode, name)
		fk, err := q("PRAGMA foreign_keys")
		require.NoError(t, err, name)
		require.Equal(t, "1", fk, name)
		bt, err := q("PRAGMA busy_timeout")
		require.NoError(t, err, name)
		require.Equal(t, "5000", bt, name)
		syn, err := q("PRAGMA synchronous")
		require.NoError(t, err, name)
		require.Equal(t, "1", syn, name) // NORMAL
	}
	check("writer", func(q string) (string, error) {
		var s string
		err := db.writer.QueryRowContext(ctx, q).Scan(&s)
		return s, err
	})
	check("reader", func(q string) (string, error) {
		var s string
		err := db.reader.QueryRowContext(ctx, q).Scan(&s)
		return s, err
	})
	_, err := db.reader.ExecContext(ctx, `DELETE FROM workspaces`)
	require.Error(t, err, "the reader pool must be read-only")
}

func TestMigrationsIdempotent(t *testing.T) {
	db, path := openTest(t)
	require.NoError(t, db.Close())
	for range 2 {
		db2, err := Open(context.Background(), path)
		require.NoError(t, err)
		var n int
		require.NoError(t, db2.reader.QueryRow(`SELECT COUNT(*) FROM schema_migrations`).Scan(&n))
		names, err := fs.Glob(migrationsFS, "migrations/*.sql")
		require.NoError(t, err)
		require.Equal(t, len(names), n)
		require.NoError(t, db2.Close())
	}
}

// A database from before the message count column gets it filled in from
// the messages it already has, and the count follows later writes.
func TestMessageCountBackfilled(t *testing.T) {
	db, path := openTest(t)
	ctx := context.Background()
	mustWorkspace(t, db, "w")
	mustSession(t, db, "w", "s", t0)
	mustSession(t, db, "w", "empty", t0)
	for _, id := range []string{"m1", "m2"} {
		require.NoError(t, db.PutMessage(ctx, msg(id, "s", id)))
	}
	// Undo migration 0002 to get the schema as 0001 left it.
	db = reopenAfter(t, db, path,
		`DROP TRIGGER messages_count_insert`,
		`DROP TRIGGER messages_count_delete`,
		`ALTER TABLE sessions DROP COLUMN message_count`,
		`DELETE FROM schema_migrations WHERE version = '0002_message_count.sql'`,
	)
	s, err := db.GetSession(ctx, "w", "s")
	require.NoError(t, err)
	require.Equal(t, 2, s.MessageCount)
	e, err := db.GetSession(ctx, "w", "empty")
	require.NoError(t, err)
	require.Equal(t, 0, e.MessageCount)
	require.NoError(t, db.PutMessage(ctx, msg("m3", "s", "m3")))
	require.NoError(t, db.PutMessage(ctx, msg("m1", "s", "m1 again")))
	s, err = db.GetSession(ctx, "w", "s")
	require.NoError(t, err)
	require.Equal(t, 3, s.MessageCount)
}

// A database from before migration 0004 keeps its messages, their order and
// counts when the table is rebuilt without AUTOINCREMENT; a message put
// after the newest one was deleted (with its session) still sorts last.
func TestMessagesRebuiltWithoutAutoincrement(t *testing.T) {
	db, path := openTest(t)
	ctx := context.Background()
	mustWorkspace(t, db, "w")
	mustSession(t, db, "w", "s", t0)
	mustSession(t, db, "w", "gone", t0)
	// The table as 0001 made it, with rows.
	execAll(t, db,
		`DROP TABLE messages`,
		`CREATE TABLE messages (
			ord INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE,
			session_id TEXT NOT NULL, data TEXT NOT NULL) STRICT`,
		`CREATE INDEX messages_by_session ON messages (session_id, ord)`,
		`CREATE TRIGGER messages_count_insert AFTER INSERT ON messages BEGIN
			UPDATE sessions SET message_count = message_count + 1 WHERE id = NEW.session_id; END`,
		`CREATE TRIGGER messages_count_delete AFTER DELETE ON messages BEGIN
			UPDATE sessions SET message_count = message_count - 1 WHERE id = OLD.session_id; END`,
	)
	m1, m2, m3 := msg("m1", "s", "one"), msg("m2", "s", "two"), msg("m3", "s", "three")
	for _, m := range []proto.Message{m2, m1, msg("g", "gone", "newest")} {
		require.NoError(t, db.PutMessage(ctx, m))
	}
	// 0011 runs again after it, as it did after it the first time: it adds
	// a column to the table 0004 rebuilds.
	db = reopenAfter(t, db, path, `DELETE FROM schema_migrations WHERE version = '0004_messages_rowid.sql'`,
		`DROP TABLE checkpoints`, `DELETE FROM schema_migrations WHERE version = '0011_rewinds.sql'`)
	var schema string
	require.NoError(t, db.reader.QueryRow(`SELECT sql FROM sqlite_schema WHERE name = 'messages'`).Scan(&schema))
	require.NotContains(t, schema, "AUTOINCREMENT")
	got, err := db.ListMessages(ctx, "s")
	require.NoError(t, err)
	require.Equal(t, []proto.Message{m2, m1}, got)

	require.NoError(t, db.DeleteSession(ctx, "w", "gone"))
	require.NoError(t, db.PutMessage(ctx, m3))
	got, err = db.ListMessages(ctx, "s")
	require.NoError(t, err)
	require.Equal(t, []proto.Message{m2, m1, m3}, got)
	sess, err := db.GetSession(ctx, "w", "s")
	require.NoError(t, err)
	require.Equal(t, 3, sess.MessageCount, "the count triggers came back with the table")
}

// reopenAfter runs stmts on db (to put the schema back as an older binary
// left it, for one), closes it and opens the file again, which migrates it.
func reopenAfter(t *testing.T, db *DB, path string, stmts ...string) *DB {
	t.Helper()
	execAll(t, db, stmts...)
	require.NoError(t, db.Close())
	db, err := Open(context.Background(), path)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func execAll(t *testing.T, db *DB, stmts ...string) {
	t.Helper()
	for _, q := range stmts {
		_, err := db.writer.Exec(q)
		require.NoError(t, err, q)
	}
}

func TestMigrationUnknownToBinary(t *testing.T) {
	db, path := openTest(t)
	_, err := db.writer.Exec(`INSERT INTO schema_migrations VALUES ('9999_future.sql', 0)`)
	require.NoError(t, err)
	require.NoError(t, db.Close())
	_, err = Open(context.Background(), path)
	require.ErrorContains(t, err, "9999_future.sql")
}

// Migration 0005 settles the requests whose answer the broker had recorded
// as applied, and only those.
func TestPendingSettledBackfilled(t *testing.T) {
	db, path := openTest(t)
	ctx := context.Background()
	applied := store.Pending{RequestID: "applied", WorkspaceID: "w", RunID: "r", Kind: "permission", CreatedAt: t0,
		Data: json.RawMessage(`{"resolved":true,"applied":true,"answer":{"result":"approved"}}`)}
	resolved := store.Pending{RequestID: "resolved", WorkspaceID: "w", RunID: "r", Kind: "permission", CreatedAt: at(time.Second),
		Data: json.RawMessage(`{"resolved":true,"answer":{"result":"approved"}}`)}
	waiting := store.Pending{RequestID: "waiting", WorkspaceID: "w", RunID: "r", Kind: "tool_call", CreatedAt: at(2 * time.Second),
		Data: json.RawMessage(`{"answer":{}}`)}
	mustPutPending(t, db, applied, resolved, waiting)
	// Undo migration 0005 to get the table as 0004 left it.
	db = reopenAfter(t, db, path,
		`DROP INDEX pending_open_by_workspace`,
		`DROP INDEX pending_by_run`,
		`CREATE INDEX pending_by_workspace ON pending (workspace_id, created_at)`,
		`ALTER TABLE pending DROP COLUMN settled`,
		`DELETE FROM schema_migrations WHERE version = '0005_pending_settled.sql'`,
	)
	requireListed(t, db, "w", resolved, waiting)
	got, err := db.GetPending(ctx, "applied")
	require.NoError(t, err)
	require.True(t, got.Settled)
}

// Migration 0013 marks resolved the requests whose answer the broker had
// recorded in their data, and only those; data that is no JSON does not
// stop it.
func TestPendingResolvedBackfilled(t *testing.T) {
	db, path := openTest(t)
	ctx := context.Background()
	resolved := store.Pending{RequestID: "resolved", WorkspaceID: "w", RunID: "r", Kind: "permission", CreatedAt: t0,
		Data: json.RawMessage(`{"resolved":true,"answer":{"result":"approved"}}`)}
	waiting := store.Pending{RequestID: "waiting", WorkspaceID: "w", RunID: "r", Kind: "tool_call", CreatedAt: at(time.Second),
		Data: json.RawMessage(`{"answer":{}}`)}
	odd := store.Pending{RequestID: "odd", WorkspaceID: "w", RunID: "r", Kind: "tool_call", CreatedAt: at(2 * time.Second),
		Data: json.RawMessage(`not json "resolved":true`)}
	empty := store.Pending{RequestID: "empty", WorkspaceID: "w", RunID: "r", Kind: "tool_call", CreatedAt: at(3 * time.Second)}
	mustPutPending(t, db, resolved, waiting, odd, empty)
	// Undo migration 0013 to get the table as the ones before left it.
	db = reopenAfter(t, db, path,
		`ALTER TABLE pending DROP COLUMN resolved`,
		`DELETE FROM schema_migrations WHERE version = '0013_pending_resolved.sql'`,
	)
	resolved.Resolved = true
	requireListed(t, db, "w", resolved, waiting, odd, empty)
	won, err := db.ResolvePending(ctx, "w", "resolved", json.RawMessage(`{}`))
	require.NoError(t, err)
	require.False(t, won, "an answer recorded before the column still wins over later ones")
}

// requireListed checks the workspace's unsettled requests, oldest first.
func requireListed(t *testing.T, db *DB, ws string, want ...store.Pending) {
	t.Helper()
	list, err := db.ListPending(context.Background(), ws)
	require.NoError(t, err)
	require.Equal(t, want, list)
}

func mustPutPending(t *testing.T, db *DB, ps ...store.Pending) {
	t.Helper()
	for _, p := range ps {
		require.NoError(t, db.PutPending(context.Background(), p))
	}
}

// TestTwoHandlesSameFile checks the busy_timeout path: a second store on the
// same file (as a second process would) competes for the file lock.
func TestTwoHandlesSameFile(t *testing.T) {
	a, path := openTest(t)
	b, err := Open(context.Background(), path)
	require.NoError(t, err)
	defer b.Close()
	ctx := context.Background()
	mustWorkspace(t, a, "w")

	var wg sync.WaitGroup
	errs := make(chan error, 2)
	var seq atomic.Int64
	for _, db := range []*DB{a, b} {
		wg.Go(func() {
			for range 100 {
				if err := db.AppendEvent(ctx, ev("w", "s", seq.Add(1), true)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	maxSeq, err := a.MaxSeq(ctx, "w")
	require.NoError(t, err)
	require.EqualValues(t, 200, maxSeq)
}
