package postgres

import (
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/internal/store"
	"github.com/tandem-dev/tandem/proto"
)

// acquireEventually retries AcquireLease until it succeeds (the lease it
// waits for has expired) or the deadline passes.
func acquireEventually(t *testing.T, db *DB, ws, owner string, ttl time.Duration) Lease {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		l, err := db.AcquireLease(bg, ws, owner, ttl)
		if err == nil {
			return l
		}
		require.ErrorIs(t, err, ErrLeaseHeld)
		if time.Now().After(deadline) {
			t.Fatalf("%s could not take %s over: %v", owner, ws, err)
		}
		time.Sleep(20 * time.Millisecond) // polling the database's clock, not synchronizing goroutines
	}
}

func TestLeaseLifecycle(t *testing.T) {
	db, _ := openTest(t)
	_, err := db.GetLease(bg, "w")
	require.ErrorIs(t, err, store.ErrNotFound)

	a, err := db.AcquireLease(bg, "w", "node-a", time.Minute)
	require.NoError(t, err)
	require.Equal(t, "w", a.WorkspaceID)
	require.Equal(t, "node-a", a.Owner)
	require.EqualValues(t, 1, a.Epoch)
	require.WithinDuration(t, time.Now().Add(time.Minute), a.Expires, 30*time.Second)

	for _, owner := range []string{"node-b", "node-a"} {
		_, err = db.AcquireLease(bg, "w", owner, time.Minute)
		require.ErrorIs(t, err, ErrLeaseHeld, "a live lease is not taken, not even by its owner again")
		var held *HeldError
		require.ErrorAs(t, err, &held)
		require.Equal(t, a, held.Held)
	}

	renewed, err := db.RenewLease(bg, a, 2*time.Minute)
	require.NoError(t, err)
	require.Equal(t, a.Epoch, renewed.Epoch)
	require.True(t, renewed.Expires.After(a.Expires))

	require.NoError(t, db.ReleaseLease(bg, renewed))
	got, err := db.GetLease(bg, "w")
	require.NoError(t, err)
	require.True(t, got.Expires.IsZero(), "released")

	b, err := db.AcquireLease(bg, "w", "node-b", time.Minute)
	require.NoError(t, err, "a released lease is free at once")
	require.EqualValues(t, 2, b.Epoch)

	_, err = db.RenewLease(bg, a, time.Minute)
	require.ErrorIs(t, err, ErrLeaseLost)
	require.NoError(t, db.ReleaseLease(bg, a), "releasing a lease no longer held does nothing")
	got, err = db.GetLease(bg, "w")
	require.NoError(t, err)
	require.Equal(t, b, got)

	_, err = db.AcquireLease(bg, "w", "", time.Minute)
	require.Error(t, err)
	_, err = db.AcquireLease(bg, "w", "node-c", 0)
	require.Error(t, err)
}

// A lease nobody renews expires by the database's clock, another node
// takes the workspace over with the next epoch, and the old owner can
// neither renew nor write.
func TestLeaseTakeoverByExpiry(t *testing.T) {
	db, _ := openTest(t)
	mustWorkspace(t, db, "w")
	a, err := db.AcquireLease(bg, "w", "node-a", 300*time.Millisecond)
	require.NoError(t, err)
	_, err = db.AcquireLease(bg, "w", "node-b", time.Minute)
	require.ErrorIs(t, err, ErrLeaseHeld)

	b := acquireEventually(t, db, "w", "node-b", time.Minute)
	require.EqualValues(t, a.Epoch+1, b.Epoch)
	require.Equal(t, "node-b", b.Owner)
	_, err = db.RenewLease(bg, a, time.Minute)
	require.ErrorIs(t, err, ErrLeaseLost)

	require.ErrorIs(t, db.Fenced(a).AppendEvent(bg, ev("w", 1)), ErrLeaseLost)
	require.NoError(t, db.Fenced(b).AppendEvent(bg, ev("w", 2)))
	es, err := db.WorkspaceEvents(bg, "w", 0, 0, 0)
	require.NoError(t, err)
	require.Len(t, es, 1)
	require.EqualValues(t, 2, es[0].Seq)
}

// Every write of a store fenced on a stale epoch fails with ErrLeaseLost
// and leaves nothing behind; an expired lease fences as a taken one does.
func TestFencedStaleEpochWritesFail(t *testing.T) {
	db, _ := openTest(t)
	mustWorkspace(t, db, "w")
	require.NoError(t, db.CreateSession(bg, store.Session{ID: "s", WorkspaceID: "w", Title: "t", CreatedAt: t0, UpdatedAt: t0}))
	require.NoError(t, db.PutPending(bg, store.Pending{RequestID: "p", WorkspaceID: "w", SessionID: "s", Kind: "permission",
		Data: json.RawMessage(`{}`), CreatedAt: t0}))

	stale, err := db.AcquireLease(bg, "w", "node-a", time.Minute)
	require.NoError(t, err)
	require.NoError(t, db.ReleaseLease(bg, stale))
	current, err := db.AcquireLease(bg, "w", "node-b", time.Minute)
	require.NoError(t, err)
	expiring, err := db.AcquireLease(bg, "other", "node-a", 100*time.Millisecond)
	require.NoError(t, err)

	for name, l := range map[string]Lease{"stale epoch": stale, "expired": expiring, "never held": {WorkspaceID: "w", Owner: "node-b", Epoch: 99}} {
		if name == "expired" {
			// Wait for the database's clock to pass the expiry.
			waitExpired(t, db, expiring.WorkspaceID)
		}
		f := db.Fenced(l)
		require.Equal(t, l, f.Lease())
		m := proto.Message{ID: "m", SessionID: "s", Role: proto.RoleUser, Parts: []proto.Part{{Type: proto.PartText, Text: "x"}}}
		e := ev("w", 1)
		e.SessionID, e.Message, e.Touch = "s", &m, t0.Add(time.Hour)
		writes := map[string]func() error{
			"append events": func() error { return f.AppendEvents(bg, []store.Event{e}) },
			"put message":   func() error { return f.PutMessage(bg, m) },
			"create session": func() error {
				return f.CreateSession(bg, store.Session{ID: "s2", WorkspaceID: "w", CreatedAt: t0, UpdatedAt: t0})
			},
			"update session": func() error {
				return f.UpdateSession(bg, store.Session{ID: "s", WorkspaceID: "w", Title: "stale", UpdatedAt: t0})
			},
			"touch session":  func() error { return f.TouchSession(bg, "s", t0.Add(time.Hour)) },
			"delete session": func() error { return f.DeleteSession(bg, "w", "s") },
			"reserve seq":    func() error { return f.ReserveSeq(bg, "w", 1000) },
			"reserve block":  func() error { _, _, err := f.ReserveBlock(bg, "w", 1000); return err },
			"recovered":      func() error { return f.SetRecoveredThrough(bg, "w", 1000) },
			"put pending": func() error {
				return f.PutPending(bg, store.Pending{RequestID: "p2", WorkspaceID: "w", Kind: "permission", CreatedAt: t0})
			},
			"swap pending": func() error {
				old, err := db.GetPending(bg, "p")
				require.NoError(t, err)
				nw := old
				nw.Data = json.RawMessage(`{"resolved":true}`)
				_, err = f.SwapPending(bg, old, nw)
				return err
			},
			"delete pending": func() error { return f.DeletePending(bg, "p") },
			"approve":        func() error { return f.ApproveForSession(bg, "s", "shell") },
			"ensure workspace": func() error {
				_, _, err := f.EnsureWorkspace(bg, store.Workspace{ID: "w3", Path: "/w3", CreatedAt: t0})
				return err
			},
		}
		for what, write := range writes {
			require.ErrorIs(t, write(), ErrLeaseLost, "%s: %s", name, what)
		}
	}

	// Nothing of them landed.
	es, err := db.WorkspaceEvents(bg, "w", 0, 0, 0)
	require.NoError(t, err)
	require.Empty(t, es)
	ms, err := db.ListMessages(bg, "s")
	require.NoError(t, err)
	require.Empty(t, ms)
	sess, err := db.GetSession(bg, "w", "s")
	require.NoError(t, err)
	require.Equal(t, "t", sess.Title)
	require.Equal(t, t0, sess.UpdatedAt)
	w, err := db.GetWorkspace(bg, "w")
	require.NoError(t, err)
	require.Zero(t, w.SeqReserved)
	require.Zero(t, w.RecoveredThrough)
	p, err := db.GetPending(bg, "p")
	require.NoError(t, err)
	require.JSONEq(t, `{}`, string(p.Data))
	_, err = db.GetWorkspace(bg, "w3")
	require.ErrorIs(t, err, store.ErrNotFound)

	// The current owner writes.
	f := db.Fenced(current)
	require.NoError(t, f.AppendEvent(bg, ev("w", 1)))
	require.NoError(t, f.TouchSession(bg, "s", t0.Add(time.Hour)))
}

// An owner writing without a pause while its lease runs out and another
// node takes over: once the takeover returns, none of the old owner's
// writes succeeds, and every write it was told succeeded is visible to
// the new owner. Writes already past the fence when the takeover came
// commit before it; later ones fail.
func TestFencingRacesTakeover(t *testing.T) {
	db, u := openTest(t)
	other, err := Open(bg, u, Options{}) // the new owner is another node
	require.NoError(t, err)
	t.Cleanup(func() { _ = other.Close() })
	mustWorkspace(t, db, "w")

	old, err := db.AcquireLease(bg, "w", "node-a", 400*time.Millisecond)
	require.NoError(t, err)
	f := db.Fenced(old)
	var (
		lastOK   atomic.Int64
		takeover = make(chan int64) // MaxSeq as the new owner first reads it
		wg       sync.WaitGroup
		after    []int64 // seqs the old owner wrote after the takeover returned
	)
	const (
		writers = 4
		batch   = 200
	)
	var seq atomic.Int64
	var mu sync.Mutex
	for range writers {
		wg.Go(func() {
			var taken int64 = -1
			// After the takeover each writer tries a few more times: all
			// must fail.
			for tries := 0; tries < 20; {
				if taken >= 0 {
					tries++
				}
				select {
				case m := <-takeover:
					taken = m
				default:
				}
				// Big writes keep a transaction open well past its fence
				// check: the window a takeover must not slip into.
				n := seq.Add(batch)
				es := make([]store.Event, batch)
				for i := range es {
					es[i] = ev("w", n-batch+1+int64(i))
				}
				err := f.AppendEvents(bg, es)
				if err == nil {
					for cur := lastOK.Load(); n > cur && !lastOK.CompareAndSwap(cur, n); cur = lastOK.Load() {
					}
					if taken >= 0 {
						mu.Lock()
						after = append(after, n)
						mu.Unlock()
					}
					continue
				}
				if !assert.ErrorIs(t, err, ErrLeaseLost) {
					return
				}
				if taken >= 0 {
					return
				}
			}
		})
	}
	b := acquireEventually(t, other, "w", "node-b", time.Minute)
	maxSeq, err := other.MaxSeq(bg, "w")
	require.NoError(t, err)
	for range writers {
		takeover <- maxSeq
	}
	wg.Wait()
	require.Empty(t, after, "the old owner wrote after the takeover")
	require.LessOrEqual(t, lastOK.Load(), maxSeq, "a write reported done is visible to the new owner")
	require.Positive(t, lastOK.Load(), "the old owner did write while it held the lease")
	require.EqualValues(t, old.Epoch+1, b.Epoch)
	final, err := other.MaxSeq(bg, "w")
	require.NoError(t, err)
	require.Equal(t, maxSeq, final, "nothing landed after the takeover")
}

// Of many nodes answering one request at once, exactly one answer is
// recorded; the others learn they lost.
func TestSwapPendingFirstAnswerWins(t *testing.T) {
	db, u := openTest(t)
	other, err := Open(bg, u, Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = other.Close() })
	open := store.Pending{RequestID: "p", WorkspaceID: "w", SessionID: "s", RunID: "r", Kind: "permission",
		Data: json.RawMessage(`{"resolved":false}`), CreatedAt: t0}
	require.NoError(t, db.PutPending(bg, open))

	const resolvers = 50
	var (
		wg   sync.WaitGroup
		won  = make([]bool, resolvers)
		errs = make([]error, resolvers)
	)
	// Every resolver reads the open request before any answers, so all
	// of them swap from the same row: the database alone decides.
	var read sync.WaitGroup
	read.Add(resolvers)
	for i := range resolvers {
		node := []*DB{db, other}[i%2]
		wg.Go(func() {
			seen, err := node.GetPending(bg, "p")
			read.Done()
			if err != nil {
				errs[i] = err
				return
			}
			read.Wait()
			answer := seen
			answer.Data = fmt.Appendf(nil, `{"resolved":true,"by":%d}`, i)
			won[i], errs[i] = node.SwapPending(bg, seen, answer)
		})
	}
	wg.Wait()
	winner := -1
	for i := range resolvers {
		require.NoError(t, errs[i])
		if won[i] {
			require.Equal(t, -1, winner, "two answers won: %d and %d", winner, i)
			winner = i
		}
	}
	require.NotEqual(t, -1, winner, "no answer won")
	got, err := db.GetPending(bg, "p")
	require.NoError(t, err)
	require.JSONEq(t, fmt.Sprintf(`{"resolved":true,"by":%d}`, winner), string(got.Data))

	// Settling from the resolved row works; from the open one it does not.
	settled := got
	settled.Settled = true
	ok, err := db.SwapPending(bg, open, settled)
	require.NoError(t, err)
	require.False(t, ok)
	ok, err = db.SwapPending(bg, got, settled)
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = db.SwapPending(bg, got, settled)
	require.NoError(t, err)
	require.False(t, ok, "the settled flag is part of what is compared")

	missing := open
	missing.RequestID = "nope"
	_, err = db.SwapPending(bg, missing, missing)
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = db.SwapPending(bg, open, missing)
	require.Error(t, err, "two different requests")
}

// Blocks reserved by racing nodes never overlap and start above every seq
// reserved or written before.
func TestReserveBlock(t *testing.T) {
	db, u := openTest(t)
	other, err := Open(bg, u, Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = other.Close() })
	mustWorkspace(t, db, "w")
	require.NoError(t, db.ReserveSeq(bg, "w", 500))
	require.NoError(t, db.AppendEvent(bg, ev("w", 700)))

	first, last, err := db.ReserveBlock(bg, "w", 10)
	require.NoError(t, err)
	require.EqualValues(t, 701, first)
	require.EqualValues(t, 710, last)

	type block struct{ first, last int64 }
	var (
		mu     sync.Mutex
		blocks []block
		wg     sync.WaitGroup
	)
	for i := range 40 {
		node := []*DB{db, other}[i%2]
		wg.Go(func() {
			f, l, err := node.ReserveBlock(bg, "w", 1024)
			if !assert.NoError(t, err) {
				return
			}
			mu.Lock()
			blocks = append(blocks, block{f, l})
			mu.Unlock()
		})
	}
	wg.Wait()
	require.Len(t, blocks, 40)
	sort.Slice(blocks, func(i, j int) bool { return blocks[i].first < blocks[j].first })
	prev := int64(710)
	for _, b := range blocks {
		require.EqualValues(t, 1023, b.last-b.first)
		require.Greater(t, b.first, prev, "blocks overlap")
		prev = b.last
	}
	w, err := db.GetWorkspace(bg, "w")
	require.NoError(t, err)
	require.Equal(t, prev, w.SeqReserved)

	_, _, err = db.ReserveBlock(bg, "nope", 10)
	require.ErrorIs(t, err, store.ErrNotFound)
	_, _, err = db.ReserveBlock(bg, "w", 0)
	require.Error(t, err)
}

// An owner paused in the middle of a write (here: blocked on a row lock)
// while its lease runs out: the takeover waits for that write, already
// past its fence, to commit, so the new owner reads it. Were the takeover
// to go first, the old owner's write would land after it.
func TestTakeoverWaitsForAWritePastItsFence(t *testing.T) {
	db, u := openTest(t)
	other, err := Open(bg, u, Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = other.Close() })
	mustWorkspace(t, db, "w")
	require.NoError(t, db.CreateSession(bg, store.Session{ID: "s", WorkspaceID: "w", CreatedAt: t0, UpdatedAt: t0}))

	// The test holds the session row, so the old owner's write, which
	// touches it, stops after its fence and its event's insert.
	c := admin(t, u)
	holder, err := c.Begin(bg)
	require.NoError(t, err)
	_, err = holder.Exec(bg, `SELECT 1 FROM sessions WHERE id = 's' FOR UPDATE`)
	require.NoError(t, err)

	old, err := db.AcquireLease(bg, "w", "node-a", 300*time.Millisecond)
	require.NoError(t, err)
	written := make(chan error, 1)
	go func() {
		e := ev("w", 1)
		e.SessionID, e.Touch = "s", t0.Add(time.Hour)
		written <- db.Fenced(old).AppendEvents(bg, []store.Event{e})
	}()
	// Polls go through the store's pool, which is safe to share.
	waiters := func() int {
		var n int
		if err := db.pool.QueryRow(bg, `SELECT count(*) FROM pg_locks WHERE NOT granted`).Scan(&n); err != nil {
			return -1
		}
		return n
	}
	require.Eventually(t, func() bool { return waiters() == 1 }, 10*time.Second, 10*time.Millisecond, "the write blocks")
	require.Eventually(t, func() bool {
		var expired bool
		err := db.pool.QueryRow(bg, `SELECT expires_at <= now() FROM workspace_leases`).Scan(&expired)
		return err == nil && expired
	}, 10*time.Second, 20*time.Millisecond, "the lease expires")

	type took struct {
		lease  Lease
		maxSeq int64
		err    error
	}
	takeover := make(chan took, 1)
	go func() {
		l, err := other.AcquireLease(bg, "w", "node-b", time.Minute)
		var n int64
		if err == nil {
			n, err = other.MaxSeq(bg, "w")
		}
		takeover <- took{l, n, err}
	}()
	// The takeover either waits behind the write (two waiters) or, were
	// the fence not holding the lease row, goes through at once.
	var early *took
	require.Eventually(t, func() bool {
		select {
		case r := <-takeover:
			early = &r
			return true
		default:
			return waiters() == 2
		}
	}, 10*time.Second, 10*time.Millisecond)
	require.NoError(t, holder.Rollback(bg))
	werr := <-written
	r := early
	if r == nil {
		got := <-takeover
		r = &got
	}
	require.NoError(t, r.err)
	require.EqualValues(t, old.Epoch+1, r.lease.Epoch)
	if werr == nil {
		require.EqualValues(t, 1, r.maxSeq, "the old owner's write committed after the new owner read the log")
	} else {
		require.ErrorIs(t, werr, ErrLeaseLost)
		require.Zero(t, r.maxSeq)
	}
	require.Nil(t, early, "the takeover did not wait for the write past its fence")
}

// Leases lists every lease, released ones too, which is how a node finds
// the workspaces whose owner left.
func TestLeasesListsEveryLease(t *testing.T) {
	db, _ := openTest(t)
	mustWorkspace(t, db, "w1")
	mustWorkspace(t, db, "w2")
	mustWorkspace(t, db, "w3")
	a, err := db.AcquireLease(bg, "w1", "node-a", time.Minute)
	require.NoError(t, err)
	b, err := db.AcquireLease(bg, "w2", "node-b", time.Minute)
	require.NoError(t, err)
	require.NoError(t, db.ReleaseLease(bg, b))
	got, err := db.Leases(bg)
	require.NoError(t, err)
	require.Len(t, got, 2, "a workspace never leased has no lease")
	require.Equal(t, a, got[0])
	require.Equal(t, "w2", got[1].WorkspaceID)
	require.True(t, got[1].Expires.IsZero(), "a released lease has no expiry")
}

// waitExpired waits for the database's clock to pass the workspace's
// lease's expiry.
func waitExpired(t *testing.T, db *DB, workspaceID string) {
	t.Helper()
	require.Eventually(t, func() bool {
		var expired bool
		err := db.pool.QueryRow(bg, `SELECT expires_at <= now() FROM workspace_leases WHERE workspace_id = $1`, workspaceID).Scan(&expired)
		return err == nil && expired
	}, 10*time.Second, 20*time.Millisecond)
}

// A lease that expired but that nobody took since (its owner could not
// reach the database for longer than it lasts) is its owner's to renew,
// at the same epoch: no other owner came in between. Once another node
// took it, or it was released, it is lost.
func TestLeaseRenewedAfterExpiryWhenNobodyTookIt(t *testing.T) {
	db, _ := openTest(t)
	mustWorkspace(t, db, "w")
	a, err := db.AcquireLease(bg, "w", "node-a", 200*time.Millisecond)
	require.NoError(t, err)
	waitExpired(t, db, "w")
	again, err := db.RenewLease(bg, a, time.Minute)
	require.NoError(t, err)
	assert.Equal(t, a.Epoch, again.Epoch)
	require.NoError(t, db.Fenced(again).AppendEvent(bg, ev("w", 1)), "its writes pass again")
	_, err = db.AcquireLease(bg, "w", "node-b", time.Minute)
	require.ErrorIs(t, err, ErrLeaseHeld)

	require.NoError(t, db.ReleaseLease(bg, again))
	_, err = db.RenewLease(bg, again, time.Minute)
	require.ErrorIs(t, err, ErrLeaseLost, "a released lease is not taken back")
}
