package workspace

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/tandem-dev/tandem/internal/store"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/tandem-dev/tandem/internal/bus"
	"github.com/tandem-dev/tandem/internal/hub"
	"github.com/tandem-dev/tandem/internal/store/sqlite"
	"github.com/tandem-dev/tandem/proto"

	"github.com/tandem-dev/tandem/internal/httpapi/sse"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// openWorkspace opens a workspace over a fresh database; wrap, when set,
// wraps the database as the workspace's store.
func openWorkspace(t testing.TB, wrap func(store.Store) store.Store) (*Workspace, *sqlite.DB) {
	t.Helper()
	ctx := context.Background()
	db, err := sqlite.Open(ctx, t.TempDir()+"/t.db")
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	var st store.Store = db
	if wrap != nil {
		st = wrap(db)
	}
	h := hub.New(hub.Config{})
	t.Cleanup(h.Close)
	m := NewManager(Config{Store: st, Hub: h, CreateGrace: time.Minute, DetachGrace: time.Minute})
	t.Cleanup(func() { m.Shutdown(ctx) })
	ws, _, err := m.Open(ctx, t.TempDir())
	require.NoError(t, err)
	return ws, db
}

// Many goroutines emitting at once (kept and ephemeral events mixed, one at
// a time and in groups): a stream sees every event exactly once, in strictly
// increasing seq order, and every kept event is on disk.
func TestConcurrentEmitsArePublishedInSeqOrder(t *testing.T) {
	ctx := context.Background()
	ws, db := openWorkspace(t, nil)

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = ws.Stream(r.Context(), sse.NewWriter(w), &StreamOptions{ClientID: r.URL.Query().Get("c")})
	}))
	defer srv.Close()
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, _ := http.NewRequestWithContext(sctx, "GET", srv.URL+"?c="+uuid.NewString(), nil)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	lines := bufio.NewScanner(resp.Body)
	lines.Buffer(nil, 1<<20)
	require.True(t, lines.Scan())
	require.Equal(t, "event: "+proto.EventStreamOpened, lines.Text())

	const emitters, each = 32, 50
	var wg sync.WaitGroup
	for g := range emitters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Half the emitters emit one event at a time, half in groups.
			var group []Draft
			for i := range each {
				d := Draft{
					Type: proto.EventSessionLog, SessionID: "s",
					Data:      proto.SessionLog{Level: "info", Message: fmt.Sprintf("%d/%d", g, i)},
					Ephemeral: i%3 == 0,
				}
				if g%2 == 0 {
					_, err := ws.Emit(ctx, d)
					assert.NoError(t, err)
					continue
				}
				if group = append(group, d); len(group) == 5 || i == each-1 {
					evs, err := ws.EmitAll(ctx, group)
					assert.NoError(t, err)
					assert.Len(t, evs, len(group))
					group = nil
				}
			}
		}()
	}

	// A lost or reordered event would leave the reader waiting: the deadline
	// ends the stream and the count below fails.
	deadline := time.AfterFunc(30*time.Second, cancel)
	defer deadline.Stop()
	var last int64
	logs := 0
	for logs < emitters*each && lines.Scan() {
		line := lines.Text()
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		var ev proto.Event
		if json.Unmarshal([]byte(data), &ev) != nil || ev.Seq == 0 {
			continue // the stream.opened control frame
		}
		require.Greater(t, ev.Seq, last, "seqs strictly increase on the stream")
		last = ev.Seq
		if ev.Type == proto.EventSessionLog {
			logs++
		}
	}
	wg.Wait()
	assert.Equal(t, emitters*each, logs, "every event arrives once")

	kept, err := db.WorkspaceEvents(ctx, ws.ID, 0, 0, 0)
	require.NoError(t, err)
	n := 0
	for _, e := range kept {
		if e.Type == proto.EventSessionLog {
			n++
		}
	}
	assert.Equal(t, emitters*(each-(each+2)/3), n, "every kept event is on disk, no ephemeral one")
}

// failingStore fails appends while fail is set.
type failingStore struct {
	store.Store
	fail atomic.Bool
}

func (s *failingStore) AppendEvents(ctx context.Context, es []store.Event) error {
	if s.fail.Load() {
		return errors.New("disk full")
	}
	return s.Store.AppendEvents(ctx, es)
}

// A group that fails to persist is published as nothing at all, and its
// seqs become gaps rather than holding back the events after it.
func TestFailedGroupLeavesGaps(t *testing.T) {
	ctx := context.Background()
	st := &failingStore{}
	ws, db := openWorkspace(t, func(db store.Store) store.Store { st.Store = db; return st })

	log := func(msg string, ephemeral bool) Draft {
		return Draft{Type: proto.EventSessionLog, SessionID: "s", Data: proto.SessionLog{Level: "info", Message: msg}, Ephemeral: ephemeral}
	}
	first, err := ws.Emit(ctx, log("before", false))
	require.NoError(t, err)
	// Emit returns once its events are published: a group held back by
	// the failed one, or the failed one itself, would never return.
	var after proto.Event
	inTime(t, func() {
		st.fail.Store(true)
		_, err := ws.EmitAll(ctx, []Draft{log("lost", false), log("lost too", true)})
		assert.ErrorContains(t, err, "disk full")
		st.fail.Store(false)
		after, err = ws.Emit(ctx, log("after", false))
		assert.NoError(t, err)
	})
	require.Equal(t, first.Seq+3, after.Seq, "the failed group's seqs are not reused")

	kept, err := db.WorkspaceEvents(ctx, ws.ID, first.Seq-1, 0, 0)
	require.NoError(t, err)
	var got []int64
	for _, e := range kept {
		got = append(got, e.Seq)
	}
	require.Equal(t, []int64{first.Seq, after.Seq}, got)
}

// inTime runs f and ends the test binary if f has not returned within
// 10 s. It exits rather than calling t.Fatal or panicking: with the event log
// wedged, the workspace's cleanup (which both run) would wait forever too,
// and the message would never be printed.
func inTime(t *testing.T, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		fmt.Fprintf(os.Stderr, "--- FAIL: %s: still waiting after 10 s: an event was never published\n", t.Name())
		os.Exit(1)
	}
}

// holdingStore holds the appends of events whose data mentions "hold"
// until release is closed, saying when one arrives on entered.
type holdingStore struct {
	store.Store
	entered chan struct{}
	release chan struct{}
}

func (s *holdingStore) AppendEvents(ctx context.Context, es []store.Event) error {
	if len(es) > 0 && strings.Contains(string(es[0].Envelope), "hold") {
		close(s.entered)
		<-s.release
	}
	return s.Store.AppendEvents(ctx, es)
}

// Record returns once its event is on disk, without waiting for the events
// numbered before it (another writer's, still being written) to be
// published: a 202 does not wait for the commits of other runs. The event
// still reaches the streams after those, in seq order.
func TestRecordDoesNotWaitForEarlierWriters(t *testing.T) {
	ctx := context.Background()
	st := &holdingStore{entered: make(chan struct{}), release: make(chan struct{})}
	ws, db := openWorkspace(t, func(db store.Store) store.Store { st.Store = db; return st })
	log := func(msg string) Draft {
		return Draft{Type: proto.EventSessionLog, SessionID: "s", Data: proto.SessionLog{Level: "info", Message: msg}}
	}
	slow := make(chan proto.Event, 1)
	go func() {
		ev, err := ws.Emit(ctx, log("hold"))
		assert.NoError(t, err)
		slow <- ev
	}()
	<-st.entered
	var fast proto.Event
	inTime(t, func() {
		var err error
		fast, err = ws.Record(ctx, log("fast"))
		require.NoError(t, err)
	})
	kept, err := db.WorkspaceEvents(ctx, ws.ID, fast.Seq-1, 0, 0)
	require.NoError(t, err)
	require.Len(t, kept, 1, "Record returned before its event was on disk")
	require.Less(t, ws.topic.Head(), fast.Seq, "published before the event numbered before it")
	close(st.release)
	first := <-slow
	require.Less(t, first.Seq, fast.Seq)
	// Emit returns once its event is published, and the one Record wrote
	// goes out right after it.
	require.Eventually(t, func() bool { return ws.topic.Head() == fast.Seq }, 10*time.Second, time.Millisecond)
}

// The event log publishes through the node's in-process bus, the seam a
// cluster plugs into: a subscriber of the workspace on that bus gets each
// event once it is committed, in seq order, as the streams do.
func TestEventsArePublishedOnTheBusAfterCommit(t *testing.T) {
	ctx := context.Background()
	db, err := sqlite.Open(ctx, t.TempDir()+"/t.db")
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	h := hub.New(hub.Config{})
	t.Cleanup(h.Close)
	local := bus.NewLocal()
	m := NewManager(Config{Store: db, Hub: h, Bus: local, CreateGrace: time.Minute, DetachGrace: time.Minute})
	t.Cleanup(func() { m.Shutdown(ctx) })
	ws, _, err := m.Open(ctx, t.TempDir())
	require.NoError(t, err)

	type seen struct {
		seq       int64
		committed bool
	}
	var got []seen
	cancel, err := local.Subscribe(ws.ID, func(e bus.Event) {
		committed := true
		if e.Kept {
			recs, err := db.WorkspaceEvents(ctx, ws.ID, e.Seq-1, e.Seq, 1)
			committed = err == nil && len(recs) == 1
		}
		got = append(got, seen{e.Seq, committed})
	}, nil)
	require.NoError(t, err)
	defer cancel()
	var want []seen
	for i := range 10 {
		typ := proto.EventSessionCreated
		if i%2 == 1 {
			typ = proto.EventMessageDelta
		}
		ev, err := ws.Emit(ctx, Draft{Type: typ, Data: map[string]int{"i": i}})
		require.NoError(t, err)
		want = append(want, seen{ev.Seq, true})
	}
	require.Equal(t, want, got)
}

// A stream another node reports is a claim like one here: it counts the
// client, and its end releases it.
func TestClaimsOfOtherNodesCount(t *testing.T) {
	ws, _ := openWorkspace(t, nil)
	require.NoError(t, ws.Claim("c"))
	require.NoError(t, ws.Claim("c"))
	require.True(t, ws.HasClient("c"))
	require.Equal(t, 2, ws.Info().Clients)
	ws.Unclaim("c")
	ws.Unclaim("c")
	require.False(t, ws.HasClient("c"))
	require.Zero(t, ws.Info().Clients)
}

// reservingStore tells of each seq reservation on reserved and holds the
// ones beyond hold until release is closed.
type reservingStore struct {
	store.Store
	hold     int64
	reserved chan int64
	release  chan struct{}
}

func (s *reservingStore) ReserveSeq(ctx context.Context, workspaceID string, upTo int64) error {
	s.reserved <- upTo
	if upTo > s.hold {
		<-s.release
	}
	return s.Store.ReserveSeq(ctx, workspaceID, upTo)
}

// The next block of seqs is reserved while half of the current one is
// left, in the background: no emitter (a prompt's 202 among them) waits
// for that commit on top of its own when the block runs out, and the
// emitters go on while it is held up.
func TestSeqsAreReservedAheadInTheBackground(t *testing.T) {
	ctx := context.Background()
	st := &reservingStore{hold: math.MaxInt64, reserved: make(chan int64, 16), release: make(chan struct{})}
	ws, _ := openWorkspace(t, func(db store.Store) store.Store { st.Store = db; return st })
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(st.release) }) }
	t.Cleanup(release) // before the workspace's: its last events may need a block
	log := Draft{Type: proto.EventSessionLog, SessionID: "s", Data: proto.SessionLog{Level: "info", Message: "m"}}
	first, err := ws.Record(ctx, log)
	require.NoError(t, err)
	ws.log.mu.Lock()
	block := ws.log.reserved // the block the first event was numbered in ends here
	ws.log.mu.Unlock()
	st.hold = block
	for len(st.reserved) > 0 {
		<-st.reserved // the first block's
	}
	// Every seq of the block is handed out, the last ones while the
	// reservation of the next is held up.
	inTime(t, func() {
		for seq := first.Seq + 1; seq <= block; seq++ {
			ev, err := ws.Record(ctx, log)
			require.NoError(t, err)
			require.Equal(t, seq, ev.Seq)
		}
	})
	select {
	case upTo := <-st.reserved:
		require.Equal(t, block+seqBlock, upTo, "the next block is reserved")
	case <-time.After(10 * time.Second):
		t.Fatal("the next block was not reserved while the current one had room")
	}
	release()
	// The next block was reserved before it was needed: the event past the
	// block's end waits for no reservation, and none was made but that one.
	ev, err := ws.Record(ctx, log)
	require.NoError(t, err)
	require.Equal(t, block+1, ev.Seq)
	require.Empty(t, st.reserved, "no reservation waited for past the block's end")
}
