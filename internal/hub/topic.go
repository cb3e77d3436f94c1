package hub

import (
	"github.com/tandem-dev/tandem/internal/event"
	"github.com/tandem-dev/tandem/proto"

	"sync"
	"sync/atomic"
	"time"
)

// Topic is the live event stream of one workspace: its subscribers, the last
// seq published (head) and a ring of recent kept events for resumes.
type Topic struct {
	h       *Hub
	id      string
	backlog Backlog

	mu     sync.Mutex
	head   int64
	ring   ring
	subs   []*subscriber // unordered; each knows its index for O(1) removal
	closed bool
	// watched mirrors len(subs) > 0 for Watched, which must not wait on mu.
	watched atomic.Bool
	// later wakes the writers PresenceDelay after an event that can wait
	// was queued without waking them; armed while it is due.
	later *time.Timer
	armed bool
}

func newTopic(h *Hub, id string, head int64, backlog Backlog) *Topic {
	return &Topic{
		h:       h,
		id:      id,
		backlog: backlog,
		head:    head,
		ring:    newRing(h.cfg.RingSize, h.cfg.RingBytes, head),
	}
}

// Publish delivers e to every current stream that wants it and remembers it
// for resumes if it is kept. Callers publish in seq order; an event whose seq
// is not above Head is dropped (and logged), because delivering it could
// break the streams' ordering. Publish never blocks on a subscriber: it only
// appends to in-memory queues, evicting streams whose queue would overflow.
// Events published to a closed topic are dropped.
func (t *Topic) Publish(e event.Event) {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return
	}
	if e.Seq <= t.head {
		head := t.head
		t.mu.Unlock()
		t.h.cfg.Logger.Error("hub: event published out of order, dropped",
			"topic", t.id, "seq", e.Seq, "type", e.Type, "head", head)
		return
	}
	t.head = e.Seq
	if !e.Kept && len(t.subs) == 0 {
		// Nobody to tell and nothing to remember: skip formatting. This is
		// the common case of message deltas while no client watches.
		t.mu.Unlock()
		return
	}
	// One frame for every stream and the ring.
	frame := appendFrame(make([]byte, 0, frameLen(e.Type, e.Data)), e.Seq, e.Type, e.Data)
	if e.Kept {
		t.ring.push(ringEntry{seq: e.Seq, session: e.SessionID, frame: frame})
	}
	ent := entry{seq: e.Seq, frame: frame}
	when := soon
	switch {
	case canWait(e):
		when = later
	case e.Kept:
		when = now
	}
	var clock time.Time // read once, and only if a stream is behind
	for i := 0; i < len(t.subs); {
		s := t.subs[i]
		if s.wants(e.SessionID) && s.enqueue(ent, &t.h.cfg, &clock, when) {
			// Evicted: stop feeding it now rather than when its writer
			// wakes up; removal moves another subscriber into slot i.
			t.removeLocked(s)
			continue
		}
		i++
	}
	if when == later && !t.armed && len(t.subs) > 0 {
		t.armed = true
		if t.later == nil {
			t.later = time.AfterFunc(t.h.cfg.PresenceDelay, t.wakeLater)
		} else {
			t.later.Reset(t.h.cfg.PresenceDelay)
		}
	}
	t.mu.Unlock()
}

// canWait reports whether e may reach the streams up to
// Config.PresenceDelay late: a client's arrival or departure, which a
// person reads, and which a reconnect storm publishes by the thousand
// (each one to every stream of the workspace). Delivered one write per
// event, they took most of the server's CPU while 10,000 clients
// connected; waiting, each stream writes them in a batch, or with the
// next event that cannot wait, which wakes its writer at once and keeps
// the order.
func canWait(e event.Event) bool {
	return !e.Kept && (e.Type == proto.EventClientAttached || e.Type == proto.EventClientDetached)
}

// wakeLater wakes the writers of the streams that have frames waiting.
func (t *Topic) wakeLater() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.armed = false
	for _, s := range t.subs {
		if s.pending() {
			s.signal()
		}
	}
}

// Head returns the seq of the last event published (or the head the topic
// was created with).
func (t *Topic) Head() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.head
}

// Watched reports whether any stream is registered, without waiting for
// a Publish in progress: a publisher can tell whether an event that is
// not kept would reach anyone now.
func (t *Topic) Watched() bool { return t.watched.Load() }

func (t *Topic) subscribers() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.subs)
}

// ForTest returns what tests and benchmarks outside the package may read of
// the topic; the server never needs it.
func (t *Topic) ForTest() TopicForTest { return TopicForTest{t} }

// TopicForTest is a topic seen by a test (see Topic.ForTest).
type TopicForTest struct{ t *Topic }

// Subscribers returns the number of streams currently registered.
func (f TopicForTest) Subscribers() int { return f.t.subscribers() }

// Disconnect ends every current stream of the topic after a best-effort flush
// of what is already queued; their Serve calls return ErrDisconnected. Unlike
// Close, the topic stays usable: later Serve and Publish calls work as usual
// (a workspace that closes and reopens keeps its topic).
func (t *Topic) Disconnect() {
	t.mu.Lock()
	subs := t.detachAllLocked()
	t.mu.Unlock()
	for _, s := range subs {
		s.finish(ErrDisconnected)
	}
}

// Close ends every stream of the topic after a best-effort flush of what is
// already queued; their Serve calls return ErrClosed, and so do later Serve
// calls, at once. Later Publish calls are dropped. The hub forgets the topic,
// so Hub.Topic with the same id creates a new one.
func (t *Topic) Close() {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return
	}
	t.closed = true
	if t.later != nil {
		t.later.Stop()
	}
	subs := t.detachAllLocked()
	t.ring.reset(t.head) // nobody can resume from it any more
	t.mu.Unlock()
	for _, s := range subs {
		s.finish(ErrClosed)
	}
	t.h.forget(t)
}

func (t *Topic) heartbeat() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, s := range t.subs {
		s.ping()
	}
}

// register adds s and snapshots, in the same critical section, the head and
// the ring entries a resume from after needs: every event published later
// goes to s's queue and has seq > head, so replay and live never overlap or
// leave a hole.
func (t *Topic) register(s *subscriber, resume bool, after int64) (registration, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return registration{}, ErrClosed
	}
	s.idx = len(t.subs)
	t.subs = append(t.subs, s)
	t.watched.Store(true)
	reg := registration{head: t.head}
	if resume && after <= t.head && t.ring.covers(after) {
		reg.fromRing = true
		reg.ring = t.ring.after(after, s)
	}
	return reg, nil
}

// registration is what a new stream learned when it registered.
type registration struct {
	head     int64
	fromRing bool        // the ring covered the resume
	ring     []ringEntry // then: the kept events to replay, filtered
}

func (t *Topic) unregister(s *subscriber) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s.idx >= 0 {
		t.removeLocked(s)
	}
}

func (t *Topic) removeLocked(s *subscriber) {
	i, last := s.idx, len(t.subs)-1
	t.subs[i] = t.subs[last]
	t.subs[i].idx = i
	t.subs[last] = nil
	t.subs = t.subs[:last]
	t.watched.Store(last > 0)
	s.idx = -1
}

func (t *Topic) detachAllLocked() []*subscriber {
	subs := t.subs
	for _, s := range subs {
		s.idx = -1
	}
	t.subs = nil
	t.watched.Store(false)
	return subs
}
