package hub

import "sort"

// ringEntry is one kept event remembered for resumes.
type ringEntry struct {
	seq     int64
	session string
	frame   []byte
}

// ring holds the most recent kept events of a topic, bounded by count and by
// bytes. Ephemeral events are not stored: they are never replayed, and
// message deltas would otherwise flush the useful events out.
//
// floor is the seq at and below which the ring may have lost events: every
// kept event published with seq > floor is in the ring. Seqs are not
// contiguous (ephemeral events take seqs too), so coverage is decided by
// floor rather than by comparing the oldest seq with Last-Event-ID+1.
type ring struct {
	buf      []ringEntry // circular; grows lazily up to max so quiet topics stay small
	start    int         // index of the oldest entry
	count    int
	max      int
	bytes    int
	maxBytes int
	floor    int64
}

func newRing(max, maxBytes int, floor int64) ring {
	return ring{max: max, maxBytes: maxBytes, floor: floor}
}

func (r *ring) at(i int) *ringEntry {
	return &r.buf[(r.start+i)%len(r.buf)]
}

func (r *ring) push(e ringEntry) {
	for r.count > 0 && (r.count >= r.max || r.bytes+len(e.frame) > r.maxBytes) {
		r.dropOldest()
	}
	if r.count == len(r.buf) {
		r.grow()
	}
	*r.at(r.count) = e
	r.count++
	r.bytes += len(e.frame)
}

func (r *ring) grow() {
	nb := make([]ringEntry, min(max(2*len(r.buf), 16), r.max))
	for i := range r.count {
		nb[i] = *r.at(i)
	}
	r.buf, r.start = nb, 0
}

func (r *ring) dropOldest() {
	e := r.at(0)
	r.floor = e.seq
	r.bytes -= len(e.frame)
	*e = ringEntry{} // release the frame
	r.start = (r.start + 1) % len(r.buf)
	r.count--
}

// covers reports whether the ring alone holds every kept event after seq.
func (r *ring) covers(after int64) bool {
	return after >= r.floor
}

// after copies the entries with seq > after that s wants. The copy lets the
// writer replay them without holding the topic lock.
func (r *ring) after(after int64, s *subscriber) []ringEntry {
	first := sort.Search(r.count, func(i int) bool { return r.at(i).seq > after })
	var out []ringEntry
	for i := first; i < r.count; i++ {
		if e := r.at(i); s.wants(e.session) {
			out = append(out, *e)
		}
	}
	return out
}

// reset empties the ring; events published from now on are after floor.
func (r *ring) reset(floor int64) {
	*r = newRing(r.max, r.maxBytes, floor)
}
