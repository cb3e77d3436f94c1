package copilot_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tandem-dev/tandem/client"
	"github.com/tandem-dev/tandem/internal/bridge/httpbridge"
	"github.com/tandem-dev/tandem/internal/copilot"
	"github.com/tandem-dev/tandem/internal/server"
	"github.com/tandem-dev/tandem/proto"
)

const benchToken = "bench-token"

// benchServer is a Tandem server on the echo model, over HTTP on loopback.
func benchServer(b *testing.B) (url string) {
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
	return ts.URL
}

// BenchmarkSendToIdleHTTP is the baseline: a prompt over HTTP, then the
// session's events on its SSE stream until session.idle.
func BenchmarkSendToIdleHTTP(b *testing.B) {
	url := benchServer(b)
	ctx := context.Background()
	c := client.New(url, benchToken)
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
	b.ResetTimer()
	for b.Loop() {
		if _, err := c.Prompt(ctx, ws.ID, proto.PromptRequest{SessionID: sess.ID, Prompt: "hello there"}); err != nil {
			b.Fatal(err)
		}
		for {
			ev, err := st.Next(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if ev.Type == proto.EventSessionIdle {
				break
			}
		}
	}
}

// BenchmarkSendToIdleSDK is the same turn by an SDK client through the
// bridge: session.send, then session.event notifications until
// session.idle. The difference from the baseline, divided by events/op, is
// the bridge's cost per event.
func BenchmarkSendToIdleSDK(b *testing.B) {
	url := benchServer(b)
	srv := copilot.NewServer(copilot.Config{Connect: httpbridge.Connect(url, benchToken), Cwd: b.TempDir()})
	a, z := net.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.ServeConn(ctx, z)
	}()
	defer func() {
		cancel()
		a.Close()
		<-done
	}()
	r := bufio.NewReader(a)
	id := 0
	call := func(method string, params any) {
		id++
		body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
		if _, err := fmt.Fprintf(a, "Content-Length: %d\r\n\r\n%s", len(body), body); err != nil {
			b.Fatal(err)
		}
	}
	// next returns the next message's method ("" for an answer) and its
	// event type for session.event.
	next := func() (string, string) {
		n := 0
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				b.Fatal(err)
			}
			line = strings.TrimSpace(line)
			if line == "" {
				break
			}
			if v, ok := strings.CutPrefix(line, "Content-Length: "); ok {
				n, _ = strconv.Atoi(v)
			}
		}
		body := make([]byte, n)
		if _, err := io.ReadFull(r, body); err != nil {
			b.Fatal(err)
		}
		var m struct {
			Method string `json:"method"`
			Params struct {
				Event struct {
					Type string `json:"type"`
				} `json:"event"`
			} `json:"params"`
			Error json.RawMessage `json:"error"`
		}
		_ = json.Unmarshal(body, &m)
		if m.Error != nil {
			b.Fatalf("error answer: %s", m.Error)
		}
		return m.Method, m.Params.Event.Type
	}
	sessionID := uuid.NewString()
	call("session.create", map[string]any{"sessionId": sessionID})
	for {
		if method, _ := next(); method == "" {
			break
		}
	}
	events := 0
	b.ResetTimer()
	for b.Loop() {
		call("session.send", map[string]any{"sessionId": sessionID, "prompt": "hello there"})
		for {
			method, typ := next()
			if method == "session.event" {
				events++
			}
			if typ == "session.idle" {
				break
			}
		}
	}
	b.ReportMetric(float64(events)/float64(b.N), "events/op")
}
