package hub

import (
	"sync"
	"time"
	"unsafe"
)

// entry is one queued frame. frame is shared with every other stream and the
// ring and must not be modified. A nil frame is a heartbeat.
type entry struct {
	seq   int64
	frame []byte
}

// entryOverhead is what an entry costs in the queue besides its frame.
const entryOverhead = int(unsafe.Sizeof(entry{}))

// size is what e counts for in its queue's bounds: its frame, which it
// shares with every other stream and the ring but pins while queued, and
// the entry itself.
func (e entry) size() int {
	if e.frame == nil {
		return len(pingFrame) + entryOverhead
	}
	return len(e.frame) + entryOverhead
}

// subscriber is the state of one stream shared between publishers (which
// fill its queue) and its writer (Serve's goroutine, which drains it).
type subscriber struct {
	session string        // "" = every event; else that session plus workspace-level ones
	wake    chan struct{} // cap 1: a pending wake-up coalesces any number of enqueues
	idx     int           // position in Topic.subs, or -1 once removed; guarded by Topic.mu

	mu     sync.Mutex
	queue  []entry
	queued int // bytes in queue (see entry.size)
	// behind is when queued went over Config.QueueBytes; zero while it is
	// under, and reset whenever the writer takes the queue.
	behind time.Time
	end    error // why the stream must end; set once
	// urgent is set while the queue holds an event that must not wait for
	// the writer's flush tick (see Config.FlushTick).
	urgent bool
}

// urgency says how soon a queued event must be written.
type urgency uint8

const (
	// later: with the next write, or once the topic wakes the writers
	// (presence, see canWait); the writer is not woken for it.
	later urgency = iota
	// soon: within the writer's flush tick (a delta).
	soon
	// now: at once, with everything queued before it (a kept event).
	now
)

func newSubscriber(session string) *subscriber {
	return &subscriber{session: session, wake: make(chan struct{}, 1), idx: -1}
}

func (s *subscriber) wants(session string) bool {
	return s.session == "" || session == "" || session == s.session
}

func (s *subscriber) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// enqueue appends e unless the stream is ending. It reports true when the
// stream fell too far behind and is evicted: its queue would go over
// cfg.MaxQueueBytes, or it has been over cfg.QueueBytes for
// cfg.BurstGrace without its writer taking it. The queue is then dropped at
// once, since those frames will never be written. A writer that keeps
// taking its queue is never evicted by a burst under MaxQueueBytes, while a
// stalled one (blocked in a write to a client that does not read) is, at
// the first event after the grace. now caches the time across the streams
// of one publish; it is read only for a stream over QueueBytes.
//
// when says how soon e must be written: for later the writer is not woken,
// since a publisher that queues an event that can wait (see Topic.Publish)
// wakes the writers later, with whatever else came meanwhile.
func (s *subscriber) enqueue(e entry, cfg *Config, clock *time.Time, when urgency) (evicted bool) {
	n := e.size()
	s.mu.Lock()
	if s.end != nil {
		s.mu.Unlock()
		return false
	}
	if q := s.queued + n; s.queued > 0 && q > cfg.QueueBytes {
		if clock.IsZero() {
			*clock = time.Now()
		}
		switch {
		case q > cfg.MaxQueueBytes:
			evicted = true
		case s.behind.IsZero():
			s.behind = *clock
		case clock.Sub(s.behind) >= cfg.BurstGrace:
			evicted = true
		}
	}
	if evicted {
		s.end = ErrEvicted
		s.queue = nil
		s.queued = 0
		s.mu.Unlock()
		s.signal()
		return true
	}
	s.queue = append(s.queue, e)
	s.queued += n
	s.urgent = s.urgent || when == now
	s.mu.Unlock()
	if when != later {
		s.signal()
	}
	return false
}

// hurried reports whether the writer must write at once: an urgent event
// is queued, or the stream must end.
func (s *subscriber) hurried() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.urgent || s.end != nil
}

// pending reports whether frames wait in the queue.
func (s *subscriber) pending() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue) > 0
}

// ping queues a heartbeat if nothing else is queued: a stream with pending
// frames is about to write anyway.
func (s *subscriber) ping() {
	s.mu.Lock()
	if s.end != nil || len(s.queue) > 0 {
		s.mu.Unlock()
		return
	}
	s.queue = append(s.queue, entry{})
	s.queued += entry{}.size()
	s.mu.Unlock()
	s.signal()
}

// finish asks the writer to flush what is queued and end with err.
func (s *subscriber) finish(err error) {
	s.mu.Lock()
	if s.end == nil {
		s.end = err
	}
	s.mu.Unlock()
	s.signal()
}

// take swaps the queue for spare (an emptied earlier batch, so a busy stream
// reuses two slices instead of allocating) and returns the batch to write,
// whether it holds an urgent event, and whether the stream must end.
func (s *subscriber) take(spare []entry) (batch []entry, urgent bool, end error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	batch, urgent = s.queue, s.urgent
	s.queue = spare[:0]
	s.queued = 0
	s.urgent = false
	s.behind = time.Time{}
	return batch, urgent, s.end
}

// ended returns why the stream must end, or nil.
func (s *subscriber) ended() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.end
}

// evicted reports whether the stream ended for falling behind.
func (s *subscriber) evicted() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.end == ErrEvicted
}
