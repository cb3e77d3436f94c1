// Package e2e drives the real server wiring over HTTP and SSE.
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/tandem-dev/tandem/internal/mcp/mcptest"
	"github.com/tandem-dev/tandem/internal/server"
	"github.com/tandem-dev/tandem/proto"
)

func TestMain(m *testing.M) {
	// This test binary is also the MCP server the MCP tests start.
	mcptest.Main()
	if os.Getenv(posterEnv) != "" {
		os.Exit(posterMain())
	}
	dir, err := os.MkdirTemp("", "tandem-e2e-bin")
	if err != nil {
		panic(err)
	}
	sandboxHelper = filepath.Join(dir, "tandem")
	// The agent's commands run confined by the real binary's helper
	// (tandem sandbox-exec): the server here is in this process.
	if out, err := exec.Command("go", "build", "-o", sandboxHelper, "github.com/tandem-dev/tandem/cmd/tandem").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build tandem: %v\n%s", err, out)
		os.Exit(1)
	}
	code := runMain(m)
	os.RemoveAll(dir)
	os.Exit(code)
}

// sandboxHelper is the tandem binary built for the servers' sandbox.
var sandboxHelper string

// runMain runs the tests, then checks no goroutine leaked.
func runMain(m *testing.M) (code int) {
	defer func() {
		if code == 0 {
			if err := goleak.Find(); err != nil {
				fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
				code = 1
			}
		}
	}()
	return m.Run()
}

const testToken = "test-token-123"

// wait is the deadline for anything the server should do promptly.
const wait = 10 * time.Second

// env is one server on httptest plus helpers to talk to it.
type env struct {
	t       *testing.T
	cfg     server.Config
	srv     *server.Server
	ts      *httptest.Server
	client  *http.Client
	workDir string
}

// serverConfig is server.Config, named so tests can write options inline.
type serverConfig = server.Config

type option func(*serverConfig)

func withGraces(create, detach time.Duration) option {
	return func(c *server.Config) { c.CreateGrace, c.DetachGrace = create, detach }
}

func withHeartbeat(d time.Duration) option { return func(c *server.Config) { c.Heartbeat = d } }

func startEnv(t *testing.T, opts ...option) *env {
	t.Helper()
	cfg := server.Config{DataDir: t.TempDir(), Token: testToken, SandboxHelper: sandboxHelper}
	for _, o := range opts {
		o(&cfg)
	}
	e := &env{t: t, cfg: cfg, workDir: t.TempDir(), client: &http.Client{Transport: newValidatingTransport(t)}}
	e.boot()
	t.Cleanup(e.stop)
	return e
}

func (e *env) boot() {
	srv, err := server.New(context.Background(), e.cfg)
	require.NoError(e.t, err)
	e.srv = srv
	e.ts = httptest.NewServer(srv.Handler())
}

func (e *env) stop() {
	if e.srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	// assert, not require: stop may run on a goroutine other than the test's.
	assert.NoError(e.t, e.srv.Shutdown(ctx))
	e.ts.Close()
	e.client.CloseIdleConnections()
	e.srv = nil
}

// restart stops the server and starts a new one on the same data dir.
func (e *env) restart() {
	e.stop()
	e.boot()
}

// do sends a request with the test token and decodes a JSON answer into out.
func (e *env) do(method, path string, body any, out any) (int, []byte) {
	e.t.Helper()
	return e.doRaw(method, path, body, out, map[string]string{"Authorization": "Bearer " + testToken})
}

func (e *env) doRaw(method, path string, body any, out any, headers map[string]string) (int, []byte) {
	e.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		require.NoError(e.t, err)
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, e.ts.URL+path, rd)
	require.NoError(e.t, err)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := e.client.Do(req)
	require.NoError(e.t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(e.t, err)
	if out != nil && len(raw) > 0 {
		require.NoError(e.t, json.Unmarshal(raw, out), "body: %s", raw)
	}
	return resp.StatusCode, raw
}

// must is do that requires the status.
func (e *env) must(status int, method, path string, body any, out any) {
	e.t.Helper()
	got, raw := e.do(method, path, body, out)
	require.Equal(e.t, status, got, "%s %s: %s", method, path, raw)
}

func (e *env) createWorkspace() proto.Workspace {
	e.t.Helper()
	var ws proto.Workspace
	e.must(http.StatusCreated, "POST", "/v1/workspaces", map[string]string{"path": e.workDir}, &ws)
	return ws
}

func (e *env) createSession(wsID string, body any) proto.Session {
	e.t.Helper()
	var s proto.Session
	if body == nil {
		body = map[string]any{}
	}
	e.must(http.StatusCreated, "POST", "/v1/workspaces/"+wsID+"/sessions", body, &s)
	return s
}

func (e *env) log(wsID, sid, msg string, ephemeral bool) int64 {
	e.t.Helper()
	var out proto.LogResponse
	e.must(http.StatusOK, "POST", fmt.Sprintf("/v1/workspaces/%s/sessions/%s/log", wsID, sid),
		proto.LogRequest{Level: "info", Message: msg, Ephemeral: ephemeral}, &out)
	return out.Seq
}

func (e *env) workspace(id string) proto.Workspace {
	e.t.Helper()
	var ws proto.Workspace
	e.must(http.StatusOK, "GET", "/v1/workspaces/"+id, nil, &ws)
	return ws
}

// frame is one SSE frame as a client sees it.
type frame struct {
	ID    string
	Event string
	Data  string
}

func (f frame) envelope(t *testing.T) proto.Event {
	t.Helper()
	var ev proto.Event
	require.NoError(t, json.Unmarshal([]byte(f.Data), &ev), "frame %+v", f)
	return ev
}

// stream is an open SSE connection read by a goroutine the test owns.
type stream struct {
	t        *testing.T
	ClientID string
	cancel   context.CancelFunc
	frames   chan frame
	done     chan struct{}
	resp     *http.Response
	comments chan string
}

type streamOpt func(*http.Request)

func lastEventID(n int64) streamOpt {
	return func(r *http.Request) { r.Header.Set("Last-Event-ID", fmt.Sprint(n)) }
}

func (e *env) openStream(wsID, clientID, query string, opts ...streamOpt) *stream {
	e.t.Helper()
	s, status, body := e.tryStream(wsID, clientID, query, opts...)
	require.Equal(e.t, http.StatusOK, status, "open stream: %s", body)
	return s
}

// tryStream opens a stream and returns the status and, on failure, the body.
func (e *env) tryStream(wsID, clientID, query string, opts ...streamOpt) (*stream, int, string) {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	url := fmt.Sprintf("%s/v1/workspaces/%s/events?client_id=%s%s", e.ts.URL, wsID, clientID, query)
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	require.NoError(e.t, err)
	req.Header.Set("Authorization", "Bearer "+testToken)
	for _, o := range opts {
		o(req)
	}
	resp, err := e.client.Do(req)
	require.NoError(e.t, err)
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		return nil, resp.StatusCode, string(b)
	}
	s := &stream{t: e.t, ClientID: clientID, cancel: cancel, frames: make(chan frame, 100000),
		done: make(chan struct{}), resp: resp, comments: make(chan string, 1000)}
	go s.read()
	e.t.Cleanup(s.close)
	return s, resp.StatusCode, ""
}

func (s *stream) read() {
	defer close(s.done)
	defer close(s.frames)
	sc := bufio.NewScanner(s.resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	var f frame
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if f.Event != "" || f.Data != "" {
				s.frames <- f
			}
			f = frame{}
		case strings.HasPrefix(line, ":"):
			select {
			case s.comments <- line:
			default:
			}
		case strings.HasPrefix(line, "id: "):
			f.ID = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "event: "):
			f.Event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			f.Data = strings.TrimPrefix(line, "data: ")
		}
	}
}

func (s *stream) close() {
	s.cancel()
	<-s.done
	s.resp.Body.Close()
}

// next returns the next frame, failing the test after the deadline.
func (s *stream) next() frame {
	s.t.Helper()
	select {
	case f, ok := <-s.frames:
		require.True(s.t, ok, "stream of %s ended", s.ClientID)
		return f
	case <-time.After(wait):
		s.t.Fatalf("no frame on stream of %s within %v", s.ClientID, wait)
	}
	return frame{}
}

// until returns the first frame of type typ, failing on deadline; frames
// before it are returned too, so tests can check what came in between.
func (s *stream) until(typ string) (frame, []frame) {
	s.t.Helper()
	var seen []frame
	deadline := time.After(wait)
	for {
		select {
		case f, ok := <-s.frames:
			require.True(s.t, ok, "stream of %s ended before %s", s.ClientID, typ)
			if f.Event == typ {
				return f, seen
			}
			seen = append(seen, f)
		case <-deadline:
			s.t.Fatalf("no %s on stream of %s within %v (saw %d frames)", typ, s.ClientID, wait, len(seen))
		}
	}
}

// ended waits for the server to end the stream and returns what came before.
func (s *stream) ended() []frame {
	s.t.Helper()
	var seen []frame
	deadline := time.After(wait)
	for {
		select {
		case f, ok := <-s.frames:
			if !ok {
				return seen
			}
			seen = append(seen, f)
		case <-deadline:
			s.t.Fatalf("stream of %s still open after %v", s.ClientID, wait)
		}
	}
}

func newClientID() string { return uuid.NewString() }

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, cond func() bool, msg string) {
	t.Helper()
	require.Eventually(t, cond, wait, 5*time.Millisecond, msg)
}
