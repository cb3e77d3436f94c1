package bus

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// memLog is a Log in memory: the kept events committed so far.
type memLog struct {
	mu     sync.Mutex
	events map[int64]Event
	// failures makes the next calls of Events fail.
	failures int
	// gate, when set, holds Events until it is closed or ctx ends.
	gate chan struct{}
	// reads counts calls of Events.
	reads atomic.Int64
}

func newMemLog() *memLog { return &memLog{events: map[int64]Event{}} }

func (l *memLog) commit(e Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e.Kept {
		l.events[e.Seq] = e
	}
}

func (l *memLog) Events(ctx context.Context, _ string, after, upTo int64, limit int) ([]Event, error) {
	l.reads.Add(1)
	l.mu.Lock()
	gate := l.gate
	if l.failures > 0 {
		l.failures--
		l.mu.Unlock()
		return nil, errors.New("log unavailable")
	}
	l.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var seqs []int64
	for s := range l.events {
		if s > after && (upTo <= 0 || s <= upTo) {
			seqs = append(seqs, s)
		}
	}
	sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
	if limit > 0 && len(seqs) > limit {
		seqs = seqs[:limit]
	}
	out := make([]Event, len(seqs))
	for i, s := range seqs {
		out[i] = l.events[s]
	}
	return out, nil
}

func (l *memLog) Head(context.Context, string) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var max int64
	for s := range l.events {
		max = maxI(max, s)
	}
	return max, nil
}

func maxI(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}

func testEvent(seq int64, kept bool) Event {
	return Event{Seq: seq, Type: "t", SessionID: "s", Kept: kept, Data: fmt.Appendf(nil, `{"seq":%d}`, seq)}
}

// recorder collects what a feed delivers and tells when it has reached a
// seq.
type recorder struct {
	mu      sync.Mutex
	got     []Event
	changed chan struct{}
}

func newRecorder() *recorder { return &recorder{changed: make(chan struct{}, 1)} }

func (r *recorder) fn(e Event) {
	r.mu.Lock()
	r.got = append(r.got, e)
	r.mu.Unlock()
	select {
	case r.changed <- struct{}{}:
	default:
	}
}

func (r *recorder) last() (n int, seq int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.got) > 0 {
		seq = r.got[len(r.got)-1].Seq
	}
	return len(r.got), seq
}

// waitFor waits until the feed has delivered seq (or beyond).
func (r *recorder) waitFor(t *testing.T, seq int64) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		if _, last := r.last(); last >= seq {
			return
		}
		select {
		case <-r.changed:
		case <-deadline:
			n, last := r.last()
			t.Fatalf("feed did not reach seq %d (got %d events, last %d)", seq, n, last)
		}
	}
}

func (r *recorder) events() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Event(nil), r.got...)
}

// checkFeed checks a feed that started after `after`: strictly increasing
// seqs (no duplicate, in order) and every kept event of the log above
// after present.
func checkFeed(t *testing.T, got []Event, log *memLog, after, upTo int64) {
	t.Helper()
	seen := map[int64]bool{}
	prev := after
	for _, e := range got {
		require.Greater(t, e.Seq, prev, "out of order or duplicate")
		prev = e.Seq
		seen[e.Seq] = true
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	for s := range log.events {
		if s > after && s <= upTo {
			require.True(t, seen[s], "kept event %d missing (feed after %d)", s, after)
		}
	}
}

func TestLocalFanOutInOrder(t *testing.T) {
	l := NewLocal()
	_, ok, err := l.Head(context.Background(), "w")
	require.NoError(t, err)
	require.False(t, ok, "no publisher yet")

	var got [5][]int64
	var cancels [5]func()
	for i := range got {
		cancels[i], err = l.Subscribe("w", func(e Event) { got[i] = append(got[i], e.Seq) }, nil)
		require.NoError(t, err)
	}
	other, err := l.Subscribe("v", func(e Event) { t.Errorf("workspace v got %d", e.Seq) }, nil)
	require.NoError(t, err)
	defer other()

	p, err := l.Publisher("w", 10)
	require.NoError(t, err)
	_, err = l.Publisher("w", 10)
	require.ErrorIs(t, err, ErrPublished)
	head, ok, err := l.Head(context.Background(), "w")
	require.NoError(t, err)
	require.True(t, ok)
	require.EqualValues(t, 10, head)

	for seq := int64(11); seq <= 1000; seq++ {
		p.Publish(testEvent(seq, seq%3 == 0))
		if seq == 500 {
			cancels[0]()
			cancels[0]() // twice is fine
		}
	}
	head, _, _ = l.Head(context.Background(), "w")
	require.EqualValues(t, 1000, head)
	for i := range got {
		n := 990
		if i == 0 {
			n = 490
		}
		require.Len(t, got[i], n, "subscriber %d", i)
		for j, s := range got[i] {
			require.EqualValues(t, 11+j, s)
		}
	}
	p.Close()
	p.Close()
	_, ok, _ = l.Head(context.Background(), "w")
	require.False(t, ok, "closed")
	for _, c := range cancels[1:] {
		c()
	}
	require.Zero(t, l.subscribers("w"))
	l.mu.Lock()
	require.Len(t, l.topics, 1, "only v's topic is left")
	l.mu.Unlock()
}

// Local keeps its promise to the event log that publishes through it on
// every single node: a publish hands subscribers the event as it is (the
// same Data, no copy) and allocates nothing, whatever the subscribers.
func TestLocalPublishAllocatesNothing(t *testing.T) {
	l := NewLocal()
	e := testEvent(1, true)
	var seen []byte
	var calls int
	for range 8 {
		cancel, err := l.Subscribe("w", func(got Event) { seen, calls = got.Data, calls+1 }, nil)
		require.NoError(t, err)
		defer cancel()
	}
	p, err := l.Publisher("w", 0)
	require.NoError(t, err)
	defer p.Close()
	allocs := testing.AllocsPerRun(1000, func() {
		e.Seq++
		p.Publish(e)
	})
	require.Zero(t, allocs, "allocations per Publish")
	require.Equal(t, 8*1001, calls, "every subscriber got every event")
	require.Same(t, &e.Data[0], &seen[0], "subscribers share the publisher's data")
}

// A feed replays the kept events after its seq from the log, then goes
// live: ephemeral events only live.
func TestFollowReplaysThenLive(t *testing.T) {
	l, log := NewLocal(), newMemLog()
	for seq := int64(1); seq <= 100; seq++ {
		log.commit(testEvent(seq, seq%4 != 0))
	}
	p, err := l.Publisher("w", 100)
	require.NoError(t, err)
	defer p.Close()
	f := &Follower{Bus: l, Log: log}
	rec := newRecorder()
	feed, err := f.Follow("w", 40, rec.fn)
	require.NoError(t, err)
	defer feed.Close()
	for seq := int64(101); seq <= 200; seq++ {
		e := testEvent(seq, seq%4 != 0)
		log.commit(e)
		p.Publish(e)
	}
	rec.waitFor(t, 200)
	got := rec.events()
	checkFeed(t, got, log, 40, 200)
	for _, e := range got {
		if e.Seq <= 100 {
			require.True(t, e.Kept, "replayed events are kept ones")
		}
	}
	require.Len(t, got, 45+100, "45 kept from the log, 100 live")
}

// Followers join at any moment while a publisher commits events out of
// order (as concurrent emitters do) and publishes them in order once all
// before them are committed, with seqs skipped by failed writes: every
// follower gets every kept event after its start, in order, once.
func TestFollowJoinsWhileEventsFlow(t *testing.T) {
	l, log := NewLocal(), newMemLog()
	const last = 3000
	p, err := l.Publisher("w", 0)
	require.NoError(t, err)
	defer p.Close()
	f := &Follower{Bus: l, Log: log}

	type follower struct {
		after int64
		rec   *recorder
		feed  *Feed
	}
	var (
		mu        sync.Mutex
		followers []*follower
		wg        sync.WaitGroup
		published atomic.Int64
	)
	wg.Go(func() {
		rng := rand.New(rand.NewPCG(1, 2))
		for seq := int64(1); seq <= last; {
			// A window of events numbered together, committed in any
			// order, then published in seq order.
			n := int64(1 + rng.IntN(8))
			window := make([]Event, 0, n)
			for i := int64(0); i < n && seq <= last; i++ {
				// The last one is kept: a follower that joins after an
				// ephemeral event went out does not get it.
				e := testEvent(seq, rng.IntN(3) != 0 || seq == last)
				seq++
				if rng.IntN(50) == 0 && seq <= last {
					continue // a failed write: its seq is a gap, never published
				}
				window = append(window, e)
			}
			for _, i := range rng.Perm(len(window)) {
				log.commit(window[i])
				runtime.Gosched() // let followers look at a half-committed window
			}
			for _, e := range window {
				p.Publish(e)
				published.Store(e.Seq)
			}
		}
	})
	for i := range 24 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			// Start somewhere in the flow, with a Last-Event-ID behind it.
			for published.Load() < int64(rng.IntN(last-100)) {
				time.Sleep(50 * time.Microsecond) // pacing the start, not a synchronization
			}
			after := max(0, published.Load()-int64(rng.IntN(200)))
			fl := &follower{after: after, rec: newRecorder()}
			feed, err := f.Follow("w", after, fl.rec.fn)
			if !assert.NoError(t, err) {
				return
			}
			fl.feed = feed
			mu.Lock()
			followers = append(followers, fl)
			mu.Unlock()
		})
	}
	wg.Wait()
	require.Len(t, followers, 24)
	for _, fl := range followers {
		fl.rec.waitFor(t, last)
		fl.feed.Close()
		checkFeed(t, fl.rec.events(), log, fl.after, last)
	}
}

// Emitters commit concurrently, so the log can hold seq 2 while seq 1 is
// still on its way; the publisher publishes neither until both are in. A
// feed starting then must not take the log's end for the stream's: it
// would send 2, then drop 1 as already sent.
func TestFollowStartsFromThePublishersHead(t *testing.T) {
	l, log := NewLocal(), newMemLog()
	p, err := l.Publisher("w", 0)
	require.NoError(t, err)
	defer p.Close()
	one, two := testEvent(1, true), testEvent(2, true)
	log.commit(two)
	rec := newRecorder()
	feed, err := (&Follower{Bus: l, Log: log}).Follow("w", 0, rec.fn)
	require.NoError(t, err)
	defer feed.Close()
	log.commit(one)
	p.Publish(one)
	p.Publish(two)
	rec.waitFor(t, 2)
	got := rec.events()
	require.Len(t, got, 2)
	require.EqualValues(t, 1, got[0].Seq)
	require.EqualValues(t, 2, got[1].Seq)
	require.Zero(t, log.reads.Load(), "nothing before the publisher's head was asked for")
}

// With no publisher, a feed catches up to the end of the log; when an
// owner appears numbering above what it reserved, the feed goes on, and
// reads from the log the seqs the new owner's first event skips.
func TestFollowWithoutPublisherThenNewOwner(t *testing.T) {
	l, log := NewLocal(), newMemLog()
	for seq := int64(1); seq <= 50; seq++ {
		log.commit(testEvent(seq, true))
	}
	f := &Follower{Bus: l, Log: log}
	rec := newRecorder()
	feed, err := f.Follow("w", 0, rec.fn)
	require.NoError(t, err)
	defer feed.Close()
	rec.waitFor(t, 50)

	// The old owner's last events reached the log but never the bus.
	for seq := int64(51); seq <= 60; seq++ {
		log.commit(testEvent(seq, seq%2 == 0))
	}
	p, err := l.Publisher("w", 1024)
	require.NoError(t, err)
	defer p.Close()
	for seq := int64(1025); seq <= 1030; seq++ {
		e := testEvent(seq, true)
		log.commit(e)
		p.Publish(e)
	}
	rec.waitFor(t, 1030)
	checkFeed(t, rec.events(), log, 0, 1030)
}

// lossy wraps a bus and drops some events of its subscribers, telling
// them they lost some only now and then, as a bus between nodes may.
type lossy struct {
	Bus
	drop func(Event) bool
}

func (b lossy) Subscribe(ws string, fn func(Event), lost func()) (func(), error) {
	dropped := 0
	return b.Bus.Subscribe(ws, func(e Event) {
		if b.drop(e) {
			dropped++
			if dropped%3 == 0 {
				lost()
			}
			return
		}
		fn(e)
	}, lost)
}

// Dropped events come back from the log: at the next event that skips
// them, or when the bus reports the loss.
func TestFollowRecoversDroppedEvents(t *testing.T) {
	l, log := NewLocal(), newMemLog()
	p, err := l.Publisher("w", 0)
	require.NoError(t, err)
	defer p.Close()
	f := &Follower{Bus: lossy{Bus: l, drop: func(e Event) bool { return e.Seq%7 == 0 || e.Seq == 500 }}, Log: log}
	rec := newRecorder()
	feed, err := f.Follow("w", 0, rec.fn)
	require.NoError(t, err)
	defer feed.Close()
	for seq := int64(1); seq <= 500; seq++ {
		e := testEvent(seq, seq%5 != 0 || seq == 500)
		log.commit(e)
		p.Publish(e)
	}
	// The last event was dropped with nothing after it: only a report of
	// the loss brings it.
	rec.waitFor(t, 499)
	feed.lost()
	rec.waitFor(t, 500)
	checkFeed(t, rec.events(), log, 0, 500)
}

// A log that fails is retried; a feed that falls too far behind drops its
// queue and catches up from the log; no kept event is lost either way.
func TestFollowRetriesAndOverflows(t *testing.T) {
	l, log := NewLocal(), newMemLog()
	for seq := int64(1); seq <= 10; seq++ {
		log.commit(testEvent(seq, true))
	}
	log.failures = 3
	log.gate = make(chan struct{})
	f := &Follower{Bus: l, Log: log, MaxQueued: 16, Retry: time.Millisecond}
	rec := newRecorder()
	feed, err := f.Follow("w", 0, rec.fn)
	require.NoError(t, err)
	defer feed.Close()
	// The feed is stuck on its first read while 390 events come.
	require.Eventually(t, func() bool { return log.reads.Load() >= 4 }, 5*time.Second, time.Millisecond)
	p, err := l.Publisher("w", 10)
	require.NoError(t, err)
	defer p.Close()
	for seq := int64(11); seq <= 400; seq++ {
		e := testEvent(seq, seq%2 == 0)
		log.commit(e)
		p.Publish(e)
	}
	log.mu.Lock()
	close(log.gate)
	log.gate = nil
	log.mu.Unlock()
	rec.waitFor(t, 400)
	got := rec.events()
	checkFeed(t, got, log, 0, 400)
	require.Less(t, len(got), 400, "ephemeral events dropped with the overflowing queue")
}

// Close returns while the log blocks, and nothing is delivered after it.
func TestFeedCloseWhileCatchingUp(t *testing.T) {
	l, log := NewLocal(), newMemLog()
	log.commit(testEvent(1, true))
	log.gate = make(chan struct{})
	f := &Follower{Bus: l, Log: log}
	var calls atomic.Int64
	feed, err := f.Follow("w", 0, func(Event) { calls.Add(1) })
	require.NoError(t, err)
	require.Eventually(t, func() bool { return log.reads.Load() > 0 }, 5*time.Second, time.Millisecond)
	done := make(chan struct{})
	go func() { feed.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		t.Fatal("Close did not return while the log blocked")
	}
	require.Zero(t, calls.Load())
	require.Zero(t, l.subscribers("w"), "the feed's subscription ended")
}

// BenchmarkPublish compares the in-process bus with a direct call of the
// subscriber, which is what the event log made before the bus.
func BenchmarkPublish(b *testing.B) {
	e := testEvent(1, true)
	var sink atomic.Int64
	fn := func(e Event) { sink.Store(e.Seq) }
	b.Run("direct", func(b *testing.B) {
		call := fn
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			e.Seq = int64(i)
			call(e)
		}
	})
	for _, subs := range []int{0, 1, 8} {
		b.Run(fmt.Sprintf("local/%d-subscribers", subs), func(b *testing.B) {
			l := NewLocal()
			for range subs {
				cancel, _ := l.Subscribe("w", fn, nil)
				defer cancel()
			}
			p, _ := l.Publisher("w", 0)
			defer p.Close()
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				e.Seq = int64(i)
				p.Publish(e)
			}
		})
	}
}

// A feed that cannot catch up from the log for StallAfter says so, at
// each failed try from then on (its streams are silent meanwhile), and
// stops saying so once it delivers again; one that fails briefly does not.
func TestFollowReportsAStall(t *testing.T) {
	l, log := NewLocal(), newMemLog()
	p, err := l.Publisher("w", 1) // event 1 is only in the log now
	require.NoError(t, err)
	defer p.Close()
	log.commit(testEvent(1, true))
	log.mu.Lock()
	log.failures = 1 << 20
	log.mu.Unlock()
	stalls := make(chan time.Time, 100)
	f := &Follower{Bus: l, Log: log, Retry: 20 * time.Millisecond, StallAfter: 200 * time.Millisecond}
	rec := newRecorder()
	start := time.Now()
	feed, err := f.FollowOr("w", 0, rec.fn, func() { stalls <- time.Now() })
	require.NoError(t, err)
	defer feed.Close()
	var first time.Time
	select {
	case first = <-stalls:
	case <-time.After(5 * time.Second):
		t.Fatal("a feed failing for 5 s did not report a stall")
	}
	assert.GreaterOrEqual(t, first.Sub(start), 200*time.Millisecond, "not before StallAfter")
	select {
	case <-stalls:
	case <-time.After(5 * time.Second):
		t.Fatal("a feed still failing did not report its stall again")
	}

	log.mu.Lock()
	log.failures = 0
	log.mu.Unlock()
	rec.waitFor(t, 1)
	for len(stalls) > 0 {
		<-stalls
	}
	e := testEvent(2, true)
	log.commit(e)
	p.Publish(e)
	rec.waitFor(t, 2)
	assert.Empty(t, stalls, "a feed that delivers is not stalled")
}
