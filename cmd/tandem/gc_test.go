package main

import (
	"log/slog"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/require"
)

// A server runs with serveGCPercent, unless the operator set GOGC: theirs
// wins.
func TestTuneGCKeepsTheOperatorsGOGC(t *testing.T) {
	old := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(old) })
	log := slog.New(slog.DiscardHandler)

	tuneGC(func(k string) string {
		if k == "GOGC" {
			return "100"
		}
		return ""
	}, log)
	require.Equal(t, 100, debug.SetGCPercent(100), "GOGC set: left as it is")

	tuneGC(func(string) string { return "" }, log)
	require.Equal(t, serveGCPercent, debug.SetGCPercent(100))
}
