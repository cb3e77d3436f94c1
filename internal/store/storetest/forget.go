package storetest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/internal/store"
)

// Deleting a workspace (a forgotten one) takes its sessions and all they
// hold, and its own log, and nothing of any other workspace; its path can
// be registered again afterwards, as a new workspace.
func testDeleteWorkspaceCascade(t *testing.T, h Harness) {
	s := h.Open(t)
	rw, ok := s.(store.Rewinds)
	require.True(t, ok, "the store implements store.Rewinds")
	mustWorkspace(t, s, "w")
	mustWorkspace(t, s, "keep")
	mustSession(t, s, "w", "s", t0)
	mustSession(t, s, "keep", "k", t0)
	for _, sid := range []string{"s", "k"} {
		ws := map[string]string{"s": "w", "k": "keep"}[sid]
		require.NoError(t, s.PutMessage(bg, msg("m-"+sid, sid, "hi")))
		require.NoError(t, s.AppendEvent(bg, ev(ws, sid, 1, true)))
		require.NoError(t, s.AppendEvent(bg, ev(ws, "", 2, false)))
		require.NoError(t, s.AppendEvent(bg, keyed(ws, sid, "r-"+sid, 3, "key", t0)))
		require.NoError(t, s.PutPending(bg, store.Pending{RequestID: "p-" + sid, WorkspaceID: ws, SessionID: sid, Kind: "permission", CreatedAt: t0}))
		require.NoError(t, s.ApproveForSession(bg, sid, "shell"))
		require.NoError(t, rw.PutCheckpoint(bg, store.Checkpoint{ID: "c-" + sid, WorkspaceID: ws, SessionID: sid, RunID: "r-" + sid, Commit: "a1", CreatedAt: t0}))
	}

	require.NoError(t, s.DeleteWorkspace(bg, "w"))
	err := s.DeleteWorkspace(bg, "w")
	require.ErrorIs(t, err, store.ErrNotFound)
	require.ErrorContains(t, err, "delete workspace w")

	_, err = s.GetWorkspace(bg, "w")
	require.ErrorIs(t, err, store.ErrNotFound)
	list, err := s.ListWorkspaces(bg)
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, "keep", list[0].ID)
	_, err = s.GetSession(bg, "w", "s")
	require.ErrorIs(t, err, store.ErrNotFound)
	require.Empty(t, messageIDs(t, s, "s"))
	require.Empty(t, allSeqs(t, s, "w"))
	maxSeq, err := s.MaxSeq(bg, "w")
	require.NoError(t, err)
	require.Zero(t, maxSeq)
	_, err = s.GetPending(bg, "p-s")
	require.ErrorIs(t, err, store.ErrNotFound)
	requireApprovals(t, s, "s")
	_, err = s.PromptByKey(bg, "s", "key", t0.Add(-store.PromptKeyTTL))
	require.ErrorIs(t, err, store.ErrNotFound)
	cks, err := rw.ListCheckpoints(bg, "s")
	require.NoError(t, err)
	require.Empty(t, cks)

	// The other workspace keeps everything.
	got, err := s.GetSession(bg, "keep", "k")
	require.NoError(t, err)
	require.Equal(t, 1, got.MessageCount)
	require.Equal(t, []string{"m-k"}, messageIDs(t, s, "k"))
	require.Equal(t, []int64{1, 2, 3}, allSeqs(t, s, "keep"))
	_, err = s.GetPending(bg, "p-k")
	require.NoError(t, err)
	requireApprovals(t, s, "k", "shell")
	run, err := s.PromptByKey(bg, "k", "key", t0.Add(-store.PromptKeyTTL))
	require.NoError(t, err)
	require.Equal(t, "r-k", run)
	cks, err = rw.ListCheckpoints(bg, "k")
	require.NoError(t, err)
	require.Len(t, cks, 1)

	// Gone after a restart too, and the path is free again.
	s = h.Reopen(t, s)
	_, err = s.GetWorkspace(bg, "w")
	require.ErrorIs(t, err, store.ErrNotFound)
	again := mustWorkspace(t, s, "w")
	require.Equal(t, "w", again.ID)
	require.Empty(t, allSeqs(t, s, "w"))
}
