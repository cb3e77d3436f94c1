package e2e

import (
	"fmt"
	"runtime/metrics"
	"sync"
	"testing"
	"time"
)

// BenchmarkMemoryAfterBurst runs a burst of runs (16 sessions prompting
// back to back, the echo model) and reports the memory the process holds
// from the OS (what Go mapped and has not released: its share of the RSS)
// idle before it, at its end, and afterBurst later, with nothing run in
// between: the server should give back what the burst used within
// seconds, not at its next idle sweep or forced collection minutes later.
func BenchmarkMemoryAfterBurst(b *testing.B) {
	const sessions, runs = 16, 100 // runs per session: 1,600 in all
	const afterBurst = 10 * time.Second
	for b.Loop() {
		_, base, client, cleanup := benchServer(b)
		type poster struct {
			ws, sid string
			frames  <-chan frame
		}
		posters := make([]poster, sessions)
		for i := range posters {
			ws := benchWorkspace(b, client, base)
			sid := benchSession(b, client, base, ws)
			frames, stop := benchStream(b, base, ws)
			defer stop()
			posters[i] = poster{ws, sid, frames}
			benchRunToIdle(b, client, base, ws, sid, "hello", frames) // warm
		}
		idle := heldFromOS()
		var wg sync.WaitGroup
		for _, p := range posters {
			wg.Go(func() {
				for i := range runs {
					benchRunToIdle(b, client, base, p.ws, p.sid, fmt.Sprintf("prompt %d", i), p.frames)
				}
			})
		}
		wg.Wait()
		end := heldFromOS()
		time.Sleep(afterBurst) // the measure is what is held this long after
		after := heldFromOS()
		b.ReportMetric(float64(idle)/(1<<20), "idle-MiB")
		b.ReportMetric(float64(end)/(1<<20), "burst-end-MiB")
		b.ReportMetric(float64(after)/(1<<20), "after-10s-MiB")
		b.ReportMetric(float64(after-min(after, idle))/(1<<20), "kept-MiB")
		cleanup()
	}
}

// heldFromOS is the memory Go holds from the OS: all it mapped, less the
// heap it gave back.
func heldFromOS() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64() - s[1].Value.Uint64()
}
