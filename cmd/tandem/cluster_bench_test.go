package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/proto"
)

// Benchmarks of a cluster against a single node, in the same run:
//
//	go test -run '^$' -bench Cluster -benchtime 200x ./cmd/tandem
//
// BenchmarkClusterPrompt202: the latency of POST .../agent until its 202,
// sent to the workspace's owner, to another node (forwarded over NATS),
// and to a single server on SQLite. BenchmarkClusterDelivery: the delay
// from an event's numbering on the owner (its envelope's time) to its
// arrival on streams spread over the nodes (TANDEM_BENCH_STREAMS per node,
// default 100).

func BenchmarkClusterPrompt202(b *testing.B) {
	run := func(b *testing.B, url, wsID string, sessions []string) {
		lat := make([]time.Duration, 0, b.N)
		b.ResetTimer()
		for i := range b.N {
			start := time.Now()
			var acc proto.PromptAccepted
			code := benchCall(b, url, "POST", "/v1/workspaces/"+wsID+"/agent",
				proto.PromptRequest{SessionID: sessions[i%len(sessions)], Prompt: "hi"}, &acc)
			lat = append(lat, time.Since(start))
			if code != http.StatusAccepted {
				b.Fatalf("prompt: %d", code)
			}
		}
		b.StopTimer()
		reportPercentiles(b, lat)
	}
	b.Run("single", func(b *testing.B) {
		p := startServe(b, []string{"TANDEM_TOKEN=crash-token", "TANDEM_DATA_DIR=" + b.TempDir()})
		ws, sessions := benchWorkspace(b, p.url, p.url)
		run(b, p.url, ws, sessions)
	})
	c := startCluster(b, 2)
	ws, sessions := benchWorkspace(b, c.url(0), c.url(0)) // node 1 owns it
	b.Run("owner", func(b *testing.B) { run(b, c.url(0), ws, sessions) })
	b.Run("forwarded", func(b *testing.B) { run(b, c.url(1), ws, sessions) })
}

func BenchmarkClusterDelivery(b *testing.B) {
	per := 100
	if v, err := strconv.Atoi(os.Getenv("TANDEM_BENCH_STREAMS")); err == nil && v > 0 {
		per = v
	}
	b.Run("single", func(b *testing.B) {
		p := startServe(b, []string{"TANDEM_TOKEN=crash-token", "TANDEM_DATA_DIR=" + b.TempDir()})
		ws, sessions := benchWorkspace(b, p.url, p.url)
		deliver(b, []string{p.url, p.url, p.url}, per, ws, sessions[0])
	})
	b.Run("3nodes", func(b *testing.B) {
		c := startCluster(b, 3)
		ws, sessions := benchWorkspace(b, c.url(0), c.url(0))
		deliver(b, []string{c.url(0), c.url(1), c.url(2)}, per, ws, sessions[0])
	})
}

// deliver opens per streams on each url, runs one prompt of 50 deltas and
// reports how long the deltas took to arrive.
func deliver(b *testing.B, urls []string, per int, ws, session string) {
	var (
		mu   sync.Mutex
		lat  []time.Duration
		done sync.WaitGroup
	)
	const deltas = 50
	for _, url := range urls {
		for range per {
			resp := openBenchStream(b, url, ws)
			done.Add(1)
			go func() {
				defer done.Done()
				defer resp.Body.Close()
				readBenchStream(resp, func(ev proto.Event, at time.Time) bool {
					if ev.Type == proto.EventMessageDelta {
						mu.Lock()
						lat = append(lat, at.Sub(ev.Time.Time))
						mu.Unlock()
					}
					return ev.Type != proto.EventRunCompleted
				})
			}()
		}
	}
	// Every stream is registered once its headers came back.
	b.ResetTimer()
	benchCall(b, urls[1], "POST", "/v1/workspaces/"+ws+"/agent", proto.PromptRequest{SessionID: session, Prompt: fmt.Sprintf("/slow %d 20", deltas)}, nil)
	done.Wait()
	b.StopTimer()
	b.ReportMetric(float64(len(urls)*per), "streams")
	reportPercentiles(b, lat)
}

func reportPercentiles(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	at := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))].Microseconds()) }
	b.ReportMetric(at(0.5), "p50_us")
	b.ReportMetric(at(0.99), "p99_us")
}

func benchCall(b testing.TB, url, method, path string, body, out any) int {
	var rd *strings.Reader
	if body != nil {
		raw, _ := json.Marshal(body)
		rd = strings.NewReader(string(raw))
	} else {
		rd = strings.NewReader("")
	}
	req, err := http.NewRequest(method, url+path, rd)
	require.NoError(b, err)
	req.Header.Set("Authorization", "Bearer crash-token")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(b, err)
	defer resp.Body.Close()
	if out != nil {
		_ = json.NewDecoder(resp.Body).Decode(out)
	}
	return resp.StatusCode
}

func benchWorkspace(b *testing.B, url, sessURL string) (string, []string) {
	var ws proto.Workspace
	require.Equal(b, http.StatusCreated, benchCall(b, url, "POST", "/v1/workspaces", map[string]string{"path": b.TempDir()}, &ws))
	var ids []string
	for range 8 {
		var s proto.Session
		require.Equal(b, http.StatusCreated, benchCall(b, sessURL, "POST", "/v1/workspaces/"+ws.ID+"/sessions", map[string]any{}, &s))
		ids = append(ids, s.ID)
	}
	return ws.ID, ids
}

func openBenchStream(b *testing.B, url, wsID string) *http.Response {
	req, _ := http.NewRequest("GET", fmt.Sprintf("%s/v1/workspaces/%s/events?client_id=%s", url, wsID, uuid.NewString()), nil)
	req.Header.Set("Authorization", "Bearer crash-token")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(b, err)
	require.Equal(b, http.StatusOK, resp.StatusCode)
	return resp
}

func readBenchStream(resp *http.Response, fn func(proto.Event, time.Time) bool) {
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		at := time.Now()
		var ev proto.Event
		if json.Unmarshal([]byte(data), &ev) != nil || ev.Seq == 0 {
			continue
		}
		if !fn(ev, at) {
			return
		}
	}
}
