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

// BenchmarkForkImport100k measures a session of 100,000 messages: its
// import (POST .../sessions/import) and its fork (POST .../fork), each
// answered in full, and the largest the SQLite WAL grows meanwhile
// (sampled every 5 ms), with the process's CPU for each. Targets (issue 31): each under 3 s, the WAL under
// 256 MiB throughout. Run with -benchtime=1x: one iteration is a whole
// import and fork.
func BenchmarkForkImport100k(b *testing.B) {
	const n = 100_000
	data := b.TempDir()
	_, base, client, cleanup := benchServerWith(b, func(c *serverConfig) { c.DataDir, c.MaxBody = data, 64<<20 })
	defer cleanup()
	dir := b.TempDir()
	status, raw := benchPost(b, client, base+"/v1/workspaces", map[string]string{"path": dir})
	require.Equal(b, http.StatusCreated, status, "%s", raw)
	var ws proto.Workspace
	require.NoError(b, json.Unmarshal(raw, &ws))
	msgs := make([]proto.Message, n)
	for i := range msgs {
		role := proto.RoleUser
		if i%2 == 1 {
			role = proto.RoleAssistant
		}
		msgs[i] = proto.Message{Role: role, Parts: []proto.Part{{Type: proto.PartText, Text: fmt.Sprintf("message %d", i)}}}
	}
	doc := proto.Export{Format: proto.ExportFormat, Settings: proto.ExportSettings{PermissionMode: "ask"}, Messages: msgs}
	wal := sampleSize(filepath.Join(data, "tandem.db-wal"))
	defer wal.stop()
	var importS, forkS float64
	var importCPU, forkCPU time.Duration
	for b.Loop() {
		start, cpu := time.Now(), processCPU()
		status, raw := benchPost(b, client, base+"/v1/workspaces/"+ws.ID+"/sessions/import", doc)
		importS += time.Since(start).Seconds()
		importCPU += processCPU() - cpu
		require.Equal(b, http.StatusCreated, status, "%.300s", raw)
		var sess proto.Session
		require.NoError(b, json.Unmarshal(raw, &sess))
		start, cpu = time.Now(), processCPU()
		status, raw = benchPost(b, client, base+"/v1/workspaces/"+ws.ID+"/sessions/"+sess.ID+"/fork", map[string]any{})
		forkS += time.Since(start).Seconds()
		forkCPU += processCPU() - cpu
		require.Equal(b, http.StatusCreated, status, "%.300s", raw)
		var fork proto.Session
		require.NoError(b, json.Unmarshal(raw, &fork))
		require.Equal(b, n, fork.MessageCount)
	}
	b.ReportMetric(importS/float64(b.N), "import-s")
	b.ReportMetric(forkS/float64(b.N), "fork-s")
	// CPU of the whole process (the client's encoding of the document
	// too): what a busy host's wall times hide.
	b.ReportMetric(importCPU.Seconds()/float64(b.N), "import-cpu-s")
	b.ReportMetric(forkCPU.Seconds()/float64(b.N), "fork-cpu-s")
	b.ReportMetric(float64(wal.stop())/(1<<20), "wal-max-MiB")
}

// sizeSampler keeps the largest size a file reaches, looking every 5 ms.
type sizeSampler struct {
	done chan struct{}
	max  chan int64
}

func sampleSize(path string) *sizeSampler {
	s := &sizeSampler{done: make(chan struct{}), max: make(chan int64, 1)}
	go func() {
		var largest int64
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			if fi, err := os.Stat(path); err == nil {
				largest = max(largest, fi.Size())
			}
			select {
			case <-s.done:
				s.max <- largest
				return
			case <-t.C:
			}
		}
	}()
	return s
}

// stop ends the sampling and returns the largest size seen; later calls
// return 0.
func (s *sizeSampler) stop() int64 {
	select {
	case <-s.done:
		return 0
	default:
	}
	close(s.done)
	return <-s.max
}
