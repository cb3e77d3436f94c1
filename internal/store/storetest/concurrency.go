package storetest

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/internal/store"
)

func testCanceledContext(t *testing.T, h Harness) {
	s := h.Open(t)
	ctx, cancel := context.WithCancel(bg)
	cancel()
	_, _, err := s.EnsureWorkspace(ctx, store.Workspace{ID: "w", Path: "/w", CreatedAt: t0})
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorIs(t, s.AppendEvent(ctx, ev("w", "", 1, false)), context.Canceled)
	// The store is still usable afterwards, and nothing of those landed.
	mustWorkspace(t, s, "w")
	require.Empty(t, allSeqs(t, s, "w"))
}

// A write whose context ends while it is under way either failed and left
// nothing, or succeeded and is all there: a caller told "failed" never
// finds its write on disk later, one told "done" always does.
func testCanceledWritesAreAllOrNothing(t *testing.T, h Harness) {
	s := h.Open(t)
	mustWorkspace(t, s, "w")
	const n = 120
	for i := range n {
		mustSession(t, s, "w", fmt.Sprintf("d%d", i), t0)
	}
	var (
		wg        sync.WaitGroup
		appendErr [n]error
		deleteErr [n]error
	)
	for i := range n {
		wg.Go(func() {
			ctx, cancel := context.WithCancel(bg)
			defer cancel()
			// Cancel at different points: before the call, while it is
			// queued or running, or not at all.
			switch i % 4 {
			case 0:
				cancel()
			case 1:
				go cancel()
			case 2:
				go func() { runtime.Gosched(); cancel() }()
			}
			sid := fmt.Sprintf("d%d", i)
			m := msg(fmt.Sprintf("m%d", i), sid, "x")
			e := ev("w", sid, int64(i+1), true)
			e.Message, e.Touch = &m, at(time.Hour)
			appendErr[i] = s.AppendEvents(ctx, []store.Event{e})
			deleteErr[i] = s.DeleteSession(ctx, "w", fmt.Sprintf("d%d", (i+1)%n))
		})
	}
	wg.Wait()
	present := map[int64]bool{}
	for _, seq := range allSeqs(t, s, "w") {
		present[seq] = true
	}
	for i := range n {
		err := appendErr[i]
		if err != nil {
			require.ErrorIs(t, err, context.Canceled, "append %d", i)
		}
		// The session holding event i+1 may have been deleted (with its
		// events) by another call; the message tells apart what the append
		// itself wrote only while the session lives.
		deleted := deleteErr[(i+n-1)%n] == nil
		sid := fmt.Sprintf("d%d", i)
		if deleted {
			_, gerr := s.GetSession(bg, "w", sid)
			require.ErrorIs(t, gerr, store.ErrNotFound, "a delete that returned nil happened")
			continue
		}
		sess, gerr := s.GetSession(bg, "w", sid)
		require.NoError(t, gerr, "a delete that failed left %s", sid)
		require.Equal(t, err == nil, present[int64(i+1)], "append %d: err %v", i, err)
		require.Equal(t, err == nil, len(messageIDs(t, s, sid)) == 1, "append %d: its message", i)
		require.Equal(t, err == nil, sess.UpdatedAt.Equal(at(time.Hour)), "append %d: its touch", i)
	}
	for i, err := range deleteErr {
		if err != nil {
			require.ErrorIs(t, err, context.Canceled, "delete %d", i)
		}
	}
}

// Writes that share a commit do not share failures: a duplicate seq or a
// missing session fails its own call only, whatever else was committed
// with it.
func testGroupCommitIsolatesFailures(t *testing.T, h Harness) {
	s := h.Open(t)
	mustWorkspace(t, s, "w")
	mustSession(t, s, "w", "s", t0)
	for seq := int64(1); seq <= 10; seq++ {
		require.NoError(t, s.AppendEvent(bg, ev("w", "s", seq, true)))
	}
	const n = 100
	var (
		wg      sync.WaitGroup
		errs    [n]error
		updates [n]error
	)
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			m := msg(fmt.Sprintf("m%03d", i), "s", "x")
			e := ev("w", "s", int64(i+1), true)
			e.Message = &m
			errs[i] = s.AppendEvents(bg, []store.Event{e})
			if i%10 == 0 {
				updates[i] = s.UpdateSession(bg, store.Session{ID: "missing", WorkspaceID: "w"})
			}
		})
	}
	close(start)
	wg.Wait()
	var wantMsgs []string
	for i := range n {
		if i < 10 {
			require.ErrorIs(t, errs[i], store.ErrExists, "seq %d was taken", i+1)
		} else {
			require.NoError(t, errs[i], "seq %d", i+1)
			wantMsgs = append(wantMsgs, fmt.Sprintf("m%03d", i))
		}
		if i%10 == 0 {
			require.ErrorIs(t, updates[i], store.ErrNotFound)
		}
	}
	want := make([]int64, n)
	for i := range want {
		want[i] = int64(i + 1)
	}
	require.Equal(t, want, allSeqs(t, s, "w"))
	got := messageIDs(t, s, "s")
	require.ElementsMatch(t, wantMsgs, got, "only the events written brought their messages")
	sess, err := s.GetSession(bg, "w", "s")
	require.NoError(t, err)
	require.Equal(t, n-10, sess.MessageCount)
}

// However many writers race for the same seqs, each seq is written once,
// with only the winner's message.
func testSeqUniqueUnderConcurrency(t *testing.T, h Harness) {
	s := h.Open(t)
	mustWorkspace(t, s, "w")
	mustSession(t, s, "w", "s", t0)
	const (
		writers = 8
		perW    = 40
	)
	var (
		wg   sync.WaitGroup
		wins [perW + 1]atomic.Int32
		bad  atomic.Value
	)
	for g := range writers {
		wg.Go(func() {
			for seq := int64(1); seq <= perW; seq++ {
				m := msg(fmt.Sprintf("g%d-seq%d", g, seq), "s", "x")
				e := ev("w", "s", seq, true)
				e.Message = &m
				err := s.AppendEvents(bg, []store.Event{e})
				switch {
				case err == nil:
					wins[seq].Add(1)
				case !errors.Is(err, store.ErrExists):
					bad.Store(err)
				}
			}
		})
	}
	wg.Wait()
	if err, _ := bad.Load().(error); err != nil {
		t.Fatalf("a losing write failed with something else than ErrExists: %v", err)
	}
	for seq := 1; seq <= perW; seq++ {
		require.EqualValues(t, 1, wins[seq].Load(), "seq %d", seq)
	}
	ids := messageIDs(t, s, "s")
	require.Len(t, ids, perW)
	seen := map[string]bool{}
	for _, id := range ids {
		seq := id[strings.Index(id, "-seq")+4:]
		require.False(t, seen[seq], "two messages for seq %s", seq)
		seen[seq] = true
	}
}

// TestConcurrentStress hammers the store from many writers while readers
// run; a lost write or a failure of any kind fails it.
func testConcurrentStress(t *testing.T, h Harness) {
	s := h.Open(t)
	mustWorkspace(t, s, "w")
	const (
		writers = 16
		readers = 8
		perG    = 40
	)
	for g := range writers {
		mustSession(t, s, "w", fmt.Sprintf("s%d", g), t0)
	}

	var (
		seq         atomic.Int64
		maxReserved atomic.Int64
		wg          sync.WaitGroup
		done        = make(chan struct{})
		errCh       = make(chan error, writers+readers)
		readsOK     atomic.Int64
	)
	for g := range writers {
		wg.Go(func() {
			sid := fmt.Sprintf("s%d", g)
			for i := range perG {
				n := seq.Add(1)
				if err := s.AppendEvent(bg, ev("w", sid, n, true)); err != nil {
					errCh <- err
					return
				}
				if err := s.PutMessage(bg, msg(fmt.Sprintf("%s-m%d", sid, i), sid, "x")); err != nil {
					errCh <- err
					return
				}
				if i%10 == 0 {
					for cur := maxReserved.Load(); n+100 > cur && !maxReserved.CompareAndSwap(cur, n+100); cur = maxReserved.Load() {
					}
					if err := s.ReserveSeq(bg, "w", n+100); err != nil {
						errCh <- err
						return
					}
					if err := s.PutPending(bg, store.Pending{RequestID: fmt.Sprintf("%s-p%d", sid, i),
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
				if _, err := s.WorkspaceEvents(bg, "w", 0, 0, 50); err != nil {
					errCh <- err
					return
				}
				if _, err := s.SessionEvents(bg, sid, 0, 0); err != nil {
					errCh <- err
					return
				}
				if _, err := s.ListMessages(bg, sid); err != nil {
					errCh <- err
					return
				}
				if _, err := s.ListSessions(bg, "w"); err != nil {
					errCh <- err
					return
				}
				if _, err := s.MaxSeq(bg, "w"); err != nil {
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

	maxSeq, err := s.MaxSeq(bg, "w")
	require.NoError(t, err)
	require.EqualValues(t, writers*perG, maxSeq)
	require.Len(t, allSeqs(t, s, "w"), writers*perG)
	for g := range writers {
		sid := fmt.Sprintf("s%d", g)
		ids := messageIDs(t, s, sid)
		require.Len(t, ids, perG)
		for i, id := range ids {
			require.Equal(t, fmt.Sprintf("%s-m%d", sid, i), id, "insertion order")
		}
		sess, err := s.GetSession(bg, "w", sid)
		require.NoError(t, err)
		require.Equal(t, perG, sess.MessageCount)
	}
	pending, err := s.ListPending(bg, "w")
	require.NoError(t, err)
	require.Len(t, pending, writers*perG/10)
	w, err := s.GetWorkspace(bg, "w")
	require.NoError(t, err)
	require.Equal(t, maxReserved.Load(), w.SeqReserved, "the highest reservation, whatever the commit order")
}

// While the storage is broken every write fails with an error wrapping
// store.ErrUnavailable and nothing of it lands; once it heals the same
// store takes the same writes.
func testUnavailableWhileBroken(t *testing.T, h Harness) {
	s := h.Open(t)
	ws := mustWorkspace(t, s, "w1")
	mustSession(t, s, ws.ID, "s1", t0)
	require.NoError(t, s.AppendEvents(bg, []store.Event{ev(ws.ID, "s1", 1, true)}))
	require.NoError(t, s.PutMessage(bg, msg("m1", "s1", "before")))
	require.NoError(t, s.PutPending(bg, store.Pending{RequestID: "p1", WorkspaceID: ws.ID, SessionID: "s1", Kind: "permission", CreatedAt: t0}))

	heal := h.Break(t, s)
	healed := false
	t.Cleanup(func() {
		if !healed {
			heal()
		}
	})
	// Big enough to need pages of its own, so nothing fits in what a
	// database file already holds.
	big := msg("m2", "s1", strings.Repeat("x", 64<<10))
	touched := ev(ws.ID, "s1", 2, true)
	touched.Touch = at(time.Hour)
	writes := []struct {
		name string
		do   func() error
	}{
		{"append events", func() error { return s.AppendEvents(bg, []store.Event{touched, ev(ws.ID, "s1", 3, true)}) }},
		{"put message", func() error { return s.PutMessage(bg, big) }},
		{"create session", func() error {
			return s.CreateSession(bg, store.Session{ID: "s2", WorkspaceID: ws.ID, CreatedAt: t0, UpdatedAt: t0})
		}},
		{"update session", func() error {
			return s.UpdateSession(bg, store.Session{ID: "s1", WorkspaceID: ws.ID, Title: "renamed", CreatedAt: t0, UpdatedAt: at(time.Minute)})
		}},
		{"touch session", func() error { return s.TouchSession(bg, "s1", at(2*time.Hour)) }},
		{"reserve seq", func() error { return s.ReserveSeq(bg, ws.ID, 1<<20) }},
		{"set recovered through", func() error { return s.SetRecoveredThrough(bg, ws.ID, 1) }},
		{"put pending", func() error {
			return s.PutPending(bg, store.Pending{RequestID: "p2", WorkspaceID: ws.ID, SessionID: "s1", Kind: "tool_call", CreatedAt: t0})
		}},
		{"approve", func() error { return s.ApproveForSession(bg, "s1", "shell") }},
		{"ensure workspace", func() error {
			_, _, err := s.EnsureWorkspace(bg, store.Workspace{ID: "w2", Path: "/src/w2", CreatedAt: t0})
			return err
		}},
	}
	destructive := []struct {
		name string
		do   func() error
	}{
		{"delete pending", func() error { return s.DeletePending(bg, "p1") }},
		{"delete session", func() error { return s.DeleteSession(bg, ws.ID, "s1") }},
	}
	for _, w := range append(writes, destructive...) {
		err := w.do()
		require.Error(t, err, w.name)
		assert.ErrorIs(t, err, store.ErrUnavailable, w.name)
	}

	heal()
	healed = true
	// Nothing of the failed writes landed.
	require.Equal(t, []int64{1}, allSeqs(t, s, ws.ID))
	require.Equal(t, []string{"m1"}, messageIDs(t, s, "s1"))
	sess, err := s.GetSession(bg, ws.ID, "s1")
	require.NoError(t, err)
	require.Equal(t, "title s1", sess.Title)
	require.Equal(t, t0, sess.UpdatedAt)
	_, err = s.GetSession(bg, ws.ID, "s2")
	require.ErrorIs(t, err, store.ErrNotFound)
	got, err := s.GetWorkspace(bg, ws.ID)
	require.NoError(t, err)
	require.Zero(t, got.SeqReserved)
	require.Zero(t, got.RecoveredThrough)
	_, err = s.GetWorkspace(bg, "w2")
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = s.GetPending(bg, "p2")
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = s.GetPending(bg, "p1")
	require.NoError(t, err)
	requireApprovals(t, s, "s1")

	// The same writes now succeed, on the same store.
	for _, w := range writes {
		require.NoError(t, w.do(), w.name)
	}
	require.Equal(t, []int64{1, 2, 3}, allSeqs(t, s, ws.ID))
	require.Equal(t, []string{"m1", "m2"}, messageIDs(t, s, "s1"))
	sess, err = s.GetSession(bg, ws.ID, "s1")
	require.NoError(t, err)
	require.Equal(t, "renamed", sess.Title)
	require.Equal(t, at(2*time.Hour), sess.UpdatedAt)
	require.Equal(t, 2, sess.MessageCount)
	requireApprovals(t, s, "s1", "shell")
	s = h.Reopen(t, s)
	require.Equal(t, []int64{1, 2, 3}, allSeqs(t, s, ws.ID), "and they are durable")
}

// Calls on a closed store fail; none hangs.
func testWritesAfterCloseFail(t *testing.T, h Harness) {
	s := h.Open(t)
	mustWorkspace(t, s, "w")
	mustSession(t, s, "w", "s", t0)
	require.NoError(t, s.Close())
	calls := map[string]func() error{
		"append events": func() error { return s.AppendEvents(bg, []store.Event{ev("w", "s", 1, true)}) },
		"put message":   func() error { return s.PutMessage(bg, msg("m", "s", "x")) },
		"touch session": func() error { return s.TouchSession(bg, "s", at(time.Hour)) },
		"put pending": func() error {
			return s.PutPending(bg, store.Pending{RequestID: "p", WorkspaceID: "w", Kind: "permission", CreatedAt: t0})
		},
		"delete session": func() error { return s.DeleteSession(bg, "w", "s") },
		"ensure workspace": func() error {
			_, _, err := s.EnsureWorkspace(bg, store.Workspace{ID: "v", Path: "/v", CreatedAt: t0})
			return err
		},
		"get session": func() error { _, err := s.GetSession(bg, "w", "s"); return err },
	}
	for name, call := range calls {
		for range 8 { // a race between "closed" and "queued" shows within a few tries
			done := make(chan error, 1)
			go func() { done <- call() }()
			select {
			case err := <-done:
				require.Error(t, err, name)
			case <-time.After(10 * time.Second):
				t.Fatalf("%s on a closed store did not return", name)
			}
		}
	}
	require.NotPanics(t, func() { _ = s.Close() }, "closing twice")
}
