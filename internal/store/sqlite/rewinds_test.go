package sqlite

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/internal/store"
)

// A rewind marks the messages from the run's first on, leaves them out of
// ListMessages and the count, keeps them in AllMessages, drops the later
// checkpoints in one transaction, and a session's delete takes its
// checkpoints with it.
func TestRewind(t *testing.T) {
	db, _ := openTest(t)
	ctx := context.Background()
	mustWorkspace(t, db, "w")
	mustSession(t, db, "w", "s", t0)
	for _, id := range []string{"m1", "m2", "m3", "m4"} {
		require.NoError(t, db.PutMessage(ctx, msg(id, "s", id)))
	}
	cks := []store.Checkpoint{
		{ID: "c1", WorkspaceID: "w", SessionID: "s", RunID: "r1", MessageID: "m2", Commit: "a1", CreatedAt: t0},
		{ID: "c2", WorkspaceID: "w", SessionID: "s", RunID: "r2", MessageID: "m3", Commit: "a2", End: "b2", CreatedAt: t0},
	}
	for _, c := range cks {
		require.NoError(t, db.PutCheckpoint(ctx, c))
	}
	got, err := db.ListCheckpoints(ctx, "s")
	require.NoError(t, err)
	require.Equal(t, cks, got)

	_, err = db.Rewind(ctx, "s", "nope", cks[0])
	require.ErrorIs(t, err, store.ErrNotFound)
	keep := cks[0]
	keep.End = "e1"
	n, err := db.Rewind(ctx, "s", "m2", keep)
	require.NoError(t, err)
	assert.Equal(t, 3, n)
	live, err := db.ListMessages(ctx, "s")
	require.NoError(t, err)
	require.Len(t, live, 1)
	assert.Equal(t, "m1", live[0].ID)
	all, err := db.AllMessages(ctx, "s")
	require.NoError(t, err)
	require.Len(t, all, 4)
	for i, m := range all {
		assert.Equal(t, i > 0, m.Rewound, m.ID)
	}
	s, err := db.GetSession(ctx, "w", "s")
	require.NoError(t, err)
	assert.Equal(t, 1, s.MessageCount)
	got, err = db.ListCheckpoints(ctx, "s")
	require.NoError(t, err)
	assert.Equal(t, []store.Checkpoint{keep}, got)

	require.NoError(t, db.DeleteSession(ctx, "w", "s"))
	got, err = db.ListCheckpoints(ctx, "s")
	require.NoError(t, err)
	assert.Empty(t, got)
}
