package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/proto"
)

// BenchmarkCheckpointOverhead measures echo runs that call one tool, prompt
// to session.idle, in a workspace of 1,000 files: tool=write changes a file
// (the run takes a checkpoint before the call and records the files when
// it ends), tool=view only reads one (no checkpoint). The difference is
// what checkpoints cost a run.
func BenchmarkCheckpointOverhead(b *testing.B) {
	for _, tool := range []string{"view", "write"} {
		b.Run("tool="+tool, func(b *testing.B) {
			_, base, client, cleanup := benchServer(b)
			defer cleanup()
			dir := b.TempDir()
			for i := range 1000 {
				p := filepath.Join(dir, fmt.Sprintf("d%02d", i/50), fmt.Sprintf("f%04d.txt", i))
				require.NoError(b, os.MkdirAll(filepath.Dir(p), 0o755))
				require.NoError(b, os.WriteFile(p, []byte(fmt.Sprintf("file %d\n", i)), 0o644))
			}
			status, raw := benchPost(b, client, base+"/v1/workspaces", map[string]string{"path": dir})
			require.Equal(b, http.StatusCreated, status, "%s", raw)
			var ws proto.Workspace
			require.NoError(b, json.Unmarshal(raw, &ws))
			status, raw = benchPost(b, client, base+"/v1/workspaces/"+ws.ID+"/sessions", map[string]any{"permission_mode": "allow_all"})
			require.Equal(b, http.StatusCreated, status, "%s", raw)
			var sess proto.Session
			require.NoError(b, json.Unmarshal(raw, &sess))
			frames, stop := benchStream(b, base, ws.ID)
			defer stop()
			n := 0
			run := func() {
				prompt := `/tool view {"path":"d00/f0000.txt"}`
				if tool == "write" {
					prompt = fmt.Sprintf(`/tool write {"path":"d00/f0000.txt","content":"run %d\n"}`, n)
				}
				benchRunToIdle(b, client, base, ws.ID, sess.ID, prompt, frames)
				n++
			}
			run() // the first checkpoint stores every file once
			n = 0
			cpu := processCPU()
			start := time.Now()
			for b.Loop() {
				run()
			}
			elapsed := time.Since(start)
			b.ReportMetric(float64(n)/elapsed.Seconds(), "runs/s")
			b.ReportMetric(float64((processCPU()-cpu).Microseconds())/float64(n), "cpu-µs/run")
		})
	}
}
