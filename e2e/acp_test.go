package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/client"
	"github.com/tandem-dev/tandem/proto"
)

// acpSession is what session/new and session/load answer.
type acpSession struct {
	SessionID string `json:"sessionId"`
	Modes     struct {
		CurrentModeID  string `json:"currentModeId"`
		AvailableModes []struct {
			ID   string `json:"id"`
			Name string `json:"name"`
		} `json:"availableModes"`
	} `json:"modes"`
}

func (s acpSession) modeIDs() []string {
	var ids []string
	for _, m := range s.Modes.AvailableModes {
		ids = append(ids, m.ID)
	}
	return ids
}

// acpFixture is a tandem serve process, an editor on it (the owner's
// token), and an HTTP client of the same server: the other person.
type acpFixture struct {
	srv *servedTandem
	ed  *editor
	c   *client.Client
	dir string
	ctx context.Context
}

func newACPFixture(t *testing.T) *acpFixture {
	t.Helper()
	srv := serveTandem(t)
	f := &acpFixture{srv: srv, c: client.New(srv.url, srv.token), dir: t.TempDir(), ctx: context.Background()}
	t.Cleanup(f.c.CloseIdleConnections)
	f.ed = startEditor(t, nil, "--url", srv.url, "--token", srv.token)
	f.ed.request("initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{}})
	return f
}

// newSession makes a session in the fixture's directory from the editor.
func (f *acpFixture) newSession(t *testing.T, ed *editor) acpSession {
	t.Helper()
	var s acpSession
	require.NoError(t, json.Unmarshal(ed.request("session/new", map[string]any{"cwd": f.dir, "mcpServers": []any{}}), &s))
	require.NotEmpty(t, s.SessionID)
	return s
}

// workspace is the fixture directory's workspace, over HTTP.
func (f *acpFixture) workspace(t *testing.T) proto.Workspace {
	t.Helper()
	ws, _, err := f.c.CreateWorkspace(f.ctx, f.dir)
	require.NoError(t, err)
	return ws
}

func (f *acpFixture) prompt(t *testing.T, ed *editor, sessionID, text string) report {
	t.Helper()
	return ed.send(map[string]any{"op": "request", "method": "session/prompt", "params": map[string]any{
		"sessionId": sessionID, "prompt": []any{map[string]any{"type": "text", "text": text}}}})
}

func stopReason(t *testing.T, rep report) string {
	t.Helper()
	require.Nil(t, rep.Error, "session/prompt answered an error")
	var r struct {
		StopReason string `json:"stopReason"`
	}
	require.NoError(t, json.Unmarshal(rep.Result, &r))
	return r.StopReason
}

// initialize answers the capabilities of section 13, whatever version the
// client asks for.
func TestACPInitialize(t *testing.T) {
	srv := serveTandem(t)
	ed := startEditor(t, nil, "--url", srv.url, "--token", srv.token)
	res := ed.request("initialize", map[string]any{"protocolVersion": 7})
	var got map[string]any
	require.NoError(t, json.Unmarshal(res, &got))
	assert.EqualValues(t, 1, got["protocolVersion"])
	assert.Equal(t, map[string]any{
		"loadSession":         true,
		"promptCapabilities":  map[string]any{"image": true, "embeddedContext": true},
		"mcpCapabilities":     map[string]any{"http": true},
		"sessionCapabilities": map[string]any{"list": map[string]any{}},
	}, got["agentCapabilities"])
	info, _ := got["agentInfo"].(map[string]any)
	assert.Equal(t, "tandem", info["name"])
	assert.NotEmpty(t, info["version"])
	assert.Equal(t, []any{}, got["authMethods"])
}

// A prompt streams the answer as agent_message_chunk and ends end_turn; the
// session is an ordinary one that HTTP clients see, with the prompt as the
// token's person's.
func TestACPPromptStreamsAndEndsTurn(t *testing.T) {
	f := newACPFixture(t)
	s := f.newSession(t, f.ed)
	from := f.ed.mark()
	assert.Equal(t, "end_turn", stopReason(t, f.prompt(t, f.ed, s.SessionID, "hello from the editor")))
	ups := f.ed.updates(from, s.SessionID)
	assert.Equal(t, "echo: hello from the editor", text(ups, "agent_message_chunk"))
	assert.Empty(t, text(ups, "user_message_chunk"), "the editor's own prompt is not echoed back to it")

	msgs, err := f.c.Messages(f.ctx, f.workspace(t).ID, s.SessionID)
	require.NoError(t, err)
	require.Len(t, msgs, 2)
	assert.Equal(t, "hello from the editor", msgs[0].Parts[0].Text)
	require.NotNil(t, msgs[0].Author)
	assert.Equal(t, proto.OwnerTokenName, msgs[0].Author.Name)
}

// A write and an edit show as tool calls of kind edit, with their
// locations, raw input and diff; the permission is asked in the editor,
// which approves it.
func TestACPToolCallWithDiffApprovedInEditor(t *testing.T) {
	f := newACPFixture(t)
	s := f.newSession(t, f.ed)
	path := filepath.Join(f.dir, "notes.txt")

	approve := func(from int) report {
		perm, _ := f.ed.waitFor(from, "permission request", func(r report) bool { return r.Ev == "permission" })
		f.ed.send(map[string]any{"op": "answer", "rid": perm.RID, "response": map[string]any{
			"outcome": map[string]any{"outcome": "selected", "optionId": "approve_once"}}})
		return perm
	}

	// A new file: its diff has no oldText.
	from := f.ed.mark()
	done := f.ed.requestAsync("session/prompt", map[string]any{"sessionId": s.SessionID, "prompt": []any{
		map[string]any{"type": "text", "text": `/tool write {"path": "notes.txt", "content": "one\ntwo\n"}`}}})
	perm := approve(from)
	var pp struct {
		SessionID string `json:"sessionId"`
		ToolCall  struct {
			ToolCallID string `json:"toolCallId"`
			Kind       string `json:"kind"`
			Status     string `json:"status"`
			Content    []struct {
				Type    string  `json:"type"`
				Path    string  `json:"path"`
				OldText *string `json:"oldText"`
				NewText string  `json:"newText"`
			} `json:"content"`
		} `json:"toolCall"`
		Options []struct {
			OptionID string `json:"optionId"`
			Kind     string `json:"kind"`
		} `json:"options"`
	}
	require.NoError(t, json.Unmarshal(perm.Params, &pp))
	assert.Equal(t, s.SessionID, pp.SessionID)
	assert.Equal(t, "edit", pp.ToolCall.Kind)
	require.Len(t, pp.ToolCall.Content, 1)
	assert.Equal(t, "diff", pp.ToolCall.Content[0].Type)
	assert.Equal(t, path, pp.ToolCall.Content[0].Path)
	assert.Nil(t, pp.ToolCall.Content[0].OldText, "a new file has no old text")
	assert.Equal(t, "one\ntwo\n", pp.ToolCall.Content[0].NewText)
	var kinds []string
	for _, o := range pp.Options {
		kinds = append(kinds, o.Kind)
	}
	assert.Equal(t, []string{"allow_once", "allow_always", "reject_once"}, kinds)
	assert.Equal(t, "end_turn", stopReason(t, f.ed.await(done)))
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "one\ntwo\n", string(got))

	// The tool call's life, as the editor saw it.
	callID := pp.ToolCall.ToolCallID
	var statuses []string
	var first map[string]any
	f.ed.mu.Lock()
	for _, r := range f.ed.log[from:] {
		var p struct {
			Update map[string]any `json:"update"`
		}
		if r.Ev != "update" || json.Unmarshal(r.Params, &p) != nil || p.Update["toolCallId"] != callID {
			continue
		}
		if p.Update["sessionUpdate"] == "tool_call" {
			first = p.Update
		}
		if st, ok := p.Update["status"].(string); ok {
			statuses = append(statuses, st)
		}
	}
	f.ed.mu.Unlock()
	require.NotNil(t, first, "a tool_call for %s", callID)
	assert.Equal(t, "edit", first["kind"])
	assert.Equal(t, []any{map[string]any{"path": path}}, first["locations"])
	assert.Equal(t, map[string]any{"path": "notes.txt", "content": "one\ntwo\n"}, first["rawInput"])
	assert.Equal(t, []string{"pending", "in_progress", "completed"}, statuses)

	// Over an existing file: the diff has the old text.
	from = f.ed.mark()
	done = f.ed.requestAsync("session/prompt", map[string]any{"sessionId": s.SessionID, "prompt": []any{
		map[string]any{"type": "text", "text": `/tool write {"path": "notes.txt", "content": "one\nTWO\nthree\n"}`}}})
	perm = approve(from)
	require.NoError(t, json.Unmarshal(perm.Params, &pp))
	require.Len(t, pp.ToolCall.Content, 1)
	require.NotNil(t, pp.ToolCall.Content[0].OldText)
	assert.Equal(t, "one\ntwo\n", *pp.ToolCall.Content[0].OldText)
	assert.Equal(t, "one\nTWO\nthree\n", pp.ToolCall.Content[0].NewText)
	assert.Equal(t, "end_turn", stopReason(t, f.ed.await(done)))

	// An edit: the diff is the replaced string and its replacement.
	from = f.ed.mark()
	done = f.ed.requestAsync("session/prompt", map[string]any{"sessionId": s.SessionID, "prompt": []any{
		map[string]any{"type": "text", "text": `/tool edit {"path": "notes.txt", "old_string": "TWO", "new_string": "2"}`}}})
	perm = approve(from)
	require.NoError(t, json.Unmarshal(perm.Params, &pp))
	require.Len(t, pp.ToolCall.Content, 1)
	assert.Equal(t, "TWO", *pp.ToolCall.Content[0].OldText)
	assert.Equal(t, "2", pp.ToolCall.Content[0].NewText)
	assert.Equal(t, "end_turn", stopReason(t, f.ed.await(done)))
	got, err = os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "one\n2\nthree\n", string(got))

	// A read: kind read, completed, with the file's text in its content.
	from = f.ed.mark()
	assert.Equal(t, "end_turn", stopReason(t, f.prompt(t, f.ed, s.SessionID, `/tool view {"path": "notes.txt"}`)))
	f.ed.waitFor(from, "a read tool call", isUpdate(s.SessionID, `"sessionUpdate":"tool_call"`, `"kind":"read"`))
	f.ed.waitFor(from, "its completion", isUpdate(s.SessionID, `"status":"completed"`, `three`))
}

// A permission answered over HTTP (another person) first: the editor's
// request is withdrawn with $/cancel_request, and the run goes on with the
// HTTP answer.
func TestACPPermissionAnsweredElsewhereIsWithdrawn(t *testing.T) {
	f := newACPFixture(t)
	s := f.newSession(t, f.ed)
	ws := f.workspace(t)
	from := f.ed.mark()
	done := f.ed.requestAsync("session/prompt", map[string]any{"sessionId": s.SessionID, "prompt": []any{
		map[string]any{"type": "text", "text": `/tool bash {"command": "echo shared"}`}}})
	perm, _ := f.ed.waitFor(from, "permission request", func(r report) bool { return r.Ev == "permission" })

	pending, err := f.c.ListPermissions(f.ctx, ws.ID)
	require.NoError(t, err)
	require.Len(t, pending, 1, "the request is every client's at once")
	ans, err := f.c.AnswerPermission(f.ctx, ws.ID, pending[0].RequestID, proto.PermissionAnswer{ClientID: f.c.ClientID(), Decision: proto.DecisionReject, Feedback: "not now"})
	require.NoError(t, err)
	assert.Equal(t, proto.ResultDeniedByUser, ans.Result)

	f.ed.waitFor(from, "the editor's request withdrawn", func(r report) bool { return r.Ev == "withdrawn" && r.RID == perm.RID })
	assert.Equal(t, "end_turn", stopReason(t, f.ed.await(done)))
	f.ed.waitFor(from, "the rejected call failed", isUpdate(s.SessionID, `"sessionUpdate":"tool_call_update"`, `"status":"failed"`))
	// The editor's late answer changes nothing: its request is gone.
	rep := f.ed.send(map[string]any{"op": "answer", "rid": perm.RID, "response": map[string]any{
		"outcome": map[string]any{"outcome": "selected", "optionId": "approve_once"}}})
	assert.Equal(t, `"gone"`, string(rep.Result))
	events, err := f.c.SessionEvents(f.ctx, ws.ID, s.SessionID, 0, 0)
	require.NoError(t, err)
	var resolved int
	for _, ev := range events {
		if ev.Type == proto.EventPermissionResolved {
			resolved++
			var r proto.PermissionResolved
			require.NoError(t, json.Unmarshal(ev.Data, &r))
			assert.Equal(t, proto.ResultDeniedByUser, r.Result)
		}
	}
	assert.Equal(t, 1, resolved)
}

// A prompt posted over HTTP streams into the editor, its text included;
// the editor cancels a run started over HTTP.
func TestACPHTTPPromptStreamsIntoEditorAndEditorCancelsIt(t *testing.T) {
	f := newACPFixture(t)
	s := f.newSession(t, f.ed)
	ws := f.workspace(t)
	st, err := f.c.Events(f.ctx, ws.ID, client.EventsOptions{SessionID: s.SessionID})
	require.NoError(t, err)
	defer st.Close()

	from := f.ed.mark()
	acc, err := f.c.Prompt(f.ctx, ws.ID, proto.PromptRequest{SessionID: s.SessionID, Prompt: "typed in the web app", ClientID: f.c.ClientID()})
	require.NoError(t, err)
	rc, err := client.WaitRun(f.ctx, st, acc.RunID)
	require.NoError(t, err)
	require.Equal(t, proto.OutcomeEndTurn, rc.Outcome)
	f.ed.waitFor(from, "the web app's prompt", isUpdate(s.SessionID, `"user_message_chunk"`, "typed in the web app"))
	f.ed.waitFor(from, "its answer's end", isUpdate(s.SessionID, `"agent_message_chunk"`, "app"))
	ups := f.ed.updates(from, s.SessionID)
	assert.Equal(t, "typed in the web app", text(ups, "user_message_chunk"))
	assert.Equal(t, "echo: typed in the web app", text(ups, "agent_message_chunk"))

	// A slow run started over HTTP, canceled from the editor.
	from = f.ed.mark()
	acc, err = f.c.Prompt(f.ctx, ws.ID, proto.PromptRequest{SessionID: s.SessionID, Prompt: "/slow 200 50", ClientID: f.c.ClientID()})
	require.NoError(t, err)
	f.ed.waitFor(from, "the slow run's first chunk", isUpdate(s.SessionID, `"agent_message_chunk"`))
	f.ed.send(map[string]any{"op": "notify", "method": "session/cancel", "params": map[string]any{"sessionId": s.SessionID}})
	rc, err = client.WaitRun(f.ctx, st, acc.RunID)
	require.NoError(t, err)
	assert.Equal(t, proto.OutcomeCanceled, rc.Outcome)

	// The editor's own prompt, canceled from the editor, answers cancelled.
	done := f.ed.requestAsync("session/prompt", map[string]any{"sessionId": s.SessionID, "prompt": []any{
		map[string]any{"type": "text", "text": "/slow 200 50"}}})
	from = f.ed.mark()
	f.ed.waitFor(from, "the editor's slow run's chunk", isUpdate(s.SessionID, `"agent_message_chunk"`))
	f.ed.send(map[string]any{"op": "notify", "method": "session/cancel", "params": map[string]any{"sessionId": s.SessionID}})
	assert.Equal(t, "cancelled", stopReason(t, f.ed.await(done)))
}

// session/load of a session made over HTTP replays its history before it
// answers; session/list lists the sessions, most recently updated first; an
// unknown session is -32002.
func TestACPLoadAndListSessionsMadeOverHTTP(t *testing.T) {
	f := newACPFixture(t)
	ws := f.workspace(t)
	st, err := f.c.Events(f.ctx, ws.ID, client.EventsOptions{})
	require.NoError(t, err)
	defer st.Close()
	older, err := f.c.CreateSession(f.ctx, ws.ID, proto.CreateSessionRequest{Title: "older"})
	require.NoError(t, err)
	sess, err := f.c.CreateSession(f.ctx, ws.ID, proto.CreateSessionRequest{Title: "made over http"})
	require.NoError(t, err)
	acc, err := f.c.Prompt(f.ctx, ws.ID, proto.PromptRequest{SessionID: sess.ID, Prompt: "/think pondering", ClientID: f.c.ClientID()})
	require.NoError(t, err)
	_, err = client.WaitRun(f.ctx, st, acc.RunID)
	require.NoError(t, err)
	acc, err = f.c.Prompt(f.ctx, ws.ID, proto.PromptRequest{SessionID: sess.ID, Prompt: `/tool ls {}`, ClientID: f.c.ClientID()})
	require.NoError(t, err)
	_, err = client.WaitRun(f.ctx, st, acc.RunID)
	require.NoError(t, err)

	from := f.ed.mark()
	rep := f.ed.send(map[string]any{"op": "request", "method": "session/load", "params": map[string]any{
		"sessionId": sess.ID, "cwd": f.dir, "mcpServers": []any{}}})
	require.Nil(t, rep.Error)
	var loaded acpSession
	require.NoError(t, json.Unmarshal(rep.Result, &loaded))
	assert.Equal(t, "ask", loaded.Modes.CurrentModeID)
	// The replay came before the answer: the driver reports updates as
	// they arrive, and the answer only after them.
	ups := f.ed.updates(from, sess.ID)
	assert.Equal(t, "/think pondering/tool ls {}", text(ups, "user_message_chunk"))
	assert.Equal(t, "pondering", text(ups, "agent_thought_chunk"))
	assert.Contains(t, text(ups, "agent_message_chunk"), "echo: ")
	var kinds []string
	for _, u := range ups {
		kinds = append(kinds, u.SessionUpdate)
	}
	assert.Contains(t, kinds, "tool_call")
	assert.Contains(t, kinds, "tool_call_update")

	// Loaded, the session is live in the editor.
	from = f.ed.mark()
	assert.Equal(t, "end_turn", stopReason(t, f.prompt(t, f.ed, sess.ID, "and now from the editor")))
	assert.Equal(t, "echo: and now from the editor", text(f.ed.updates(from, sess.ID), "agent_message_chunk"))

	e := f.ed.requestErr("session/load", map[string]any{"sessionId": "9b2f6a3c-0000-4000-8000-000000000000", "cwd": f.dir, "mcpServers": []any{}})
	assert.Equal(t, -32002, e.Code)

	var list struct {
		Sessions []struct {
			SessionID string `json:"sessionId"`
			Cwd       string `json:"cwd"`
			Title     string `json:"title"`
			UpdatedAt string `json:"updatedAt"`
		} `json:"sessions"`
	}
	require.NoError(t, json.Unmarshal(f.ed.request("session/list", map[string]any{"cwd": f.dir}), &list))
	require.Len(t, list.Sessions, 2)
	assert.Equal(t, sess.ID, list.Sessions[0].SessionID, "the most recently updated first")
	assert.Equal(t, older.ID, list.Sessions[1].SessionID)
	assert.Equal(t, f.dir, list.Sessions[0].Cwd)
	assert.Equal(t, "made over http", list.Sessions[0].Title)
	assert.True(t, sort.SliceIsSorted(list.Sessions, func(i, j int) bool { return list.Sessions[i].UpdatedAt > list.Sessions[j].UpdatedAt }))
	require.NoError(t, json.Unmarshal(f.ed.request("session/list", map[string]any{}), &list))
	assert.Len(t, list.Sessions, 2)
}

// Modes are the permission modes: set_mode sets the session's, and a
// change made by anyone reaches the editor as current_mode_update.
func TestACPModes(t *testing.T) {
	f := newACPFixture(t)
	s := f.newSession(t, f.ed)
	ws := f.workspace(t)
	assert.Equal(t, "ask", s.Modes.CurrentModeID)
	assert.Equal(t, []string{"ask", "deny_all", "allow_all"}, s.modeIDs())

	from := f.ed.mark()
	f.ed.request("session/set_mode", map[string]any{"sessionId": s.SessionID, "modeId": "deny_all"})
	got, err := f.c.GetSession(f.ctx, ws.ID, s.SessionID)
	require.NoError(t, err)
	assert.Equal(t, proto.PermissionModeDenyAll, got.PermissionMode)
	f.ed.waitFor(from, "current_mode_update deny_all", isUpdate(s.SessionID, `"current_mode_update"`, `"deny_all"`))

	mode := proto.PermissionModeAllowAll
	from = f.ed.mark()
	_, err = f.c.UpdateSession(f.ctx, ws.ID, s.SessionID, proto.UpdateSessionRequest{PermissionMode: &mode})
	require.NoError(t, err)
	f.ed.waitFor(from, "current_mode_update allow_all from HTTP", isUpdate(s.SessionID, `"current_mode_update"`, `"allow_all"`))

	// allow_all runs a write without asking the editor.
	from = f.ed.mark()
	assert.Equal(t, "end_turn", stopReason(t, f.prompt(t, f.ed, s.SessionID, `/tool write {"path": "free.txt", "content": "x"}`)))
	assert.Empty(t, f.ed.reports("permission"))
	_, err = os.Stat(filepath.Join(f.dir, "free.txt"))
	assert.NoError(t, err)

	e := f.ed.requestErr("session/set_mode", map[string]any{"sessionId": s.SessionID, "modeId": "yolo"})
	assert.Equal(t, -32602, e.Code)
}

// A member's editor acts as the member: no allow_all mode, no MCP servers,
// and the audit log names the member for the editor's prompts.
func TestACPActsAsTheTokensPerson(t *testing.T) {
	f := newACPFixture(t)
	created, err := f.c.CreateToken(f.ctx, proto.CreateTokenRequest{Name: "mia", Role: "member"})
	require.NoError(t, err)
	// The member works in a workspace the owner opened.
	f.workspace(t)
	ed := startEditor(t, nil, "--url", f.srv.url, "--token", created.Secret)
	ed.request("initialize", map[string]any{"protocolVersion": 1})

	e := ed.requestErr("session/new", map[string]any{"cwd": f.dir, "mcpServers": []any{
		map[string]any{"name": "tools", "command": "/bin/true", "args": []any{}, "env": []any{}}}})
	assert.Contains(t, e.Message, "MCP")

	s := f.newSession(t, ed)
	assert.Equal(t, []string{"ask", "deny_all"}, s.modeIDs())
	e = ed.requestErr("session/set_mode", map[string]any{"sessionId": s.SessionID, "modeId": "allow_all"})
	assert.Contains(t, e.Message, "allow_all")

	assert.Equal(t, "end_turn", stopReason(t, f.prompt(t, ed, s.SessionID, "hello as mia")))
	entries, err := f.c.Audit(f.ctx, 0, 1000)
	require.NoError(t, err)
	var prompts []string
	for _, en := range entries {
		if en.Action == "prompt" && en.SessionID == s.SessionID {
			prompts = append(prompts, en.Name)
		}
	}
	assert.Equal(t, []string{"mia"}, prompts)
}

// A failed run is error -32603 with the run's error as data; a line that
// is not JSON is -32700 with id null, and the connection goes on.
func TestACPFailedRunAndMalformedLine(t *testing.T) {
	f := newACPFixture(t)
	s := f.newSession(t, f.ed)
	rep := f.prompt(t, f.ed, s.SessionID, "/fail model_bad_request no such model")
	require.NotNil(t, rep.Error)
	assert.Equal(t, -32603, rep.Error.Code)
	var data proto.ErrorDetail
	require.NoError(t, json.Unmarshal(rep.Error.Data, &data))
	assert.Equal(t, "model_bad_request", data.Code)
	assert.Contains(t, data.Message, "no such model")

	from := f.ed.mark()
	f.ed.send(map[string]any{"op": "raw", "line": "this is not json {"})
	wire, _ := f.ed.waitFor(from, "the parse error", func(r report) bool { return r.Ev == "wire" && strings.Contains(r.Line, "-32700") })
	var m struct {
		ID    json.RawMessage `json:"id"`
		Error struct {
			Code int `json:"code"`
		} `json:"error"`
	}
	require.NoError(t, json.Unmarshal([]byte(wire.Line), &m))
	assert.Equal(t, "null", string(m.ID))
	assert.Equal(t, -32700, m.Error.Code)

	// The connection goes on.
	assert.Equal(t, "end_turn", stopReason(t, f.prompt(t, f.ed, s.SessionID, "still here")))
	// A relative cwd is invalid params.
	e := f.ed.requestErr("session/new", map[string]any{"cwd": "some/dir", "mcpServers": []any{}})
	assert.Equal(t, -32602, e.Code)
	// Audio is refused, the session unchanged.
	e = f.ed.requestErr("session/prompt", map[string]any{"sessionId": s.SessionID, "prompt": []any{
		map[string]any{"type": "audio", "data": "AAAA", "mimeType": "audio/wav"}}})
	assert.Equal(t, -32602, e.Code)
}

// With no server running, tandem acp runs one in its process and serves
// the editor through the domain, no HTTP in between; other clients reach
// that server through the data dir as usual.
func TestACPInProcessServer(t *testing.T) {
	data, dir := t.TempDir(), t.TempDir()
	ed := startEditor(t, []string{"TANDEM_DATA_DIR=" + data, "XDG_CONFIG_HOME=" + t.TempDir(), "TANDEM_URL=", "TANDEM_TOKEN=", "TANDEM_MODEL=echo"})
	ed.request("initialize", map[string]any{"protocolVersion": 1})
	var s acpSession
	require.NoError(t, json.Unmarshal(ed.request("session/new", map[string]any{"cwd": dir, "mcpServers": []any{}}), &s))
	from := ed.mark()
	rep := ed.send(map[string]any{"op": "request", "method": "session/prompt", "params": map[string]any{
		"sessionId": s.SessionID, "prompt": []any{map[string]any{"type": "text", "text": "in process"}}}})
	assert.Equal(t, "end_turn", stopReason(t, rep))
	assert.Equal(t, "echo: in process", text(ed.updates(from, s.SessionID), "agent_message_chunk"))

	// The in-process server published itself: an HTTP client finds it.
	raw, err := os.ReadFile(filepath.Join(data, "server.json"))
	require.NoError(t, err)
	var info struct {
		URL string `json:"url"`
	}
	require.NoError(t, json.Unmarshal(raw, &info))
	tok, err := os.ReadFile(filepath.Join(data, "token"))
	require.NoError(t, err)
	c := client.New(info.URL, strings.TrimSpace(string(tok)))
	defer c.CloseIdleConnections()
	list, err := c.ListWorkspaces(context.Background())
	require.NoError(t, err)
	require.Len(t, list, 1)
	msgs, err := c.Messages(context.Background(), list[0].ID, s.SessionID)
	require.NoError(t, err)
	require.Len(t, msgs, 2)
	entries, err := c.Audit(context.Background(), 0, 100)
	require.NoError(t, err)
	var prompted bool
	for _, en := range entries {
		prompted = prompted || (en.Action == "prompt" && en.SessionID == s.SessionID && en.Name == proto.OwnerTokenName)
	}
	assert.True(t, prompted, "the audit log has the editor's prompt as the owner's")
}

// SIGTERM (or SIGINT) ends tandem acp promptly, even while the editor
// keeps its stdin open and says nothing.
func TestACPStopsOnSignal(t *testing.T) {
	srv := serveTandem(t)
	cmd := exec.Command(tandemBinary(t), "acp", "--url", srv.url, "--token", srv.token)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	defer stdin.Close()
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	_, err = stdin.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}` + "\n"))
	require.NoError(t, err)
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err)
	require.Contains(t, line, `"protocolVersion":1`)
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		assert.NoError(t, err, "exit status 0")
	case <-time.After(2 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatal("tandem acp did not stop within 2s of SIGTERM")
	}
}

// A session loaded while its run streams shows the answer whole: the
// deltas that went out before the editor attached are not kept, so the
// answer's text comes complete, once, when its step ends.
func TestACPLoadDuringARunShowsTheWholeAnswer(t *testing.T) {
	f := newACPFixture(t)
	ws := f.workspace(t)
	sess, err := f.c.CreateSession(f.ctx, ws.ID, proto.CreateSessionRequest{})
	require.NoError(t, err)
	st, err := f.c.Events(f.ctx, ws.ID, client.EventsOptions{SessionID: sess.ID})
	require.NoError(t, err)
	defer st.Close()
	acc, err := f.c.Prompt(f.ctx, ws.ID, proto.PromptRequest{SessionID: sess.ID, Prompt: "/slow 40 50", ClientID: f.c.ClientID()})
	require.NoError(t, err)
	deltas := 0
	for deltas < 5 {
		ev, err := st.Next(f.ctx)
		require.NoError(t, err)
		if ev.Type == proto.EventMessageDelta {
			deltas++
		}
	}
	from := f.ed.mark()
	f.ed.request("session/load", map[string]any{"sessionId": sess.ID, "cwd": f.dir, "mcpServers": []any{}})
	rc, err := client.WaitRun(f.ctx, st, acc.RunID)
	require.NoError(t, err)
	require.Equal(t, proto.OutcomeEndTurn, rc.Outcome)
	msgs, err := f.c.Messages(f.ctx, ws.ID, sess.ID)
	require.NoError(t, err)
	require.Len(t, msgs, 2)
	want := msgs[1].Parts[0].Text
	require.NotEmpty(t, want)
	tail := want[len(want)-8:]
	f.ed.waitFor(from, "the answer's end", isUpdate(sess.ID, `"agent_message_chunk"`, tail))
	assert.Equal(t, want, text(f.ed.updates(from, sess.ID), "agent_message_chunk"))
}
