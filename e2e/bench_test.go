package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/e2e/benchkit"
	"github.com/tandem-dev/tandem/internal/server"
	"github.com/tandem-dev/tandem/internal/store"
	"github.com/tandem-dev/tandem/internal/store/sqlite"
	"github.com/tandem-dev/tandem/proto"
)

// benchServer starts the real server on httptest for a benchmark.
func benchServer(b *testing.B) (*server.Server, string, *http.Client, func()) {
	srv, base, client, _, cleanup := benchServerTimed(b)
	return srv, base, client, cleanup
}

// benchServerWith is benchServer with options.
func benchServerWith(b *testing.B, opts ...option) (*server.Server, string, *http.Client, func()) {
	srv, base, client, _, cleanup := benchServerTimed(b, opts...)
	return srv, base, client, cleanup
}

// benchServerTimed is benchServer that also times, inside the server, the
// handling of every prompt (and log line): from the handler's start to its return, which
// leaves out what the network and the OS add before and after.
func benchServerTimed(b *testing.B, opts ...option) (*server.Server, string, *http.Client, *handlerTimes, func()) {
	b.Helper()
	cfg := serverConfig{DataDir: b.TempDir(), Token: testToken, SandboxHelper: sandboxHelper}
	for _, o := range opts {
		o(&cfg)
	}
	srv, err := server.New(context.Background(), cfg)
	require.NoError(b, err)
	times := &handlerTimes{}
	h := srv.Handler()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		h.ServeHTTP(w, r)
		if r.Method == http.MethodPost && (strings.HasSuffix(r.URL.Path, "/agent") || strings.HasSuffix(r.URL.Path, "/log")) {
			times.add(time.Since(start))
		}
	}))
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	return srv, ts.URL, client, times, func() {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		require.NoError(b, srv.Shutdown(ctx))
		ts.Close()
		client.CloseIdleConnections()
	}
}

// benchSession creates a session in the workspace and returns its id.
func benchSession(b *testing.B, client *http.Client, base, wsID string) string {
	b.Helper()
	status, raw := benchPost(b, client, base+"/v1/workspaces/"+wsID+"/sessions", map[string]any{})
	require.Equal(b, http.StatusCreated, status, "%s", raw)
	var s proto.Session
	require.NoError(b, json.Unmarshal(raw, &s))
	return s.ID
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
// (an open loop: every prompt is a real echo run). The posters run in
// another process, as real clients do: in-process posters would share the
// server's Go scheduler, where the runs started by earlier prompts keep a
// poster from reading its 202 until they block (see
// BenchmarkPromptAcceptedInProcess). The offered loads go from light to
// most of the server's capacity on this machine, so the table shows the
// accept path's own latency and how it grows as the runs' work fills the
// machine.
func BenchmarkPromptAccepted(b *testing.B) {
	for _, every := range promptIntervals {
		b.Run(fmt.Sprintf("offered=%d/s", int(64*time.Second/every)), func(b *testing.B) {
			benchPrompts(b, every, postFromProcess)
		})
	}
}

// BenchmarkPromptAcceptedInProcess is BenchmarkPromptAccepted with the
// posters in the server's process.
func BenchmarkPromptAcceptedInProcess(b *testing.B) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	defer client.CloseIdleConnections()
	for _, every := range promptIntervals {
		b.Run(fmt.Sprintf("offered=%d/s", int(64*time.Second/every)), func(b *testing.B) {
			benchPrompts(b, every, func(job posterJob) ([]time.Duration, error) { return postPrompts(client, job) })
		})
	}
}

var promptIntervals = []time.Duration{500 * time.Millisecond, 200 * time.Millisecond, 100 * time.Millisecond, 50 * time.Millisecond}

// BenchmarkCommitFloor is BenchmarkPromptAccepted's floor on this machine:
// the same posters and loads on the cheapest route that commits before it
// answers (POST .../sessions/{sid}/log, one kept event), and no run after
// it. Run it in the same invocation to compare.
func BenchmarkCommitFloor(b *testing.B) {
	for _, every := range promptIntervals[:2] {
		b.Run(fmt.Sprintf("offered=%d/s", int(64*time.Second/every)), func(b *testing.B) {
			benchPosts(b, every, postFromProcess, func(base, wsID string) posterJob {
				return posterJob{
					URL:    base + "/v1/workspaces/" + wsID + "/sessions/{session}/log",
					Body:   `{"level": "info", "message": "hi"}`,
					Status: http.StatusOK,
				}
			})
		})
	}
}

// BenchmarkPromptAcceptedSaturated posts as fast as the server answers
// (closed loop, 64 in flight, posters in another process): its latency is
// 64 divided by the throughput, which it reports as posts/s.
func BenchmarkPromptAcceptedSaturated(b *testing.B) {
	benchPrompts(b, 0, postFromProcess)
}

func benchPrompts(b *testing.B, every time.Duration, post func(posterJob) ([]time.Duration, error)) {
	benchPosts(b, every, post, promptJob)
}

// benchPosts runs 64 posters, each on its own session, against one server
// and reports the latencies seen by the clients and, inside the server, by
// the handler.
func benchPosts(b *testing.B, every time.Duration, post func(posterJob) ([]time.Duration, error), route func(base, wsID string) posterJob) {
	_, base, client, inServer, cleanup := benchServerTimed(b)
	defer cleanup()
	const posters = 64
	wsID := benchWorkspace(b, client, base)
	job := route(base, wsID)
	job.Token, job.N, job.Every = testToken, b.N, every
	for range posters {
		job.Sessions = append(job.Sessions, benchSession(b, client, base, wsID))
	}
	b.ResetTimer()
	began := time.Now()
	cpu, steal := processCPU(), benchkit.HostSteal()
	lat, err := post(job)
	elapsed := time.Since(began)
	cpu, steal = processCPU()-cpu, benchkit.HostSteal()-steal
	b.StopTimer()
	require.NoError(b, err)
	require.Len(b, lat, b.N)
	p50, p99 := percentiles(lat)
	b.ReportMetric(float64(p50.Microseconds()), "p50-µs")
	b.ReportMetric(float64(p99.Microseconds()), "p99-µs")
	b.ReportMetric(float64(len(lat))/elapsed.Seconds(), "posts/s")
	p50, p99 = percentiles(inServer.take())
	b.ReportMetric(float64(p50.Microseconds()), "server-p50-µs")
	b.ReportMetric(float64(p99.Microseconds()), "server-p99-µs")
	// With the posters in another process this is the server's CPU alone:
	// the accept and the whole run that follows it.
	b.ReportMetric(float64(cpu.Microseconds())/float64(len(lat)), "cpu-µs/op")
	// See benchkit.HostSteal.
	b.ReportMetric(float64(steal.Milliseconds()), "steal-ms")
}

// BenchmarkCancelToCompleted measures the time from a cancel's request to
// the run.completed event on a client's stream, for a run that is streaming.
func BenchmarkCancelToCompleted(b *testing.B) {
	_, base, client, cleanup := benchServer(b)
	defer cleanup()
	wsID := benchWorkspace(b, client, base)
	sess := proto.Session{ID: benchSession(b, client, base, wsID)}
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

// handlerTimes collects durations from the server's handler goroutines.
type handlerTimes struct {
	mu sync.Mutex
	ds []time.Duration
}

func (t *handlerTimes) add(d time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.ds = append(t.ds, d)
}

func (t *handlerTimes) take() []time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	ds := t.ds
	t.ds = nil
	return ds
}

// processCPU is the CPU time (user and system) this process has used. The
// server builds for Unix only (bash runs in its own process group).
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkStartWithHistory starts the server, and stops it, on a data
// directory whose workspace log holds 20,000 finished runs (100,000
// events): what a start costs as history grows, which the CLI's in-process
// server pays at every prompt. A start reads the log for runs a crash left
// unfinished; first-ms is the first start, later-ms the mean of the others.
func BenchmarkStartWithHistory(b *testing.B) {
	ctx := context.Background()
	dir := b.TempDir()
	db, err := sqlite.Open(ctx, filepath.Join(dir, "tandem.db"))
	require.NoError(b, err)
	now := time.Now().UTC()
	ws, _, err := db.EnsureWorkspace(ctx, store.Workspace{ID: uuid.NewString(), Path: b.TempDir(), CreatedAt: now})
	require.NoError(b, err)
	sid := uuid.NewString()
	require.NoError(b, db.CreateSession(ctx, store.Session{ID: sid, WorkspaceID: ws.ID, CreatedAt: now, UpdatedAt: now}))
	var (
		seq   int64
		batch []store.Event
	)
	data := json.RawMessage(`{"prompt": "make the tests pass", "text": "` + strings.Repeat("x", 200) + `"}`)
	for range 20000 {
		runID := uuid.NewString()
		for _, typ := range []string{proto.EventRunAccepted, proto.EventRunStarted, proto.EventMessageUpdated, proto.EventMessageUpdated, proto.EventRunCompleted} {
			seq++
			env, err := json.Marshal(proto.Event{Seq: seq, Type: typ, WorkspaceID: ws.ID, SessionID: sid, RunID: runID, Data: data})
			require.NoError(b, err)
			batch = append(batch, store.Event{Seq: seq, WorkspaceID: ws.ID, SessionID: sid, RunID: runID, Type: typ, InHistory: true, Envelope: env})
		}
		if len(batch) >= 1000 {
			require.NoError(b, db.AppendEvents(ctx, batch))
			batch = batch[:0]
		}
	}
	require.NoError(b, db.AppendEvents(ctx, batch))
	require.NoError(b, db.ReserveSeq(ctx, ws.ID, seq))
	require.NoError(b, db.Close())

	var first, later time.Duration
	n := 0
	for b.Loop() {
		start := time.Now()
		srv, err := server.New(ctx, serverConfig{DataDir: dir, Token: testToken, SandboxHelper: sandboxHelper})
		require.NoError(b, err)
		if took := time.Since(start); n == 0 {
			first = took
		} else {
			later += took
		}
		n++
		require.NoError(b, srv.Shutdown(ctx))
	}
	b.ReportMetric(float64(first.Microseconds())/1000, "first-ms")
	if n > 1 {
		b.ReportMetric(float64(later.Microseconds())/1000/float64(n-1), "later-ms")
	}
}
