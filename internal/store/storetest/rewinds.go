package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/internal/store"
)

// A rewind marks the messages from the run's first on, leaves them out of
// ListMessages and the count, keeps them in AllMessages, drops the later
// checkpoints, and survives a reopen; a session's delete takes its
// checkpoints with it. Every Tandem store keeps checkpoints.
func testRewinds(t *testing.T, h Harness) {
	s := h.Open(t)
	rw, ok := s.(store.Rewinds)
	require.True(t, ok, "the store implements store.Rewinds")
	mustWorkspace(t, s, "w")
	mustSession(t, s, "w", "s", t0)
	for _, id := range []string{"m1", "m2", "m3", "m4"} {
		require.NoError(t, s.PutMessage(bg, msg(id, "s", id)))
	}
	cks := []store.Checkpoint{
		{ID: "c1", WorkspaceID: "w", SessionID: "s", RunID: "r1", MessageID: "m2", Commit: "a1", CreatedAt: t0},
		{ID: "c2", WorkspaceID: "w", SessionID: "s", RunID: "r2", MessageID: "m3", Commit: "a2", End: "b2", CreatedAt: at(time.Second)},
	}
	for _, c := range cks {
		require.NoError(t, rw.PutCheckpoint(bg, c))
	}
	got, err := rw.ListCheckpoints(bg, "s")
	require.NoError(t, err)
	require.Equal(t, cks, got)
	// A session deleted (or never made) gets no checkpoint: the end of a
	// run recorded after its session's delete leaves nothing behind.
	require.ErrorIs(t, rw.PutCheckpoint(bg, store.Checkpoint{ID: "c9", WorkspaceID: "w", SessionID: "gone", RunID: "r9", Commit: "a9", CreatedAt: t0}), store.ErrNotFound)
	got, err = rw.ListCheckpoints(bg, "gone")
	require.NoError(t, err)
	require.Empty(t, got)

	_, err = rw.Rewind(bg, "s", "nope", cks[0])
	require.ErrorIs(t, err, store.ErrNotFound)
	keep := cks[0]
	keep.End = "e1"
	n, err := rw.Rewind(bg, "s", "m2", keep)
	require.NoError(t, err)
	assert.Equal(t, 3, n)

	s = h.Reopen(t, s)
	rw = s.(store.Rewinds)
	live, err := s.ListMessages(bg, "s")
	require.NoError(t, err)
	require.Len(t, live, 1)
	assert.Equal(t, "m1", live[0].ID)
	all, err := rw.AllMessages(bg, "s")
	require.NoError(t, err)
	require.Len(t, all, 4)
	for i, m := range all {
		assert.Equal(t, i > 0, m.Rewound, m.ID)
	}
	sess, err := s.GetSession(bg, "w", "s")
	require.NoError(t, err)
	assert.Equal(t, 1, sess.MessageCount)
	got, err = rw.ListCheckpoints(bg, "s")
	require.NoError(t, err)
	assert.Equal(t, []store.Checkpoint{keep}, got)

	require.NoError(t, s.DeleteSession(bg, "w", "s"))
	got, err = rw.ListCheckpoints(bg, "s")
	require.NoError(t, err)
	assert.Empty(t, got)
}
