package coordinator

import (
	"runtime"
	"testing"
	"weak"

	"github.com/stretchr/testify/assert"
)

// A run taken off its session's queue is not kept by the queue: an idle
// session would otherwise hold its last run (prompt, attachments, session
// record) for as long as the session lives, and a server the last run of
// every session ever prompted.
func TestQueueLetsGoOfItsRuns(t *testing.T) {
	sr := &sessionRuns{}
	var runs []weak.Pointer[run]
	for range 3 {
		r := &run{prompt: "a prompt"}
		runs = append(runs, weak.Make(r))
		sr.queue = append(sr.queue, r)
	}
	sr.mu.Lock()
	sr.dropHeadLocked(2)
	sr.dropHeadLocked(1)
	sr.mu.Unlock()
	runtime.GC()
	for i, w := range runs {
		assert.Nil(t, w.Value(), "run %d is still reachable", i)
	}
	runtime.KeepAlive(sr)
}
