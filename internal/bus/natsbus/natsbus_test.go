package natsbus

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/tandem-dev/tandem/internal/bus"
	"github.com/tandem-dev/tandem/internal/bus/natsbus/natstest"
)

func natsServer(t *testing.T, port int) *server.Server { return natstest.StartOn(t, port) }

func port(s *server.Server) int { return natstest.Port(s) }

func dial(t *testing.T, s *server.Server, name string, tweak ...func(*Config)) *Bus {
	t.Helper()
	cfg := Config{URL: s.ClientURL(), Name: name}
	for _, f := range tweak {
		f(&cfg)
	}
	b, err := Dial(cfg)
	require.NoError(t, err)
	t.Cleanup(b.Close)
	return b
}

func event(seq int64, kept bool) bus.Event {
	return bus.Event{Seq: seq, Type: "message.delta", SessionID: "s1", Kept: kept, Data: fmt.Appendf(nil, `{"seq":%d}`, seq)}
}

// memLog stands for the store: the kept events committed so far.
type memLog struct {
	mu     sync.Mutex
	events map[string]map[int64]bus.Event
	reads  atomic.Int64 // Events calls: catch-ups from the store
}

func newMemLog() *memLog { return &memLog{events: map[string]map[int64]bus.Event{}} }

func (l *memLog) commit(ws string, e bus.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !e.Kept {
		return
	}
	if l.events[ws] == nil {
		l.events[ws] = map[int64]bus.Event{}
	}
	l.events[ws][e.Seq] = e
}

func (l *memLog) Events(_ context.Context, ws string, after, upTo int64, limit int) ([]bus.Event, error) {
	l.reads.Add(1)
	return l.keptEvents(ws, after, upTo, limit), nil
}

func (l *memLog) keptEvents(ws string, after, upTo int64, limit int) []bus.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	var seqs []int64
	for s := range l.events[ws] {
		if s > after && (upTo <= 0 || s <= upTo) {
			seqs = append(seqs, s)
		}
	}
	sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
	if limit > 0 && len(seqs) > limit {
		seqs = seqs[:limit]
	}
	out := make([]bus.Event, len(seqs))
	for i, s := range seqs {
		out[i] = l.events[ws][s]
	}
	return out
}

func (l *memLog) Head(_ context.Context, ws string) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var head int64
	for s := range l.events[ws] {
		head = max(head, s)
	}
	return head, nil
}

func (l *memLog) kept(ws string, after, upTo int64) []int64 {
	es := l.keptEvents(ws, after, upTo, 0)
	out := make([]int64, len(es))
	for i, e := range es {
		out[i] = e.Seq
	}
	return out
}

// collector records events and tells when one reaches a seq.
type collector struct {
	mu      sync.Mutex
	got     []bus.Event
	changed chan struct{}
}

func newCollector() *collector { return &collector{changed: make(chan struct{}, 1)} }

func (c *collector) fn(e bus.Event) {
	c.mu.Lock()
	c.got = append(c.got, e)
	c.mu.Unlock()
	select {
	case c.changed <- struct{}{}:
	default:
	}
}

func (c *collector) events() []bus.Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]bus.Event(nil), c.got...)
}

func (c *collector) waitFor(t *testing.T, seq int64) {
	t.Helper()
	deadline := time.After(15 * time.Second)
	for {
		got := c.events()
		if len(got) > 0 && got[len(got)-1].Seq >= seq {
			return
		}
		select {
		case <-c.changed:
		case <-deadline:
			var last int64
			if len(got) > 0 {
				last = got[len(got)-1].Seq
			}
			t.Fatalf("did not reach seq %d: %d events, last %d", seq, len(got), last)
		}
	}
}

// requireFeed checks strictly increasing seqs and every kept event of the
// log in (after, upTo] present.
func requireFeed(t *testing.T, got []bus.Event, log *memLog, ws string, after, upTo int64) {
	t.Helper()
	seen := map[int64]bool{}
	prev := after
	for _, e := range got {
		require.Greater(t, e.Seq, prev, "out of order or twice")
		prev = e.Seq
		seen[e.Seq] = true
	}
	for _, s := range log.kept(ws, after, upTo) {
		require.True(t, seen[s], "kept event %d missing (after %d)", s, after)
	}
}

// Events published on one node reach every subscriber on the others,
// whole and in order, workspace by workspace.
func TestOrderAcrossNodes(t *testing.T) {
	s := natsServer(t, 0)
	a, b, c := dial(t, s, "a"), dial(t, s, "b"), dial(t, s, "c")
	const (
		workspaces = 4
		perWS      = 2000
	)
	var cols []*collector
	var wsOf []string
	for w := range workspaces {
		ws := fmt.Sprintf("ws-%d", w)
		for _, node := range []*Bus{b, c, b} {
			col := newCollector()
			cancel, err := node.Subscribe(ws, col.fn, nil)
			require.NoError(t, err)
			t.Cleanup(cancel)
			cols, wsOf = append(cols, col), append(wsOf, ws)
		}
	}
	var wg sync.WaitGroup
	for w := range workspaces {
		p, err := a.Publisher(fmt.Sprintf("ws-%d", w), 0)
		require.NoError(t, err)
		t.Cleanup(p.Close)
		wg.Go(func() {
			for seq := int64(1); seq <= perWS; seq++ {
				e := event(seq, seq%3 == 0)
				e.SessionID = fmt.Sprintf("s-%d", w)
				p.Publish(e)
			}
		})
	}
	wg.Wait()
	for i, col := range cols {
		col.waitFor(t, perWS)
		got := col.events()
		require.Len(t, got, perWS, "subscriber %d of %s", i, wsOf[i])
		for j, e := range got {
			require.EqualValues(t, j+1, e.Seq)
			require.Equal(t, j%3 == 2, e.Kept)
			require.Equal(t, "message.delta", e.Type)
			require.Equal(t, "s-"+wsOf[i][3:], e.SessionID)
			require.Equal(t, fmt.Sprintf(`{"seq":%d}`, j+1), string(e.Data))
		}
	}
}

// A node publishing a workspace answers Head for it; with none, Head says
// so at once.
func TestHead(t *testing.T) {
	s := natsServer(t, 0)
	a, b := dial(t, s, "a"), dial(t, s, "b")
	ctx := context.Background()
	start := time.Now()
	_, ok, err := b.Head(ctx, "w")
	require.NoError(t, err)
	require.False(t, ok)
	require.Less(t, time.Since(start), time.Second, "no responders is told at once, not timed out")

	p, err := a.Publisher("w", 41)
	require.NoError(t, err)
	_, err = a.Publisher("w", 41)
	require.ErrorIs(t, err, bus.ErrPublished)
	for _, node := range []*Bus{a, b} {
		head, ok, err := node.Head(ctx, "w")
		require.NoError(t, err)
		require.True(t, ok)
		require.EqualValues(t, 41, head)
	}
	p.Publish(event(42, true))
	head, _, err := b.Head(ctx, "w")
	require.NoError(t, err)
	require.EqualValues(t, 42, head)
	p.Close()
	_, ok, err = b.Head(ctx, "w")
	require.NoError(t, err)
	require.False(t, ok, "a closed publisher no longer answers")

	// Workspace ids that are not subject tokens stay apart.
	q, err := a.Publisher("odd.id *>", 7)
	require.NoError(t, err)
	defer q.Close()
	head, ok, err = b.Head(ctx, "odd.id *>")
	require.NoError(t, err)
	require.True(t, ok)
	require.EqualValues(t, 7, head)
	_, ok, err = b.Head(ctx, "odd")
	require.NoError(t, err)
	require.False(t, ok)
}

// A stream on any node replays from the store and goes live from NATS with
// no gap and no duplicate, whenever it starts, while the owner commits
// events out of order and publishes them in order.
func TestFollowAcrossNodes(t *testing.T) {
	s := natsServer(t, 0)
	owner := dial(t, s, "owner")
	nodes := []*Bus{dial(t, s, "b"), dial(t, s, "c"), owner}
	log := newMemLog()
	const last = 3000
	p, err := owner.Publisher("w", 0)
	require.NoError(t, err)
	defer p.Close()

	var (
		published atomic.Int64
		wg        sync.WaitGroup
		mu        sync.Mutex
		feeds     []*bus.Feed
		cols      []*collector
		afters    []int64
	)
	wg.Go(func() {
		rng := rand.New(rand.NewPCG(3, 4))
		for seq := int64(1); seq <= last; {
			n := int64(1 + rng.IntN(6))
			var window []bus.Event
			for i := int64(0); i < n && seq <= last; i++ {
				// The last one is kept: a follower that joins after an
				// ephemeral event went out does not get it.
				window = append(window, event(seq, rng.IntN(3) != 0 || seq == last))
				seq++
			}
			for _, i := range rng.Perm(len(window)) {
				log.commit("w", window[i])
			}
			for _, e := range window {
				p.Publish(e)
				published.Store(e.Seq)
			}
		}
	})
	for i := range 12 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(i), 9))
			for published.Load() < int64(rng.IntN(last-200)) {
				time.Sleep(100 * time.Microsecond) // pacing the start, not a synchronization
			}
			after := max(0, published.Load()-int64(rng.IntN(300)))
			col := newCollector()
			f := &bus.Follower{Bus: nodes[i%len(nodes)], Log: log}
			feed, err := f.Follow("w", after, col.fn)
			if !assert.NoError(t, err) {
				return
			}
			mu.Lock()
			feeds, cols, afters = append(feeds, feed), append(cols, col), append(afters, after)
			mu.Unlock()
		})
	}
	wg.Wait()
	require.Len(t, feeds, 12)
	for i, col := range cols {
		col.waitFor(t, last)
		feeds[i].Close()
		requireFeed(t, col.events(), log, "w", afters[i], last)
	}
}

// Ownership moves: the old owner's last events reached the store but not
// the bus, the new owner numbers above what was reserved. A stream on a
// third node gets them all, in order.
func TestFollowAcrossOwners(t *testing.T) {
	s := natsServer(t, 0)
	a, b, c := dial(t, s, "a"), dial(t, s, "b"), dial(t, s, "c")
	log := newMemLog()
	col := newCollector()
	feed, err := (&bus.Follower{Bus: c, Log: log}).Follow("w", 0, col.fn)
	require.NoError(t, err)
	defer feed.Close()

	pa, err := a.Publisher("w", 0)
	require.NoError(t, err)
	for seq := int64(1); seq <= 100; seq++ {
		e := event(seq, seq%2 == 0)
		log.commit("w", e)
		if seq <= 90 {
			pa.Publish(e)
		}
	}
	pa.Close() // a dies: 91..100 were committed, never published
	col.waitFor(t, 90)
	pb, err := b.Publisher("w", 1024)
	require.NoError(t, err)
	defer pb.Close()
	for seq := int64(1025); seq <= 1100; seq++ {
		e := event(seq, seq%2 == 0)
		log.commit("w", e)
		pb.Publish(e)
	}
	col.waitFor(t, 1100)
	requireFeed(t, col.events(), log, "w", 0, 1100)
}

// The NATS server goes away and comes back empty (a restart loses memory
// streams): the owner goes on committing and publishing meanwhile, streams
// on other nodes miss what was published while they were cut off, are
// told, and get it from the store once reconnected, on the new stream.
func TestReconnectCatchesUp(t *testing.T) {
	s := natsServer(t, 0)
	p0 := port(s)
	// The owner keeps nothing to send while disconnected: what it
	// publishes then is lost for the other node, which must get it from
	// the store.
	owner := dial(t, s, "owner", func(c *Config) { c.Options = append(c.Options, nats.ReconnectBufSize(-1)) })
	other := dial(t, s, "other")
	log := newMemLog()
	col := newCollector()
	feed, err := (&bus.Follower{Bus: other, Log: log}).Follow("w", 0, col.fn)
	require.NoError(t, err)
	defer feed.Close()
	var lost atomic.Int64
	cancel, err := other.Subscribe("w", func(bus.Event) {}, func() { lost.Add(1) })
	require.NoError(t, err)
	defer cancel()

	p, err := owner.Publisher("w", 0)
	require.NoError(t, err)
	defer p.Close()
	publish := func(from, to int64) {
		for seq := from; seq <= to; seq++ {
			e := event(seq, seq%4 != 0 || seq == 300)
			log.commit("w", e)
			p.Publish(e)
		}
	}
	publish(1, 100)
	col.waitFor(t, 100)

	s.Shutdown()
	s.WaitForShutdown()
	publish(101, 300) // committed, and lost on the way
	natsServer(t, p0)
	require.Eventually(t, func() bool { return owner.nc.IsConnected() && other.nc.IsConnected() },
		15*time.Second, 20*time.Millisecond, "both nodes reconnect")
	require.Eventually(t, func() bool { return lost.Load() > 0 }, 15*time.Second, 10*time.Millisecond,
		"a new stream is reported as a possible loss")
	// Nothing more is published: the other node's restart on the new
	// stream (or the owner's beacon after its reconnect) is what brings
	// 101..300.
	col.waitFor(t, 300)
	publish(301, 400)
	col.waitFor(t, 400)
	requireFeed(t, col.events(), log, "w", 0, 400)
}

// A node cut off from NATS for a moment (the server drops its connection)
// reads on from where it was once back: a stream gets every event
// published meanwhile, the ephemeral ones too, in order, from the bus
// alone.
func TestReconnectResumesFromTheStream(t *testing.T) {
	s := natsServer(t, 0)
	owner := dial(t, s, "owner")
	node := dial(t, s, "node")
	log := newMemLog()
	var lost atomic.Int64
	cancel, err := node.Subscribe("w", func(bus.Event) {}, func() { lost.Add(1) })
	require.NoError(t, err)
	defer cancel()
	p, err := owner.Publisher("w", 0)
	require.NoError(t, err)
	defer p.Close()
	col := newCollector()
	feed, err := (&bus.Follower{Bus: node, Log: log}).Follow("w", 0, col.fn)
	require.NoError(t, err)
	defer feed.Close()
	publish := func(from, to int64) {
		for seq := from; seq <= to; seq++ {
			e := event(seq, seq%4 == 0)
			log.commit("w", e)
			p.Publish(e)
		}
	}
	publish(1, 100)
	col.waitFor(t, 100)

	cid, err := node.nc.GetClientID()
	require.NoError(t, err)
	require.NoError(t, s.DisconnectClientByID(cid))
	publish(101, 1000) // while the node is away
	require.Eventually(t, func() bool { return node.nc.Stats().Reconnects > 0 && node.nc.IsConnected() },
		15*time.Second, 10*time.Millisecond, "the node reconnects")
	publish(1001, 1100)
	col.waitFor(t, 1100)
	got := col.events()
	require.Equal(t, 1100, len(got), "every event, the ephemeral ones too")
	for i, e := range got {
		require.EqualValues(t, i+1, e.Seq)
	}
	require.Zero(t, lost.Load(), "nothing was lost")
	require.Zero(t, log.reads.Load(), "nothing was read from the store")
}

// A node that falls behind further than the stream keeps (here 50 events
// per workspace) loses the oldest of what it had not read; it is told, and
// a stream catches up from the store.
func TestSlowConsumerIsToldAndCatchesUp(t *testing.T) {
	s := natsServer(t, 0)
	// Beacons are made too rare to help: the hole shows at the next frame.
	small := func(c *Config) {
		c.StreamMaxPerWorkspace, c.PendingMsgs, c.BeaconEvery = 50, minPendingMsgs, time.Minute
	}
	owner := dial(t, s, "owner", small)
	slow := dial(t, s, "slow", small)
	log := newMemLog()
	gate, blocked := make(chan struct{}), make(chan struct{})
	var once sync.Once
	var lost atomic.Int64
	cancel, err := slow.Subscribe("w", func(bus.Event) {
		once.Do(func() { close(blocked) })
		<-gate
	}, func() { lost.Add(1) })
	require.NoError(t, err)
	col := newCollector()
	feed, err := (&bus.Follower{Bus: slow, Log: log}).Follow("w", 0, col.fn)
	require.NoError(t, err)
	defer feed.Close()

	p, err := owner.Publisher("w", 0)
	require.NoError(t, err)
	defer p.Close()
	// The slow node reads the first event, and is stuck there while the
	// rest is published. (A node whose first frame already comes after a
	// hole has nothing to compare it with: the publisher's beacon, a
	// second after a burst, tells it; TestAFollowerLearnsOfEventsItWasNeverSent.)
	e := event(1, true)
	log.commit("w", e)
	p.Publish(e)
	select {
	case <-blocked:
	case <-time.After(15 * time.Second):
		t.Fatal("the slow node never read the first event")
	}
	for seq := int64(2); seq <= 500; seq++ {
		e := event(seq, seq%3 != 0 || seq == 500)
		log.commit("w", e)
		p.Publish(e)
	}
	// Every event is in the stream (which keeps the last 50) before the
	// slow node reads on.
	select {
	case <-owner.js.PublishAsyncComplete():
	case <-time.After(15 * time.Second):
		t.Fatal("publishes not acknowledged")
	}
	require.Zero(t, lost.Load())
	close(gate)
	require.Eventually(t, func() bool { return lost.Load() > 0 }, 15*time.Second, 10*time.Millisecond,
		"the slow subscriber is told it lost events")
	cancel()
	col.waitFor(t, 500)
	requireFeed(t, col.events(), log, "w", 0, 500)
	require.NotZero(t, log.reads.Load(), "the discarded kept events came from the store")
}

// A node that falls behind within what the stream keeps is not dropped
// anything: once it reads on, a stream gets every event, the ephemeral
// ones too, in order, from the bus alone.
func TestSlowFollowerGetsEveryEventFromTheBus(t *testing.T) {
	s := natsServer(t, 0)
	owner := dial(t, s, "owner")
	slow := dial(t, s, "slow", func(c *Config) { c.PendingMsgs = minPendingMsgs })
	log := newMemLog()
	gate := make(chan struct{})
	var lost atomic.Int64
	var blocked sync.Once
	cancel, err := slow.Subscribe("w", func(bus.Event) { blocked.Do(func() { <-gate }) }, func() { lost.Add(1) })
	require.NoError(t, err)
	defer cancel()
	p, err := owner.Publisher("w", 0)
	require.NoError(t, err)
	defer p.Close()
	col := newCollector()
	feed, err := (&bus.Follower{Bus: slow, Log: log}).Follow("w", 0, col.fn)
	require.NoError(t, err)
	defer feed.Close()

	const last = 3000 // far beyond what the node buffers
	for seq := int64(1); seq <= last; seq++ {
		e := event(seq, seq%4 == 0)
		log.commit("w", e)
		p.Publish(e)
	}
	select {
	case <-owner.js.PublishAsyncComplete():
	case <-time.After(15 * time.Second):
		t.Fatal("publishes not acknowledged")
	}
	close(gate)
	col.waitFor(t, last)
	got := col.events()
	require.Equal(t, last, len(got), "every event, the ephemeral ones too")
	for i, e := range got {
		require.EqualValues(t, i+1, e.Seq)
		require.Equal(t, (i+1)%4 == 0, e.Kept)
	}
	require.Zero(t, lost.Load(), "nothing was lost")
	require.Zero(t, log.reads.Load(), "nothing was read from the store")
}

// Garbage on a workspace's subject is dropped; the stream goes on.
func TestMalformedMessagesAreDropped(t *testing.T) {
	s := natsServer(t, 0)
	node := dial(t, s, "node")
	col := newCollector()
	cancel, err := node.Subscribe("w", col.fn, nil)
	require.NoError(t, err)
	defer cancel()
	raw, err := nats.Connect(s.ClientURL())
	require.NoError(t, err)
	defer raw.Close()
	subj := node.subject("w", "ev")
	for _, junk := range [][]byte{nil, {0x01}, {0x01, 0x00, 0x80}, {0x07, 1, 2}, {0x01, 0, 1, 200, 'x'}, {0x01, 0, 2, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}} {
		require.NoError(t, raw.Publish(subj, junk))
	}
	require.NoError(t, raw.Publish(subj, appendEvent(nil, event(1, true), 0, 7)))
	col.waitFor(t, 1)
	require.Len(t, col.events(), 1)
}

func TestFrameRoundTrip(t *testing.T) {
	for _, e := range []bus.Event{
		event(1, true),
		{Seq: 1 << 40, Type: "", SessionID: "", Kept: false, Data: nil},
		{Seq: 7, Type: "session.log", SessionID: "0198-uuid", Kept: true, Data: []byte("{}")},
	} {
		b := appendEvent(nil, e, e.Seq-1, 0xfeedface12345678)
		require.LessOrEqual(t, len(b), frameSize(e))
		f, err := decode(b)
		require.NoError(t, err)
		require.False(t, f.beacon)
		require.Equal(t, e.Seq-1, f.prev)
		require.Equal(t, uint64(0xfeedface12345678), f.origin)
		if len(e.Data) == 0 {
			require.Empty(t, f.event.Data)
			f.event.Data = e.Data
		}
		require.Equal(t, e, f.event)
	}
	f, err := decode(appendBeacon(nil, 99))
	require.NoError(t, err)
	require.True(t, f.beacon)
	require.EqualValues(t, 99, f.event.Seq)
}

func FuzzDecode(f *testing.F) {
	f.Add(appendEvent(nil, event(1, true), 0, 1))
	f.Add(appendEvent(nil, event(9, false), 4, 1<<63))
	f.Add(appendBeacon(nil, 12))
	f.Add([]byte{0x01, 0x00, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, err := decode(b)
		if err != nil {
			return
		}
		if fr.event.Seq <= 0 && !fr.beacon {
			t.Fatalf("decoded a non-positive seq %d", fr.event.Seq)
		}
		if !fr.beacon {
			if fr.prev < 0 || fr.prev >= fr.event.Seq {
				t.Fatalf("decoded prev %d for seq %d", fr.prev, fr.event.Seq)
			}
			// What decodes encodes back to the same bytes.
			again := appendEvent(nil, fr.event, fr.prev, fr.origin)
			f2, err := decode(again)
			if err != nil || f2.event.Seq != fr.event.Seq || f2.event.Type != fr.event.Type || f2.prev != fr.prev ||
				f2.origin != fr.origin || f2.event.SessionID != fr.event.SessionID || string(f2.event.Data) != string(fr.event.Data) {
				t.Fatalf("round trip changed %q", b)
			}
		}
	})
}

// Events a node never heard of on the bus, committed and counted by an
// owner that died before publishing them, reach its streams from the log
// all the same: the new owner's beacon, as it takes over, tells the node
// where the events end (its periodic beacons are made too rare to).
func TestAFollowerLearnsOfEventsItWasNeverSent(t *testing.T) {
	s := natsServer(t, 0)
	owner := dial(t, s, "owner", func(c *Config) { c.BeaconEvery = time.Minute })
	node := dial(t, s, "node")
	log := newMemLog()
	for seq := int64(1); seq <= 3; seq++ {
		log.commit("w", event(seq, true))
	}
	col := newCollector()
	feed, err := (&bus.Follower{Bus: node, Log: log}).Follow("w", 0, col.fn)
	require.NoError(t, err)
	defer feed.Close()
	col.waitFor(t, 3)

	for seq := int64(4); seq <= 6; seq++ {
		log.commit("w", event(seq, true))
	}
	p, err := owner.Publisher("w", 6)
	require.NoError(t, err)
	defer p.Close()
	col.waitFor(t, 6)
	requireFeed(t, col.events(), log, "w", 0, 6)
}

// Unsubscribing and closing stop every goroutine the bus started: its
// consumers', its publishers' and the connection's.
func TestCloseStopsEverything(t *testing.T) {
	s := natsServer(t, 0)
	// The stream is the server's: make it before counting goroutines.
	first, err := Dial(Config{URL: s.ClientURL(), Name: "first"})
	require.NoError(t, err)
	first.Close()
	defer goleak.VerifyNone(t, append(natstest.IgnoreConsumers(), goleak.IgnoreCurrent())...)
	a, err := Dial(Config{URL: s.ClientURL(), Name: "a"})
	require.NoError(t, err)
	b, err := Dial(Config{URL: s.ClientURL(), Name: "b"})
	require.NoError(t, err)
	col := newCollector()
	cancel1, err := b.Subscribe("w", col.fn, nil)
	require.NoError(t, err)
	cancel2, err := b.Subscribe("w", func(bus.Event) {}, nil)
	require.NoError(t, err)
	_, err = b.Subscribe("v", func(bus.Event) {}, nil) // left to Close
	require.NoError(t, err)
	p, err := a.Publisher("w", 0)
	require.NoError(t, err)
	p.Publish(event(1, true))
	col.waitFor(t, 1)
	cancel1()
	cancel2()
	_, err = a.Publisher("v", 0) // left to Close
	require.NoError(t, err)
	p.Close()
	a.Close()
	b.Close()
}

// A NATS server without JetStream is refused at Dial, saying what it
// lacks.
func TestDialNeedsJetStream(t *testing.T) {
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	require.NoError(t, err)
	go s.Start()
	require.True(t, s.ReadyForConnections(10*time.Second))
	defer s.Shutdown()
	start := time.Now()
	_, err = Dial(Config{URL: s.ClientURL(), Name: "n"})
	require.Error(t, err)
	require.Contains(t, err.Error(), "nats-server -js")
	require.Less(t, time.Since(start), 5*time.Second)
}

// Nodes starting together all get the one stream: creating it is
// idempotent, and a node whose settings differ brings it up to date.
func TestDialTogether(t *testing.T) {
	s := natsServer(t, 0)
	var wg sync.WaitGroup
	errs := make([]error, 6)
	for i := range errs {
		wg.Go(func() {
			b, err := Dial(Config{URL: s.ClientURL(), Name: fmt.Sprint("n", i), StreamMaxAge: time.Duration(1+i%2) * time.Minute})
			errs[i] = err
			if err == nil {
				b.Close()
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "node %d", i)
	}
	b := dial(t, s, "last", func(c *Config) { c.StreamMaxAge = 3 * time.Minute })
	info, err := b.js.Stream(context.Background(), b.stream)
	require.NoError(t, err)
	require.Equal(t, 3*time.Minute, info.CachedInfo().Config.MaxAge)
	require.Equal(t, []string{"tandem.ws.*.ev"}, info.CachedInfo().Config.Subjects)
}
