//go:build linux

package sqlite

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/tandem-dev/tandem/internal/store"
)

// setFileSizeLimit sets this process's soft RLIMIT_FSIZE. At 0 no file may
// grow or be written past its start: a full disk, as SQLite sees it (Go
// ignores SIGXFSZ, so writes fail with EFBIG), without root and without
// filling anything. The tests of this package run one at a time.
func setFileSizeLimit(t *testing.T, soft uint64) {
	t.Helper()
	var lim unix.Rlimit
	require.NoError(t, unix.Getrlimit(unix.RLIMIT_FSIZE, &lim))
	lim.Cur = min(soft, lim.Max)
	require.NoError(t, unix.Setrlimit(unix.RLIMIT_FSIZE, &lim))
}

func event(ws, sid string, seq int64) store.Event {
	return store.Event{WorkspaceID: ws, Seq: seq, SessionID: sid, Type: "session.log", InHistory: true, Envelope: []byte(`{}`)}
}

// While the disk is full every write fails with an error that wraps
// store.ErrUnavailable (the group commit's and the direct transactions'
// alike), reads go on, and nothing of the failed writes lands. Once space
// returns, the same writer connection, group commit and checkpointer work
// as before, and a reopen finds exactly what was committed.
func TestWritesOnAFullDiskAreUnavailableUntilSpaceReturns(t *testing.T) {
	ctx := context.Background()
	db, path := openTest(t)
	ws := mustWorkspace(t, db, "w1")
	mustSession(t, db, ws.ID, "s1", t0)
	require.NoError(t, db.AppendEvents(ctx, []store.Event{event(ws.ID, "s1", 1)}))
	require.NoError(t, db.PutMessage(ctx, msg("m1", "s1", "before")))

	setFileSizeLimit(t, 0)
	t.Cleanup(func() { setFileSizeLimit(t, unix.RLIM_INFINITY) })
	// Big enough to need pages of its own, so nothing fits in what the WAL
	// already holds.
	big := msg("m2", "s1", string(make([]byte, 64<<10)))
	failures := map[string]error{
		"append events":  db.AppendEvents(ctx, []store.Event{event(ws.ID, "s1", 2), event(ws.ID, "s1", 3)}),
		"put message":    db.PutMessage(ctx, big),
		"create session": db.CreateSession(ctx, store.Session{ID: "s2", WorkspaceID: ws.ID, CreatedAt: t0, UpdatedAt: t0}),
		"reserve seq":    db.ReserveSeq(ctx, ws.ID, 1<<20),
		"delete session": db.DeleteSession(ctx, ws.ID, "s1"),
		"ensure workspace": func() error {
			_, _, err := db.EnsureWorkspace(ctx, store.Workspace{ID: "w2", Path: "/src/w2", CreatedAt: t0})
			return err
		}(),
	}
	for what, err := range failures {
		require.Error(t, err, what)
		assert.ErrorIs(t, err, store.ErrUnavailable, what)
	}
	// A checkpoint fails too, and leaves its connection usable.
	_, err := db.checkpoints.db.Exec("PRAGMA wal_checkpoint(TRUNCATE)")
	t.Logf("checkpoint on a full disk: %v", err)
	got, err := db.GetSession(ctx, ws.ID, "s1")
	require.NoError(t, err, "reads go on")
	assert.Equal(t, 1, got.MessageCount)

	setFileSizeLimit(t, unix.RLIM_INFINITY)
	require.NoError(t, db.AppendEvents(ctx, []store.Event{event(ws.ID, "s1", 2), event(ws.ID, "s1", 3)}))
	require.NoError(t, db.PutMessage(ctx, big))
	require.NoError(t, db.CreateSession(ctx, store.Session{ID: "s2", WorkspaceID: ws.ID, CreatedAt: t0, UpdatedAt: t0}))
	_, _, err = db.EnsureWorkspace(ctx, store.Workspace{ID: "w2", Path: "/src/w2", CreatedAt: t0})
	require.NoError(t, err)
	var busy, logged, moved int
	require.NoError(t, db.checkpoints.db.QueryRow("PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &logged, &moved))
	assert.Zero(t, busy, "the checkpointer copies the WAL again")
	assert.Equal(t, logged, moved)

	require.NoError(t, db.Close())
	db2, err := Open(ctx, path)
	require.NoError(t, err)
	defer db2.Close()
	evs, err := db2.WorkspaceEvents(ctx, ws.ID, 0, 0, 0)
	require.NoError(t, err)
	assert.Len(t, evs, 3)
	msgs, err := db2.ListMessages(ctx, "s1")
	require.NoError(t, err)
	require.Len(t, msgs, 2)
	assert.Equal(t, "m1", msgs[0].ID)
	sessions, err := db2.ListSessions(ctx, ws.ID)
	require.NoError(t, err)
	assert.Len(t, sessions, 2)
}

// breakDisk is the conformance suite's fault: a full disk until heal.
func breakDisk(t *testing.T, _ store.Store) (heal func()) {
	setFileSizeLimit(t, 0)
	return func() { setFileSizeLimit(t, unix.RLIM_INFINITY) }
}
