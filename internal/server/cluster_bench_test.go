package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tandem-dev/tandem/internal/bus/natsbus/natstest"
	"github.com/tandem-dev/tandem/internal/store/postgres/pgtest"
	"github.com/tandem-dev/tandem/proto"
)

// BenchmarkClusterPromptAccept: the latency of POST .../agent until its
// 202 on a two-node cluster served in this process (no race detector, no
// processes of its own, so the cost of reaching the owner shows above the
// noise): sent to the workspace's owner, and to the other node.
//
//	go test -run '^$' -bench ClusterPromptAccept -benchtime 1000x ./internal/server
func BenchmarkClusterPromptAccept(b *testing.B) {
	db, busURL := pgtest.Database(b), natstest.Start(b).ClientURL()
	urls := make([]string, 2)
	for i := range urls {
		srv, err := New(context.Background(), Config{DataDir: b.TempDir(), Token: "secret", StoreURL: db, BusURL: busURL,
			NodeID: fmt.Sprintf("n%d", i+1), LeaseTTL: 2 * time.Minute, ClusterTick: 30 * time.Second})
		if err != nil {
			b.Fatal(err)
		}
		hs := httptest.NewServer(srv.Handler())
		b.Cleanup(func() {
			hs.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = srv.Shutdown(ctx)
		})
		urls[i] = hs.URL
	}
	call := func(url, method, path string, body, out any) int {
		raw, _ := json.Marshal(body)
		req, _ := http.NewRequest(method, url+path, strings.NewReader(string(raw)))
		req.Header.Set("Authorization", "Bearer secret")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		if out != nil {
			_ = json.NewDecoder(resp.Body).Decode(out)
		}
		return resp.StatusCode
	}
	var ws proto.Workspace
	if code := call(urls[0], "POST", "/v1/workspaces", map[string]string{"path": b.TempDir()}, &ws); code != http.StatusCreated {
		b.Fatalf("create workspace: %d", code)
	}
	var sessions []string
	for range 8 {
		var s proto.Session
		if code := call(urls[0], "POST", "/v1/workspaces/"+ws.ID+"/sessions", map[string]any{}, &s); code != http.StatusCreated {
			b.Fatalf("create session: %d", code)
		}
		sessions = append(sessions, s.ID)
	}
	for i, name := range []string{"owner", "forwarded"} {
		b.Run(name, func(b *testing.B) {
			lat := make([]time.Duration, 0, b.N)
			for n := range b.N {
				start := time.Now()
				code := call(urls[i], "POST", "/v1/workspaces/"+ws.ID+"/agent", proto.PromptRequest{SessionID: sessions[n%len(sessions)], Prompt: "hi"}, nil)
				lat = append(lat, time.Since(start))
				if code != http.StatusAccepted {
					b.Fatalf("prompt: %d", code)
				}
			}
			b.StopTimer()
			slices.Sort(lat)
			at := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))].Microseconds()) }
			b.ReportMetric(at(0.5), "p50_us")
			b.ReportMetric(at(0.99), "p99_us")
		})
	}
}
