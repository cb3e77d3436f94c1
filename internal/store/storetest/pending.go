package storetest

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/internal/store"
	"github.com/tandem-dev/tandem/proto"
)

func testPending(t *testing.T, h Harness) {
	s := h.Open(t)
	p1 := store.Pending{RequestID: "r1", WorkspaceID: "w", SessionID: "s", RunID: "run", Kind: "permission",
		Data: json.RawMessage(`{"tool":"bash"}`), CreatedAt: at(2 * time.Second)}
	p2 := store.Pending{RequestID: "r2", WorkspaceID: "w", SessionID: "s", RunID: "run", Kind: "tool_call",
		Data: json.RawMessage(`{"name":"x"}`), CreatedAt: at(time.Second)}
	p3 := store.Pending{RequestID: "r3", WorkspaceID: "v", Kind: "permission", CreatedAt: t0, Resolved: true}
	mustPutPending(t, s, p1, p2, p3)

	got, err := s.GetPending(bg, "r1")
	require.NoError(t, err)
	require.Equal(t, p1, got)
	got, err = s.GetPending(bg, "r3")
	require.NoError(t, err)
	require.Equal(t, p3, got)
	require.Nil(t, got.Data, "empty data stays empty")
	_, err = s.GetPending(bg, "nope")
	require.ErrorIs(t, err, store.ErrNotFound)

	requireListed(t, s, "w", p2, p1)
	requireListed(t, s, "v", p3)
	run, err := s.RunPending(bg, "run")
	require.NoError(t, err)
	require.Equal(t, []store.Pending{p2, p1}, run)

	// Put again replaces.
	p1.Data = json.RawMessage(`{"tool":"edit"}`)
	require.NoError(t, s.PutPending(bg, p1))
	got, err = s.GetPending(bg, "r1")
	require.NoError(t, err)
	require.Equal(t, p1, got)

	require.NoError(t, s.DeletePending(bg, "r1"))
	require.ErrorIs(t, s.DeletePending(bg, "r1"), store.ErrNotFound)
	_, err = s.GetPending(bg, "r1")
	require.ErrorIs(t, err, store.ErrNotFound)
	requireListed(t, s, "w", p2)
}

// Rewriting a request keeps its place among requests created at the same
// instant.
func testPendingPutKeepsPlace(t *testing.T, h Harness) {
	s := h.Open(t)
	a := store.Pending{RequestID: "z-first", WorkspaceID: "w", RunID: "run", Kind: "permission", CreatedAt: t0}
	b := store.Pending{RequestID: "a-second", WorkspaceID: "w", RunID: "run", Kind: "permission", CreatedAt: t0}
	mustPutPending(t, s, a, b)
	requireListed(t, s, "w", a, b)
	a.Data = json.RawMessage(`{"more":"state"}`)
	require.NoError(t, s.PutPending(bg, a))
	requireListed(t, s, "w", a, b)
	run, err := s.RunPending(bg, "run")
	require.NoError(t, err)
	require.Equal(t, []store.Pending{a, b}, run)
}

// A settled request is kept (an answer to it must learn it was resolved)
// but is no longer the workspace's pending work; its run still finds it.
func testPendingSettled(t *testing.T, h Harness) {
	s := h.Open(t)
	open := store.Pending{RequestID: "open", WorkspaceID: "w", SessionID: "s", RunID: "run", Kind: "permission", CreatedAt: at(time.Second)}
	done := store.Pending{RequestID: "done", WorkspaceID: "w", SessionID: "s", RunID: "run", Kind: "permission", CreatedAt: t0, Settled: true}
	other := store.Pending{RequestID: "other", WorkspaceID: "w", SessionID: "s", RunID: "run2", Kind: "tool_call", CreatedAt: t0}
	mustPutPending(t, s, open, done, other)
	requireListed(t, s, "w", other, open)
	got, err := s.GetPending(bg, "done")
	require.NoError(t, err)
	require.Equal(t, done, got)
	runs, err := s.RunPending(bg, "run")
	require.NoError(t, err)
	require.Equal(t, []store.Pending{done, open}, runs, "settled or not, oldest first")

	open.Settled = true
	require.NoError(t, s.PutPending(bg, open))
	requireListed(t, s, "w", other)
	other.Settled = true
	require.NoError(t, s.PutPending(bg, other))
	requireListed(t, s, "w")
}

// Approving a kind twice records it once; sessions keep their own.
func testSessionApprovals(t *testing.T, h Harness) {
	s := h.Open(t)
	requireApprovals(t, s, "s")
	for _, kind := range []string{"write", "shell", "write"} {
		require.NoError(t, s.ApproveForSession(bg, "s", kind))
	}
	require.NoError(t, s.ApproveForSession(bg, "other", "custom_tool"))
	requireApprovals(t, s, "s", "shell", "write")
	requireApprovals(t, s, "other", "custom_tool")
}

// Deleting a session takes its messages, events, pending requests and
// approvals with it, and nothing of any other session.
func testDeleteSessionCascade(t *testing.T, h Harness) {
	s := h.Open(t)
	mustWorkspace(t, s, "w")
	mustSession(t, s, "w", "s", t0)
	keep := mustSession(t, s, "w", "keep", t0)

	require.NoError(t, s.PutMessage(bg, msg("m1", "s", "a")))
	require.NoError(t, s.PutMessage(bg, msg("k1", "keep", "b")))
	require.NoError(t, s.AppendEvent(bg, ev("w", "s", 1, true)))
	require.NoError(t, s.AppendEvent(bg, ev("w", "keep", 2, true)))
	require.NoError(t, s.AppendEvent(bg, ev("w", "", 3, false)))
	require.NoError(t, s.AppendEvent(bg, ev("w", "s", 4, false)))
	require.NoError(t, s.PutPending(bg, store.Pending{RequestID: "p1", WorkspaceID: "w", SessionID: "s", Kind: "permission", CreatedAt: t0}))
	require.NoError(t, s.PutPending(bg, store.Pending{RequestID: "p1b", WorkspaceID: "w", SessionID: "s", Kind: "permission", CreatedAt: t0, Settled: true}))
	require.NoError(t, s.PutPending(bg, store.Pending{RequestID: "p2", WorkspaceID: "w", SessionID: "keep", Kind: "permission", CreatedAt: t0}))
	require.NoError(t, s.ApproveForSession(bg, "s", "shell"))
	require.NoError(t, s.ApproveForSession(bg, "keep", "shell"))

	// Wrong workspace: nothing is deleted.
	mustWorkspace(t, s, "v")
	require.ErrorIs(t, s.DeleteSession(bg, "v", "s"), store.ErrNotFound)
	require.Equal(t, []string{"m1"}, messageIDs(t, s, "s"))
	requireApprovals(t, s, "s", "shell")

	require.NoError(t, s.DeleteSession(bg, "w", "s"))
	err := s.DeleteSession(bg, "w", "s")
	require.ErrorIs(t, err, store.ErrNotFound)
	require.ErrorContains(t, err, "delete session s")

	_, err = s.GetSession(bg, "w", "s")
	require.ErrorIs(t, err, store.ErrNotFound)
	require.Empty(t, messageIDs(t, s, "s"))
	require.Equal(t, []int64{2, 3}, allSeqs(t, s, "w"))
	hist, err := s.SessionEvents(bg, "s", 0, 0)
	require.NoError(t, err)
	require.Empty(t, hist)
	for _, id := range []string{"p1", "p1b"} {
		_, err = s.GetPending(bg, id)
		require.ErrorIs(t, err, store.ErrNotFound, id)
	}

	got, err := s.GetSession(bg, "w", "keep")
	require.NoError(t, err)
	keep.MessageCount = 1
	require.Equal(t, keep, got)
	_, err = s.GetPending(bg, "p2")
	require.NoError(t, err)
	requireApprovals(t, s, "s")
	requireApprovals(t, s, "keep", "shell")

	// The id can be used again, and starts empty.
	mustSession(t, s, "w", "s", t0)
	got, err = s.GetSession(bg, "w", "s")
	require.NoError(t, err)
	require.Zero(t, got.MessageCount)
}

// Everything a call wrote is there after a restart: workspaces with their
// marks, sessions, messages, events with what they carried, pending
// requests, approvals.
func testReopenPersists(t *testing.T, h Harness) {
	s := h.Open(t)
	w := mustWorkspace(t, s, "w")
	require.NoError(t, s.ReserveSeq(bg, "w", 4096))
	require.NoError(t, s.SetRecoveredThrough(bg, "w", 7))
	w.SeqReserved, w.RecoveredThrough = 4096, 7
	sess := mustSession(t, s, "w", "s", at(time.Minute))
	m := msg("m", "s", "hello")
	require.NoError(t, s.PutMessage(bg, m))
	e := ev("w", "s", 7, true)
	require.NoError(t, s.AppendEvent(bg, e))
	carried := msg("carried", "s", "with its event")
	e8 := ev("w", "s", 8, true)
	e8.Message, e8.Touch = &carried, at(time.Hour)
	require.NoError(t, s.AppendEvents(bg, []store.Event{e8}))
	p := store.Pending{RequestID: "r", WorkspaceID: "w", SessionID: "s", Kind: "tool_call",
		Data: json.RawMessage(`{}`), CreatedAt: t0}
	require.NoError(t, s.PutPending(bg, p))
	require.NoError(t, s.ApproveForSession(bg, "s", "shell"))

	s = h.Reopen(t, s)

	gw, err := s.GetWorkspace(bg, "w")
	require.NoError(t, err)
	require.Equal(t, w, gw)
	gs, err := s.GetSession(bg, "w", "s")
	require.NoError(t, err)
	sess.MessageCount, sess.UpdatedAt = 2, at(time.Hour)
	require.Equal(t, sess, gs)
	ms, err := s.ListMessages(bg, "s")
	require.NoError(t, err)
	require.Equal(t, []proto.Message{m, carried}, ms)
	es, err := s.WorkspaceEvents(bg, "w", 0, 0, 0)
	require.NoError(t, err)
	e8.Message, e8.Touch = nil, time.Time{} // not read back
	require.Equal(t, []store.Event{e, e8}, es)
	maxSeq, err := s.MaxSeq(bg, "w")
	require.NoError(t, err)
	require.EqualValues(t, 8, maxSeq)
	gp, err := s.GetPending(bg, "r")
	require.NoError(t, err)
	require.Equal(t, p, gp)
	requireApprovals(t, s, "s", "shell")

	// Ensure on reopen finds the existing workspace.
	_, created, err := s.EnsureWorkspace(bg, store.Workspace{ID: "new", Path: w.Path, CreatedAt: t0})
	require.NoError(t, err)
	require.False(t, created)
}

// The first answer of a request is recorded and later ones change nothing;
// resolving and settling name the request's workspace.
func testPendingResolveOnce(t *testing.T, h Harness) {
	s := h.Open(t)
	open := store.Pending{RequestID: "r", WorkspaceID: "w", SessionID: "s", RunID: "run", Kind: "permission",
		Data: json.RawMessage(`{"q":1}`), CreatedAt: t0}
	mustPutPending(t, s, open)

	_, err := s.ResolvePending(bg, "v", "r", json.RawMessage(`{"a":"other workspace"}`))
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = s.ResolvePending(bg, "w", "nope", json.RawMessage(`{}`))
	require.ErrorIs(t, err, store.ErrNotFound)

	won, err := s.ResolvePending(bg, "w", "r", json.RawMessage(`{"a":"first"}`))
	require.NoError(t, err)
	require.True(t, won)
	won, err = s.ResolvePending(bg, "w", "r", json.RawMessage(`{"a":"second"}`))
	require.NoError(t, err)
	require.False(t, won, "a second answer must not win")
	resolved := open
	resolved.Data, resolved.Resolved = json.RawMessage(`{"a":"first"}`), true
	got, err := s.GetPending(bg, "r")
	require.NoError(t, err)
	require.Equal(t, resolved, got)
	requireListed(t, s, "w", resolved) // resolved is still work until settled

	require.ErrorIs(t, s.SettlePending(bg, "v", "r"), store.ErrNotFound)
	require.ErrorIs(t, s.SettlePending(bg, "w", "nope"), store.ErrNotFound)
	require.NoError(t, s.SettlePending(bg, "w", "r"))
	require.NoError(t, s.SettlePending(bg, "w", "r"), "settling again does nothing")
	resolved.Settled = true
	got, err = s.GetPending(bg, "r")
	require.NoError(t, err)
	require.Equal(t, resolved, got)
	requireListed(t, s, "w")

	// Kept across a restart, as put.
	s = h.Reopen(t, s)
	got, err = s.GetPending(bg, "r")
	require.NoError(t, err)
	require.Equal(t, resolved, got)
	won, err = s.ResolvePending(bg, "w", "r", json.RawMessage(`{"a":"after restart"}`))
	require.NoError(t, err)
	require.False(t, won)
}

// Of answers racing on one request, exactly one wins, and the request
// holds that one's data: first answer wins on every node, decided by the
// store.
func testPendingConcurrentAnswersOneWins(t *testing.T, h Harness) {
	s := h.Open(t)
	for _, racers := range []int{2, 16} {
		id := fmt.Sprintf("r%d", racers)
		mustPutPending(t, s, store.Pending{RequestID: id, WorkspaceID: "w", RunID: "run", Kind: "tool_call", CreatedAt: t0})
		var (
			wg    sync.WaitGroup
			start = make(chan struct{})
			won   = make([]bool, racers)
			errs  = make([]error, racers)
		)
		for i := range racers {
			wg.Go(func() {
				<-start
				won[i], errs[i] = s.ResolvePending(bg, "w", id, json.RawMessage(fmt.Sprintf(`{"by":%d}`, i)))
			})
		}
		close(start)
		wg.Wait()
		winner := -1
		for i := range racers {
			require.NoError(t, errs[i])
			if won[i] {
				require.Equal(t, -1, winner, "answers %d and %d both won", winner, i)
				winner = i
			}
		}
		require.NotEqual(t, -1, winner, "no answer won")
		got, err := s.GetPending(bg, id)
		require.NoError(t, err)
		require.True(t, got.Resolved)
		require.JSONEq(t, fmt.Sprintf(`{"by":%d}`, winner), string(got.Data), "the request holds the winner's answer")
	}
}
