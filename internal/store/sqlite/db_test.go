package sqlite

import (
	"bytes"
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

	"github.com/google/uuid"
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

func seqs(es []store.Event) []int64 {
	out := make([]int64, len(es))
	for i, e := range es {
		out[i] = e.Seq
	}
	return out
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
	db = reopenAfter(t, db, path, `DELETE FROM schema_migrations WHERE version = '0004_messages_rowid.sql'`)
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

func TestWorkspaces(t *testing.T) {
	db, _ := openTest(t)
	ctx := context.Background()

	w1 := store.Workspace{ID: "w1", Path: "/a", CreatedAt: at(time.Second), SeqReserved: 3}
	got, created, err := db.EnsureWorkspace(ctx, w1)
	require.NoError(t, err)
	require.True(t, created)
	require.Equal(t, w1, got)

	// Same path, other id: the existing row wins.
	got, created, err = db.EnsureWorkspace(ctx, store.Workspace{ID: "other", Path: "/a", CreatedAt: at(time.Hour)})
	require.NoError(t, err)
	require.False(t, created)
	require.Equal(t, w1, got)

	// Same id, other path: a conflict, not a silent merge.
	_, _, err = db.EnsureWorkspace(ctx, store.Workspace{ID: "w1", Path: "/elsewhere", CreatedAt: t0})
	require.ErrorIs(t, err, store.ErrExists)

	w0 := store.Workspace{ID: "w0", Path: "/b", CreatedAt: t0}
	_, created, err = db.EnsureWorkspace(ctx, w0)
	require.NoError(t, err)
	require.True(t, created)

	got, err = db.GetWorkspace(ctx, "w1")
	require.NoError(t, err)
	require.Equal(t, w1, got)
	require.Equal(t, time.UTC, got.CreatedAt.Location())

	_, err = db.GetWorkspace(ctx, "nope")
	require.ErrorIs(t, err, store.ErrNotFound)
	require.ErrorContains(t, err, "nope")

	list, err := db.ListWorkspaces(ctx)
	require.NoError(t, err)
	require.Equal(t, []store.Workspace{w0, w1}, list, "oldest first")
}

func TestListEmptyNonNil(t *testing.T) {
	db, _ := openTest(t)
	ctx := context.Background()
	ws, err := db.ListWorkspaces(ctx)
	require.NoError(t, err)
	require.NotNil(t, ws)
	require.Empty(t, ws)
	ss, err := db.ListSessions(ctx, "w")
	require.NoError(t, err)
	require.NotNil(t, ss)
	ms, err := db.ListMessages(ctx, "s")
	require.NoError(t, err)
	require.NotNil(t, ms)
	es, err := db.WorkspaceEvents(ctx, "w", 0, 0, 0)
	require.NoError(t, err)
	require.NotNil(t, es)
	es, err = db.SessionEvents(ctx, "s", 0, 0)
	require.NoError(t, err)
	require.NotNil(t, es)
	ps, err := db.ListPending(ctx, "w")
	require.NoError(t, err)
	require.NotNil(t, ps)
}

func TestTimeRoundTrip(t *testing.T) {
	db, _ := openTest(t)
	ctx := context.Background()
	local := time.Date(2024, 1, 2, 3, 4, 5, 123456789, time.FixedZone("X", 5*3600))
	w, _, err := db.EnsureWorkspace(ctx, store.Workspace{ID: "w", Path: "/w", CreatedAt: local})
	require.NoError(t, err)
	require.Equal(t, local.UTC().Truncate(time.Microsecond), w.CreatedAt)
	require.Equal(t, time.UTC, w.CreatedAt.Location())

	_, _, err = db.EnsureWorkspace(ctx, store.Workspace{ID: "z", Path: "/z"})
	require.NoError(t, err)
	z, err := db.GetWorkspace(ctx, "z")
	require.NoError(t, err)
	require.True(t, z.CreatedAt.IsZero(), "the zero time round-trips")
}

func TestEnsureWorkspaceConcurrent(t *testing.T) {
	db, _ := openTest(t)
	ctx := context.Background()
	const n = 16
	var (
		wg      sync.WaitGroup
		created atomic.Int32
		ids     = make([]string, n)
		errs    = make([]error, n)
	)
	for i := range n {
		wg.Go(func() {
			w, c, err := db.EnsureWorkspace(ctx, store.Workspace{ID: fmt.Sprintf("w%d", i), Path: "/same", CreatedAt: t0})
			errs[i], ids[i] = err, w.ID
			if c {
				created.Add(1)
			}
		})
	}
	wg.Wait()
	for i := range n {
		require.NoError(t, errs[i])
		require.Equal(t, ids[0], ids[i])
	}
	require.EqualValues(t, 1, created.Load())
}

// A workspace's marks (the seqs reserved, the log recovered) only move up,
// and setting one names a workspace that exists.
func TestWorkspaceMarksOnlyRise(t *testing.T) {
	for name, mark := range map[string]struct {
		set func(*DB, context.Context, string, int64) error
		get func(store.Workspace) int64
	}{
		"seq_reserved":      {(*DB).ReserveSeq, func(w store.Workspace) int64 { return w.SeqReserved }},
		"recovered_through": {(*DB).SetRecoveredThrough, func(w store.Workspace) int64 { return w.RecoveredThrough }},
	} {
		t.Run(name, func(t *testing.T) {
			db, _ := openTest(t)
			ctx := context.Background()
			mustWorkspace(t, db, "w")
			require.NoError(t, mark.set(db, ctx, "w", 100))
			require.NoError(t, mark.set(db, ctx, "w", 50)) // never lowers
			w, err := db.GetWorkspace(ctx, "w")
			require.NoError(t, err)
			require.EqualValues(t, 100, mark.get(w))
			require.NoError(t, mark.set(db, ctx, "w", 100)) // unchanged value still "found"
			require.ErrorIs(t, mark.set(db, ctx, "nope", 1), store.ErrNotFound)
		})
	}
}

func TestSessions(t *testing.T) {
	db, _ := openTest(t)
	ctx := context.Background()
	mustWorkspace(t, db, "w")
	mustWorkspace(t, db, "v")

	s1 := mustSession(t, db, "w", "s1", at(1*time.Minute))
	s2 := mustSession(t, db, "w", "s2", at(3*time.Minute))
	mustSession(t, db, "w", "s3", at(2*time.Minute))
	// Ties on updated_at: newer created_at first, then id.
	s4 := store.Session{ID: "s4", WorkspaceID: "w", CreatedAt: at(time.Second), UpdatedAt: at(2 * time.Minute)}
	require.NoError(t, db.CreateSession(ctx, s4))
	s5 := store.Session{ID: "s5", WorkspaceID: "w", CreatedAt: at(time.Second), UpdatedAt: at(2 * time.Minute)}
	require.NoError(t, db.CreateSession(ctx, s5))
	mustSession(t, db, "v", "other", at(time.Hour))

	err := db.CreateSession(ctx, s1)
	require.ErrorIs(t, err, store.ErrExists)
	err = db.CreateSession(ctx, store.Session{ID: "x", WorkspaceID: "missing", CreatedAt: t0, UpdatedAt: t0})
	require.ErrorIs(t, err, store.ErrNotFound)

	got, err := db.GetSession(ctx, "w", "s1")
	require.NoError(t, err)
	require.Equal(t, s1, got)
	require.Nil(t, s4.Config)
	got, err = db.GetSession(ctx, "w", "s4")
	require.NoError(t, err)
	require.Nil(t, got.Config, "empty config stays empty")

	_, err = db.GetSession(ctx, "w", "nope")
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = db.GetSession(ctx, "v", "s1")
	require.ErrorIs(t, err, store.ErrNotFound, "sessions are scoped to their workspace")

	list, err := db.ListSessions(ctx, "w")
	require.NoError(t, err)
	ids := []string{}
	for _, s := range list {
		ids = append(ids, s.ID)
	}
	require.Equal(t, []string{"s2", "s4", "s5", "s3", "s1"}, ids)
	require.Equal(t, s2, list[0])

	// Update moves s1 to the front and changes its fields, not created_at.
	s1.Title, s1.Model, s1.ReasoningEffort = "renamed", "m2", "low"
	s1.Config = json.RawMessage(`{"x":1}`)
	s1.UpdatedAt = at(time.Hour)
	s1.CreatedAt = at(time.Hour) // ignored
	require.NoError(t, db.UpdateSession(ctx, s1))
	got, err = db.GetSession(ctx, "w", "s1")
	require.NoError(t, err)
	require.Equal(t, "renamed", got.Title)
	require.Equal(t, "m2", got.Model)
	require.Equal(t, "low", got.ReasoningEffort)
	require.JSONEq(t, `{"x":1}`, string(got.Config))
	require.Equal(t, at(time.Hour), got.UpdatedAt)
	require.Equal(t, t0, got.CreatedAt)
	list, err = db.ListSessions(ctx, "w")
	require.NoError(t, err)
	require.Equal(t, "s1", list[0].ID)

	err = db.UpdateSession(ctx, store.Session{ID: "nope", WorkspaceID: "w"})
	require.ErrorIs(t, err, store.ErrNotFound)
}

func TestMessages(t *testing.T) {
	db, _ := openTest(t)
	ctx := context.Background()
	mustWorkspace(t, db, "w")
	mustSession(t, db, "w", "s", t0)

	m1, m2, m3 := msg("m1", "s", "one"), msg("m2", "s", "two"), msg("m3", "s", "three")
	for _, m := range []proto.Message{m1, m2, m3, msg("x", "other", "x")} {
		require.NoError(t, db.PutMessage(ctx, m))
	}

	// Replacing m1 keeps it first.
	m1.Parts = append(m1.Parts, proto.Part{Type: proto.PartFinish, Reason: proto.FinishEndTurn})
	m1.UpdatedAt = proto.Time{Time: at(time.Minute)}
	require.NoError(t, db.PutMessage(ctx, m1))

	got, err := db.ListMessages(ctx, "s")
	require.NoError(t, err)
	require.Equal(t, []proto.Message{m1, m2, m3}, got)

	s, err := db.GetSession(ctx, "w", "s")
	require.NoError(t, err)
	require.Equal(t, 3, s.MessageCount)
	list, err := db.ListSessions(ctx, "w")
	require.NoError(t, err)
	require.Equal(t, 3, list[0].MessageCount)

	bad := msg("bad", "s", "")
	bad.Parts = []proto.Part{{Type: "bogus"}}
	require.ErrorContains(t, db.PutMessage(ctx, bad), "put message bad")
}

// Events appended together, with the messages and the touch they carry, are
// written all or none: one bad event leaves no trace of the others.
func TestAppendEventsAllOrNone(t *testing.T) {
	db, _ := openTest(t)
	ctx := context.Background()
	mustWorkspace(t, db, "w")
	mustSession(t, db, "w", "s", t0)
	require.NoError(t, db.AppendEvent(ctx, ev("w", "s", 2, true)))

	withMessage := func(seq int64, m proto.Message) store.Event {
		e := ev("w", "s", seq, true)
		e.Message = &m
		e.Touch = at(time.Hour)
		return e
	}
	m1, m2 := msg("m1", "s", "one"), msg("m2", "s", "two")
	err := db.AppendEvents(ctx, []store.Event{withMessage(1, m1), withMessage(2, m2)})
	require.ErrorIs(t, err, store.ErrExists, "seq 2 is taken")
	msgs, err := db.ListMessages(ctx, "s")
	require.NoError(t, err)
	require.Empty(t, msgs)
	evs, err := db.WorkspaceEvents(ctx, "w", 0, 0, 0)
	require.NoError(t, err)
	require.Equal(t, []int64{2}, seqs(evs))
	sess, err := db.GetSession(ctx, "w", "s")
	require.NoError(t, err)
	require.Equal(t, t0, sess.UpdatedAt)
	require.Zero(t, sess.MessageCount)

	m1.Parts = m1.Parts[:1]
	require.NoError(t, db.AppendEvents(ctx, []store.Event{withMessage(3, m1), withMessage(4, m2)}))
	msgs, err = db.ListMessages(ctx, "s")
	require.NoError(t, err)
	require.Equal(t, []proto.Message{m1, m2}, msgs)
	evs, err = db.WorkspaceEvents(ctx, "w", 0, 0, 0)
	require.NoError(t, err)
	require.Equal(t, []int64{2, 3, 4}, seqs(evs))
	sess, err = db.GetSession(ctx, "w", "s")
	require.NoError(t, err)
	require.Equal(t, at(time.Hour), sess.UpdatedAt)
	require.Equal(t, 2, sess.MessageCount)
}

// An event that carries a session record writes it with the event, or
// neither when the event cannot be written.
func TestAppendEventsWritesTheSessionItAnnounces(t *testing.T) {
	db, _ := openTest(t)
	ctx := context.Background()
	mustWorkspace(t, db, "w")
	orig := mustSession(t, db, "w", "s", t0)
	require.NoError(t, db.AppendEvent(ctx, ev("w", "s", 1, true)))

	changed := orig
	changed.Title, changed.Model, changed.UpdatedAt = "renamed", "openai/gpt-4.1", at(time.Hour)
	dup := ev("w", "s", 1, true)
	dup.Session = &changed
	require.ErrorIs(t, db.AppendEvents(ctx, []store.Event{dup}), store.ErrExists)
	got, err := db.GetSession(ctx, "w", "s")
	require.NoError(t, err)
	require.Equal(t, "title s", got.Title, "no event, no change")

	e := ev("w", "s", 2, true)
	e.Session = &changed
	require.NoError(t, db.AppendEvents(ctx, []store.Event{e}))
	got, err = db.GetSession(ctx, "w", "s")
	require.NoError(t, err)
	require.Equal(t, "renamed", got.Title)
	require.Equal(t, "openai/gpt-4.1", got.Model)
	require.Equal(t, at(time.Hour), got.UpdatedAt)
	evs, err := db.WorkspaceEvents(ctx, "w", 0, 0, 0)
	require.NoError(t, err)
	require.Equal(t, []int64{1, 2}, seqs(evs))
}

// A message put several times in one AppendEvents ends with its last
// version, in the place its first put gave it.
func TestAppendEventsKeepsEachMessagesLastVersionInItsFirstPlace(t *testing.T) {
	db, _ := openTest(t)
	ctx := context.Background()
	mustWorkspace(t, db, "w")
	mustSession(t, db, "w", "s", t0)
	withMessage := func(seq int64, m proto.Message) store.Event {
		e := ev("w", "s", seq, true)
		e.Message = &m
		return e
	}
	u, a1, b := msg("u", "s", "question"), msg("a", "s", ""), msg("b", "s", "aside")
	a2 := msg("a", "s", "answer")
	require.NoError(t, db.AppendEvents(ctx, []store.Event{withMessage(1, u), withMessage(2, a1), withMessage(3, b), withMessage(4, a2)}))
	msgs, err := db.ListMessages(ctx, "s")
	require.NoError(t, err)
	require.Equal(t, []proto.Message{u, a2, b}, msgs)
	evs, err := db.WorkspaceEvents(ctx, "w", 0, 0, 0)
	require.NoError(t, err)
	require.Equal(t, []int64{1, 2, 3, 4}, seqs(evs), "every event is kept")
	sess, err := db.GetSession(ctx, "w", "s")
	require.NoError(t, err)
	require.Equal(t, 3, sess.MessageCount)
}

func TestEvents(t *testing.T) {
	db, _ := openTest(t)
	ctx := context.Background()
	mustWorkspace(t, db, "w")
	mustWorkspace(t, db, "v")

	maxSeq, err := db.MaxSeq(ctx, "w")
	require.NoError(t, err)
	require.Zero(t, maxSeq)

	for seq := int64(1); seq <= 10; seq++ {
		sid := "s1"
		switch {
		case seq%3 == 0:
			sid = "" // workspace-level
		case seq%2 == 0:
			sid = "s2"
		}
		require.NoError(t, db.AppendEvent(ctx, ev("w", sid, seq, seq != 5)))
	}
	require.NoError(t, db.AppendEvent(ctx, ev("v", "sv", 1, true)))
	require.NoError(t, db.AppendEvent(ctx, ev("v", "sv", 100, true)))

	err = db.AppendEvent(ctx, ev("w", "s1", 4, true))
	require.ErrorIs(t, err, store.ErrExists)
	require.ErrorContains(t, err, "append event w/4")

	all, err := db.WorkspaceEvents(ctx, "w", 0, 0, 0)
	require.NoError(t, err)
	require.Equal(t, []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, seqs(all))
	require.Equal(t, ev("w", "s1", 1, true), all[0])
	require.Equal(t, ev("w", "s1", 5, false), all[4])

	got, err := db.WorkspaceEvents(ctx, "w", 3, 7, 0)
	require.NoError(t, err)
	require.Equal(t, []int64{4, 5, 6, 7}, seqs(got))
	got, err = db.WorkspaceEvents(ctx, "w", 3, 0, 2)
	require.NoError(t, err)
	require.Equal(t, []int64{4, 5}, seqs(got))
	got, err = db.WorkspaceEvents(ctx, "w", 3, -1, 100)
	require.NoError(t, err)
	require.Equal(t, []int64{4, 5, 6, 7, 8, 9, 10}, seqs(got))
	got, err = db.WorkspaceEvents(ctx, "w", 10, 0, 0)
	require.NoError(t, err)
	require.Empty(t, got)

	// s1 holds 1, 5, 7; 5 is not in history.
	got, err = db.SessionEvents(ctx, "s1", 0, 0)
	require.NoError(t, err)
	require.Equal(t, []int64{1, 7}, seqs(got))
	got, err = db.SessionEvents(ctx, "s2", 2, 1)
	require.NoError(t, err)
	require.Equal(t, []int64{4}, seqs(got))
	got, err = db.SessionEvents(ctx, "s2", 0, -5)
	require.NoError(t, err)
	require.Equal(t, []int64{2, 4, 8, 10}, seqs(got))

	maxSeq, err = db.MaxSeq(ctx, "w")
	require.NoError(t, err)
	require.EqualValues(t, 10, maxSeq)
	maxSeq, err = db.MaxSeq(ctx, "v")
	require.NoError(t, err)
	require.EqualValues(t, 100, maxSeq)
}

func TestEventEmptyEnvelope(t *testing.T) {
	db, _ := openTest(t)
	ctx := context.Background()
	require.NoError(t, db.AppendEvent(ctx, store.Event{WorkspaceID: "w", Seq: 1, Type: "t"}))
	got, err := db.WorkspaceEvents(ctx, "w", 0, 0, 0)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Empty(t, got[0].Envelope)
}

func TestPending(t *testing.T) {
	db, _ := openTest(t)
	ctx := context.Background()

	p1 := store.Pending{RequestID: "r1", WorkspaceID: "w", SessionID: "s", RunID: "run", Kind: "permission",
		Data: json.RawMessage(`{"tool":"bash"}`), CreatedAt: at(2 * time.Second)}
	p2 := store.Pending{RequestID: "r2", WorkspaceID: "w", SessionID: "s", RunID: "run", Kind: "tool_call",
		Data: json.RawMessage(`{"name":"x"}`), CreatedAt: at(time.Second)}
	p3 := store.Pending{RequestID: "r3", WorkspaceID: "v", Kind: "permission", CreatedAt: t0}
	mustPutPending(t, db, p1, p2, p3)

	got, err := db.GetPending(ctx, "r1")
	require.NoError(t, err)
	require.Equal(t, p1, got)
	got, err = db.GetPending(ctx, "r3")
	require.NoError(t, err)
	require.Equal(t, p3, got)
	_, err = db.GetPending(ctx, "nope")
	require.ErrorIs(t, err, store.ErrNotFound)

	requireListed(t, db, "w", p2, p1)

	// Put again replaces.
	p1.Data = json.RawMessage(`{"tool":"edit"}`)
	require.NoError(t, db.PutPending(ctx, p1))
	got, err = db.GetPending(ctx, "r1")
	require.NoError(t, err)
	require.Equal(t, p1, got)

	require.NoError(t, db.DeletePending(ctx, "r1"))
	require.ErrorIs(t, db.DeletePending(ctx, "r1"), store.ErrNotFound)
	_, err = db.GetPending(ctx, "r1")
	require.ErrorIs(t, err, store.ErrNotFound)
	requireListed(t, db, "w", p2)
}

// A settled request is kept (an answer to it must learn it was resolved)
// but is no longer the workspace's pending work; its run still finds it.
func TestPendingSettled(t *testing.T) {
	db, _ := openTest(t)
	ctx := context.Background()
	open := store.Pending{RequestID: "open", WorkspaceID: "w", SessionID: "s", RunID: "run", Kind: "permission", CreatedAt: at(time.Second)}
	done := store.Pending{RequestID: "done", WorkspaceID: "w", SessionID: "s", RunID: "run", Kind: "permission", CreatedAt: t0, Settled: true}
	other := store.Pending{RequestID: "other", WorkspaceID: "w", SessionID: "s", RunID: "run2", Kind: "tool_call", CreatedAt: t0}
	mustPutPending(t, db, open, done, other)
	requireListed(t, db, "w", other, open)
	got, err := db.GetPending(ctx, "done")
	require.NoError(t, err)
	require.Equal(t, done, got)
	runs, err := db.RunPending(ctx, "run")
	require.NoError(t, err)
	require.Equal(t, []store.Pending{done, open}, runs, "settled or not, oldest first")

	open.Settled = true
	require.NoError(t, db.PutPending(ctx, open))
	requireListed(t, db, "w", other)
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

func TestDeleteSessionCascade(t *testing.T) {
	db, _ := openTest(t)
	ctx := context.Background()
	mustWorkspace(t, db, "w")
	mustSession(t, db, "w", "s", t0)
	keep := mustSession(t, db, "w", "keep", t0)

	require.NoError(t, db.PutMessage(ctx, msg("m1", "s", "a")))
	require.NoError(t, db.PutMessage(ctx, msg("k1", "keep", "b")))
	require.NoError(t, db.AppendEvent(ctx, ev("w", "s", 1, true)))
	require.NoError(t, db.AppendEvent(ctx, ev("w", "keep", 2, true)))
	require.NoError(t, db.AppendEvent(ctx, ev("w", "", 3, false)))
	require.NoError(t, db.PutPending(ctx, store.Pending{RequestID: "p1", WorkspaceID: "w", SessionID: "s", Kind: "permission", CreatedAt: t0}))
	require.NoError(t, db.PutPending(ctx, store.Pending{RequestID: "p2", WorkspaceID: "w", SessionID: "keep", Kind: "permission", CreatedAt: t0}))
	require.NoError(t, db.ApproveForSession(ctx, "s", "shell"))
	require.NoError(t, db.ApproveForSession(ctx, "keep", "shell"))

	// Wrong workspace: nothing is deleted.
	mustWorkspace(t, db, "v")
	require.ErrorIs(t, db.DeleteSession(ctx, "v", "s"), store.ErrNotFound)
	ms, err := db.ListMessages(ctx, "s")
	require.NoError(t, err)
	require.Len(t, ms, 1)

	require.NoError(t, db.DeleteSession(ctx, "w", "s"))
	err = db.DeleteSession(ctx, "w", "s")
	require.ErrorIs(t, err, store.ErrNotFound)
	require.ErrorContains(t, err, "delete session s")

	_, err = db.GetSession(ctx, "w", "s")
	require.ErrorIs(t, err, store.ErrNotFound)
	ms, err = db.ListMessages(ctx, "s")
	require.NoError(t, err)
	require.Empty(t, ms)
	es, err := db.WorkspaceEvents(ctx, "w", 0, 0, 0)
	require.NoError(t, err)
	require.Equal(t, []int64{2, 3}, seqs(es))
	_, err = db.GetPending(ctx, "p1")
	require.ErrorIs(t, err, store.ErrNotFound)

	got, err := db.GetSession(ctx, "w", "keep")
	require.NoError(t, err)
	keep.MessageCount = 1
	require.Equal(t, keep, got)
	_, err = db.GetPending(ctx, "p2")
	require.NoError(t, err)
	requireApprovals(t, db, "s")
	requireApprovals(t, db, "keep", "shell")
}

func requireApprovals(t *testing.T, db *DB, sessionID string, want ...string) {
	t.Helper()
	got, err := db.SessionApprovals(context.Background(), sessionID)
	require.NoError(t, err)
	require.ElementsMatch(t, want, got)
}

// Approving a kind twice records it once; sessions keep their own.
func TestSessionApprovals(t *testing.T) {
	db, _ := openTest(t)
	ctx := context.Background()
	requireApprovals(t, db, "s")
	for _, kind := range []string{"write", "shell", "write"} {
		require.NoError(t, db.ApproveForSession(ctx, "s", kind))
	}
	require.NoError(t, db.ApproveForSession(ctx, "other", "custom_tool"))
	requireApprovals(t, db, "s", "shell", "write")
	requireApprovals(t, db, "other", "custom_tool")
}

func TestReopenPersists(t *testing.T) {
	db, path := openTest(t)
	ctx := context.Background()
	w := mustWorkspace(t, db, "w")
	require.NoError(t, db.ReserveSeq(ctx, "w", 4096))
	w.SeqReserved = 4096
	s := mustSession(t, db, "w", "s", at(time.Minute))
	m := msg("m", "s", "hello")
	require.NoError(t, db.PutMessage(ctx, m))
	e := ev("w", "s", 7, true)
	require.NoError(t, db.AppendEvent(ctx, e))
	p := store.Pending{RequestID: "r", WorkspaceID: "w", SessionID: "s", Kind: "tool_call",
		Data: json.RawMessage(`{}`), CreatedAt: t0}
	require.NoError(t, db.PutPending(ctx, p))
	require.NoError(t, db.Close())

	db, err := Open(ctx, path)
	require.NoError(t, err)
	defer db.Close()

	gw, err := db.GetWorkspace(ctx, "w")
	require.NoError(t, err)
	require.Equal(t, w, gw)
	gs, err := db.GetSession(ctx, "w", "s")
	require.NoError(t, err)
	s.MessageCount = 1
	require.Equal(t, s, gs)
	ms, err := db.ListMessages(ctx, "s")
	require.NoError(t, err)
	require.Equal(t, []proto.Message{m}, ms)
	es, err := db.WorkspaceEvents(ctx, "w", 0, 0, 0)
	require.NoError(t, err)
	require.Equal(t, []store.Event{e}, es)
	maxSeq, err := db.MaxSeq(ctx, "w")
	require.NoError(t, err)
	require.EqualValues(t, 7, maxSeq)
	gp, err := db.GetPending(ctx, "r")
	require.NoError(t, err)
	require.Equal(t, p, gp)

	// Ensure on reopen finds the existing workspace.
	_, created, err := db.EnsureWorkspace(ctx, store.Workspace{ID: "new", Path: w.Path, CreatedAt: t0})
	require.NoError(t, err)
	require.False(t, created)
}

func TestCanceledContext(t *testing.T) {
	db, _ := openTest(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, _, err := db.EnsureWorkspace(ctx, store.Workspace{ID: "w", Path: "/w", CreatedAt: t0})
	require.ErrorIs(t, err, context.Canceled)
	// The writer connection is still usable afterwards.
	mustWorkspace(t, db, "w")
}

// TestConcurrentStress hammers the writer from many goroutines while readers
// run; any SQLITE_BUSY or lost write fails it.
func TestConcurrentStress(t *testing.T) {
	db, _ := openTest(t)
	ctx := context.Background()
	mustWorkspace(t, db, "w")
	const (
		writers = 16
		readers = 8
		perG    = 40
	)
	for g := range writers {
		mustSession(t, db, "w", fmt.Sprintf("s%d", g), t0)
	}

	var (
		seq     atomic.Int64
		wg      sync.WaitGroup
		done    = make(chan struct{})
		errCh   = make(chan error, writers+readers)
		readsOK atomic.Int64
	)
	for g := range writers {
		wg.Go(func() {
			sid := fmt.Sprintf("s%d", g)
			for i := range perG {
				s := seq.Add(1)
				if err := db.AppendEvent(ctx, ev("w", sid, s, true)); err != nil {
					errCh <- err
					return
				}
				if err := db.PutMessage(ctx, msg(fmt.Sprintf("%s-m%d", sid, i), sid, "x")); err != nil {
					errCh <- err
					return
				}
				if i%10 == 0 {
					if err := db.ReserveSeq(ctx, "w", s+100); err != nil {
						errCh <- err
						return
					}
					if err := db.PutPending(ctx, store.Pending{RequestID: fmt.Sprintf("%s-p%d", sid, i),
						WorkspaceID: "w", SessionID: sid, Kind: "permission", CreatedAt: t0}); err != nil {
						errCh <- err
						return
					}
				}
			}
		})
	}
	var rg sync.WaitGroup
	for r := range readers {
		rg.Go(func() {
			sid := fmt.Sprintf("s%d", r)
			for {
				select {
				case <-done:
					return
				default:
				}
				if _, err := db.WorkspaceEvents(ctx, "w", 0, 0, 50); err != nil {
					errCh <- err
					return
				}
				if _, err := db.SessionEvents(ctx, sid, 0, 0); err != nil {
					errCh <- err
					return
				}
				if _, err := db.ListMessages(ctx, sid); err != nil {
					errCh <- err
					return
				}
				if _, err := db.ListSessions(ctx, "w"); err != nil {
					errCh <- err
					return
				}
				if _, err := db.MaxSeq(ctx, "w"); err != nil {
					errCh <- err
					return
				}
				readsOK.Add(1)
			}
		})
	}
	wg.Wait()
	close(done)
	rg.Wait()
	close(errCh)
	for err := range errCh {
		require.NoError(t, err)
	}
	require.Positive(t, readsOK.Load())

	maxSeq, err := db.MaxSeq(ctx, "w")
	require.NoError(t, err)
	require.EqualValues(t, writers*perG, maxSeq)
	all, err := db.WorkspaceEvents(ctx, "w", 0, 0, 0)
	require.NoError(t, err)
	require.Len(t, all, writers*perG)
	for g := range writers {
		ms, err := db.ListMessages(ctx, fmt.Sprintf("s%d", g))
		require.NoError(t, err)
		require.Len(t, ms, perG)
		for i, m := range ms {
			require.Equal(t, fmt.Sprintf("s%d-m%d", g, i), m.ID, "insertion order")
		}
	}
	w, err := db.GetWorkspace(ctx, "w")
	require.NoError(t, err)
	require.GreaterOrEqual(t, w.SeqReserved, int64(100))
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

func BenchmarkAppendEvent(b *testing.B) {
	db, _ := openTest(b)
	ctx := context.Background()
	mustWorkspace(b, db, "w")
	env := make([]byte, 256)
	var seq int64
	for b.Loop() {
		seq++
		if err := db.AppendEvent(ctx, store.Event{WorkspaceID: "w", Seq: seq, SessionID: "s", RunID: "r",
			Type: "message.delta", InHistory: true, Envelope: env}); err != nil {
			b.Fatal(err)
		}
	}
}

func TestTouchSessionOnlyMovesForward(t *testing.T) {
	db, _ := openTest(t)
	ctx := context.Background()
	mustWorkspace(t, db, "w")
	mustSession(t, db, "w", "old", at(1*time.Minute))
	mustSession(t, db, "w", "new", at(2*time.Minute))

	require.NoError(t, db.TouchSession(ctx, "old", at(3*time.Minute)))
	list, err := db.ListSessions(ctx, "w")
	require.NoError(t, err)
	require.Equal(t, "old", list[0].ID, "touched session comes first")
	require.Equal(t, at(3*time.Minute), list[0].UpdatedAt)

	require.NoError(t, db.TouchSession(ctx, "old", at(0)))
	got, err := db.GetSession(ctx, "w", "old")
	require.NoError(t, err)
	require.Equal(t, at(3*time.Minute), got.UpdatedAt, "never lowered")

	require.ErrorIs(t, db.TouchSession(ctx, "missing", at(0)), store.ErrNotFound)
}

// BenchmarkAppendEventParallel shows the group commit at work: many writers
// share commits instead of queueing for one each.
func BenchmarkAppendEventParallel(b *testing.B) {
	db, _ := openTest(b)
	ctx := context.Background()
	mustWorkspace(b, db, "w")
	var seq atomic.Int64
	env := bytes.Repeat([]byte("x"), 256)
	b.SetParallelism(32)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := db.AppendEvent(ctx, store.Event{Seq: seq.Add(1), WorkspaceID: "w", Type: "t", Envelope: env}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkPromptWrites makes the writes of one echo prompt, one commit
// after the other, over 64 sessions: the 202's commit (run.accepted and a
// touch), then the run's (run.started, the user message, the assistant
// message opened and finished, run.completed with a touch, session.idle).
// It is the store's share of a prompt's cost, without the scheduling noise
// of the e2e benchmarks. Message ids are version 7 UUIDs, as the agent
// makes them. Count the pages it writes with strace (two pwrites a page).
func BenchmarkPromptWrites(b *testing.B) {
	db, _ := openTest(b)
	ctx := context.Background()
	mustWorkspace(b, db, "w")
	const sessions = 64
	ids := make([]string, sessions)
	for i := range ids {
		ids[i] = uuid.NewString()
		mustSession(b, db, "w", ids[i], t0)
	}
	env := bytes.Repeat([]byte("x"), 300)
	var seq int64
	event := func(sid, typ string, m *proto.Message, touch bool) store.Event {
		seq++
		e := store.Event{WorkspaceID: "w", Seq: seq, SessionID: sid, RunID: "r", Type: typ, InHistory: true, Envelope: env, Message: m}
		if touch {
			e.Touch = time.Now()
		}
		return e
	}
	i := 0
	for b.Loop() {
		sid := ids[i%sessions]
		i++
		if err := db.AppendEvents(ctx, []store.Event{event(sid, "run.accepted", nil, true)}); err != nil {
			b.Fatal(err)
		}
		user := msg(uuid.Must(uuid.NewV7()).String(), sid, "hello")
		user.Role = proto.RoleUser
		opened := msg(uuid.Must(uuid.NewV7()).String(), sid, "")
		finished := opened
		finished.Parts = []proto.Part{{Type: proto.PartText, Text: "hello, echoed back in a few deltas"}, {Type: proto.PartFinish, Reason: "end_turn"}}
		if err := db.AppendEvents(ctx, []store.Event{
			event(sid, "run.started", nil, false),
			event(sid, "message.updated", &user, false),
			event(sid, "message.updated", &opened, false),
			event(sid, "message.updated", &finished, false),
			event(sid, "run.completed", nil, true),
			event(sid, "session.idle", nil, false),
		}); err != nil {
			b.Fatal(err)
		}
	}
}

// A run's usage is added to its session with the event that carries it, or
// not at all when that event cannot be written; the cost stays unknown
// until a run has one, then sums the known ones; an update of the
// session's settings never touches the totals; they survive a reopen.
func TestSessionUsageAddsUpWithItsEvents(t *testing.T) {
	db, path := openTest(t)
	ctx := context.Background()
	mustWorkspace(t, db, "w")
	orig := mustSession(t, db, "w", "s", t0)
	require.NoError(t, db.AppendEvent(ctx, ev("w", "s", 1, true)))

	withUsage := func(seq int64, u proto.Usage, context int64) store.Event {
		e := ev("w", "s", seq, true)
		e.Usage = &store.SessionUsage{Add: u, ContextTokens: context}
		return e
	}
	cost := func(v float64) *float64 { return &v }

	got, err := db.GetSession(ctx, "w", "s")
	require.NoError(t, err)
	require.Equal(t, proto.Usage{}, got.Usage)
	require.Zero(t, got.ContextTokens)

	// Refused with its event (seq 1 is taken): nothing is added.
	require.ErrorIs(t, db.AppendEvents(ctx, []store.Event{withUsage(1, proto.Usage{InputTokens: 5}, 9)}), store.ErrExists)
	got, err = db.GetSession(ctx, "w", "s")
	require.NoError(t, err)
	require.Equal(t, proto.Usage{}, got.Usage)
	require.Zero(t, got.ContextTokens)

	// No price known: the counts add up, the cost stays absent.
	require.NoError(t, db.AppendEvents(ctx, []store.Event{withUsage(2, proto.Usage{InputTokens: 100, OutputTokens: 20, CacheReadTokens: 40, CacheWriteTokens: 10, ReasoningTokens: 5}, 120)}))
	got, err = db.GetSession(ctx, "w", "s")
	require.NoError(t, err)
	require.Equal(t, proto.Usage{InputTokens: 100, OutputTokens: 20, CacheReadTokens: 40, CacheWriteTokens: 10, ReasoningTokens: 5}, got.Usage)
	require.EqualValues(t, 120, got.ContextTokens)

	// Priced runs add their costs; a context of 0 keeps the last one.
	require.NoError(t, db.AppendEvents(ctx, []store.Event{
		withUsage(3, proto.Usage{InputTokens: 1, CostUSD: cost(0.25)}, 0),
		withUsage(4, proto.Usage{OutputTokens: 2, CostUSD: cost(0.5)}, 0),
		withUsage(5, proto.Usage{OutputTokens: 3}, 0),
	}))
	// Settings changes write the record but not the totals.
	changed := orig
	changed.Title, changed.UpdatedAt = "renamed", at(time.Hour)
	require.NoError(t, db.UpdateSession(ctx, changed))

	want := proto.Usage{InputTokens: 101, OutputTokens: 25, CacheReadTokens: 40, CacheWriteTokens: 10, ReasoningTokens: 5, CostUSD: cost(0.75)}
	check := func(db *DB) {
		t.Helper()
		list, err := db.ListSessions(ctx, "w")
		require.NoError(t, err)
		require.Len(t, list, 1)
		require.Equal(t, want, list[0].Usage)
		require.EqualValues(t, 120, list[0].ContextTokens)
		require.Equal(t, "renamed", list[0].Title)
	}
	check(db)
	require.NoError(t, db.Close())
	db2, err := Open(ctx, path)
	require.NoError(t, err)
	defer db2.Close()
	check(db2)
}
