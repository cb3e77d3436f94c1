package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/internal/server"
	"github.com/tandem-dev/tandem/proto"
)

// benchServer starts the real server on httptest for a benchmark.
func benchServer(b *testing.B) (*server.Server, string, *http.Client, func()) {
	b.Helper()
	srv, err := server.New(context.Background(), serverConfig{DataDir: b.TempDir(), Token: testToken})
	require.NoError(b, err)
	ts := httptest.NewServer(srv.Handler())
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	return srv, ts.URL, client, func() {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		require.NoError(b, srv.Shutdown(ctx))
		ts.Close()
		client.CloseIdleConnections()
	}
}

func benchWorkspace(b *testing.B, client *http.Client, base string) string {
	b.Helper()
	status, raw := benchPost(b, client, base+"/v1/workspaces", map[string]string{"path": b.TempDir()})
	require.Equal(b, http.StatusCreated, status, "%s", raw)
	var ws proto.Workspace
	require.NoError(b, json.Unmarshal(raw, &ws))
	return ws.ID
}

// benchStream reads a workspace stream on its own goroutine.
func benchStream(b *testing.B, base, wsID string) (<-chan frame, func()) {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", fmt.Sprintf("%s/v1/workspaces/%s/events?client_id=%s", base, wsID, newClientID()), nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(b, err)
	frames := make(chan frame, 1<<16)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(frames)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
		var f frame
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if f.Event != "" {
					frames <- f
				}
				f = frame{}
			case strings.HasPrefix(line, "event: "):
				f.Event = line[len("event: "):]
			case strings.HasPrefix(line, "data: "):
				f.Data = line[len("data: "):]
			}
		}
	}()
	return frames, func() {
		cancel()
		resp.Body.Close()
		<-done
		http.DefaultClient.CloseIdleConnections()
	}
}

func waitFrame(b *testing.B, frames <-chan frame, match func(frame) bool) {
	b.Helper()
	deadline := time.After(wait)
	for {
		select {
		case f, ok := <-frames:
			if !ok {
				b.Fatal("stream ended")
			}
			if match(f) {
				return
			}
		case <-deadline:
			b.Fatal("no matching frame")
		}
	}
}

// percentiles returns p50 and p99 of ds.
func percentiles(ds []time.Duration) (p50, p99 time.Duration) {
	if len(ds) == 0 {
		return 0, 0
	}
	slices.Sort(ds)
	return ds[len(ds)*50/100], ds[min(len(ds)-1, len(ds)*99/100)]
}

func benchPost(b *testing.B, client *http.Client, url string, body any) (int, []byte) {
	raw, err := json.Marshal(body)
	if err != nil {
		b.Fatal(err)
	}
	req, _ := http.NewRequest("POST", url, bytes.NewReader(raw))
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	return resp.StatusCode, buf.Bytes()
}

// BenchmarkPromptAccepted measures the latency of the 202 with 64
// concurrent posters, each on its own session, each posting every interval
// (an open loop: every prompt is a real echo run). The offered loads go from
// light to the server's capacity on this machine (about 1300 runs/s on two
// cores), so the table shows the accept path's own latency and how it grows
// once the runs' work saturates the machine.
func BenchmarkPromptAccepted(b *testing.B) {
	for _, every := range []time.Duration{500 * time.Millisecond, 200 * time.Millisecond, 100 * time.Millisecond, 50 * time.Millisecond} {
		b.Run(fmt.Sprintf("offered=%d/s", int(64*time.Second/every)), func(b *testing.B) {
			benchPrompts(b, every)
		})
	}
}

// BenchmarkPromptAcceptedSaturated posts as fast as the server answers
// (closed loop, 64 in flight): its latency is 64 divided by the throughput,
// which it reports as prompts/s.
func BenchmarkPromptAcceptedSaturated(b *testing.B) {
	benchPrompts(b, 0)
}

func benchPrompts(b *testing.B, every time.Duration) {
	_, base, client, cleanup := benchServer(b)
	defer cleanup()
	const posters = 64
	wsID := benchWorkspace(b, client, base)
	sids := make([]string, posters)
	for i := range sids {
		status, raw := benchPost(b, client, base+"/v1/workspaces/"+wsID+"/sessions", map[string]any{})
		require.Equal(b, http.StatusCreated, status, "%s", raw)
		var s proto.Session
		require.NoError(b, json.Unmarshal(raw, &s))
		sids[i] = s.ID
	}
	var mu sync.Mutex
	lat := make([]time.Duration, 0, b.N)
	var next atomic.Int64
	b.ResetTimer()
	began := time.Now()
	var wg sync.WaitGroup
	for p := range posters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine := make([]time.Duration, 0, b.N/posters+1)
			// Posters start spread over one period so arrivals are even.
			due := began.Add(every * time.Duration(p) / posters)
			for next.Add(1) <= int64(b.N) {
				if every > 0 {
					time.Sleep(time.Until(due))
					due = due.Add(every)
				}
				start := time.Now()
				status, raw := benchPost(b, client, base+"/v1/workspaces/"+wsID+"/agent", proto.PromptRequest{SessionID: sids[p], Prompt: "hi"})
				mine = append(mine, time.Since(start))
				if status != http.StatusAccepted {
					b.Errorf("prompt: %d %s", status, raw)
					return
				}
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(began)
	b.StopTimer()
	p50, p99 := percentiles(lat)
	b.ReportMetric(float64(p50.Microseconds()), "p50-µs")
	b.ReportMetric(float64(p99.Microseconds()), "p99-µs")
	b.ReportMetric(float64(len(lat))/elapsed.Seconds(), "prompts/s")
}

// BenchmarkCancelToCompleted measures the time from a cancel's request to
// the run.completed event on a client's stream, for a run that is streaming.
func BenchmarkCancelToCompleted(b *testing.B) {
	_, base, client, cleanup := benchServer(b)
	defer cleanup()
	wsID := benchWorkspace(b, client, base)
	status, raw := benchPost(b, client, base+"/v1/workspaces/"+wsID+"/sessions", map[string]any{})
	require.Equal(b, http.StatusCreated, status, "%s", raw)
	var sess proto.Session
	require.NoError(b, json.Unmarshal(raw, &sess))
	frames, stop := benchStream(b, base, wsID)
	defer stop()

	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		status, raw := benchPost(b, client, base+"/v1/workspaces/"+wsID+"/agent", proto.PromptRequest{SessionID: sess.ID, Prompt: "/slow 100000 1"})
		require.Equal(b, http.StatusAccepted, status, "%s", raw)
		var acc proto.PromptAccepted
		require.NoError(b, json.Unmarshal(raw, &acc))
		waitFrame(b, frames, func(f frame) bool {
			return f.Event == proto.EventMessageDelta && bytes.Contains([]byte(f.Data), []byte(acc.RunID))
		})
		start := time.Now()
		status, raw = benchPost(b, client, fmt.Sprintf("%s/v1/workspaces/%s/agent/sessions/%s/cancel", base, wsID, sess.ID), nil)
		require.Equal(b, http.StatusOK, status, "%s", raw)
		waitFrame(b, frames, func(f frame) bool {
			return f.Event == proto.EventRunCompleted && bytes.Contains([]byte(f.Data), []byte(acc.RunID))
		})
		lat = append(lat, time.Since(start))
		waitFrame(b, frames, func(f frame) bool { return f.Event == proto.EventSessionIdle })
	}
	b.StopTimer()
	p50, p99 := percentiles(lat)
	b.ReportMetric(float64(p50.Microseconds()), "p50-µs")
	b.ReportMetric(float64(p99.Microseconds()), "p99-µs")
}
