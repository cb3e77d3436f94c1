package main

import (
	"log/slog"
	"runtime/debug"
)

// serveGCPercent is the collector's target a server runs with unless GOGC
// says otherwise: a heap may grow to three times what is live before a
// collection, not twice. A busy server allocates fast (each model step
// re-encodes its history's request), so collections came often and, in a
// long session, cost a step more than its own work; at 200 a step's CPU
// fell 6-14% and the 16-poster accept p99 with it (loadbench, 4 reps). The
// heap that grows meanwhile goes back once the load ends (memtrim).
const serveGCPercent = 200

// tuneGC sets serveGCPercent unless GOGC is set.
func tuneGC(getenv func(string) string, log *slog.Logger) {
	if getenv("GOGC") != "" {
		return
	}
	debug.SetGCPercent(serveGCPercent)
	log.Debug("garbage collector target", "gogc", serveGCPercent)
}
