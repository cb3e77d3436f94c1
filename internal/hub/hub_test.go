package hub

import (
	"github.com/tandem-dev/tandem/internal/event"

	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/r3labs/sse/v2"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"gopkg.in/cenkalti/backoff.v1"

	ssehttp "github.com/tandem-dev/tandem/internal/httpapi/sse"
)

func resumeFrom(n int64) http.Header {
	return http.Header{"Last-Event-Id": {fmt.Sprint(n)}}
}

func TestStreamOpenedFirst(t *testing.T) {
	h := newHarness(t, Config{}, 41, nil)
	s := h.open("c1", nil, nil)

	require.Equal(t, "text/event-stream", s.resp.Header.Get("Content-Type"))
	require.Equal(t, "no-cache", s.resp.Header.Get("Cache-Control"))
	require.Equal(t, "no", s.resp.Header.Get("X-Accel-Buffering"))

	f := s.opened()
	var data map[string]any
	require.NoError(t, json.Unmarshal([]byte(f.Data), &data))
	require.Equal(t, map[string]any{"client_id": "c1", "workspace_id": "ws", "head_seq": float64(41)}, data)
	require.Equal(t, int64(41), h.topic.Head())
}

func TestLiveDeliveryInOrder(t *testing.T) {
	h := newHarness(t, Config{}, 0, nil)
	a := h.open("a", nil, nil)
	b := h.open("b", nil, nil)
	a.opened()
	b.opened()
	waitSubscribers(t, h.topic, 2)

	const n = 500
	for i := int64(1); i <= n; i++ {
		h.topic.Publish(ev(i, "message.delta", "s1", i%2 == 0))
	}
	for _, s := range []*sseStream{a, b} {
		for i := int64(1); i <= n; i++ {
			f := s.next()
			require.Equal(t, i, f.seq(t))
			require.Equal(t, "message.delta", f.Event)
			require.Equal(t, string(ev(i, "message.delta", "s1", true).Data), f.Data)
		}
	}
}

func TestSessionFilter(t *testing.T) {
	st := &store{}
	h := newHarness(t, Config{}, 0, st.backlog)
	publish := func(e event.Event) { st.add(e); h.topic.Publish(e) }

	// Kept history before the stream, to check the filter applies to replay.
	publish(ev(1, "session.started", "A", true))
	publish(ev(2, "session.started", "B", true))
	publish(ev(3, "client.attached", "", false))
	publish(ev(4, "session.created", "C", true))

	s := h.open("c", url.Values{"session_id": {"A"}}, resumeFrom(0))
	s.opened()
	require.Equal(t, int64(1), s.next().seq(t))
	waitSubscribers(t, h.topic, 1)

	publish(ev(5, "message.created", "B", true))
	publish(ev(6, "message.created", "A", true))
	publish(ev(7, "client.detached", "", false))
	publish(ev(8, "workspace.closing", "", false))
	publish(ev(9, "message.delta", "A", false))
	for _, want := range []int64{6, 7, 8, 9} {
		require.Equal(t, want, s.next().seq(t))
	}
}

func TestResumeFromRing(t *testing.T) {
	st := &store{}
	h := newHarness(t, Config{}, 100, st.backlog)
	for i := int64(101); i <= 120; i++ {
		h.topic.Publish(ev(i, "run.started", "", true))
	}
	s := h.open("c", nil, resumeFrom(110))
	f := s.opened()
	require.Contains(t, f.Data, `"head_seq":120`)
	for i := int64(111); i <= 120; i++ {
		require.Equal(t, i, s.next().seq(t))
	}
	h.topic.Publish(ev(121, "run.started", "", true))
	require.Equal(t, int64(121), s.next().seq(t))
	require.Zero(t, st.numCalls(), "the ring covered the resume: no database read")
}

func TestResumeQueryParameter(t *testing.T) {
	h := newHarness(t, Config{}, 0, nil)
	for i := int64(1); i <= 3; i++ {
		h.topic.Publish(ev(i, "run.started", "", true))
	}
	s := h.open("c", url.Values{"last_event_id": {"2"}}, nil)
	s.opened()
	require.Equal(t, int64(3), s.next().seq(t))
}

func TestResumeFromBacklog(t *testing.T) {
	st := &store{}
	// The topic was created at head 1000 (after a restart): everything
	// before is in the database only, and the ring holds just 8 events.
	for i := int64(1); i <= 1000; i++ {
		st.add(ev(i, "message.created", "", i%10 != 0))
	}
	h := newHarness(t, Config{RingSize: 8}, 1000, st.backlog)
	for i := int64(1001); i <= 1050; i++ {
		e := ev(i, "message.created", "", true)
		st.add(e)
		h.topic.Publish(e)
	}

	s := h.open("c", nil, resumeFrom(5))
	require.Contains(t, s.opened().Data, `"head_seq":1050`)
	for i := int64(6); i <= 1050; i++ {
		if i <= 1000 && i%10 == 0 {
			continue // ephemeral, never stored
		}
		require.Equal(t, i, s.next().seq(t))
	}
	h.topic.Publish(ev(1051, "run.started", "", false))
	require.Equal(t, int64(1051), s.next().seq(t))

	st.mu.Lock()
	defer st.mu.Unlock()
	// 945 kept events after 5: two pages of at most 500, both bounded by
	// the head at subscribe.
	require.Len(t, st.calls, 2)
	require.Equal(t, [3]int64{5, 1050, 500}, st.calls[0])
	require.Equal(t, int64(1050), st.calls[1][1])
}

func TestResumeBacklogErrorResets(t *testing.T) {
	st := &store{fail: errors.New("disk on fire")}
	h := newHarness(t, Config{RingSize: 2}, 0, st.backlog)
	for i := int64(1); i <= 10; i++ {
		h.topic.Publish(ev(i, "run.started", "", true))
	}
	s := h.open("c", nil, resumeFrom(1))
	s.opened()
	f := s.next()
	require.Equal(t, "stream.reset", f.Event)
	require.False(t, f.HasID)
	require.JSONEq(t, `{"head_seq":10}`, f.Data)
	h.topic.Publish(ev(11, "run.started", "", true))
	require.Equal(t, int64(11), s.next().seq(t))
}

func TestResumeAheadOfHeadResets(t *testing.T) {
	h := newHarness(t, Config{}, 7, nil)
	s := h.open("c", nil, resumeFrom(50))
	s.opened()
	f := s.next()
	require.Equal(t, "stream.reset", f.Event)
	require.False(t, f.HasID)
	require.JSONEq(t, `{"head_seq":7}`, f.Data)
	waitSubscribers(t, h.topic, 1)
	// Live events continue from head, even those below the client's bogus id.
	h.topic.Publish(ev(8, "run.started", "", true))
	require.Equal(t, int64(8), s.next().seq(t))
}

func TestEphemeralNotReplayed(t *testing.T) {
	h := newHarness(t, Config{}, 0, nil)
	live := h.open("live", nil, nil)
	live.opened()
	waitSubscribers(t, h.topic, 1)
	h.topic.Publish(ev(1, "message.created", "", true))
	h.topic.Publish(ev(2, "message.delta", "", false))
	h.topic.Publish(ev(3, "message.updated", "", true))
	for i := int64(1); i <= 3; i++ {
		require.Equal(t, i, live.next().seq(t), "ephemeral events are delivered live")
	}

	s := h.open("resumer", nil, resumeFrom(0))
	s.opened()
	require.Equal(t, int64(1), s.next().seq(t))
	require.Equal(t, int64(3), s.next().seq(t))
	h.topic.Publish(ev(4, "message.delta", "", false))
	require.Equal(t, int64(4), s.next().seq(t))
}

func TestOnSubscribedEventReachesNewStream(t *testing.T) {
	h := newHarness(t, Config{}, 0, nil)
	h.topic.Publish(ev(1, "session.started", "", true))
	h.setOnSubscribed(func(clientID string) {
		h.topic.Publish(ev(h.topic.Head()+1, "client.attached", "", false))
	})
	s := h.open("c", nil, resumeFrom(0))
	require.Contains(t, s.opened().Data, `"head_seq":1`)
	require.Equal(t, int64(1), s.next().seq(t), "replay first")
	f := s.next()
	require.Equal(t, int64(2), f.seq(t))
	require.Equal(t, "client.attached", f.Event)
}

// TestResumeRacesPublish resumes many streams, by ring and by backlog, while
// events are being published, and checks each stream saw every event exactly
// once and in order.
func TestResumeRacesPublish(t *testing.T) {
	st := &store{}
	h := newHarness(t, Config{RingSize: 64}, 0, st.backlog)
	const total = 3000
	kept := func(seq int64) bool { return seq%3 != 0 || seq == total }

	// The publisher paces itself on subscriptions, so that streams keep
	// registering and replaying while it publishes, whatever the speed of
	// the machine.
	subscribed := make(chan struct{}, 1000)
	h.setOnSubscribed(func(string) {
		select {
		case subscribed <- struct{}{}:
		default:
		}
	})
	published := make(chan struct{})
	go func() {
		defer close(published)
		for seq := int64(1); seq <= total; seq++ {
			e := ev(seq, "message.created", "", kept(seq))
			st.add(e)
			h.topic.Publish(e)
			if seq%25 == 0 {
				select {
				case <-subscribed:
				case <-time.After(wait):
				}
			}
		}
	}()

	var wg sync.WaitGroup
	var resumes atomic.Int64
	errs := make(chan error, 100)
	for worker := range 6 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-published:
					return
				default:
				}
				head := h.topic.Head()
				last := max(0, head-rand.Int64N(150))
				id := fmt.Sprintf("w%d-%d", worker, i)
				resumes.Add(1)
				if err := checkResume(h, id, last, total, kept); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Positive(t, st.numCalls(), "some resumes went to the backlog")
	t.Logf("%d resumes, %d backlog reads", resumes.Load(), st.numCalls())
}

// checkResume opens a stream resuming after last, reads it up to a few
// events after its head_seq (the publisher publishes more for every
// subscription) and checks: stream.opened first, strictly increasing seqs,
// every kept event in (last, head_seq] and every event after head_seq
// present, nothing else.
func checkResume(h *harness, id string, last, total int64, kept func(int64) bool) error {
	s, err := h.tryOpen(id, nil, resumeFrom(last))
	if err != nil {
		return err
	}
	defer s.close()
	first, ok := <-s.frames
	if !ok || first.Event != "stream.opened" {
		return fmt.Errorf("%s: first frame %+v", id, first)
	}
	var opened struct {
		Head int64 `json:"head_seq"`
	}
	if err := json.Unmarshal([]byte(first.Data), &opened); err != nil {
		return err
	}
	want, until := last+1, min(opened.Head+10, total)
	for want <= until {
		if want <= opened.Head && !kept(want) {
			want++
			continue
		}
		var f frame
		select {
		case f, ok = <-s.frames:
			if !ok {
				return fmt.Errorf("%s: stream ended before %d: %v", id, want, s.err)
			}
		case <-time.After(wait):
			return fmt.Errorf("%s: waiting for %d", id, want)
		}
		if f.Comment != "" {
			continue
		}
		if f.ID != fmt.Sprint(want) {
			return fmt.Errorf("%s (last %d, head %d): got id %q, want %d", id, last, opened.Head, f.ID, want)
		}
		want++
	}
	return nil
}

// TestStalledClientEvicted: a client that never reads (a raw connection
// that sent its request) fills its socket, then its queue, and is evicted,
// while healthy clients get every event in order.
func TestStalledClientEvicted(t *testing.T) {
	h := newHarness(t, Config{QueueBytes: 32 << 10, WriteTimeout: time.Second}, 0, nil)
	conn, err := net.Dial("tcp", h.srv.Listener.Addr().String())
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.(*net.TCPConn).SetReadBuffer(4096))
	_, err = io.WriteString(conn, "GET /events?client_id=stalled HTTP/1.1\r\nHost: test\r\n\r\n")
	require.NoError(t, err)

	healthy := make([]*sseStream, 4)
	for i := range healthy {
		healthy[i] = h.open(fmt.Sprint("healthy", i), nil, nil)
		healthy[i].opened()
	}
	waitSubscribers(t, h.topic, 5)

	data := []byte(`{"pad":"` + strings.Repeat("y", 500) + `"}`)
	var seq int64
	got := make([]int64, len(healthy)) // last seq each healthy client read
	for h.topic.subscribers() == 5 || seq < 1000 {
		require.Less(t, seq, int64(200000), "stalled client never evicted")
		for range 16 {
			seq++
			h.topic.Publish(event.Event{Seq: seq, Type: "message.delta", Data: data})
		}
		for i, s := range healthy {
			for got[i] < seq {
				n := s.next().seq(t)
				require.Equal(t, got[i]+1, n, "healthy client %d missed an event", i)
				got[i] = n
			}
		}
	}
	require.ErrorIs(t, h.ended("stalled"), ErrEvicted)

	// Best effort: if the socket had room, the stalled client was told why.
	_ = conn.SetReadDeadline(time.Now().Add(time.Second))
	tail, _ := io.ReadAll(conn)
	t.Logf("stalled client received %d bytes before the end; evicted frame seen: %v",
		len(tail), strings.Contains(string(tail), "stream.evicted"))
}

func TestSlowConsumerGetsEvictedFrame(t *testing.T) {
	// The writer is blocked in a write while the queue overflows, then the
	// write succeeds: it must send stream.evicted and end.
	hub := New(Config{QueueBytes: 1024, Logger: quietLogger()})
	defer hub.Close()
	tp := hub.Topic("ws", 0, nil)
	w := &gateWriter{memWriter: newMemWriter(), gate: make(chan struct{}), entered: make(chan struct{}, 100)}
	done := make(chan error, 1)
	go func() { done <- tp.Serve(context.Background(), ssehttp.NewWriter(w), &ServeOptions{ClientID: "slow"}) }()
	<-w.entered // stream.opened write
	w.gate <- struct{}{}
	waitSubscribers(t, tp, 1)
	tp.Publish(ev(1, "message.delta", "", false))
	<-w.entered // the writer holds event 1 and is blocked
	for i := int64(2); tp.subscribers() == 1; i++ {
		tp.Publish(event.Event{Seq: i, Type: "message.delta", Data: make([]byte, 300)})
	}
	close(w.gate)
	require.ErrorIs(t, <-done, ErrEvicted)
	frames, err := w.frames()
	require.NoError(t, err)
	require.Equal(t, "stream.opened", frames[0].Event)
	require.Equal(t, "1", frames[1].ID)
	last := frames[len(frames)-1]
	require.Equal(t, "stream.evicted", last.Event)
	require.JSONEq(t, `{"reason":"slow_consumer"}`, last.Data)
	require.False(t, last.HasID)
}

// gateWriter blocks each write until gate lets it through.
type gateWriter struct {
	*memWriter
	gate    chan struct{}
	entered chan struct{}
}

func (g *gateWriter) Write(p []byte) (int, error) {
	g.entered <- struct{}{}
	<-g.gate
	return g.memWriter.Write(p)
}

// serveGated serves tp on a gateWriter and returns it once the stream is
// registered and its stream.opened written; Serve's result goes to done.
func serveGated(t *testing.T, tp *Topic, clientID string, subs int) (*gateWriter, chan error) {
	t.Helper()
	w := &gateWriter{memWriter: newMemWriter(), gate: make(chan struct{}), entered: make(chan struct{}, 100)}
	done := make(chan error, 1)
	go func() {
		done <- tp.Serve(context.Background(), ssehttp.NewWriter(w), &ServeOptions{ClientID: clientID})
	}()
	<-w.entered // stream.opened
	w.gate <- struct{}{}
	waitSubscribers(t, tp, subs)
	return w, done
}

// bigEvent is an event whose frame is a bit over 1 MiB, the size of the
// largest events (contract section 1: data up to 1 MiB).
func bigEvent(seq int64) event.Event {
	return event.Event{Seq: seq, Type: "tool.started", Kept: true, Data: []byte(`{"arguments":"` + strings.Repeat("a", 1<<20-20) + `"}`)}
}

// A client that keeps up is not evicted by a burst of maximum-size events
// published while its writer is still writing the first of them: the
// default 1 MiB queue holds less than two such events, but the writer takes
// them all once it is done.
func TestBurstOfLargeEventsKeepsFastReader(t *testing.T) {
	hub := New(Config{Logger: quietLogger()})
	defer hub.Close()
	tp := hub.Topic("ws", 0, nil)
	w, done := serveGated(t, tp, "fast", 1)
	tp.Publish(bigEvent(1))
	<-w.entered // the writer is writing event 1
	const burst = 6
	for seq := int64(2); seq <= burst; seq++ {
		tp.Publish(bigEvent(seq))
	}
	require.Equal(t, 1, tp.subscribers(), "evicted by the burst")
	close(w.gate)
	// Close flushes what is queued, then ends the stream.
	tp.Close()
	require.ErrorIs(t, <-done, ErrClosed)
	frames, err := w.frames()
	require.NoError(t, err)
	require.Len(t, frames, burst+1)
	for i, f := range frames[1:] {
		require.Equal(t, int64(i+1), f.seq(t))
	}
}

// A stalled client, whose writer stays blocked in a write, is evicted once
// its queue has been over QueueBytes for BurstGrace, long before it reaches
// MaxQueueBytes; the other streams get every event meanwhile.
func TestStalledReaderEvictedAfterGrace(t *testing.T) {
	h := newHarness(t, Config{QueueBytes: 4 << 10, MaxQueueBytes: 1 << 20, BurstGrace: time.Nanosecond}, 0, nil)
	healthy := h.open("healthy", nil, nil)
	healthy.opened()
	waitSubscribers(t, h.topic, 1)
	w, done := serveGated(t, h.topic, "stalled", 2)

	data := []byte(`{"pad":"` + strings.Repeat("s", 1000) + `"}`)
	h.topic.Publish(event.Event{Seq: 1, Type: "message.delta", Data: data})
	<-w.entered // blocked writing event 1, for good
	seq := int64(1)
	require.Equal(t, int64(1), healthy.next().seq(t))
	for h.topic.subscribers() == 2 {
		seq++
		require.Less(t, seq, int64(100), "not evicted after its grace")
		h.topic.Publish(event.Event{Seq: seq, Type: "message.delta", Data: data})
		// In step with the healthy reader, whose queue then never
		// holds more than this event.
		require.Equal(t, seq, healthy.next().seq(t))
	}
	require.Equal(t, 1, h.topic.subscribers(), "the healthy stream was evicted")
	close(w.gate) // let the write of event 1 finish: Serve ends evicted
	require.ErrorIs(t, <-done, ErrEvicted)
}

// Whatever the grace, a stream is evicted as soon as its queue would go
// over MaxQueueBytes, which bounds what one stream pins.
func TestQueueOverMaxEvictsAtOnce(t *testing.T) {
	hub := New(Config{QueueBytes: 4 << 10, MaxQueueBytes: 64 << 10, BurstGrace: time.Hour, Logger: quietLogger()})
	defer hub.Close()
	tp := hub.Topic("ws", 0, nil)
	w, done := serveGated(t, tp, "stalled", 1)
	data := make([]byte, 1000)
	tp.Publish(event.Event{Seq: 1, Type: "message.delta", Data: data})
	<-w.entered
	seq, queued := int64(1), 0
	for tp.subscribers() == 1 {
		seq++
		e := event.Event{Seq: seq, Type: "message.delta", Data: data}
		size := frameLen(e.Type, e.Data)
		require.LessOrEqual(t, queued, 64<<10, "the queue went over MaxQueueBytes")
		tp.Publish(e)
		queued += size
	}
	require.Greater(t, queued, 60<<10, "evicted before the queue reached MaxQueueBytes")
	close(w.gate)
	require.ErrorIs(t, <-done, ErrEvicted)
}

func TestWatched(t *testing.T) {
	h := newHarness(t, Config{}, 0, nil)
	require.False(t, h.topic.Watched())
	s := h.open("c", nil, nil)
	s.opened()
	require.True(t, h.topic.Watched())
	s.close()
	waitSubscribers(t, h.topic, 0)
	require.False(t, h.topic.Watched())
	s = h.open("d", nil, nil)
	s.opened()
	h.topic.Disconnect()
	require.False(t, h.topic.Watched())
}

func TestOversizedEventDoesNotEvictIdleStream(t *testing.T) {
	h := newHarness(t, Config{QueueBytes: 1024}, 0, nil)
	s := h.open("c", nil, nil)
	s.opened()
	waitSubscribers(t, h.topic, 1)
	big := `"` + strings.Repeat("z", 10_000) + `"`
	h.topic.Publish(event.Event{Seq: 1, Type: "tool.finished", Data: []byte(big), Kept: true})
	f := s.next()
	require.Equal(t, int64(1), f.seq(t))
	require.Equal(t, big, f.Data)
	require.Equal(t, 1, h.topic.subscribers())
}

func TestHeartbeat(t *testing.T) {
	h := newHarness(t, Config{Heartbeat: 20 * time.Millisecond}, 0, nil)
	s := h.open("c", nil, nil)
	s.opened()
	for {
		if f := s.nextAny(); f.Comment != "" {
			require.Equal(t, "ping", f.Comment)
			return
		}
	}
}

func TestTopicCloseEndsStreams(t *testing.T) {
	h := newHarness(t, Config{}, 0, nil)
	a := h.open("a", nil, nil)
	b := h.open("b", url.Values{"session_id": {"S"}}, nil)
	a.opened()
	b.opened()
	waitSubscribers(t, h.topic, 2)

	// Queued right before Close: flushed, then the streams end.
	for i := int64(1); i <= 20; i++ {
		h.topic.Publish(ev(i, "message.delta", "S", false))
	}
	h.topic.Close()
	for _, s := range []*sseStream{a, b} {
		rest := s.eof()
		require.Len(t, rest, 20)
		require.Equal(t, "20", rest[19].ID)
	}
	require.ErrorIs(t, h.ended("a"), ErrClosed)
	require.ErrorIs(t, h.ended("b"), ErrClosed)
	require.Zero(t, h.topic.subscribers())

	// Later streams are refused before anything is written.
	s, err := h.tryOpen("late", nil, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusServiceUnavailable, s.resp.StatusCode)
	require.ErrorIs(t, h.ended("late"), ErrClosed)

	// Publish after Close is dropped, and the hub hands out a new topic.
	h.topic.Publish(ev(21, "message.delta", "", false))
	require.NotSame(t, h.topic, h.hub.Topic("ws", 21, nil))
}

func TestDisconnectKeepsTopicUsable(t *testing.T) {
	h := newHarness(t, Config{}, 0, nil)
	a := h.open("a", nil, nil)
	a.opened()
	waitSubscribers(t, h.topic, 1)
	h.topic.Publish(ev(1, "workspace.closing", "", false))
	h.topic.Disconnect()
	rest := a.eof()
	require.Len(t, rest, 1)
	require.ErrorIs(t, h.ended("a"), ErrDisconnected)

	b := h.open("b", nil, resumeFrom(0))
	b.opened()
	waitSubscribers(t, h.topic, 1)
	h.topic.Publish(ev(2, "client.attached", "", false))
	require.Equal(t, int64(2), b.next().seq(t))
}

func TestClientGoneEndsServe(t *testing.T) {
	h := newHarness(t, Config{}, 0, nil)
	s := h.open("c", nil, nil)
	s.opened()
	waitSubscribers(t, h.topic, 1)
	s.close()
	require.NoError(t, h.ended("c"))
	waitSubscribers(t, h.topic, 0)
}

func TestHubCloseLeaksNothing(t *testing.T) {
	h := newHarness(t, Config{Heartbeat: 5 * time.Millisecond}, 0, nil)
	streams := []*sseStream{
		h.open("a", nil, nil),
		h.open("b", url.Values{"topic": {"other"}}, nil),
		h.open("c", url.Values{"topic": {"third"}}, nil),
	}
	for _, s := range streams {
		s.opened()
	}
	h.hub.Close()
	for _, s := range streams {
		s.eof()
	}
	for _, id := range []string{"a", "b", "c"} {
		require.ErrorIs(t, h.ended(id), ErrClosed)
	}
	// A topic asked for after Close is closed from the start.
	s, err := h.tryOpen("late", url.Values{"topic": {"fourth"}}, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusServiceUnavailable, s.resp.StatusCode)
	s.close()

	h.close()
	goleak.VerifyNone(t)
}

func TestOutOfOrderPublishDropped(t *testing.T) {
	h := newHarness(t, Config{}, 10, nil)
	s := h.open("c", nil, nil)
	s.opened()
	waitSubscribers(t, h.topic, 1)
	h.topic.Publish(ev(10, "run.started", "", true)) // not above head
	h.topic.Publish(ev(12, "run.started", "", true))
	h.topic.Publish(ev(11, "run.started", "", true)) // behind
	h.topic.Publish(ev(13, "run.started", "", true))
	require.Equal(t, int64(12), s.next().seq(t))
	require.Equal(t, int64(13), s.next().seq(t))
	require.Equal(t, int64(13), h.topic.Head())
}

func TestR3labsClient(t *testing.T) {
	h := newHarness(t, Config{Heartbeat: 10 * time.Millisecond}, 0, nil)
	c := sse.NewClient(h.srv.URL + "/events?client_id=r3")
	c.Connection = h.client
	c.ReconnectStrategy = &backoff.StopBackOff{}

	got := make(chan *sse.Event, 100)
	done := make(chan error, 1)
	go func() {
		done <- c.SubscribeRawWithContext(context.Background(), func(m *sse.Event) { got <- m })
	}()
	recv := func() *sse.Event {
		select {
		case m := <-got:
			return m
		case <-time.After(wait):
			t.Fatal("r3labs client got nothing")
			return nil
		}
	}

	opened := recv()
	require.Equal(t, "stream.opened", string(opened.Event))
	require.Empty(t, opened.ID)
	require.JSONEq(t, `{"client_id":"r3","workspace_id":"ws","head_seq":0}`, string(opened.Data))

	waitSubscribers(t, h.topic, 1)
	for i := int64(1); i <= 5; i++ {
		h.topic.Publish(ev(i, "message.created", "", true))
	}
	for i := int64(1); i <= 5; i++ {
		m := recv()
		require.Equal(t, fmt.Sprint(i), string(m.ID))
		require.Equal(t, "message.created", string(m.Event))
		require.Equal(t, string(ev(i, "message.created", "", true).Data), string(m.Data))
	}
	h.topic.Close()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(wait):
		t.Fatal("r3labs client did not see the stream end")
	}
}

// TestStress subscribes and unsubscribes streams from many goroutines while
// events are published and heartbeats and disconnects fire, then checks every
// stream's invariants. Run it with -race.
func TestStress(t *testing.T) {
	st := &store{}
	hub := New(Config{RingSize: 32, QueueBytes: 8 << 10, Heartbeat: time.Millisecond, Logger: quietLogger()})
	defer hub.Close()
	tp := hub.Topic("ws", 0, st.backlog)
	sessions := []string{"", "a", "b"}

	const total = 10000
	var wg sync.WaitGroup
	published := make(chan struct{})
	wg.Go(func() {
		defer close(published)
		for seq := int64(1); seq <= total; seq++ {
			e := ev(seq, "message.delta", sessions[seq%3], seq%4 != 0)
			st.add(e)
			tp.Publish(e)
			if seq%1000 == 0 {
				tp.Disconnect()
			}
			if seq%50 == 0 {
				runtime.Gosched()
			}
		}
	})

	errs := make(chan error, 1000)
	var streams, delivered, evicted atomic.Int64
	for worker := range 16 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-published:
					return
				default:
				}
				opts := ServeOptions{ClientID: fmt.Sprint(worker, "-", i), SessionID: sessions[rand.IntN(3)]}
				if rand.IntN(2) == 0 {
					opts.Resume = true
					opts.LastEventID = max(0, tp.Head()-rand.Int64N(100))
				}
				ctx, cancel := context.WithCancel(context.Background())
				w := newMemWriter()
				served := make(chan error, 1)
				go func() { served <- tp.Serve(ctx, ssehttp.NewWriter(w), &opts) }()
				for range rand.IntN(20) {
					runtime.Gosched()
				}
				cancel()
				err := <-served
				if errors.Is(err, ErrEvicted) {
					evicted.Add(1)
				}
				if err != nil && !errors.Is(err, ErrEvicted) && !errors.Is(err, ErrDisconnected) {
					errs <- fmt.Errorf("%s: Serve: %w", opts.ClientID, err)
					return
				}
				frames, err := w.frames()
				if err == nil {
					err = checkStream(frames, opts)
				}
				streams.Add(1)
				delivered.Add(int64(len(frames)))
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Zero(t, tp.subscribers())
	t.Logf("%d streams, %d frames, %d evicted, %d backlog reads", streams.Load(), delivered.Load(), evicted.Load(), st.numCalls())
}

// checkStream checks the invariants of one stream's output: stream.opened
// first, strictly increasing ids, the session filter, nothing at or below
// Last-Event-ID, only kept events at or below head_seq.
func checkStream(frames []frame, opts ServeOptions) error {
	if len(frames) == 0 {
		return fmt.Errorf("%s: empty stream", opts.ClientID)
	}
	if frames[0].Event != "stream.opened" {
		return fmt.Errorf("%s: first frame %+v", opts.ClientID, frames[0])
	}
	var opened struct {
		Head int64 `json:"head_seq"`
	}
	if err := json.Unmarshal([]byte(frames[0].Data), &opened); err != nil {
		return err
	}
	var last int64
	if opts.Resume {
		last = opts.LastEventID
	} else {
		last = opened.Head
	}
	// want reports whether the stream must deliver seq: its session matches
	// and it is live (after head_seq) or kept.
	want := func(seq int64) bool {
		s := []string{"", "a", "b"}[seq%3]
		return (opts.SessionID == "" || s == "" || s == opts.SessionID) && (seq > opened.Head || seq%4 != 0)
	}
	reset := false
	for _, f := range frames[1:] {
		switch {
		case f.Comment != "":
			continue
		case f.Event == "stream.reset":
			reset = true
			continue
		case f.Event == "stream.evicted":
			continue
		}
		var seq int64
		if _, err := fmt.Sscan(f.ID, &seq); err != nil {
			return fmt.Errorf("%s: frame %+v: %w", opts.ClientID, f, err)
		}
		if seq <= last && !reset {
			return fmt.Errorf("%s: seq %d after %d (resume %v from %d, head %d)", opts.ClientID, seq, last, opts.Resume, opts.LastEventID, opened.Head)
		}
		if !want(seq) {
			return fmt.Errorf("%s: unwanted seq %d (session %q, head %d)", opts.ClientID, seq, opts.SessionID, opened.Head)
		}
		if !reset {
			// Whatever ended the stream, what it wrote is a prefix: no holes.
			for missing := last + 1; missing < seq; missing++ {
				if want(missing) {
					return fmt.Errorf("%s: seq %d missing before %d (resume %v from %d, head %d)",
						opts.ClientID, missing, seq, opts.Resume, opts.LastEventID, opened.Head)
				}
			}
		}
		last, reset = seq, false
	}
	return nil
}
