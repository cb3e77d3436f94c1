package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/internal/mcp/mcptest"
	"github.com/tandem-dev/tandem/proto"
)

// stdioServer is this test binary run as the MCP test server (see TestMain)
// in mode, as a configuration file's JSON.
func stdioServer(mode string) string {
	b, _ := json.Marshal(map[string]any{"type": "stdio", "command": os.Args[0], "env": map[string]string{mcptest.EnvMode: mode}})
	return string(b)
}

// httpServer is the MCP test server over streamable HTTP for the test's
// life; die, when set, is what its die tool does, say hears what it says.
func httpServer(t *testing.T, die func(ts *httptest.Server), say ...func(string)) *httptest.Server {
	var ts *httptest.Server
	opts := mcptest.Options{Say: func(string) {}}
	if len(say) > 0 {
		opts.Say = say[0]
	}
	if die != nil {
		opts.Die = func() { die(ts) }
	}
	srv := mcptest.NewServer(opts)
	ts = httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil))
	t.Cleanup(func() {
		// Sessions a dead client left behind end with the server.
		for ss := range srv.Sessions() {
			_ = ss.Close()
		}
		ts.Close()
	})
	return ts
}

// toolResults returns the tool results a recorded OpenAI request carries,
// by tool call id.
func toolResults(req recorded) map[string]string {
	out := map[string]string{}
	msgs, _ := req.Body["messages"].([]any)
	for _, m := range msgs {
		if mm, _ := m.(map[string]any); mm["role"] == "tool" {
			out[fmt.Sprint(mm["tool_call_id"])] = fmt.Sprint(mm["content"])
		}
	}
	return out
}

// offeredTools returns the tool names a recorded OpenAI request offers.
func offeredTools(req recorded) []string {
	var out []string
	tools, _ := req.Body["tools"].([]any)
	for _, t := range tools {
		fn, _ := t.(map[string]any)["function"].(map[string]any)
		out = append(out, fmt.Sprint(fn["name"]))
	}
	return out
}

// statuses returns the mcp.server_status events among frames.
func statuses(t *testing.T, frames []frame) []proto.MCPServerStatus {
	t.Helper()
	var out []proto.MCPServerStatus
	for _, f := range frames {
		if f.Event == proto.EventMCPServerStatus {
			var st proto.MCPServerStatus
			require.NoError(t, json.Unmarshal(f.envelope(t).Data, &st))
			out = append(out, st)
		}
	}
	return out
}

// statusOf returns the last status of server among sts.
func statusOf(sts []proto.MCPServerStatus, server string) (proto.MCPServerStatus, bool) {
	for i := len(sts) - 1; i >= 0; i-- {
		if sts[i].Name == server {
			return sts[i], true
		}
	}
	return proto.MCPServerStatus{}, false
}

// collect reads the stream until the run's run.completed and returns it with
// every frame seen meanwhile (of any run, and workspace-level ones); each
// permission request on the way goes to ask, when given.
func (s *stream) collect(runID string, ask ...func(proto.PermissionRequest)) (proto.RunCompleted, []frame) {
	s.t.Helper()
	var seen []frame
	for {
		f := s.next()
		seen = append(seen, f)
		if f.Event == proto.EventPermissionRequested && len(ask) > 0 {
			var pr proto.PermissionRequest
			require.NoError(s.t, json.Unmarshal(f.envelope(s.t).Data, &pr))
			ask[0](pr)
		}
		if f.Event != proto.EventRunCompleted {
			continue
		}
		ev := f.envelope(s.t)
		if ev.RunID == runID {
			var rc proto.RunCompleted
			require.NoError(s.t, json.Unmarshal(ev.Data, &rc))
			return rc, seen
		}
	}
}

func (e *env) mcpList(wsID string) []proto.MCPServerStatus {
	e.t.Helper()
	var out proto.MCPServerList
	e.must(http.StatusOK, "GET", "/v1/workspaces/"+wsID+"/mcp", nil, &out)
	return out.Servers
}

// TestMCPToolsReachTheModel: the model calls an MCP tool of a stdio and of
// an http server (mcp__NAME__TOOL) and reads its result; a call asks a
// permission of kind mcp unless a rule decides it; the clients hear each
// server's state.
func TestMCPToolsReachTheModel(t *testing.T) {
	web := httpServer(t, nil)
	fake := newFakeModel(t, "openai", func(n int, req map[string]any) step {
		switch n {
		case 0:
			return step{toolCalls: []scriptedCall{
				{ID: "call_s", Name: "mcp__local__echo", Args: `{"text": "hello over stdio"}`},
				{ID: "call_h", Name: "mcp__web__echo", Args: `{"text": "hello over http"}`},
			}}
		}
		return step{text: []string{"both answered"}}
	})
	e := startEnv(t, withConfigFile(t, `{
		"mcp_servers": {"web": {"type": "http", "url": "`+web.URL+`", "tools": ["echo", "add_tool"]}},
		"permissions": [{"tool": "mcp__web__*", "decision": "allow"}]
	}`))
	writeWorkspaceConfig(t, e.workDir, `{"mcp_servers": {"local": `+stdioServer("serve")+`}}`)
	ws := e.createWorkspace()
	assert.Equal(t, []proto.MCPServerStatus{
		{Name: "local", Status: proto.MCPStopped, Tools: []string{}},
		{Name: "web", Status: proto.MCPStopped, Tools: []string{}},
	}, e.mcpList(ws.ID), "not started before a session uses them")

	s := e.openStream(ws.ID, newClientID(), "")
	sess := e.openAISession(ws.ID, fake, nil)
	acc := e.prompt(ws.ID, sess.ID, "use the MCP tools")

	// The stdio server's call asks; the http one's is allowed by a rule.
	var asked []proto.PermissionRequest
	rc, frames := s.collect(acc.RunID, func(pr proto.PermissionRequest) {
		asked = append(asked, pr)
		status, _, _ := e.answerPermission(ws.ID, pr.RequestID, s.ClientID, proto.DecisionApproveOnce, "")
		require.Equal(t, http.StatusOK, status)
	})
	require.Equal(t, proto.OutcomeEndTurn, rc.Outcome, "%+v", rc.Error)
	require.Len(t, asked, 1)
	assert.Equal(t, proto.PermissionMCP, asked[0].Kind)
	assert.Equal(t, "mcp__local__echo", asked[0].ToolName)
	assert.Equal(t, "call echo of MCP server local", asked[0].Summary)

	reqs := fake.Requests()
	require.Len(t, reqs, 2)
	offered := offeredTools(reqs[0])
	for _, name := range []string{"mcp__local__echo", "mcp__local__pid", "mcp__web__echo", "mcp__web__add_tool"} {
		assert.Contains(t, offered, name)
	}
	assert.NotContains(t, offered, "mcp__web__pid", "the server's tools list filters")
	got := toolResults(reqs[1])
	assert.Equal(t, "hello over stdio", got["call_s"], "the stdio tool's result reached the model")
	assert.Equal(t, "hello over http", got["call_h"], "the http tool's result reached the model")

	finished := map[string]proto.ToolFinished{}
	for _, f := range frames {
		if f.Event == proto.EventToolFinished {
			var tf proto.ToolFinished
			require.NoError(t, json.Unmarshal(f.envelope(t).Data, &tf))
			finished[tf.ToolCallID] = tf
		}
	}
	assert.Empty(t, finished["call_s"].Permission, "a person approved it")
	assert.Equal(t, proto.ResultApprovedByRule, finished["call_h"].Permission)

	sts := statuses(t, frames)
	local, ok := statusOf(sts, "local")
	require.True(t, ok, "mcp.server_status of local: %+v", sts)
	assert.Equal(t, proto.MCPConnected, local.Status)
	assert.Contains(t, local.Tools, "mcp__local__echo")
	assert.Empty(t, local.SessionID, "a workspace's server is workspace-level")
	assert.Equal(t, proto.MCPStarting, sts[0].Status, "starting comes first")
	web1, _ := statusOf(sts, "web")
	assert.Equal(t, []string{"mcp__web__add_tool", "mcp__web__echo"}, web1.Tools)

	list := e.mcpList(ws.ID)
	require.Len(t, list, 2)
	assert.Equal(t, proto.MCPConnected, list[0].Status)
	assert.Equal(t, proto.MCPConnected, list[1].Status)

	// The kept events are in the workspace log for a client that comes back.
	again := e.openStream(ws.ID, newClientID(), "", lastEventID(0))
	f, _ := again.until(proto.EventMCPServerStatus)
	assert.False(t, f.envelope(t).Ephemeral)
}

// TestMCPServerFailures: a server that dies mid-call, one that never
// answers its handshake, one that is not found: each gets its failed
// status, its tools leave, and the run goes on.
func TestMCPServerFailures(t *testing.T) {
	web := httpServer(t, func(ts *httptest.Server) {
		_ = ts.Listener.Close()
		ts.CloseClientConnections()
	})
	fake := newFakeModel(t, "openai", func(n int, req map[string]any) step {
		switch n {
		case 0:
			return step{toolCalls: []scriptedCall{
				{ID: "call_die", Name: "mcp__dies__die", Args: `{}`},
				{ID: "call_hdie", Name: "mcp__web__die", Args: `{}`},
			}}
		case 1:
			return step{toolCalls: []scriptedCall{{ID: "call_gone", Name: "mcp__dies__echo", Args: `{"text": "still there?"}`}}}
		}
		return step{text: []string{"carried on"}}
	})
	e := startEnv(t, func(c *serverConfig) { c.MCPHandshakeTimeout = 500 * time.Millisecond })
	writeWorkspaceConfig(t, e.workDir, `{"mcp_servers": {
		"dies": `+stdioServer("serve")+`,
		"mute": `+stdioServer("mute")+`,
		"missing": {"type": "stdio", "command": "tandem-no-such-mcp-server"},
		"web": {"type": "http", "url": "`+web.URL+`"}
	}}`)
	ws := e.createWorkspace()
	s := e.openStream(ws.ID, newClientID(), "")
	sess := e.openAISession(ws.ID, fake, map[string]any{"permission_mode": "allow_all"})
	acc := e.prompt(ws.ID, sess.ID, "try them")
	rc, frames := s.collect(acc.RunID)
	require.Equal(t, proto.OutcomeEndTurn, rc.Outcome, "the run goes on: %+v", rc.Error)

	sts := statuses(t, frames)
	failed := func(name string) proto.MCPServerStatus {
		t.Helper()
		st, ok := statusOf(sts, name)
		require.True(t, ok, "no status of %s in %+v", name, sts)
		assert.Equal(t, proto.MCPFailed, st.Status, "%s: %+v", name, st)
		assert.Empty(t, st.Tools, "%s: a failed server's tools leave", name)
		return st
	}
	assert.Equal(t, "no answer to the MCP handshake within 500ms", failed("mute").Error)
	assert.Equal(t, "command not found: tandem-no-such-mcp-server", failed("missing").Error)
	assert.Equal(t, "exited with status 3", failed("dies").Error)
	assert.NotEmpty(t, failed("web").Error)

	reqs := fake.Requests()
	require.Len(t, reqs, 3)
	offered := offeredTools(reqs[0])
	assert.Contains(t, offered, "mcp__dies__die")
	assert.Contains(t, offered, "mcp__web__die")
	for _, name := range offered {
		assert.False(t, strings.HasPrefix(name, "mcp__mute__") || strings.HasPrefix(name, "mcp__missing__"), "%s is offered", name)
	}
	got := toolResults(reqs[1])
	assert.Contains(t, got["call_die"], "MCP server dies failed during the call: exited with status 3", "the model hears how the call ended")
	assert.Contains(t, got["call_hdie"], "MCP server web failed during the call: ")
	for _, name := range offeredTools(reqs[1]) {
		assert.False(t, strings.HasPrefix(name, "mcp__dies__") || strings.HasPrefix(name, "mcp__web__"), "%s is still offered after its server died", name)
	}
	assert.Contains(t, toolResults(reqs[2])["call_gone"], "MCP server dies is not available (failed: exited with status 3)")

	list := e.mcpList(ws.ID)
	require.Len(t, list, 4)
	for _, st := range list {
		assert.Equal(t, proto.MCPFailed, st.Status, "%+v", st)
	}
}

// sayings hears what the MCP test servers say of their calls ("sleeping"):
// the http one directly, the stdio one through the server's log of its
// stderr.
type sayings chan string

func (c sayings) say(s string) {
	select {
	case c <- s:
	default:
	}
}

func (c sayings) Enabled(context.Context, slog.Level) bool { return true }
func (c sayings) WithAttrs([]slog.Attr) slog.Handler       { return c }
func (c sayings) WithGroup(string) slog.Handler            { return c }
func (c sayings) Handle(_ context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "line" {
			c.say(a.Value.String())
		}
		return true
	})
	return nil
}

// wait waits until a server says want.
func (c sayings) wait(t *testing.T, want string) {
	t.Helper()
	deadline := time.After(wait)
	for {
		select {
		case s := <-c:
			if s == want {
				return
			}
		case <-deadline:
			t.Fatalf("no MCP server said %q within %v", want, wait)
		}
	}
}

// TestMCPCancelStopsACall: a cancel ends a run waiting on an MCP call
// within 2 s, on both transports, and the server hears of it.
func TestMCPCancelStopsACall(t *testing.T) {
	said := make(sayings, 100)
	web := httpServer(t, nil, said.say)
	for _, server := range []string{"local", "web"} {
		t.Run(server, func(t *testing.T) {
			fake := newFakeModel(t, "openai", func(n int, req map[string]any) step {
				return step{toolCalls: []scriptedCall{{ID: "call_1", Name: "mcp__" + server + "__sleep", Args: `{"ms": 600000}`}}}
			})
			e := startEnv(t, func(c *serverConfig) { c.Logger = slog.New(said) })
			writeWorkspaceConfig(t, e.workDir, `{"mcp_servers": {"local": `+stdioServer("serve")+`, "web": {"type": "http", "url": "`+web.URL+`"}}}`)
			ws := e.createWorkspace()
			s := e.openStream(ws.ID, newClientID(), "")
			sess := e.openAISession(ws.ID, fake, map[string]any{"permission_mode": "allow_all"})
			acc := e.prompt(ws.ID, sess.ID, "sleep")
			said.wait(t, "sleeping") // the call is in the server
			canceled := time.Now()
			assert.Equal(t, []string{acc.RunID}, e.cancel(ws.ID, sess.ID))
			rc, frames := s.completion(acc.RunID)
			assert.Less(t, time.Since(canceled), 2*time.Second, "invariant 6: an MCP call stops within 2 s of a cancel")
			assert.Equal(t, proto.OutcomeCanceled, rc.Outcome)
			for _, f := range frames {
				if f.Event == proto.EventToolFinished {
					var tf proto.ToolFinished
					require.NoError(t, json.Unmarshal(f.envelope(t).Data, &tf))
					assert.Equal(t, "the call was canceled", tf.Content)
				}
			}
			said.wait(t, "sleep canceled")
		})
	}
}

// alive reports whether pid is a live process: neither gone nor a zombie
// (a killed grandchild may stay one under an init that does not reap).
func alive(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || (s[i+2] != 'Z' && s[i+2] != 'X')
}

// TestWorkspaceCloseStopsMCPProcesses: closing a workspace stops every
// stdio MCP server it runs, its own and its sessions', with what they
// started, as /proc shows.
func TestWorkspaceCloseStopsMCPProcesses(t *testing.T) {
	fake := newFakeModel(t, "openai", func(n int, req map[string]any) step {
		if n == 0 {
			return step{toolCalls: []scriptedCall{
				{ID: "call_pid", Name: "mcp__ws__pid", Args: `{}`},
				{ID: "call_spawn", Name: "mcp__ws__spawn", Args: `{}`},
				{ID: "call_own", Name: "mcp__own__pid", Args: `{}`},
			}}
		}
		return step{text: []string{"noted"}}
	})
	e := startEnv(t)
	writeWorkspaceConfig(t, e.workDir, `{"mcp_servers": {"ws": `+stdioServer("serve")+`}}`)
	ws := e.createWorkspace()
	s := e.openStream(ws.ID, newClientID(), "")
	sess := e.openAISession(ws.ID, fake, map[string]any{
		"permission_mode": "allow_all",
		"mcp_servers":     json.RawMessage(`{"own": ` + stdioServer("serve") + `}`),
	})
	acc := e.prompt(ws.ID, sess.ID, "pids")
	rc, _ := s.completion(acc.RunID)
	require.Equal(t, proto.OutcomeEndTurn, rc.Outcome, "%+v", rc.Error)
	got := toolResults(fake.Requests()[1])
	var pids []int
	for _, id := range []string{"call_pid", "call_spawn", "call_own"} {
		pid, err := strconv.Atoi(got[id])
		require.NoError(t, err, "%s: %q", id, got[id])
		require.True(t, alive(pid), "%s: pid %d runs", id, pid)
		pids = append(pids, pid)
	}

	closed := time.Now()
	e.must(http.StatusNoContent, "DELETE", "/v1/workspaces/"+ws.ID, nil, nil)
	assert.Less(t, time.Since(closed), 5*time.Second)
	frames := s.ended()
	for _, pid := range pids {
		// SIGKILL lands when the process is next scheduled.
		eventually(t, func() bool { return !alive(pid) }, fmt.Sprintf("pid %d is gone", pid))
	}
	sts := statuses(t, frames)
	for _, name := range []string{"ws", "own"} {
		st, ok := statusOf(sts, name)
		require.True(t, ok, "%s: %+v", name, sts)
		assert.Equal(t, proto.MCPStopped, st.Status)
	}
}

// TestSessionMCPServers: a session's own servers run for it alone, their
// statuses carry its id, their settings never reach the disk, and after a
// restart a resume gives them again.
func TestSessionMCPServers(t *testing.T) {
	fake := newFakeModel(t, "openai", func(n int, req map[string]any) step {
		msgs, _ := req["messages"].([]any)
		last, _ := msgs[len(msgs)-1].(map[string]any)
		if last["role"] == "user" && strings.Contains(lastUserText(req), "token") {
			return step{toolCalls: []scriptedCall{{ID: fmt.Sprintf("call_%d", n), Name: "mcp__own__env", Args: `{"name": "MARK"}`}}}
		}
		return step{text: []string{"ok"}}
	})
	e := startEnv(t)
	ws := e.createWorkspace()
	s := e.openStream(ws.ID, newClientID(), "")
	servers := json.RawMessage(`{"own": {"type": "stdio", "command": "` + os.Args[0] + `", "args": ["--flag-sk-arg-77"],
		"env": {"` + mcptest.EnvMode + `": "serve", "SECRET_TOKEN": "tok-9f8e7d", "MARK": "env-given"}}}`)

	bad := e.scRefused("POST", "/v1/workspaces/"+ws.ID+"/sessions", map[string]any{
		"mcp_servers": map[string]any{"own": map[string]any{"type": "stdio", "comand": "x"}},
	}, http.StatusBadRequest, proto.CodeInvalidArgument)
	assert.Contains(t, bad.Message, "mcp_servers.own.comand: unknown key (did you mean command?)")

	sess := e.openAISession(ws.ID, fake, map[string]any{"permission_mode": "allow_all", "mcp_servers": servers})
	acc := e.prompt(ws.ID, sess.ID, "what is the token?")
	rc, frames := s.collect(acc.RunID)
	require.Equal(t, proto.OutcomeEndTurn, rc.Outcome, "%+v", rc.Error)
	reqs := fake.Requests()
	assert.Equal(t, "env-given", toolResults(reqs[len(reqs)-1])["call_0"], "the server runs with its env")
	st, ok := statusOf(statuses(t, frames), "own")
	require.True(t, ok)
	assert.Equal(t, sess.ID, st.SessionID, "a session's server says whose it is")
	other := e.createSession(ws.ID, nil)
	assert.Equal(t, []proto.MCPServerStatus{{Name: "own", SessionID: sess.ID, Status: proto.MCPConnected, Tools: st.Tools}}, e.mcpList(ws.ID))
	_ = other

	e.restart()
	for _, name := range []string{"tandem.db", "tandem.db-wal"} {
		data, err := os.ReadFile(filepath.Join(e.cfg.DataDir, name))
		if err != nil {
			continue
		}
		assert.False(t, strings.Contains(string(data), "tok-9f8e7d"), "%s: env values never reach the disk", name)
		assert.False(t, strings.Contains(string(data), "--flag-sk-arg-77"), "%s: nor args", name)
	}
	s = e.openStream(ws.ID, newClientID(), "")
	acc = e.prompt(ws.ID, sess.ID, "the token again?")
	rc, frames = s.collect(acc.RunID)
	require.Equal(t, proto.OutcomeEndTurn, rc.Outcome, "the run goes on without them")
	st, ok = statusOf(statuses(t, frames), "own")
	require.True(t, ok)
	assert.Equal(t, proto.MCPFailed, st.Status)
	assert.Contains(t, st.Error, "resume the session with mcp_servers")
	assert.Equal(t, proto.MCPFailed, e.mcpList(ws.ID)[0].Status)

	e.resume(ws.ID, sess.ID, proto.ResumeRequest{ClientID: s.ClientID, MCPServers: servers})
	acc = e.prompt(ws.ID, sess.ID, "and the token now?")
	rc, _ = s.collect(acc.RunID)
	require.Equal(t, proto.OutcomeEndTurn, rc.Outcome, "%+v", rc.Error)
	reqs = fake.Requests()
	results := toolResults(reqs[len(reqs)-1])
	assert.True(t, slices.Contains(mapValues(results), "env-given"), "given again, the server runs: %v", results)
}

func mapValues(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// TestRevivedRunCallsItsMCPTool: a run parked on an MCP call's permission
// goes on after a restart: answered, the call runs on a server started for
// it (a revived run calls before it offers anything).
func TestRevivedRunCallsItsMCPTool(t *testing.T) {
	e := startEnv(t)
	writeWorkspaceConfig(t, e.workDir, `{"mcp_servers": {"t": `+stdioServer("serve")+`}}`)
	ws := e.createWorkspace()
	s := e.openStream(ws.ID, newClientID(), "")
	sess := e.createSession(ws.ID, nil)
	acc := e.prompt(ws.ID, sess.ID, `/tool mcp__t__echo {"text": "after the restart"}`)
	pr := s.permissionRequested()
	require.Equal(t, proto.PermissionMCP, pr.Kind)

	e.restart()
	s = e.openStream(ws.ID, newClientID(), "")
	status, _, bad := e.answerPermission(ws.ID, pr.RequestID, s.ClientID, proto.DecisionApproveOnce, "")
	require.Equal(t, http.StatusOK, status, "%+v", bad)
	rc, frames := s.completion(acc.RunID)
	require.Equal(t, proto.OutcomeEndTurn, rc.Outcome, "%+v", rc.Error)
	var tf proto.ToolFinished
	for _, f := range frames {
		if f.Event == proto.EventToolFinished {
			require.NoError(t, json.Unmarshal(f.envelope(t).Data, &tf))
		}
	}
	assert.False(t, tf.IsError, tf.Content)
	assert.Equal(t, "after the restart", tf.Content)
}
