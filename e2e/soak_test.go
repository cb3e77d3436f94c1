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
	"runtime/pprof"
	"strconv"
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
// OpenAI model, and checks that memory comes back: the heap in use once the
// load is gone is the same after all the runs as after the first round of
// one run per session. Every session's history grows all along (each run
// adds a prompt and an answer, and each model request carries them all), so
// a cache that grows with the runs ever executed shows here.
//
// It is a benchmark, not a test: the full soak is long.
//
//	go test -run '^$' -bench Soak -benchtime 1x ./e2e                 # 20,000 runs over 1,000 sessions
//	TANDEM_SOAK_RUNS=100000 go test -run '^$' -bench Soak -benchtime 1x -timeout 2h ./e2e
//
// TANDEM_SOAK_SESSIONS changes the number of sessions, and
// TANDEM_SOAK_HEAP names a file for the heap profile at the end.
func BenchmarkSoak(b *testing.B) {
	runs, sessions := soakEnv("TANDEM_SOAK_RUNS", 20000), soakEnv("TANDEM_SOAK_SESSIONS", 1000)
	const posters = 16
	model := httptest.NewServer(http.HandlerFunc(soakModel))
	defer model.Close()
	srv, err := server.New(context.Background(), server.Config{
		DataDir: b.TempDir(), Token: testToken, DefaultModel: "openai/fake",
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
	rest := int64(max(runs-sessions, 0))
	round(rest / 2)
	mid := settledHeap()
	round(rest - rest/2)
	elapsed := time.Since(began)
	last := settledHeap()
	b.StopTimer()
	if f := os.Getenv("TANDEM_SOAK_HEAP"); f != "" {
		out, err := os.Create(f)
		require.NoError(b, err)
		require.NoError(b, pprof.Lookup("heap").WriteTo(out, 0))
		require.NoError(b, out.Close())
	}
	b.ReportMetric(float64(first)/(1<<20), "heap-MiB-after-first-round")
	b.ReportMetric(float64(mid)/(1<<20), "heap-MiB-halfway")
	b.ReportMetric(float64(last)/(1<<20), "heap-MiB-at-end")
	b.ReportMetric(float64(runs)/elapsed.Seconds(), "runs/s")
	// The caches fill as the histories grow (the providers' encodings,
	// 16 MiB; idle sessions' histories, 24 MiB; the workspace's ring of
	// recent events, 8 MiB: HeapInuse counts them with the spans they
	// fragment); bounded, they stop there. So the second half of the runs,
	// over histories twice as long, must leave the heap where the first
	// half did, and the whole soak within the caches' bounds of the start.
	if last > mid+16<<20 || last > first+96<<20 {
		b.Errorf("heap in use grew with the runs: %.1f MiB after %d runs, %.1f MiB halfway, %.1f MiB after %d",
			float64(first)/(1<<20), sessions, float64(mid)/(1<<20), float64(last)/(1<<20), runs)
	}
}

func soakEnv(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// settledHeap is the heap in use once the garbage is collected.
func settledHeap() uint64 {
	var ms runtime.MemStats
	for range 2 {
		runtime.GC()
	}
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
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
