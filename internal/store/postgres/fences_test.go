package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/internal/apierr"
	"github.com/tandem-dev/tandem/internal/store"
	"github.com/tandem-dev/tandem/internal/store/postgres/pgtest"
	"github.com/tandem-dev/tandem/proto"
)

func fencedEvent(wsID string, seq int64) store.Event {
	return store.Event{Seq: seq, WorkspaceID: wsID, Type: proto.EventSessionLog, Envelope: []byte(`{}`)}
}

// A node writes a workspace's events only while it holds the workspace's
// lease: without one, and after another node took the workspace over
// (however long this one slept through it), every write fails, with the
// contract's workspace_unavailable, and nothing reaches the database.
func TestFencesWriteOnlyUnderTheLease(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, pgtest.Database(t), Options{})
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	w, _, err := db.EnsureWorkspace(ctx, store.Workspace{ID: uuid.NewString(), Path: "/w", CreatedAt: time.Now().UTC()})
	require.NoError(t, err)
	f := NewFences(db)

	err = f.AppendEvent(ctx, fencedEvent(w.ID, 1))
	require.ErrorIs(t, err, ErrLeaseLost, "no lease, no write")
	assert.Equal(t, proto.CodeWorkspaceUnavailable, apierr.ErrorCode(err))

	old, err := db.AcquireLease(ctx, w.ID, "node-a", 200*time.Millisecond)
	require.NoError(t, err)
	f.Hold(old)
	require.NoError(t, f.AppendEvent(ctx, fencedEvent(w.ID, 2)))
	asked := store.Pending{RequestID: uuid.NewString(), WorkspaceID: w.ID, Kind: "permission", Data: []byte(`{}`), CreatedAt: time.Now().UTC()}
	require.NoError(t, f.PutPending(ctx, asked))

	// Another node takes over once the lease ran out; node-a still
	// believes it owns the workspace.
	var taken Lease
	require.Eventually(t, func() bool {
		taken, err = db.AcquireLease(ctx, w.ID, "node-b", time.Minute)
		return err == nil
	}, 10*time.Second, 20*time.Millisecond)
	require.Greater(t, taken.Epoch, old.Epoch)
	for _, write := range []func() error{
		func() error { return f.AppendEvents(ctx, []store.Event{fencedEvent(w.ID, 3)}) },
		func() error { return f.ReserveSeq(ctx, w.ID, 5000) },
		func() error {
			return f.PutPending(ctx, store.Pending{RequestID: uuid.NewString(), WorkspaceID: w.ID, Kind: "permission", Data: []byte(`{}`), CreatedAt: time.Now().UTC()})
		},
		func() error {
			_, err := f.ResolvePending(ctx, w.ID, asked.RequestID, []byte(`{"answer":{}}`))
			return err
		},
		func() error { return f.SettlePending(ctx, w.ID, asked.RequestID) },
	} {
		err := write()
		require.ErrorIs(t, err, ErrLeaseLost)
		assert.Equal(t, proto.CodeWorkspaceUnavailable, apierr.ErrorCode(err))
	}
	evs, err := db.WorkspaceEvents(ctx, w.ID, 0, 0, 0)
	require.NoError(t, err)
	require.Len(t, evs, 1)
	assert.EqualValues(t, 2, evs[0].Seq)
	got, err := db.GetWorkspace(ctx, w.ID)
	require.NoError(t, err)
	assert.Less(t, got.SeqReserved, int64(5000))
	p, err := db.GetPending(ctx, asked.RequestID)
	require.NoError(t, err)
	assert.False(t, p.Resolved, "an old owner's answer must not win")
	assert.False(t, p.Settled)
}

// A lease that ran out while its owner could not reach the database, and
// that nobody took since, is not lost: the owner's writes fail as
// unavailable (retried, as for a database away) rather than as a lost
// lease, write nothing, and pass again once the owner renewed it.
func TestFencesLapsedLeaseIsUnavailableNotLost(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, pgtest.Database(t), Options{})
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	w, _, err := db.EnsureWorkspace(ctx, store.Workspace{ID: uuid.NewString(), Path: "/w", CreatedAt: time.Now().UTC()})
	require.NoError(t, err)
	f := NewFences(db)
	l, err := db.AcquireLease(ctx, w.ID, "node-a", 200*time.Millisecond)
	require.NoError(t, err)
	f.Hold(l)
	waitExpired(t, db, w.ID)

	err = f.AppendEvent(ctx, fencedEvent(w.ID, 1))
	require.ErrorIs(t, err, store.ErrUnavailable)
	require.NotErrorIs(t, err, ErrLeaseLost)
	_, err = db.RenewLease(ctx, l, time.Minute)
	require.NoError(t, err)
	require.NoError(t, f.AppendEvent(ctx, fencedEvent(w.ID, 2)))
	evs, err := db.WorkspaceEvents(ctx, w.ID, 0, 0, 0)
	require.NoError(t, err)
	require.Len(t, evs, 1)
	assert.EqualValues(t, 2, evs[0].Seq)
}

// A workspace is forgotten by the node holding its lease, or by any node
// while nobody holds it, never under another node's feet; its lease goes
// with it, so no node renews or takes over a workspace that is gone.
func TestFencesForgetWorkspace(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, pgtest.Database(t), Options{})
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	ensure := func(path string) store.Workspace {
		w, _, err := db.EnsureWorkspace(ctx, store.Workspace{ID: uuid.NewString(), Path: path, CreatedAt: time.Now().UTC()})
		require.NoError(t, err)
		return w
	}
	other, own := ensure("/other"), ensure("/own")
	f := NewFences(db)

	held, err := db.AcquireLease(ctx, other.ID, "node-b", time.Minute)
	require.NoError(t, err)
	err = f.DeleteWorkspace(ctx, other.ID)
	require.ErrorIs(t, err, ErrLeaseLost, "node-b owns it")
	assert.Equal(t, proto.CodeWorkspaceUnavailable, apierr.ErrorCode(err))
	_, err = db.GetWorkspace(ctx, other.ID)
	require.NoError(t, err, "refused, so kept")

	require.NoError(t, db.ReleaseLease(ctx, held))
	require.NoError(t, f.DeleteWorkspace(ctx, other.ID), "nobody owns it now")
	_, err = db.GetWorkspace(ctx, other.ID)
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = db.GetLease(ctx, other.ID)
	require.ErrorIs(t, err, store.ErrNotFound, "its lease went with it")

	mine, err := db.AcquireLease(ctx, own.ID, "node-a", time.Minute)
	require.NoError(t, err)
	f.Hold(mine)
	require.NoError(t, f.DeleteWorkspace(ctx, own.ID))
	_, err = db.GetWorkspace(ctx, own.ID)
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = db.GetLease(ctx, own.ID)
	require.ErrorIs(t, err, store.ErrNotFound)
}
