package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/client"
	"github.com/tandem-dev/tandem/internal/copilot/sdkschema"
	"github.com/tandem-dev/tandem/proto"
)

// sdkConn is a client of the Copilot SDK protocol, as an SDK app is one:
// Content-Length framed JSON-RPC over TCP.
type sdkConn struct {
	t      *testing.T
	nc     net.Conn
	mu     sync.Mutex
	nextID int
	calls  map[int]chan map[string]any
	events chan map[string]any // the "event" of each session.event
	// sent names the method of each request by id; got is every message
	// received, raw, for the schema check.
	sent map[int]string
	got  [][]byte
}

func dialSDK(t *testing.T, addr string) *sdkConn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	require.NoError(t, err)
	c := &sdkConn{t: t, nc: nc, calls: map[int]chan map[string]any{}, events: make(chan map[string]any, 1024), sent: map[int]string{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.readLoop()
	}()
	t.Cleanup(func() {
		nc.Close()
		<-done
	})
	return c
}

func (c *sdkConn) readLoop() {
	r := bufio.NewReader(c.nc)
	for {
		n := -1
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
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
			return
		}
		c.mu.Lock()
		c.got = append(c.got, body)
		c.mu.Unlock()
		var m map[string]any
		if json.Unmarshal(body, &m) != nil {
			continue
		}
		if m["method"] == "session.event" {
			params, _ := m["params"].(map[string]any)
			ev, _ := params["event"].(map[string]any)
			c.events <- ev
			continue
		}
		id, ok := m["id"].(float64)
		if !ok {
			continue
		}
		c.mu.Lock()
		ch := c.calls[int(id)]
		delete(c.calls, int(id))
		c.mu.Unlock()
		if ch != nil {
			ch <- m
		}
	}
}

// call sends a request and returns its result; an error answer fails the test.
func (c *sdkConn) call(method string, params any) map[string]any {
	c.t.Helper()
	m := c.request(method, params)
	require.Nil(c.t, m["error"], "%s answered an error", method)
	res, _ := m["result"].(map[string]any)
	return res
}

// callErr sends a request that must fail and returns its error's message.
func (c *sdkConn) callErr(method string, params any) string {
	c.t.Helper()
	m := c.request(method, params)
	e, ok := m["error"].(map[string]any)
	require.True(c.t, ok, "%s answered %v, want an error", method, m["result"])
	return fmt.Sprint(e["message"])
}

// request sends a request and returns the whole answer.
func (c *sdkConn) request(method string, params any) map[string]any {
	c.t.Helper()
	c.mu.Lock()
	c.nextID++
	id := c.nextID
	ch := make(chan map[string]any, 1)
	c.calls[id] = ch
	c.sent[id] = method
	c.mu.Unlock()
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	require.NoError(c.t, err)
	_, err = fmt.Fprintf(c.nc, "Content-Length: %d\r\n\r\n%s", len(body), body)
	require.NoError(c.t, err)
	select {
	case m := <-ch:
		return m
	case <-time.After(30 * time.Second):
		c.t.Fatalf("no answer to %s", method)
		return nil
	}
}

// waitEvent returns the next session event of type typ that match accepts.
func (c *sdkConn) waitEvent(typ string, match func(data map[string]any) bool) map[string]any {
	c.t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case ev := <-c.events:
			data, _ := ev["data"].(map[string]any)
			if ev["type"] == typ && (match == nil || match(data)) {
				return data
			}
		case <-deadline:
			c.t.Fatalf("no %s event", typ)
			return nil
		}
	}
}

// waitHTTPEvent returns the next event of type typ on an HTTP client's stream.
func waitHTTPEvent(t *testing.T, st *client.EventStream, typ string) proto.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		ev, err := st.Next(ctx)
		require.NoError(t, err, "waiting for %s", typ)
		if ev.Type == typ {
			return ev
		}
	}
}

// checkSchema checks every message c received against the Copilot SDK's
// own types, as the strictest SDKs read them.
func (c *sdkConn) checkSchema() {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, body := range c.got {
		var m struct {
			ID     *int            `json:"id"`
			Method string          `json:"method"`
			Result json.RawMessage `json:"result"`
			Params struct {
				Event json.RawMessage `json:"event"`
			} `json:"params"`
		}
		require.NoError(c.t, json.Unmarshal(body, &m), "%s", body)
		switch {
		case m.Method == "session.event":
			require.NoError(c.t, sdkschema.Event(m.Params.Event), "a session.event the SDK refuses")
		case m.ID != nil && m.Result != nil:
			require.NoError(c.t, sdkschema.Result(c.sent[*m.ID], m.Result), "the answer to %s", c.sent[*m.ID])
		}
	}
}

// Everything the bridge sends in a session's life (answers, events) passes
// the Copilot SDK's own types as strictly as Python's and .NET's SDKs read
// them: an abort's reason, session.log's eventId, required fields.
func TestCopilotTrafficPassesTheSDKSchema(t *testing.T) {
	t.Parallel()
	const token = "copilot-schema-token"
	wsDir, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	_, copilotAddr := startCopilotServe(t, token)
	sdk := dialSDK(t, copilotAddr)
	sdk.call("connect", map[string]any{"token": token})
	sdk.call("ping", map[string]any{"message": "hi"})
	sessionID := uuid.NewString()
	sdk.call("session.create", map[string]any{"sessionId": sessionID, "workingDirectory": wsDir, "requestPermission": true})
	sdk.waitEvent("session.start", nil)

	sdk.call("session.send", map[string]any{"sessionId": sessionID, "prompt": "hello"})
	sdk.waitEvent("session.idle", nil)

	sdk.call("session.send", map[string]any{"sessionId": sessionID, "prompt": `/tool bash {"command":"echo done"}`})
	perm := sdk.waitEvent("permission.requested", nil)
	sdk.call("session.permissions.handlePendingPermissionRequest", map[string]any{
		"sessionId": sessionID, "requestId": perm["requestId"], "result": map[string]any{"kind": "approve-once"},
	})
	sdk.waitEvent("tool.execution_complete", nil)
	sdk.waitEvent("session.idle", nil)

	sdk.call("session.send", map[string]any{"sessionId": sessionID, "prompt": "/slow 100 100"})
	sdk.waitEvent("assistant.turn_start", nil)
	sdk.call("session.abort", map[string]any{"sessionId": sessionID})
	abort := sdk.waitEvent("abort", nil)
	require.Equal(t, "user_initiated", abort["reason"])
	sdk.waitEvent("session.idle", nil)

	for _, level := range []string{"info", "warning", "error"} {
		res := sdk.call("session.log", map[string]any{"sessionId": sessionID, "message": "a " + level, "level": level})
		_, err := uuid.Parse(fmt.Sprint(res["eventId"]))
		require.NoError(t, err, "session.log's eventId is a UUID")
	}
	sdk.call("session.model.switchTo", map[string]any{"sessionId": sessionID, "modelId": "echo"})
	sdk.call("session.getMessages", map[string]any{"sessionId": sessionID})
	sdk.call("session.list", map[string]any{})
	sdk.call("session.getLastId", map[string]any{})
	sdk.checkSchema()
}

// startCopilotServe runs tandem serve with the Copilot port, on token, and
// returns the HTTP API's URL and the Copilot port's address.
func startCopilotServe(t *testing.T, token string, args ...string) (httpURL, copilotAddr string) {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"serve", "--addr", "127.0.0.1:0", "--copilot-addr", "127.0.0.1:0",
		"--data-dir", t.TempDir(), "--token", token, "--model", "echo"}, args...)...)
	cmd.Env = append(os.Environ(), "COPILOT_API_URL=")
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	for httpURL == "" || copilotAddr == "" {
		select {
		case line, ok := <-lines:
			require.True(t, ok, "server exited: %s", stderr)
			if v, ok := strings.CutPrefix(line, "tandem listening on "); ok {
				httpURL = v
			}
			if v, ok := strings.CutPrefix(line, "tandem serving the Copilot SDK protocol on "); ok {
				copilotAddr = v
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("no listening lines; stderr: %s", stderr)
		}
	}
	return httpURL, copilotAddr
}

// Contract section 10: on the Copilot port a connection is the Tandem
// token it connected with (its person, role and audit), and nothing is
// answered before it connects.
func TestCopilotPortConnectionIsItsTandemToken(t *testing.T) {
	t.Parallel()
	const owner = "copilot-owner-token"
	wsDir, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	httpURL, copilotAddr := startCopilotServe(t, owner)
	ctx := context.Background()
	oc := client.New(httpURL, owner)
	_, _, err = oc.CreateWorkspace(ctx, wsDir)
	require.NoError(t, err)
	alice, err := oc.CreateToken(ctx, proto.CreateTokenRequest{Name: "alice", Role: "member"})
	require.NoError(t, err)
	vera, err := oc.CreateToken(ctx, proto.CreateTokenRequest{Name: "vera", Role: "viewer"})
	require.NoError(t, err)

	stranger := dialSDK(t, copilotAddr)
	for _, m := range []string{"session.list", "session.create", "ping"} {
		require.Contains(t, stranger.callErr(m, map[string]any{"workingDirectory": wsDir}), "connect first")
	}
	stranger.callErr("connect", map[string]any{"token": "not-a-token"})
	require.Contains(t, stranger.callErr("session.list", map[string]any{}), "connect first")

	viewer := dialSDK(t, copilotAddr)
	viewer.call("connect", map[string]any{"token": vera.Secret})
	viewer.call("session.list", map[string]any{})
	require.Contains(t, viewer.callErr("session.create", map[string]any{"sessionId": uuid.NewString(), "workingDirectory": wsDir}), "viewer",
		"a viewer's connection may not create a session")

	member := dialSDK(t, copilotAddr)
	member.call("connect", map[string]any{"token": alice.Secret})
	sessionID := uuid.NewString()
	member.call("session.create", map[string]any{"sessionId": sessionID, "workingDirectory": wsDir})
	entries, err := oc.Audit(ctx, 0, 1000)
	require.NoError(t, err)
	by := map[string]string{}
	for _, e := range entries {
		if e.Action == "session.create" && e.SessionID == sessionID {
			by[e.Action] = e.Name
		}
	}
	require.Equal(t, map[string]string{"session.create": "alice"}, by, "the session was created as alice, not as the owner")
}

// startCopilotTCP runs tandem copilot on a free TCP port, with the flags
// and VAR=value pairs of args, and returns its address.
func startCopilotTCP(t *testing.T, args ...string) string {
	t.Helper()
	flags := []string{"copilot", "--port", "0"}
	env := append(os.Environ(), "COPILOT_API_URL=", "COPILOT_CONNECTION_TOKEN=", "TANDEM_TOKEN=", "TANDEM_URL=", "TANDEM_DATA_DIR=", "COPILOT_HOME=")
	for _, a := range args {
		if strings.HasPrefix(a, "--") || !strings.Contains(a, "=") {
			flags = append(flags, a)
		} else {
			env = append(env, a)
		}
	}
	cmd := exec.Command(binary, flags...)
	cmd.Env = env
	cmd.Dir = t.TempDir()
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	sc := bufio.NewScanner(stdout)
	require.True(t, sc.Scan(), "no listening line: %s", stderr)
	port, ok := strings.CutPrefix(sc.Text(), "CLI server listening on port ")
	require.True(t, ok, sc.Text())
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	return net.JoinHostPort("127.0.0.1", port)
}

// A test harness empties COPILOT_HOME while one tandem copilot runs; a
// second one started afterwards finds the first's server (its server.json
// and token are back within a second), not a fresh one, and resumes a
// session created after the emptying.
func TestCopilotHomeEmptiedUnderARunningServer(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	first := dialSDK(t, startCopilotTCP(t, "COPILOT_HOME="+home, "COPILOT_CONNECTION_TOKEN=first"))
	first.call("connect", map[string]any{"token": "first"})
	before := uuid.NewString()
	first.call("session.create", map[string]any{"sessionId": before})

	entries, err := os.ReadDir(home)
	require.NoError(t, err)
	for _, e := range entries {
		require.NoError(t, os.RemoveAll(filepath.Join(home, e.Name())))
	}
	deadline := time.Now().Add(2 * time.Second)
	for {
		_, err := os.Stat(filepath.Join(home, "tandem", "server.json"))
		if err == nil {
			break
		}
		require.True(t, time.Now().Before(deadline), "server.json never came back: %v", err)
		time.Sleep(20 * time.Millisecond)
	}

	after := uuid.NewString()
	first.call("session.create", map[string]any{"sessionId": after})
	second := dialSDK(t, startCopilotTCP(t, "COPILOT_HOME="+home, "COPILOT_CONNECTION_TOKEN=second"))
	second.call("connect", map[string]any{"token": "second"})
	res := second.call("session.resume", map[string]any{"sessionId": after})
	require.Equal(t, after, res["sessionId"])
	second.waitEvent("session.resume", nil)
	list := second.call("session.list", map[string]any{})
	raw, _ := json.Marshal(list)
	require.Contains(t, string(raw), before, "one server, with what it held before the emptying")
}

// tandem copilot --port without a connection token answers nothing before
// connect; with COPILOT_CONNECTION_TOKEN (as the SDKs start it) that token
// or a Tandem token connects. Off loopback, the Copilot port needs --token.
func TestCopilotCommandOnTCPNeedsConnect(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	start := func(env ...string) string {
		return startCopilotTCP(t, append([]string{"--data-dir", dataDir}, env...)...)
	}
	addr := start()
	c := dialSDK(t, addr)
	require.Contains(t, c.callErr("session.list", map[string]any{}), "connect first")
	require.Contains(t, c.callErr("session.create", map[string]any{"sessionId": uuid.NewString()}), "connect first")
	c.callErr("connect", map[string]any{})
	ownerToken, err := os.ReadFile(filepath.Join(dataDir, "token"))
	require.NoError(t, err)
	c.call("connect", map[string]any{"token": strings.TrimSpace(string(ownerToken))})
	c.call("session.list", map[string]any{})

	launch := uuid.NewString()
	addr = start("COPILOT_CONNECTION_TOKEN=" + launch)
	c = dialSDK(t, addr)
	c.callErr("connect", map[string]any{"token": uuid.NewString()})
	c.call("connect", map[string]any{"token": launch})
	c.call("session.list", map[string]any{})

	out, errOut, code := runCLI(t, t.TempDir(), cliEnvironment(t, "TANDEM_TOKEN=", "TANDEM_DATA_DIR="+t.TempDir()),
		"serve", "--addr", "127.0.0.1:0", "--copilot-addr", "0.0.0.0:0")
	require.Equal(t, 2, code, "stdout %q", out)
	require.Contains(t, errOut, "--token")
}

// An SDK app and an HTTP client share one session: each sees the other's
// prompt and answer live, a permission is asked of both, and the first
// answer (the HTTP client's) wins.
func TestCopilotSDKAndHTTPShareASession(t *testing.T) {
	const token = "copilot-e2e-token"
	wsDir, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	httpURL, copilotAddr := startCopilotServe(t, token)

	sdk := dialSDK(t, copilotAddr)
	res := sdk.call("connect", map[string]any{"token": token})
	require.Equal(t, true, res["ok"])
	require.EqualValues(t, 3, res["protocolVersion"])
	sessionID := uuid.NewString()
	res = sdk.call("session.create", map[string]any{"sessionId": sessionID, "workingDirectory": wsDir, "requestPermission": true})
	require.Equal(t, sessionID, res["sessionId"])
	sdk.waitEvent("session.start", nil)

	ctx := context.Background()
	hc := client.New(httpURL, token)
	ws, _, err := hc.CreateWorkspace(ctx, wsDir)
	require.NoError(t, err)
	st, err := hc.Events(ctx, ws.ID, client.EventsOptions{SessionID: sessionID})
	require.NoError(t, err)
	defer st.Close()

	// A prompt from the HTTP client: the SDK app sees it and its answer.
	_, err = hc.Prompt(ctx, ws.ID, proto.PromptRequest{SessionID: sessionID, Prompt: "hello from http"})
	require.NoError(t, err)
	sdk.waitEvent("user.message", func(d map[string]any) bool { return d["content"] == "hello from http" })
	sdk.waitEvent("assistant.message", func(d map[string]any) bool { return d["content"] == "echo: hello from http" })
	sdk.waitEvent("session.idle", nil)

	// A prompt from the SDK app asks a permission of both clients.
	sdk.call("session.send", map[string]any{"sessionId": sessionID, "prompt": `/tool write {"path":"a.txt","content":"hi"}`})
	asked := waitHTTPEvent(t, st, proto.EventPermissionRequested)
	var pr proto.PermissionRequest
	require.NoError(t, json.Unmarshal(asked.Data, &pr))
	perm := sdk.waitEvent("permission.requested", func(d map[string]any) bool { return d["requestId"] == pr.RequestID })
	req, _ := perm["permissionRequest"].(map[string]any)
	require.Equal(t, "write", req["kind"])

	// The HTTP client answers first; the SDK app's later answer loses.
	ans, err := hc.AnswerPermission(ctx, ws.ID, pr.RequestID, proto.PermissionAnswer{Decision: proto.DecisionApproveOnce})
	require.NoError(t, err)
	require.True(t, ans.Resolved)
	res = sdk.call("session.permissions.handlePendingPermissionRequest", map[string]any{
		"sessionId": sessionID, "requestId": pr.RequestID, "result": map[string]any{"kind": "reject"},
	})
	require.Equal(t, false, res["success"])
	done := sdk.waitEvent("permission.completed", func(d map[string]any) bool { return d["requestId"] == pr.RequestID })
	require.Equal(t, map[string]any{"kind": "approved"}, done["result"])
	waitHTTPEvent(t, st, proto.EventPermissionResolved)
	sdk.waitEvent("tool.execution_complete", func(d map[string]any) bool { return d["success"] == true })
	sdk.waitEvent("session.idle", nil)
	got, err := os.ReadFile(filepath.Join(wsDir, "a.txt"))
	require.NoError(t, err)
	require.Equal(t, "hi", string(got))

	// Both see the whole conversation in the session's messages.
	res = sdk.call("session.getMessages", map[string]any{"sessionId": sessionID})
	evs, _ := res["events"].([]any)
	var users []string
	for _, e := range evs {
		m, _ := e.(map[string]any)
		if m["type"] == "user.message" {
			d, _ := m["data"].(map[string]any)
			users = append(users, fmt.Sprint(d["content"]))
		}
	}
	require.Equal(t, []string{"hello from http", `/tool write {"path":"a.txt","content":"hi"}`}, users)
}

// The SDK's command line is taken whole; flags it may add later are
// ignored, not refused, and COPILOT_HOME places the data dir.
func TestParseCopilotArgs(t *testing.T) {
	env := map[string]string{"COPILOT_HOME": "/tmp/home"}
	cenv := &cliEnv{getenv: func(k string) string { return env[k] }}
	o, err := parseCopilotArgs([]string{"--headless", "--no-auto-update", "--log-level", "error", "--port", "4321",
		"--auth-token-env", "TOK", "--no-auto-login", "--session-idle-timeout", "30", "--remote", "--some-new-flag"}, cenv)
	require.NoError(t, err)
	require.Equal(t, 4321, o.port)
	require.False(t, o.stdio)
	require.Equal(t, "error", o.logLevel)
	require.Equal(t, "TOK", o.authTokenEnv)
	require.Equal(t, filepath.Join("/tmp/home", "tandem"), o.dataDir)

	o, err = parseCopilotArgs([]string{"--stdio", "--data-dir=/d"}, cenv)
	require.NoError(t, err)
	require.True(t, o.stdio)
	require.Equal(t, "/d", o.dataDir)

	_, err = parseCopilotArgs([]string{"--port", "x"}, cenv)
	require.Error(t, err)
	_, err = parseCopilotArgs([]string{"--log-level"}, cenv)
	require.Error(t, err)
}
