package coordinator

import (
	"slices"
	"sync"

	"github.com/tandem-dev/tandem/internal/agent"
)

// maxIdleHistories bounds how many idle sessions keep their conversation in
// memory. A session whose history was dropped reads it from the store once,
// at its next run's first model step.
const maxIdleHistories = 256

// histories keeps the conversations of the most recently idle sessions and
// drops the rest, so memory follows recent activity, not every session ever
// prompted. Sessions with a worker always keep theirs.
type histories struct {
	mu   sync.Mutex
	idle []*sessionRuns // least recently idle first
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
	h.mu.Lock()
	h.idle = slices.DeleteFunc(h.idle, func(s *sessionRuns) bool { return s == sr })
	h.idle = append(h.idle, sr)
	var evict []*sessionRuns
	if n := len(h.idle) - maxIdleHistories; n > 0 {
		evict = slices.Clone(h.idle[:n])
		h.idle = slices.Delete(h.idle, 0, n)
	}
	h.mu.Unlock()
	for _, s := range evict {
		s.mu.Lock()
		// A session that became busy again keeps its history; it comes back
		// to the list when it goes idle.
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
	h.idle = slices.DeleteFunc(h.idle, func(s *sessionRuns) bool { return s == sr })
}
