package acp_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/tandem-dev/tandem/client"
	"github.com/tandem-dev/tandem/internal/acp"
	"github.com/tandem-dev/tandem/internal/bridge"
	"github.com/tandem-dev/tandem/internal/bridge/httpbridge"
	"github.com/tandem-dev/tandem/internal/bridge/localbridge"
	"github.com/tandem-dev/tandem/internal/server"
	"github.com/tandem-dev/tandem/proto"
)

const benchToken = "bench-token"

// benchServer is a Tandem server on the echo model, over HTTP on loopback.
func benchServer(b *testing.B) (*server.Server, string) {
	b.Helper()
	srv, err := server.New(context.Background(), server.Config{DataDir: b.TempDir(), Token: benchToken, DefaultModel: "echo"})
	if err != nil {
		b.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		ts.Close()
	})
	return srv, ts.URL
}

// reportLatencies reports the p50 and p99 of one turn's durations.
func reportLatencies(b *testing.B, d []time.Duration) {
	if len(d) == 0 {
		return
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	at := func(q float64) float64 { return float64(d[int(q*float64(len(d)-1))].Microseconds()) }
	b.ReportMetric(at(0.50), "p50-µs")
	b.ReportMetric(at(0.99), "p99-µs")
}

// BenchmarkTurn is one turn of the echo model, from the prompt to the end
// of the turn: over HTTP (the baseline: POST .../agent, then the session's
// SSE stream to run.completed), and through tandem acp (session/prompt to
// its answer) over HTTP to a server (tandem acp --url) and in-process (no
// server running). Section 13's target: ACP within 1 ms of HTTP at p50.
func BenchmarkTurn(b *testing.B) {
	const prompt = "hello there, how are you today"
	b.Run("HTTP", func(b *testing.B) {
		_, url := benchServer(b)
		ctx := context.Background()
		c := client.New(url, benchToken)
		defer c.CloseIdleConnections()
		ws, _, err := c.CreateWorkspace(ctx, b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		sess, err := c.CreateSession(ctx, ws.ID, proto.CreateSessionRequest{})
		if err != nil {
			b.Fatal(err)
		}
		st, err := c.Events(ctx, ws.ID, client.EventsOptions{SessionID: sess.ID})
		if err != nil {
			b.Fatal(err)
		}
		defer st.Close()
		var d []time.Duration
		b.ResetTimer()
		for b.Loop() {
			start := time.Now()
			acc, err := c.Prompt(ctx, ws.ID, proto.PromptRequest{SessionID: sess.ID, Prompt: prompt, ClientID: c.ClientID()})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := client.WaitRun(ctx, st, acc.RunID); err != nil {
				b.Fatal(err)
			}
			d = append(d, time.Since(start))
		}
		b.StopTimer()
		reportLatencies(b, d)
	})
	b.Run("ACP-HTTP", func(b *testing.B) {
		_, url := benchServer(b)
		benchACP(b, httpbridge.Connect(url, benchToken), prompt)
	})
	b.Run("ACP-inprocess", func(b *testing.B) {
		srv, _ := benchServer(b)
		services, audit := srv.Local()
		benchACP(b, localbridge.Connect(localbridge.Config{Services: services, Audit: audit}), prompt)
	})
}

// benchACP runs turns through an ACP connection over pipes, as an editor
// does over tandem acp's stdio.
func benchACP(b *testing.B, connect bridge.Connect, prompt string) {
	srv := acp.NewServer(acp.Config{Connect: connect, Version: "bench"})
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ctx, inR, outW)
		outW.Close()
	}()
	defer func() {
		cancel()
		inW.Close()
		<-done
	}()
	r := bufio.NewReaderSize(outR, 1<<20)
	id := 0
	// call sends a request and reads up to its answer, counting the
	// notifications before it.
	call := func(method string, params any) (json.RawMessage, int) {
		id++
		msg, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
		if _, err := inW.Write(append(msg, '\n')); err != nil {
			b.Fatal(err)
		}
		want := fmt.Sprintf(`"id":%d,`, id)
		notes := 0
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				b.Fatal(err)
			}
			if !strings.Contains(line, want) || strings.Contains(line, `"method"`) {
				notes++
				continue
			}
			var m struct {
				Result json.RawMessage `json:"result"`
				Error  json.RawMessage `json:"error"`
			}
			_ = json.Unmarshal([]byte(line), &m)
			if m.Error != nil {
				b.Fatalf("%s: %s", method, m.Error)
			}
			return m.Result, notes
		}
	}
	call("initialize", map[string]any{"protocolVersion": 1})
	res, _ := call("session/new", map[string]any{"cwd": b.TempDir(), "mcpServers": []any{}})
	var s struct {
		SessionID string `json:"sessionId"`
	}
	_ = json.Unmarshal(res, &s)
	var d []time.Duration
	updates := 0
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		_, n := call("session/prompt", map[string]any{"sessionId": s.SessionID, "prompt": []any{map[string]any{"type": "text", "text": prompt}}})
		d = append(d, time.Since(start))
		updates += n
	}
	b.StopTimer()
	b.ReportMetric(float64(updates)/float64(len(d)), "updates/op")
	reportLatencies(b, d)
}
