package coordinator

import (
	"slices"
	"sync"

	"github.com/tandem-dev/tandem/internal/agent"
)

// maxIdleHistories and maxIdleHistoryBytes bound how many idle sessions
// keep their conversation in memory, and how much those conversations hold
// in all: histories grow with every run, so a count alone would let memory
// grow with the runs ever executed. A session whose history was dropped
// reads it from the store once, at its next run's first model step.
const (
	maxIdleHistories    = 256
	maxIdleHistoryBytes = 24 << 20
)

// histories keeps the conversations of the most recently idle sessions and
// drops the rest, so memory follows recent activity, not every session ever
// prompted. Sessions with a worker always keep theirs.
type histories struct {
	mu    sync.Mutex
	idle  []idleHistory // least recently idle first
	bytes int64         // the sizes of idle's histories, summed
}

// idleHistory is an idle session with the size its history had when it
// went idle (an idle session records nothing).
type idleHistory struct {
	sr   *sessionRuns
	size int64
	// seen is set by a sweep that found the session idle (see sweep).
	seen bool
}

// historyLocked returns the session's conversation, creating it if needed.
// Callers hold sr.mu.
func (sr *sessionRuns) historyLocked() *agent.History {
	if sr.history == nil {
		sr.history = &agent.History{}
	}
	return sr.history
}

// went marks sr as just gone idle and drops the histories of the sessions
// idle the longest beyond the bound. Callers must not hold any sr.mu.
func (h *histories) went(sr *sessionRuns) {
	sr.mu.Lock()
	hist := sr.history
	sr.mu.Unlock()
	size := hist.Size()
	h.mu.Lock()
	h.removeLocked(sr)
	h.idle = append(h.idle, idleHistory{sr: sr, size: size})
	h.bytes += size
	var evict []*sessionRuns
	for len(h.idle) > 0 && (len(h.idle) > maxIdleHistories || h.bytes > maxIdleHistoryBytes) {
		evict = append(evict, h.idle[0].sr)
		h.bytes -= h.idle[0].size
		h.idle = slices.Delete(h.idle, 0, 1)
	}
	h.mu.Unlock()
	drop(evict)
}

// sweep drops the histories of the sessions that were idle at the previous
// sweep and have not run since, so that memory comes back once the load is
// gone: called every few minutes, a history outlives its session's last
// run by one to two periods. The bounds alone would keep them forever.
func (h *histories) sweep() {
	h.mu.Lock()
	var evict []*sessionRuns
	kept := h.idle[:0]
	for _, e := range h.idle {
		if e.seen {
			evict = append(evict, e.sr)
			h.bytes -= e.size
			continue
		}
		e.seen = true
		kept = append(kept, e)
	}
	clear(h.idle[len(kept):])
	h.idle = kept
	if len(h.idle) == 0 {
		h.idle = nil
	}
	h.mu.Unlock()
	drop(evict)
}

// drop forgets the histories of sessions taken off the idle list. A
// session that became busy again keeps its history; it comes back to the
// list when it goes idle.
func drop(srs []*sessionRuns) {
	for _, s := range srs {
		s.mu.Lock()
		if s.idle == nil {
			s.history = nil
		}
		s.mu.Unlock()
	}
}

// forget removes a deleted session.
func (h *histories) forget(sr *sessionRuns) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.removeLocked(sr)
}

func (h *histories) removeLocked(sr *sessionRuns) {
	h.idle = slices.DeleteFunc(h.idle, func(e idleHistory) bool {
		if e.sr == sr {
			h.bytes -= e.size
			return true
		}
		return false
	})
}
