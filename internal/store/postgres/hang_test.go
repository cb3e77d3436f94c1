package postgres

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/internal/store"
	"github.com/tandem-dev/tandem/internal/store/postgres/pgtest"
)

// A database whose connections hang (no reset, no answer) fails every
// read and write as unavailable within the store's timeouts, the writes
// queued behind a hung batch included, instead of holding its callers for
// the whole outage; once it answers again, so does the store.
func TestStoreHangingAnswersUnavailableInTime(t *testing.T) {
	u := pgtest.Database(t)
	proxy := pgtest.NewProxy(t, u)
	const timeout = time.Second
	db, err := Open(bg, proxy.URL(u), Options{ReadTimeout: timeout, WriteTimeout: timeout})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	mustWorkspace(t, db, "w")
	require.NoError(t, db.CreateSession(bg, store.Session{ID: "s", WorkspaceID: "w", CreatedAt: t0, UpdatedAt: t0}))

	proxy.Pause()
	resumed := false
	defer func() {
		if !resumed {
			proxy.Resume()
		}
	}()
	calls := map[string]func(context.Context) error{
		"get workspace": func(ctx context.Context) error { _, err := db.GetWorkspace(ctx, "w"); return err },
		"events":        func(ctx context.Context) error { _, err := db.WorkspaceEvents(ctx, "w", 0, 0, 0); return err },
		"sessions":      func(ctx context.Context) error { _, err := db.ListSessions(ctx, "w"); return err },
		"prompt key":    func(ctx context.Context) error { _, err := db.PromptByKey(ctx, "s", "k", t0); return err },
		"token":         func(ctx context.Context) error { _, err := db.TokenByHash(ctx, "h"); return err },
	}
	for i := range 6 {
		calls[fmt.Sprintf("append %d", i)] = func(ctx context.Context) error { return db.AppendEvent(ctx, ev("w", int64(i+1))) }
	}
	type outcome struct {
		name string
		err  error
		took time.Duration
	}
	out := make(chan outcome, len(calls))
	var wg sync.WaitGroup
	for name, call := range calls {
		wg.Go(func() {
			start := time.Now()
			err := call(bg) // no deadline of the caller's: the store's own bound
			out <- outcome{name, err, time.Since(start)}
		})
	}
	deadline := time.After(3 * timeout)
	for range calls {
		select {
		case o := <-out:
			assert.ErrorIs(t, o.err, store.ErrUnavailable, o.name)
			assert.Less(t, o.took, 2*timeout+500*time.Millisecond, o.name)
		case <-deadline:
			proxy.Resume()
			resumed = true
			wg.Wait()
			t.Fatalf("a call on a hanging database did not answer within %v", 3*timeout)
		}
	}
	wg.Wait()

	proxy.Resume()
	resumed = true
	require.NoError(t, db.AppendEvent(bg, ev("w", 100)))
	_, err = db.GetWorkspace(bg, "w")
	require.NoError(t, err)
}

// A write that got no answer in time (its statements held on their way)
// is never committed later, when they reach the database: its caller was
// told it failed, and it did.
func TestStoreWriteTimedOutNeverCommitsLate(t *testing.T) {
	u := pgtest.Database(t)
	proxy := pgtest.NewProxy(t, u)
	db, err := Open(bg, proxy.URL(u), Options{ReadTimeout: time.Second, WriteTimeout: time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	mustWorkspace(t, db, "w")
	require.NoError(t, db.AppendEvent(bg, ev("w", 1)))

	proxy.Pause()
	err = db.AppendEvent(bg, ev("w", 2))
	proxy.Resume()
	require.ErrorIs(t, err, store.ErrUnavailable)

	// Whatever was held reaches the database now; a write after it is
	// ordered behind it.
	require.NoError(t, db.AppendEvent(bg, ev("w", 3)))
	direct, err := Open(bg, u, Options{})
	require.NoError(t, err)
	defer direct.Close()
	require.Eventually(t, func() bool {
		var n int
		err := direct.pool.QueryRow(bg, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND state LIKE 'idle in transaction%'`).Scan(&n)
		return err == nil && n == 0
	}, 10*time.Second, 20*time.Millisecond, "the held transaction ended")
	es, err := direct.WorkspaceEvents(bg, "w", 0, 0, 0)
	require.NoError(t, err)
	assert.Equal(t, []int64{1, 3}, seqsOf(es), "the write told it failed is not there")
}

func seqsOf(es []store.Event) []int64 {
	out := make([]int64, len(es))
	for i, e := range es {
		out[i] = e.Seq
	}
	return out
}
