package hub

import "sync"

// entry is one queued frame. frame is shared with every other stream and the
// ring and must not be modified. A nil frame is a heartbeat.
type entry struct {
	seq   int64
	frame []byte
}

func (e entry) size() int {
	if e.frame == nil {
		return len(pingFrame)
	}
	return len(e.frame)
}

// subscriber is the state of one stream shared between publishers (which
// fill its queue) and its writer (Serve's goroutine, which drains it).
type subscriber struct {
	session string        // "" = every event; else that session plus workspace-level ones
	wake    chan struct{} // cap 1: a pending wake-up coalesces any number of enqueues
	idx     int           // position in Topic.subs, or -1 once removed; guarded by Topic.mu

	mu     sync.Mutex
	queue  []entry
	queued int   // bytes in queue
	end    error // why the stream must end; set once
}

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

// enqueue appends e unless the stream is ending. It reports true when e
// pushed the queue over limit: the stream is then evicted and its queue
// dropped at once, since those frames will never be written.
func (s *subscriber) enqueue(e entry, limit int) (evicted bool) {
	n := e.size()
	s.mu.Lock()
	if s.end != nil {
		s.mu.Unlock()
		return false
	}
	if s.queued > 0 && s.queued+n > limit {
		s.end = ErrEvicted
		s.queue = nil
		s.queued = 0
		s.mu.Unlock()
		s.signal()
		return true
	}
	s.queue = append(s.queue, e)
	s.queued += n
	s.mu.Unlock()
	s.signal()
	return false
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
	s.queued += len(pingFrame)
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
// reuses two slices instead of allocating) and returns the batch to write
// and whether the stream must end.
func (s *subscriber) take(spare []entry) ([]entry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	batch := s.queue
	s.queue = spare[:0]
	s.queued = 0
	return batch, s.end
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
