package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/internal/server"
	"github.com/tandem-dev/tandem/proto"
)

// BenchmarkSoak runs many runs over many sessions of one workspace against
// the real server (in this process, so its heap can be read) and a fake
// OpenAI model, and checks that memory comes back. Every session's history
// grows all along (each run adds a prompt and an answer, and each model
// request carries them all), so a cache that grows with the runs ever
// executed shows here. Under load the caches fill to their bounds; once the
// load is gone, the server's idle sweeps (every few minutes; here triggered
// through Config.IdleSweeps) drop what idle sessions kept, and the heap in
// use is back where the first round of one run per session left it.
//
// It is a benchmark, not a test: the full soak is long.
//
//	go test -run '^$' -bench Soak -benchtime 1x ./e2e                 # 20,000 runs over 1,000 sessions
//	TANDEM_SOAK_RUNS=100000 go test -run '^$' -bench Soak -benchtime 1x -timeout 2h ./e2e
//
// TANDEM_SOAK_SESSIONS changes the number of sessions, and with
// TANDEM_SOAK_HEAP=prefix the heap profiles after the first round, halfway,
// at the end and after the sweeps are written to prefix-first.pprof,
// prefix-mid.pprof, prefix-end.pprof and prefix-swept.pprof, for go tool
// pprof -base.
func BenchmarkSoak(b *testing.B) {
	runs, sessions := soakEnv("TANDEM_SOAK_RUNS", 20000), soakEnv("TANDEM_SOAK_SESSIONS", 1000)
	const posters = 16
	model := httptest.NewServer(http.HandlerFunc(soakModel))
	defer model.Close()
	sweeps := make(chan time.Time)
	srv, err := server.New(context.Background(), server.Config{
		DataDir: b.TempDir(), Token: testToken, DefaultModel: "openai/fake", IdleSweeps: sweeps, SandboxHelper: sandboxHelper,
		Getenv: func(k string) string {
			switch k {
			case "OPENAI_BASE_URL":
				return model.URL + "/v1"
			case "OPENAI_API_KEY":
				return "soak"
			}
			return ""
		},
	})
	require.NoError(b, err)
	ts := httptest.NewServer(srv.Handler())
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		require.NoError(b, srv.Shutdown(ctx))
		ts.Close()
		client.CloseIdleConnections()
	}()
	wsID := benchWorkspace(b, client, ts.URL)
	done := soakCompletions(b, ts.URL, wsID)
	ids := make([]string, sessions)
	for i := range ids {
		status, raw := benchPost(b, client, ts.URL+"/v1/workspaces/"+wsID+"/sessions", map[string]any{})
		require.Equal(b, http.StatusCreated, status, "%s", raw)
		var s proto.Session
		require.NoError(b, json.Unmarshal(raw, &s))
		ids[i] = s.ID
	}

	// round runs n runs, session after session, posters at a time.
	var next atomic.Int64
	round := func(n int64) {
		end := next.Load() + n
		var wg sync.WaitGroup
		for range posters {
			wg.Go(func() {
				for {
					i := next.Add(1) - 1
					if i >= end {
						return
					}
					sid := ids[i%int64(len(ids))]
					status, raw := benchPost(b, client, ts.URL+"/v1/workspaces/"+wsID+"/agent",
						map[string]any{"session_id": sid, "prompt": fmt.Sprintf("run %d: change the thing in file %d", i, i%97)})
					if status != http.StatusAccepted {
						b.Errorf("prompt: %d %s", status, raw)
						return
					}
					var acc proto.PromptAccepted
					_ = json.Unmarshal(raw, &acc)
					if err := done.wait(acc.RunID); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		if b.Failed() {
			b.FailNow()
		}
	}
	b.ResetTimer()
	began := time.Now()
	round(int64(sessions))
	first := settledHeap()
	soakProfile(b, "first")
	firstRSS := returnedRSS()
	rest := int64(max(runs-sessions, 0))
	round(rest / 2)
	mid := settledHeap()
	soakProfile(b, "mid")
	round(rest - rest/2)
	elapsed := time.Since(began)
	last := settledHeap()
	soakProfile(b, "end")
	lastRSS := returnedRSS()
	// The load is gone: the server's sweeps, which it makes every few
	// minutes, drop what the caches keep for idle sessions. A sweep drops
	// what was idle at the one before; the tick after two sweeps is taken
	// once they are done, and one more covers a session whose session.idle
	// came after its run.completed.
	for range 4 {
		sweeps <- time.Now()
	}
	swept := settledHeap()
	soakProfile(b, "swept")
	sweptRSS := returnedRSS()
	b.StopTimer()
	mib := func(n uint64) float64 { return float64(n) / (1 << 20) }
	b.ReportMetric(mib(first.HeapInuse), "heap-MiB-after-first-round")
	b.ReportMetric(mib(mid.HeapInuse), "heap-MiB-halfway")
	b.ReportMetric(mib(last.HeapInuse), "heap-MiB-at-end")
	b.ReportMetric(mib(swept.HeapInuse), "heap-MiB-swept")
	// Live is what the objects hold; the rest of the heap in use is the
	// free room of spans that still hold a live object.
	b.ReportMetric(mib(last.HeapAlloc), "live-MiB-at-end")
	b.ReportMetric(mib(swept.HeapAlloc), "live-MiB-swept")
	// The process's resident memory, the benchmark's own included, once
	// the runtime gave back what it could: SQLite's page cache (outside the
	// Go heap) shows here only.
	b.ReportMetric(mib(firstRSS), "rss-MiB-after-first-round")
	b.ReportMetric(mib(lastRSS), "rss-MiB-at-end")
	b.ReportMetric(mib(sweptRSS), "rss-MiB-swept")
	b.ReportMetric(float64(runs)/elapsed.Seconds(), "runs/s")
	b.Logf("heap in use (live) MiB: %.1f (%.1f) after %d runs, %.1f (%.1f) halfway, %.1f (%.1f) after %d, %.1f (%.1f) swept; RSS %.1f after the first round, %.1f at end, %.1f swept; %.0f runs/s",
		mib(first.HeapInuse), mib(first.HeapAlloc), sessions, mib(mid.HeapInuse), mib(mid.HeapAlloc),
		mib(last.HeapInuse), mib(last.HeapAlloc), runs, mib(swept.HeapInuse), mib(swept.HeapAlloc), mib(firstRSS), mib(lastRSS), mib(sweptRSS), float64(runs)/elapsed.Seconds())
	// The caches fill as the histories grow (the providers' encodings,
	// 16 MiB; idle sessions' histories, 24 MiB; the workspace's ring of
	// recent events, 8 MiB: HeapInuse counts them with the spans they
	// fragment); bounded, they stop there. So the second half of the runs,
	// over histories twice as long, must leave the heap where the first
	// half did, and the whole soak within the caches' bounds of the start.
	if last.HeapInuse > mid.HeapInuse+16<<20 || last.HeapInuse > first.HeapInuse+96<<20 {
		b.Errorf("heap in use grew with the runs: %.1f MiB after %d runs, %.1f MiB halfway, %.1f MiB after %d",
			mib(first.HeapInuse), sessions, mib(mid.HeapInuse), mib(last.HeapInuse), runs)
	}
	// Once the sweeps dropped what idle sessions kept, the heap is back
	// near where one run per session left it.
	if swept.HeapInuse > first.HeapInuse+16<<20 {
		b.Errorf("heap in use did not come back: %.1f MiB after %d runs, %.1f MiB after %d and the sweeps",
			mib(first.HeapInuse), sessions, mib(swept.HeapInuse), runs)
	}
}

func soakEnv(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// soakProfile writes the heap profile to $TANDEM_SOAK_HEAP-<at>.pprof when
// TANDEM_SOAK_HEAP is set, so that two points of the soak can be compared
// with go tool pprof -base.
func soakProfile(b *testing.B, at string) {
	prefix := os.Getenv("TANDEM_SOAK_HEAP")
	if prefix == "" {
		return
	}
	out, err := os.Create(prefix + "-" + at + ".pprof")
	require.NoError(b, err)
	require.NoError(b, pprof.Lookup("heap").WriteTo(out, 0))
	require.NoError(b, out.Close())
}

// settledHeap reads the heap once the garbage is collected.
func settledHeap() runtime.MemStats {
	var ms runtime.MemStats
	for range 2 {
		runtime.GC()
	}
	runtime.ReadMemStats(&ms)
	return ms
}

// returnedRSS is the process's resident memory (VmRSS) once the runtime
// gave the free heap back to the OS; 0 where /proc is not there.
func returnedRSS() uint64 {
	debug.FreeOSMemory()
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(raw)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// soakModel answers every request with a short streamed answer, whatever
// the history, and keeps nothing.
func soakModel(w http.ResponseWriter, r *http.Request) {
	_, _ = bufio.NewReader(r.Body).WriteTo(discard{})
	w.Header().Set("Content-Type", "text/event-stream")
	for _, c := range []string{
		`{"id":"c","object":"chat.completion.chunk","created":1,"model":"fake","choices":[{"index":0,"delta":{"role":"assistant","content":"Done: "},"finish_reason":null}]}`,
		`{"id":"c","object":"chat.completion.chunk","created":1,"model":"fake","choices":[{"index":0,"delta":{"content":"the thing is changed as asked."},"finish_reason":null}]}`,
		`{"id":"c","object":"chat.completion.chunk","created":1,"model":"fake","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
	} {
		fmt.Fprintf(w, "data: %s\n\n", c)
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// runEnds tells waiters when their run's run.completed came on the
// workspace's stream.
type runEnds struct {
	mu      sync.Mutex
	waiters map[string]chan struct{}
	ended   map[string]bool
}

func soakCompletions(b *testing.B, base, wsID string) *runEnds {
	c := &runEnds{waiters: map[string]chan struct{}{}, ended: map[string]bool{}}
	frames, stop := benchStream(b, base, wsID)
	b.Cleanup(stop)
	go func() {
		for f := range frames {
			if f.Event != proto.EventRunCompleted {
				continue
			}
			var ev struct {
				RunID string `json:"run_id"`
			}
			if json.Unmarshal([]byte(f.Data), &ev) != nil {
				continue
			}
			c.mu.Lock()
			if ch, ok := c.waiters[ev.RunID]; ok {
				close(ch)
				delete(c.waiters, ev.RunID)
			} else {
				c.ended[ev.RunID] = true
			}
			c.mu.Unlock()
		}
	}()
	return c
}

func (c *runEnds) wait(runID string) error {
	c.mu.Lock()
	if c.ended[runID] {
		delete(c.ended, runID)
		c.mu.Unlock()
		return nil
	}
	ch := make(chan struct{})
	c.waiters[runID] = ch
	c.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-time.After(time.Minute):
		return fmt.Errorf("run %s: no run.completed within a minute", runID)
	}
}
