package storetest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/internal/store"
)

// A workspace is found by its path: ensuring a known path returns the
// existing row, an id taken by another path is a conflict, lists are oldest
// first with equal times in insertion order.
func testWorkspaces(t *testing.T, h Harness) {
	s := h.Open(t)
	w1 := store.Workspace{ID: "w1", Path: "/a", CreatedAt: at(time.Second), SeqReserved: 3}
	got, created, err := s.EnsureWorkspace(bg, w1)
	require.NoError(t, err)
	require.True(t, created)
	require.Equal(t, w1, got)

	// Same path, other id: the existing row wins.
	got, created, err = s.EnsureWorkspace(bg, store.Workspace{ID: "other", Path: "/a", CreatedAt: at(time.Hour)})
	require.NoError(t, err)
	require.False(t, created)
	require.Equal(t, w1, got)
	_, err = s.GetWorkspace(bg, "other")
	require.ErrorIs(t, err, store.ErrNotFound, "the losing id is not stored")

	// Same id, other path: a conflict, not a silent merge.
	_, _, err = s.EnsureWorkspace(bg, store.Workspace{ID: "w1", Path: "/elsewhere", CreatedAt: t0})
	require.ErrorIs(t, err, store.ErrExists)

	w0 := store.Workspace{ID: "w0", Path: "/b", CreatedAt: t0}
	_, created, err = s.EnsureWorkspace(bg, w0)
	require.NoError(t, err)
	require.True(t, created)
	// Same time as w0, inserted later: listed after it.
	w2 := store.Workspace{ID: "a-first-by-id", Path: "/c", CreatedAt: t0}
	_, _, err = s.EnsureWorkspace(bg, w2)
	require.NoError(t, err)

	got, err = s.GetWorkspace(bg, "w1")
	require.NoError(t, err)
	require.Equal(t, w1, got)
	require.Equal(t, time.UTC, got.CreatedAt.Location())

	_, err = s.GetWorkspace(bg, "nope")
	require.ErrorIs(t, err, store.ErrNotFound)
	require.ErrorContains(t, err, "nope")

	list, err := s.ListWorkspaces(bg)
	require.NoError(t, err)
	require.Equal(t, []store.Workspace{w0, w2, w1}, list, "oldest first, then insertion order")
}

// Lists with nothing in them are empty slices, not nil: they are encoded
// to JSON as [] for clients.
func testListsEmptyNotNil(t *testing.T, h Harness) {
	s := h.Open(t)
	ws, err := s.ListWorkspaces(bg)
	require.NoError(t, err)
	require.NotNil(t, ws)
	require.Empty(t, ws)
	ss, err := s.ListSessions(bg, "w")
	require.NoError(t, err)
	require.NotNil(t, ss)
	ms, err := s.ListMessages(bg, "s")
	require.NoError(t, err)
	require.NotNil(t, ms)
	es, err := s.WorkspaceEvents(bg, "w", 0, 0, 0)
	require.NoError(t, err)
	require.NotNil(t, es)
	es, err = s.SessionEvents(bg, "s", 0, 0)
	require.NoError(t, err)
	require.NotNil(t, es)
	ps, err := s.ListPending(bg, "w")
	require.NoError(t, err)
	require.NotNil(t, ps)
	ps, err = s.RunPending(bg, "r")
	require.NoError(t, err)
	require.NotNil(t, ps)
}

// Times come back in UTC at microsecond precision (what proto.Time
// encodes); the zero time stays zero.
func testTimeRoundTrip(t *testing.T, h Harness) {
	s := h.Open(t)
	local := time.Date(2024, 1, 2, 3, 4, 5, 123456789, time.FixedZone("X", 5*3600))
	w, _, err := s.EnsureWorkspace(bg, store.Workspace{ID: "w", Path: "/w", CreatedAt: local})
	require.NoError(t, err)
	require.Equal(t, local.UTC().Truncate(time.Microsecond), w.CreatedAt)
	require.Equal(t, time.UTC, w.CreatedAt.Location())

	_, _, err = s.EnsureWorkspace(bg, store.Workspace{ID: "z", Path: "/z"})
	require.NoError(t, err)
	z, err := s.GetWorkspace(bg, "z")
	require.NoError(t, err)
	require.True(t, z.CreatedAt.IsZero(), "the zero time round-trips")

	require.NoError(t, s.CreateSession(bg, store.Session{ID: "s", WorkspaceID: "w", CreatedAt: local, UpdatedAt: local}))
	sess, err := s.GetSession(bg, "w", "s")
	require.NoError(t, err)
	require.Equal(t, local.UTC().Truncate(time.Microsecond), sess.CreatedAt)
	require.Equal(t, local.UTC().Truncate(time.Microsecond), sess.UpdatedAt)
	require.Equal(t, time.UTC, sess.UpdatedAt.Location())

	require.NoError(t, s.PutPending(bg, store.Pending{RequestID: "p", WorkspaceID: "w", Kind: "permission", CreatedAt: local}))
	p, err := s.GetPending(bg, "p")
	require.NoError(t, err)
	require.Equal(t, local.UTC().Truncate(time.Microsecond), p.CreatedAt)
	require.Equal(t, time.UTC, p.CreatedAt.Location())
}

// Concurrent callers ensuring one path all get one workspace, created once.
func testEnsureWorkspaceConcurrent(t *testing.T, h Harness) {
	s := h.Open(t)
	const n = 16
	var (
		wg      sync.WaitGroup
		created atomic.Int32
		ids     = make([]string, n)
		errs    = make([]error, n)
	)
	for i := range n {
		wg.Go(func() {
			w, c, err := s.EnsureWorkspace(bg, store.Workspace{ID: fmt.Sprintf("w%d", i), Path: "/same", CreatedAt: t0})
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
	list, err := s.ListWorkspaces(bg)
	require.NoError(t, err)
	require.Len(t, list, 1)
}

// A workspace's marks (the seqs reserved, the log recovered) only move up,
// and setting one names a workspace that exists.
func testWorkspaceMarksOnlyRise(t *testing.T, h Harness) {
	for name, mark := range map[string]struct {
		set func(store.Store, context.Context, string, int64) error
		get func(store.Workspace) int64
	}{
		"seq_reserved":      {store.Store.ReserveSeq, func(w store.Workspace) int64 { return w.SeqReserved }},
		"recovered_through": {store.Store.SetRecoveredThrough, func(w store.Workspace) int64 { return w.RecoveredThrough }},
	} {
		t.Run(name, func(t *testing.T) {
			s := h.Open(t)
			mustWorkspace(t, s, "w")
			mustWorkspace(t, s, "v")
			require.NoError(t, mark.set(s, bg, "w", 100))
			require.NoError(t, mark.set(s, bg, "w", 50)) // never lowers
			w, err := s.GetWorkspace(bg, "w")
			require.NoError(t, err)
			require.EqualValues(t, 100, mark.get(w))
			require.NoError(t, mark.set(s, bg, "w", 100)) // unchanged value still "found"
			require.ErrorIs(t, mark.set(s, bg, "nope", 1), store.ErrNotFound)
			v, err := s.GetWorkspace(bg, "v")
			require.NoError(t, err)
			require.Zero(t, mark.get(v), "other workspaces keep theirs")

			// Concurrent raises end at the highest, whatever their order.
			var wg sync.WaitGroup
			for i := range 32 {
				wg.Go(func() { assert.NoError(t, mark.set(s, bg, "v", int64(1000+i*7%32))) })
			}
			wg.Wait()
			v, err = s.GetWorkspace(bg, "v")
			require.NoError(t, err)
			require.EqualValues(t, 1031, mark.get(v))
		})
	}
}
