package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/proto"
)

// BenchmarkRunInLongSession measures one echo run, prompt to session.idle,
// in a session that already holds `history` runs: what each run costs the
// server as a conversation grows (the request built from the history, its
// size estimated for the context and compaction, usage counted and
// summed). cpu-µs/run is the process's CPU (server and this client) per
// run.
// benchRunToIdle prompts the session and waits for its run's
// run.completed and the session.idle after it on frames.
func benchRunToIdle(b *testing.B, client *http.Client, base, wsID, sid, prompt string, frames <-chan frame) {
	b.Helper()
	status, raw := benchPost(b, client, base+"/v1/workspaces/"+wsID+"/agent", proto.PromptRequest{SessionID: sid, Prompt: prompt})
	require.Equal(b, http.StatusAccepted, status, "%s", raw)
	var acc proto.PromptAccepted
	require.NoError(b, json.Unmarshal(raw, &acc))
	waitFrame(b, frames, func(f frame) bool {
		return f.Event == proto.EventRunCompleted && bytes.Contains([]byte(f.Data), []byte(acc.RunID))
	})
	waitFrame(b, frames, func(f frame) bool { return f.Event == proto.EventSessionIdle })
}

func BenchmarkRunInLongSession(b *testing.B) {
	for _, history := range []int{10, 200} {
		b.Run(fmt.Sprintf("history=%d", history), func(b *testing.B) {
			_, base, client, cleanup := benchServer(b)
			defer cleanup()
			wsID := benchWorkspace(b, client, base)
			sid := benchSession(b, client, base, wsID)
			frames, stop := benchStream(b, base, wsID)
			defer stop()
			run := func(prompt string) { benchRunToIdle(b, client, base, wsID, sid, prompt, frames) }
			for i := range history {
				run(fmt.Sprintf("earlier prompt %d: make the tests pass and explain what you changed", i))
			}
			cpu := processCPU()
			start := time.Now()
			n := 0
			for b.Loop() {
				run("make the tests pass and explain what you changed")
				n++
			}
			b.ReportMetric(float64((processCPU()-cpu).Microseconds())/float64(n), "cpu-µs/run")
			b.ReportMetric(float64(time.Since(start).Microseconds())/float64(n), "µs/run")
		})
	}
}
