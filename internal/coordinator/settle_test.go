package coordinator

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A session whose last run has ended, its worker still on the way out,
// counts as idle to whoever saw the run end: settleLocked lets the worker
// finish (it needs the session's lock to) and comes back with it idle.
// Without the wait a rewind sent on run.completed was 409 session_busy
// about one time in three.
func TestSettleWaitsForAnEndingRun(t *testing.T) {
	h := newHarness(t)
	sid := h.session()
	sr := h.c.lockSession(h.ws, sid)
	r := &run{id: "r1"}
	r.ending.Store(true)
	idle := make(chan struct{})
	sr.active, sr.idle = r, idle
	// The worker's last steps, as drain takes them: under the lock.
	go func() {
		sr.mu.Lock()
		sr.active, sr.idle = nil, nil
		close(idle)
		sr.mu.Unlock()
	}()
	sr = h.c.settleLocked(h.ws, sr)
	defer sr.mu.Unlock()
	require.Nil(t, sr.active)
	require.Nil(t, sr.idle)
}

// A run that has not ended, or a queue behind it, is busy: no wait.
func TestSettleLeavesABusySessionBusy(t *testing.T) {
	h := newHarness(t)
	sid := h.session()
	sr := h.c.lockSession(h.ws, sid)
	defer func() { sr.mu.Unlock() }()
	r := &run{id: "r1"}
	sr.active, sr.idle = r, make(chan struct{})
	require.Same(t, sr, h.c.settleLocked(h.ws, sr), "a live run is waited for by nobody")
	r.ending.Store(true)
	sr.queue = []*run{{id: "r2"}}
	require.Same(t, sr, h.c.settleLocked(h.ws, sr), "a queued run keeps it busy")
	sr.active, sr.idle, sr.queue = nil, nil, nil
}
