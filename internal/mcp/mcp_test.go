package mcp

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/internal/config"
	"github.com/tandem-dev/tandem/internal/mcp/mcptest"
)

func args(v map[string]any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

// start makes a Manager of servers, starts it and waits for the starts; it
// is closed when the test ends.
func start(t *testing.T, servers map[string]config.MCPServer, opts Options) (*Manager, *recorder) {
	t.Helper()
	rec := newRecorder()
	opts.Reporter = rec
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	m := New(servers, opts)
	t.Cleanup(func() { _ = m.Close() })
	m.Start()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	require.NoError(t, m.Wait(ctx))
	return m, rec
}

var allTools = []string{"add_tool", "big", "cwd", "die", "echo", "env", "fail", "mixed", "pid", "read", "sleep", "spawn"}

func prefixed(server string, tools ...string) []string {
	out := make([]string, len(tools))
	for i, t := range tools {
		out[i] = ToolName(server, t)
	}
	return out
}

func TestStdioRoundTrip(t *testing.T) {
	dir := t.TempDir()
	srv := testServer("serve", map[string]string{"MCPTEST_TOKEN": "Bearer ${SECRET}"})
	m, rec := start(t, map[string]config.MCPServer{"t": srv}, Options{
		Dir:       dir,
		LookupEnv: func(k string) (string, bool) { return map[string]string{"SECRET": "s3"}[k], k == "SECRET" },
		MaxResult: 1000,
	})

	st := rec.statuses()
	require.Len(t, st, 2)
	assert.Equal(t, Status{Server: "t", Status: StatusStarting, Tools: []string{}}, st[0])
	assert.Equal(t, Status{Server: "t", Status: StatusConnected, Tools: prefixed("t", allTools...)}, st[1])
	assert.Equal(t, prefixed("t", allTools...), names(m.Tools()))
	data, err := json.Marshal(st[1])
	require.NoError(t, err)
	assert.JSONEq(t, `{"name": "t", "status": "connected", "tools": `+mustJSON(t, prefixed("t", allTools...))+`}`, string(data),
		"a Status is the data of mcp.server_status")
	data, err = json.Marshal(Status{Server: "x", SessionID: "s1", Status: StatusFailed, Tools: []string{}, Err: "why"})
	require.NoError(t, err)
	assert.JSONEq(t, `{"name": "x", "session_id": "s1", "status": "failed", "tools": [], "error": "why"}`, string(data))
	echo := m.Tools()[4]
	assert.Equal(t, "t", echo.Server)
	assert.Equal(t, "echo", echo.Remote)
	assert.Equal(t, "Echo the text back.", echo.Description)
	assert.JSONEq(t, `"object"`, string(mustField(t, echo.Parameters, "type")))

	ctx := context.Background()
	assert.Equal(t, Result{Content: "hello"}, m.Call(ctx, "mcp__t__echo", args(map[string]any{"text": "hello"})))
	assert.Equal(t, Result{Content: "no good", IsError: true}, m.Call(ctx, "mcp__t__fail", args(map[string]any{"message": "no good"})),
		"a tool's own error is an error result")
	assert.Equal(t, Result{Content: "Bearer s3"}, m.Call(ctx, "mcp__t__env", args(map[string]any{"name": "MCPTEST_TOKEN"})),
		"env is merged, ${NAME} resolved")
	assert.Equal(t, Result{Content: os.Getenv("HOME")}, m.Call(ctx, "mcp__t__env", args(map[string]any{"name": "HOME"})),
		"the base environment is kept")
	real, err := filepath.EvalSymlinks(dir)
	require.NoError(t, err)
	assert.Equal(t, Result{Content: real}, m.Call(ctx, "mcp__t__cwd", nil), "a stdio server runs in the workspace")
	assert.Equal(t, Result{Content: "first\n[image, image/png, 16 bytes: not shown]\nlast"}, m.Call(ctx, "mcp__t__mixed", nil))
	big := m.Call(ctx, "mcp__t__big", args(map[string]any{"bytes": 5000}))
	assert.False(t, big.IsError)
	assert.Equal(t, strings.Repeat("x", 1000)+"\n[cut: 4000 of 5000 bytes not shown]", big.Content)

	bad := m.Call(ctx, "mcp__t__echo", args(map[string]any{"text": 3}))
	assert.True(t, bad.IsError, "arguments the tool's schema refuses: %q", bad.Content)
	assert.True(t, m.Call(ctx, "mcp__t__echo", json.RawMessage(`[1]`)).IsError)
	assert.Equal(t, Result{Content: `unknown tool "mcp__t__nope": MCP server t offers no such tool`, IsError: true}, m.Call(ctx, "mcp__t__nope", nil))
	assert.Equal(t, Result{Content: `unknown tool "mcp__x__echo": call only the tools offered to you`, IsError: true}, m.Call(ctx, "mcp__x__echo", nil))
	assert.True(t, m.Owns("mcp__t__anything"))
	assert.False(t, m.Owns("mcp__x__echo"))
	assert.False(t, m.Owns("bash"))

	require.NoError(t, m.Close())
	last := rec.statuses()[len(rec.statuses())-1]
	assert.Equal(t, Status{Server: "t", Status: StatusStopped, Tools: []string{}}, last)
	assert.Empty(t, m.Tools())
	assert.Equal(t, `MCP server t is not available (stopped); its tools cannot be called`, m.Call(ctx, "mcp__t__echo", nil).Content)
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

func mustField(t *testing.T, obj json.RawMessage, key string) json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(obj, &m))
	return m[key]
}

func TestToolsFilter(t *testing.T) {
	srv := testServer("serve", nil)
	srv.Tools = []string{"echo", "s*"}
	m, rec := start(t, map[string]config.MCPServer{"f": srv}, Options{SessionID: "sess-1"})
	assert.Equal(t, prefixed("f", "echo", "sleep", "spawn"), names(m.Tools()))
	st := rec.waitStatus(t, "f", StatusConnected)
	assert.Equal(t, "sess-1", st.SessionID, "a session's servers say whose they are")
	assert.True(t, m.Call(context.Background(), "mcp__f__fail", nil).IsError, "a filtered-out tool cannot be called")

	none := testServer("serve", nil)
	none.Tools = []string{}
	m2, _ := start(t, map[string]config.MCPServer{"n": none}, Options{})
	assert.Empty(t, m2.Tools(), "an empty tools list offers nothing")
}

// serveHTTP serves srv over HTTP until the test ends. Call it before start:
// cleanups run last first, so the Manager closes before the server does,
// and the server's sessions a dead client left (one that could not say
// goodbye) are closed with it.
func serveHTTP(t *testing.T, srv *sdk.Server, wantAuth string) *httptest.Server {
	ts := httptest.NewServer(mcpHandler(srv, wantAuth))
	t.Cleanup(func() {
		for ss := range srv.Sessions() {
			_ = ss.Close()
		}
		ts.Close()
	})
	return ts
}

// mcpHandler serves the test server over streamable HTTP, answering 401
// without the expected Authorization header.
func mcpHandler(srv *sdk.Server, wantAuth string) http.Handler {
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != wantAuth {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

func TestHTTPRoundTrip(t *testing.T) {
	ts := serveHTTP(t, mcptest.NewServer(mcptest.Options{}), "Bearer tok")
	spec := config.MCPServer{Type: config.TransportHTTP, URL: ts.URL, Headers: map[string]string{"Authorization": "Bearer ${DOCS_TOKEN}"}}
	m, rec := start(t, map[string]config.MCPServer{"h": spec}, Options{
		LookupEnv: func(k string) (string, bool) { return "tok", k == "DOCS_TOKEN" },
	})
	rec.waitStatus(t, "h", StatusConnected)
	assert.Equal(t, prefixed("h", allTools...), names(m.Tools()))
	assert.Equal(t, Result{Content: "over http"}, m.Call(context.Background(), "mcp__h__echo", args(map[string]any{"text": "over http"})))
	assert.Equal(t, Result{Content: "x", IsError: true}, m.Call(context.Background(), "mcp__h__fail", args(map[string]any{"message": "x"})))
	require.NoError(t, m.Close())
	rec.waitStatus(t, "h", StatusStopped)
}

func TestHTTPFailures(t *testing.T) {
	ts := serveHTTP(t, mcptest.NewServer(mcptest.Options{}), "Bearer tok")
	servers := map[string]config.MCPServer{
		"nokey":   {Type: config.TransportHTTP, URL: ts.URL, Headers: map[string]string{"Authorization": "Bearer ${UNSET_TOKEN}"}},
		"badkey":  {Type: config.TransportHTTP, URL: ts.URL, Headers: map[string]string{"Authorization": "Bearer wrong"}},
		"nothere": {Type: config.TransportHTTP, URL: "http://127.0.0.1:1/mcp"},
	}
	_, rec := start(t, servers, Options{LookupEnv: func(string) (string, bool) { return "", false }})
	assert.Equal(t, "header Authorization: environment variable UNSET_TOKEN is not set", rec.waitStatus(t, "nokey", StatusFailed).Err,
		"a missing secret fails the start rather than sending an empty token")
	assert.Equal(t, `MCP handshake failed: calling "initialize": sending "initialize": Unauthorized`, rec.waitStatus(t, "badkey", StatusFailed).Err)
	assert.Contains(t, rec.waitStatus(t, "nothere", StatusFailed).Err, "connection refused")
}

// TestListChanged: a tool the server adds is discovered from its
// list-changed notification, on both transports.
func TestListChanged(t *testing.T) {
	ts := serveHTTP(t, mcptest.NewServer(mcptest.Options{}), "")
	servers := map[string]config.MCPServer{
		"s": testServer("serve", nil),
		"h": {Type: config.TransportHTTP, URL: ts.URL},
	}
	m, rec := start(t, servers, Options{})
	for _, name := range []string{"s", "h"} {
		t.Run(name, func(t *testing.T) {
			res := m.Call(context.Background(), ToolName(name, "add_tool"), args(map[string]any{"name": "extra"}))
			require.Equal(t, Result{Content: "added extra"}, res)
			st := rec.wait(t, func(s Status) bool {
				return s.Server == name && s.Status == StatusConnected && len(s.Tools) == len(allTools)+1
			})
			assert.Contains(t, st.Tools, ToolName(name, "extra"))
			assert.Contains(t, names(m.Tools()), ToolName(name, "extra"))
			assert.Equal(t, Result{Content: "extra: hi"}, m.Call(context.Background(), ToolName(name, "extra"), args(map[string]any{"text": "hi"})))
		})
	}
}

// TestServerDiesMidCall: the caller gets an error result, the server a
// failed status, its tools leave; a later Start brings it back.
func TestServerDiesMidCall(t *testing.T) {
	m, rec := start(t, map[string]config.MCPServer{"d": testServer("serve", nil)}, Options{RetryAfter: time.Nanosecond})
	res := m.Call(context.Background(), "mcp__d__die", nil)
	assert.Equal(t, Result{Content: "MCP server d failed during the call: exited with status 3", IsError: true}, res)
	st := rec.waitStatus(t, "d", StatusFailed)
	assert.Equal(t, "exited with status 3", st.Err)
	assert.Empty(t, st.Tools)
	assert.Empty(t, m.Tools(), "a failed server's tools leave")
	assert.Equal(t, `MCP server d is not available (failed: exited with status 3); its tools cannot be called`,
		m.Call(context.Background(), "mcp__d__echo", nil).Content)

	m.Start()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	require.NoError(t, m.Wait(ctx))
	assert.Equal(t, Result{Content: "back"}, m.Call(ctx, "mcp__d__echo", args(map[string]any{"text": "back"})))
	var seq []string
	for _, s := range rec.statuses() {
		seq = append(seq, s.Status)
	}
	assert.Equal(t, []string{"starting", "connected", "failed", "starting", "connected"}, seq)
}

func TestFailedServerIsNotRestartedAtOnce(t *testing.T) {
	m, rec := start(t, map[string]config.MCPServer{"x": testServer("exit", nil)}, Options{})
	rec.waitStatus(t, "x", StatusFailed)
	m.Start() // within DefaultRetryAfter: nothing happens
	require.NoError(t, m.Wait(context.Background()))
	assert.Len(t, rec.statuses(), 2)
}

func TestHTTPServerDiesMidCall(t *testing.T) {
	var ts *httptest.Server
	srv := mcptest.NewServer(mcptest.Options{Die: func() {
		_ = ts.Listener.Close()
		ts.CloseClientConnections()
	}})
	ts = serveHTTP(t, srv, "")
	m, rec := start(t, map[string]config.MCPServer{"h": {Type: config.TransportHTTP, URL: ts.URL}}, Options{})
	res := m.Call(context.Background(), "mcp__h__die", nil)
	assert.True(t, res.IsError)
	assert.True(t, strings.HasPrefix(res.Content, "MCP server h failed during the call: "), res.Content)
	st := rec.waitStatus(t, "h", StatusFailed)
	assert.NotEmpty(t, st.Err)
	assert.Empty(t, m.Tools())
}

func TestHandshakeNeverAnswered(t *testing.T) {
	logs := newLines()
	_, rec := start(t, map[string]config.MCPServer{"mute": testServer("mute", nil)}, Options{
		HandshakeTimeout: 300 * time.Millisecond, Logger: slog.New(logs),
	})
	st := rec.waitStatus(t, "mute", StatusFailed)
	assert.Equal(t, "no answer to the MCP handshake within 300ms", st.Err)
	pid := startedPID(t, logs)
	assert.False(t, alive(pid), "the silent server is killed and reaped, not left behind")
}

// startedPID is the pid the Manager logged for the server it started.
func startedPID(t *testing.T, logs lines) int {
	t.Helper()
	logs.mu.Lock()
	defer logs.mu.Unlock()
	for _, l := range *logs.got {
		if p, ok := strings.CutPrefix(l, "pid="); ok {
			n, err := strconv.Atoi(p)
			require.NoError(t, err)
			return n
		}
	}
	t.Fatalf("no pid logged in %q", *logs.got)
	return 0
}

func TestStartFailures(t *testing.T) {
	servers := map[string]config.MCPServer{
		"missing": {Type: config.TransportStdio, Command: "tandem-no-such-mcp-server"},
		"relmiss": {Type: config.TransportStdio, Command: "./bin/none"},
		"exits":   testServer("exit", nil),
		"nokey":   {Type: config.TransportStdio, Command: os.Args[0], Args: []string{"${NOPE}"}},
		"bad__nm": testServer("serve", nil),
	}
	_, rec := start(t, servers, Options{LookupEnv: func(string) (string, bool) { return "", false }})
	assert.Equal(t, "command not found: tandem-no-such-mcp-server", rec.waitStatus(t, "missing", StatusFailed).Err)
	assert.Equal(t, "command not found: ./bin/none", rec.waitStatus(t, "relmiss", StatusFailed).Err)
	assert.Equal(t, "exited with status 2 during the handshake", rec.waitStatus(t, "exits", StatusFailed).Err)
	assert.Equal(t, "args[0]: environment variable NOPE is not set", rec.waitStatus(t, "nokey", StatusFailed).Err)
	assert.Contains(t, rec.waitStatus(t, "bad__nm", StatusFailed).Err, "must not contain __")
}

func TestRelativeCommandRunsFromTheWorkspace(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "bin"), 0o755))
	require.NoError(t, os.Symlink(os.Args[0], filepath.Join(dir, "bin", "server")))
	srv := testServer("serve", nil)
	srv.Command = "./bin/server"
	m, _ := start(t, map[string]config.MCPServer{"r": srv}, Options{Dir: dir})
	assert.Equal(t, Result{Content: "ok"}, m.Call(context.Background(), "mcp__r__echo", args(map[string]any{"text": "ok"})))
}

// TestCancelMidCall: a canceled call returns within 2 s, the server hears of
// the cancel, and stays usable.
func TestCancelMidCall(t *testing.T) {
	logs := newLines()
	ts := serveHTTP(t, mcptest.NewServer(mcptest.Options{Say: logs.say}), "")
	servers := map[string]config.MCPServer{
		"s": testServer("serve", nil),
		"h": {Type: config.TransportHTTP, URL: ts.URL},
	}
	m, _ := start(t, servers, Options{Logger: slog.New(logs)})
	for _, name := range []string{"s", "h"} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan Result, 1)
			go func() { done <- m.Call(ctx, ToolName(name, "sleep"), args(map[string]any{"ms": 600_000})) }()
			logs.wait(t, "sleeping")
			canceled := time.Now()
			cancel()
			select {
			case res := <-done:
				assert.Less(t, time.Since(canceled), 2*time.Second)
				assert.Equal(t, Result{Content: "the call was canceled", IsError: true}, res)
			case <-time.After(2 * time.Second):
				t.Fatal("the call did not return within 2 s of its cancel")
			}
			logs.wait(t, "sleep canceled")
			assert.Equal(t, Result{Content: "still here"}, m.Call(context.Background(), ToolName(name, "echo"), args(map[string]any{"text": "still here"})))
			clearLines(logs)
		})
	}
}

func clearLines(l lines) {
	l.mu.Lock()
	*l.got = nil
	l.mu.Unlock()
}

func TestCallTimeout(t *testing.T) {
	m, _ := start(t, map[string]config.MCPServer{"s": testServer("serve", nil)}, Options{CallTimeout: 200 * time.Millisecond})
	res := m.Call(context.Background(), "mcp__s__sleep", args(map[string]any{"ms": 600_000}))
	assert.Equal(t, Result{Content: "the call timed out after 200ms", IsError: true}, res)
	assert.Equal(t, Result{Content: "ok"}, m.Call(context.Background(), "mcp__s__echo", args(map[string]any{"text": "ok"})))
}

// TestCloseKillsTheProcessGroup: Close stops the server and what it started,
// a grandchild that ignores SIGTERM included, during a call too.
func TestCloseKillsTheProcessGroup(t *testing.T) {
	m, rec := start(t, map[string]config.MCPServer{"g": testServer("serve", nil)}, Options{})
	ctx := context.Background()
	serverPID, err := strconv.Atoi(m.Call(ctx, "mcp__g__pid", nil).Content)
	require.NoError(t, err)
	child, err := strconv.Atoi(m.Call(ctx, "mcp__g__spawn", nil).Content)
	require.NoError(t, err)
	require.True(t, alive(serverPID))
	require.True(t, alive(child))

	inCall := make(chan Result, 1)
	go func() { inCall <- m.Call(ctx, "mcp__g__sleep", args(map[string]any{"ms": 600_000})) }()
	closed := time.Now()
	require.NoError(t, m.Close())
	assert.Less(t, time.Since(closed), 2*time.Second, "a workspace close is not held up by its servers")
	assert.False(t, alive(serverPID), "the server is gone (reaped by Close)")
	assert.True(t, dies(child), "so is what it started, SIGKILLed with its group")
	res := <-inCall
	assert.True(t, res.IsError)
	assert.Contains(t, res.Content, "MCP server g")
	assert.Equal(t, StatusStopped, rec.statuses()[len(rec.statuses())-1].Status)
}

// TestConcurrentCallsAndClose: calls racing a Close all return, and nothing
// is left running (goleak checks at the end of the package).
func TestConcurrentCallsAndClose(t *testing.T) {
	ts := serveHTTP(t, mcptest.NewServer(mcptest.Options{}), "")
	for round := range 3 {
		m, _ := start(t, map[string]config.MCPServer{
			"s": testServer("serve", nil),
			"h": {Type: config.TransportHTTP, URL: ts.URL},
		}, Options{})
		var wg sync.WaitGroup
		for i := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				name := []string{"mcp__s__echo", "mcp__h__echo", "mcp__s__sleep", "mcp__h__sleep"}[i%4]
				res := m.Call(context.Background(), name, args(map[string]any{"text": "x", "ms": 50 * i}))
				if !res.IsError {
					assert.Contains(t, []string{"x", "slept"}, res.Content)
				}
			}()
		}
		if round > 0 {
			require.NoError(t, m.Close())
		}
		wg.Wait()
		require.NoError(t, m.Close())
	}
}

func TestSplitName(t *testing.T) {
	tests := []struct {
		name, server, tool string
		ok                 bool
	}{
		{"mcp__git__status", "git", "status", true},
		{"mcp__git__log__all", "git", "log__all", true},
		{"mcp__my-server__a_b", "my-server", "a_b", true},
		{"mcp__git__", "", "", false},
		{"mcp____x", "", "", false},
		{"bash", "", "", false},
		{"mcp_git__x", "", "", false},
	}
	for _, tt := range tests {
		s, tool, ok := SplitName(tt.name)
		assert.Equal(t, tt.ok, ok, tt.name)
		assert.Equal(t, tt.server, s, tt.name)
		assert.Equal(t, tt.tool, tool, tt.name)
		if ok {
			assert.Equal(t, tt.name, ToolName(s, tool))
		}
	}
	assert.True(t, validToolName("mcp__git__status"))
	assert.False(t, validToolName("mcp__git__get.file"))
	assert.False(t, validToolName("mcp__git__"+strings.Repeat("x", 60)))
}

func TestNeverStarted(t *testing.T) {
	m := New(map[string]config.MCPServer{"a": testServer("serve", nil)}, Options{Dir: t.TempDir()})
	assert.Equal(t, []Status{{Server: "a", Status: StatusStopped, Tools: []string{}}}, m.Statuses())
	require.NoError(t, m.Wait(context.Background()))
	require.NoError(t, m.Close())
	m.Start() // after Close: nothing
	assert.Equal(t, []Status{{Server: "a", Status: StatusStopped, Tools: []string{}}}, m.Statuses())
	require.NoError(t, m.Close(), "Close is idempotent")
}

// TestErrorsHideURLSecrets: a URL's query (a token, often) never shows in
// a status or a call's error, which clients, the disk and the model see.
func TestErrorsHideURLSecrets(t *testing.T) {
	m, rec := start(t, map[string]config.MCPServer{
		"q": {Type: config.TransportHTTP, URL: "http://127.0.0.1:1/mcp?key=sk-secret-7"},
	}, Options{})
	st := rec.waitStatus(t, "q", StatusFailed)
	assert.Contains(t, st.Err, "http://127.0.0.1:1/mcp?...")
	assert.NotContains(t, st.Err, "sk-secret-7")
	for _, s := range m.Statuses() {
		assert.NotContains(t, s.Err, "sk-secret-7")
	}
	res := m.Call(context.Background(), "mcp__q__echo", nil)
	assert.True(t, res.IsError)
	assert.Contains(t, res.Content, "mcp?...")
	assert.NotContains(t, res.Content, "sk-secret-7")

	assert.Equal(t, "x", redactor("")("x"))
	assert.Equal(t, `Post "https://h/p": EOF`, redactor("https://u:pw@h/p")(`Post "https://u:xxxxx@h/p": EOF`))
}

func TestCallBeforeStart(t *testing.T) {
	m := New(map[string]config.MCPServer{"a": testServer("serve", nil)}, Options{Dir: t.TempDir()})
	defer m.Close()
	assert.Equal(t, Result{Content: "MCP server a is not available (not started); its tools cannot be called", IsError: true},
		m.Call(context.Background(), "mcp__a__echo", nil))
}
