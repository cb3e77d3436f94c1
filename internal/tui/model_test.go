package tui

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"

	tea "charm.land/bubbletea/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/client"
	"github.com/tandem-dev/tandem/proto"
)

var sizes = [][2]int{{80, 24}, {120, 40}}

func session() proto.Session {
	win := int64(200000)
	cost := 0.0123
	return proto.Session{ID: sid, WorkspaceID: wsID, Title: "Fix the parser", Model: "anthropic/claude-sonnet-4", ReasoningEffort: "medium",
		Context: proto.SessionContext{Tokens: 50000, Window: &win},
		Usage:   proto.Usage{InputTokens: 12000, OutputTokens: 345, CostUSD: &cost}}
}

func history() []proto.Message {
	return []proto.Message{
		{ID: "m1", Role: proto.RoleUser, ClientID: me, RunID: "r1", Parts: []proto.Part{{Type: proto.PartText, Text: "Why does the parser fail on empty input?"}}},
		{ID: "m2", Role: proto.RoleAssistant, RunID: "r1", Model: "anthropic/claude-sonnet-4", Parts: []proto.Part{
			{Type: proto.PartReasoning, Text: "The user asks about the parser.\nLet me look at parse.go first."},
			{Type: proto.PartText, Text: "It reads `buf[0]` before checking the **length**:\n\n- add a guard\n- return `ErrEmpty`"},
			{Type: proto.PartToolCall, ID: "call_0", Name: "edit", Arguments: json.RawMessage(`{"path":"parse.go","old_string":"x := buf[0]","new_string":"if len(buf) == 0 {\n\treturn ErrEmpty\n}\nx := buf[0]"}`)},
			{Type: proto.PartFinish, Reason: proto.FinishToolUse},
		}},
		{ID: "m3", Role: proto.RoleTool, RunID: "r1", Parts: []proto.Part{{Type: proto.PartToolResult, ToolCallID: "call_0", Name: "edit", Content: "Edited parse.go: 1 replacement."}}},
		{ID: "m4", Role: proto.RoleUser, ClientID: other, RunID: "r2", Parts: []proto.Part{{Type: proto.PartText, Text: "and add a test please"}}},
		{ID: "m5", Role: proto.RoleAssistant, RunID: "r2", Model: "anthropic/claude-sonnet-4", Parts: []proto.Part{
			{Type: proto.PartText, Text: "Added `TestParseEmpty`."},
			{Type: proto.PartFinish, Reason: proto.FinishError, Message: "model_overloaded: try later"},
		}},
	}
}

func loaded(t *testing.T, w, h int, cfg ...func(*Config)) *driver {
	d := newDriver(t, w, h, cfg...)
	d.api.msgs[sid] = history()
	d.api.sessions = []proto.Session{session(), {ID: "sess-2", Title: "Release notes", Model: "echo", MessageCount: 4}, {ID: "sess-3", Title: "Refactor store", Model: "echo", Busy: true}}
	d.ready(session())
	return d
}

func TestGoldenTranscript(t *testing.T) {
	for _, sz := range sizes {
		d := loaded(t, sz[0], sz[1])
		d.golden("transcript")
		assert.Contains(t, d.screen(), shortID(other), "another client's prompt is signed with its short id")
		if sz[1] >= 40 {
			assert.Contains(t, d.screen(), "▍you\nWhy does")
			assert.Contains(t, d.screen(), "  +if len(buf) == 0 {", "an edit shows its change")
		}
	}
}

func TestEnterSendsThePromptAndClearsTheInput(t *testing.T) {
	d := loaded(t, 80, 24)
	d.keys("hello there", "enter")
	assert.True(t, d.hasCall(`Prompt "hello there" delivery=""`), d.api.Calls())
	assert.Empty(t, d.m.in.Value())
}

func TestAltEnterAndCtrlJInsertNewLines(t *testing.T) {
	d := loaded(t, 80, 24)
	d.keys("one", "alt+enter", "two", "ctrl+j", "three")
	assert.Equal(t, "one\ntwo\nthree", d.m.in.Value())
	assert.Equal(t, 3, d.m.in.Height(), "the input grows with its lines")
	d.golden("multiline")
	d.keys("enter")
	assert.True(t, d.hasCall(`Prompt "one\ntwo\nthree"`), d.api.Calls())
}

func TestUnknownSlashLineIsSentAsTyped(t *testing.T) {
	d := loaded(t, 80, 24)
	d.keys("/slow 3 50", "enter")
	assert.True(t, d.hasCall(`Prompt "/slow 3 50"`), d.api.Calls())
}

func TestEscCancelsTheRunningRun(t *testing.T) {
	d := loaded(t, 80, 24)
	d.keys("esc")
	assert.False(t, d.hasCall("Cancel"), "nothing runs, nothing to cancel")
	d.event(proto.EventRunStarted, sid, "r9", map[string]any{})
	d.keys("esc")
	assert.True(t, d.hasCall("Cancel "+sid))
}

func TestCtrlCClearsThenQuits(t *testing.T) {
	d := loaded(t, 80, 24)
	d.keys("draft")
	d.keys("ctrl+c")
	assert.Empty(t, d.m.in.Value())
	assert.False(t, d.quit)
	d.keys("ctrl+c")
	assert.True(t, d.quit)
}

func TestQuitWhileHostingARunAsksFirst(t *testing.T) {
	d := loaded(t, 80, 24, func(c *Config) { c.Hosting = true })
	d.event(proto.EventRunStarted, sid, "r9", map[string]any{})
	d.keys("ctrl+c")
	assert.False(t, d.quit)
	assert.Contains(t, d.screen(), "Quit? y/n")
	d.keys("n")
	assert.False(t, d.quit)
	assert.NotContains(t, d.screen(), "Quit? y/n")
	d.keys("/quit", "enter")
	assert.False(t, d.quit)
	d.keys("y")
	assert.True(t, d.quit)
}

// The server this TUI hosts runs every session of the workspace: a run in
// another one (another client's, or one left going before /new) is
// stopped by quitting too, so it asks first for that as well.
func TestQuitWhileHostingAsksWhenAnotherSessionRuns(t *testing.T) {
	d := loaded(t, 80, 24, func(c *Config) { c.Hosting = true })
	d.api.mu.Lock()
	d.api.sessions = []proto.Session{session(), {ID: "sess-2", Busy: true}}
	d.api.mu.Unlock()
	d.keys("ctrl+c")
	assert.False(t, d.quit)
	assert.Contains(t, d.screen(), "Quit? y/n")
	d.keys("y")
	assert.True(t, d.quit)

	idle := loaded(t, 80, 24, func(c *Config) { c.Hosting = true })
	idle.api.mu.Lock()
	idle.api.sessions = []proto.Session{session(), {ID: "sess-2"}}
	idle.api.mu.Unlock()
	idle.keys("ctrl+c")
	assert.True(t, idle.quit, "with no run anywhere, it quits at once")
}

func TestQuitWithoutHostingLeavesTheRunGoing(t *testing.T) {
	d := loaded(t, 80, 24)
	d.event(proto.EventRunStarted, sid, "r9", map[string]any{})
	d.keys("/quit", "enter")
	assert.True(t, d.quit)
	assert.False(t, d.hasCall("Cancel"))
}

func longHistory(n int) []proto.Message {
	var msgs []proto.Message
	for i := range n {
		msgs = append(msgs, proto.Message{ID: "u" + itoa(i), Role: proto.RoleUser, ClientID: me, Parts: []proto.Part{{Type: proto.PartText, Text: "question " + itoa(i)}}},
			proto.Message{ID: "a" + itoa(i), Role: proto.RoleAssistant, Parts: []proto.Part{{Type: proto.PartText, Text: "answer " + itoa(i) + "\n\nwith a second paragraph"}}})
	}
	return msgs
}

func itoa(i int) string { return strings.TrimSpace(strings.Repeat(" ", 0) + fmtInt(i)) }

func fmtInt(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}

func TestScrollKeysAndWheel(t *testing.T) {
	d := newDriver(t, 80, 24)
	d.api.msgs[sid] = longHistory(50)
	d.ready(proto.Session{ID: sid, Model: "echo"})
	assert.Contains(t, d.screen(), "answer 49", "it opens at the end")
	d.keys("pgup")
	assert.NotContains(t, d.screen(), "answer 49")
	d.keys("pgdown")
	assert.Contains(t, d.screen(), "answer 49")
	d.send(tea.MouseWheelMsg{Button: tea.MouseWheelUp})
	assert.Equal(t, 3, d.m.tr.offset)
	d.send(tea.MouseWheelMsg{Button: tea.MouseWheelDown})
	assert.Equal(t, 0, d.m.tr.offset)
	d.keys("ctrl+home")
	assert.Contains(t, d.screen(), "question 0", "ctrl+home goes to the top")
	off := d.m.tr.offset
	d.keys("pgup")
	assert.Equal(t, off, d.m.tr.offset, "not beyond the top")
	// Scrolled up, new text below does not move what is read.
	before := d.screen()
	d.event(proto.EventMessageDelta, sid, "r", proto.MessageDelta{MessageID: "new", Kind: "text", Text: "streamed\n\nmore"})
	assert.Equal(t, before, d.screen())
	d.keys("ctrl+end")
	assert.Contains(t, d.screen(), "streamed", "ctrl+end follows the end again")
}

func TestFollowsTheEndWhileStreaming(t *testing.T) {
	d := loaded(t, 80, 24)
	for _, w := range []string{"Streaming ", "**bold** ", "words"} {
		d.event(proto.EventMessageDelta, sid, "r3", proto.MessageDelta{MessageID: "m9", Kind: "text", Text: w})
	}
	assert.Contains(t, d.screen(), "Streaming bold words")
	d.event(proto.EventMessageUpdated, sid, "r3", proto.Message{ID: "m9", Role: proto.RoleAssistant, Parts: []proto.Part{{Type: proto.PartText, Text: "Streaming **bold** words, done."}}})
	assert.Contains(t, d.screen(), "Streaming bold words, done.")
	assert.Equal(t, 1, strings.Count(d.screen(), "Streaming"), "the final message replaces the streamed text")
}

func TestCtrlOUnfoldsReasoning(t *testing.T) {
	d := loaded(t, 120, 40)
	assert.Contains(t, d.screen(), "∴ thinking: The user asks about the parser. Let me look at parse.go first. (ctrl+o)", "folded to one line")
	d.keys("ctrl+o")
	assert.Contains(t, d.screen(), "∴ The user asks about the parser.\nLet me look at parse.go first.")
	d.keys("ctrl+o")
	assert.Contains(t, d.screen(), "(ctrl+o)")
}

func TestTabCompletesCommandsAndFiles(t *testing.T) {
	files := fstest.MapFS{"src/parse.go": {Data: []byte("x")}, "src/parse_test.go": {Data: []byte("y")}, "README.md": {Data: []byte("z")}}
	d := loaded(t, 80, 24, func(c *Config) { c.Files = files })
	d.keys("/mo")
	assert.Contains(t, d.screen(), "/model")
	d.keys("tab")
	assert.Equal(t, "/model ", d.m.in.Value())
	d.keys("ctrl+c", "/s")
	assert.Contains(t, d.screen(), "/sessions")
	assert.Contains(t, d.screen(), "/steer")
	d.keys("ctrl+c", "look at @sr", "tab")
	assert.Equal(t, "look at @src/", d.m.in.Value())
	d.keys("pa", "tab")
	assert.Equal(t, "look at @src/parse", d.m.in.Value())
	assert.Contains(t, d.screen(), "@src/parse_test.go")
	d.keys(".go", "enter")
	d.api.mu.Lock()
	defer d.api.mu.Unlock()
	require.Len(t, d.api.prompts, 1)
	assert.Equal(t, []proto.Attachment{{Type: "file", Path: "src/parse.go"}}, d.api.prompts[0].Attachments, "@path attaches the file")
}

func TestAttachCommand(t *testing.T) {
	files := fstest.MapFS{"notes.txt": {Data: []byte("x")}}
	d := loaded(t, 80, 24, func(c *Config) { c.Files = files })
	d.keys("/attach missing.txt", "enter")
	assert.Contains(t, d.screen(), "no file missing.txt")
	d.keys("/attach notes.txt", "enter")
	assert.Contains(t, d.screen(), "📎 notes.txt")
	d.keys("summarize", "enter")
	d.api.mu.Lock()
	require.Len(t, d.api.prompts, 1)
	assert.Equal(t, []proto.Attachment{{Type: "file", Path: "notes.txt"}}, d.api.prompts[0].Attachments)
	d.api.mu.Unlock()
	assert.NotContains(t, d.screen(), "📎 notes.txt", "an attachment goes with one prompt")
}

func TestSessionCommands(t *testing.T) {
	d := loaded(t, 80, 24)
	d.keys("/rename Parser fix", "enter")
	assert.True(t, d.hasCall(`UpdateSession sess-1 title="Parser fix"`), d.api.Calls())
	assert.Contains(t, d.screen(), "Parser fix")

	d.keys("/model echo", "enter")
	assert.True(t, d.hasCall(`SetModel sess-1 model="echo" effort=""`), d.api.Calls())
	d.keys("/effort extreme", "enter")
	assert.Contains(t, d.screen(), "usage: /effort low|medium|high")
	d.keys("/effort high", "enter")
	assert.True(t, d.hasCall(`SetModel sess-1 model="echo" effort="high"`), d.api.Calls())
	assert.Contains(t, d.screen(), "echo (high)")

	d.keys("/compact", "enter")
	assert.True(t, d.hasCall("Compact sess-1"))
	d.keys("/steer also check nil", "enter")
	assert.True(t, d.hasCall(`Prompt "also check nil" delivery="steer"`), d.api.Calls())
	d.keys("/cancel", "enter")
	assert.True(t, d.hasCall("Cancel sess-1"))

	d.keys("/new Second try", "enter")
	assert.True(t, d.hasCall(`CreateSession title="Second try" model="echo"`), d.api.Calls())
	assert.True(t, d.hasCall("Messages sess-new"), "the new session is loaded")
	assert.Contains(t, d.screen(), "Second try")
}

func TestSandboxCommand(t *testing.T) {
	d := newDriver(t, 100, 24)
	s := session()
	s.SandboxSettings = proto.SandboxSettings{Sandbox: proto.SandboxReadOnly, SandboxRead: []string{"/opt/sdk"}, SandboxWrite: []string{"/var/cache/\x1b[31mgo"}}
	d.api.sessions = []proto.Session{s}
	d.api.msgs[sid] = history()
	d.ready(s)

	// Without an argument: what the commands run under, the server's paths escaped.
	d.keys("/sandbox", "enter")
	assert.Contains(t, d.screen(), "sandbox: read-only · network off · read /opt/sdk · write /var/cache/")
	assert.NotContains(t, d.screen(), "\x1b[31m", "a path from the server cannot colour the terminal")
	for _, c := range d.api.Calls() {
		assert.NotContains(t, c, "UpdateSession", "showing changes nothing")
	}

	for _, bad := range []string{"/sandbox none", "/sandbox network", "/sandbox network yes", "/sandbox off now"} {
		d.keys(bad, "enter")
		assert.Contains(t, d.screen(), "usage: /sandbox", bad)
	}

	// A member widens: the server's refusal is shown as it said it, the session unchanged.
	d.api.updateErr = []error{&client.APIError{Status: 403, Code: proto.CodeForbidden, Message: "only an owner may widen the sandbox (sandbox)"}}
	d.keys("/sandbox workspace", "enter")
	assert.True(t, d.hasCall(`UpdateSession sess-1 sandbox="workspace"`), d.api.Calls())
	assert.Contains(t, d.screen(), "/sandbox workspace: only an owner may widen the sandbox (sandbox)")
	assert.Equal(t, proto.SandboxReadOnly, d.m.sess.Sandbox)

	// Taken: the session follows.
	d.keys("/sandbox off", "enter")
	assert.True(t, d.hasCall(`UpdateSession sess-1 sandbox="off"`), d.api.Calls())
	assert.Equal(t, proto.SandboxOff, d.m.sess.Sandbox)
	assert.Contains(t, d.screen(), "sandbox: off")
	assert.Contains(t, d.m.statusLine(), "· unconfined ·", "the status line says it while the session runs unconfined")
	d.keys("/sandbox network on", "enter")
	assert.True(t, d.hasCall(`UpdateSession sess-1 sandbox_network=true`), d.api.Calls())
	assert.True(t, d.m.sess.SandboxNetwork)
	d.keys("/sandbox", "enter")
	assert.Contains(t, d.screen(), "sandbox: off (unconfined) · network on")
}

func TestUsageOfCommandsWithoutArguments(t *testing.T) {
	d := loaded(t, 80, 24)
	for cmd, want := range map[string]string{"/rename": "usage: /rename", "/model": "usage: /model", "/steer": "usage: /steer"} {
		d.keys(cmd, "enter")
		assert.Contains(t, d.screen(), want)
	}
}

func TestSessionPicker(t *testing.T) {
	for _, sz := range sizes {
		d := loaded(t, sz[0], sz[1])
		d.keys("/sessions", "enter")
		assert.True(t, d.hasCall("ListSessions"))
		d.golden("picker")
		d.keys("down", "down", "up")
		assert.Equal(t, 1, d.m.picker.cur)
		d.keys("esc")
		assert.Nil(t, d.m.picker)

		d.keys("/sessions", "enter", "refac")
		assert.Contains(t, d.screen(), "Refactor store")
		assert.NotContains(t, d.screen(), "Release notes")
		d.keys("backspace", "backspace", "backspace", "backspace", "backspace", "rel", "enter")
		assert.Nil(t, d.m.picker)
		assert.True(t, d.hasCall("Messages sess-2"), d.api.Calls())
		assert.Equal(t, "sess-2", d.m.sess.ID)
	}
}

func TestHelp(t *testing.T) {
	for _, sz := range sizes {
		d := loaded(t, sz[0], sz[1])
		d.keys("/help", "enter")
		d.golden("help")
		// Even a 24-line terminal lists every command.
		for _, c := range commands {
			if c.help != "" {
				assert.Contains(t, d.screen(), "  "+c.name+" ", "%dx%d", sz[0], sz[1])
			}
		}
		d.keys("esc")
		assert.False(t, d.m.help)
	}
}

func permission() proto.PermissionRequest {
	var diff strings.Builder
	diff.WriteString("--- a/parse.go\n+++ b/parse.go\n@@ -1,30 +1,32 @@\n")
	for i := range 30 {
		diff.WriteString(" line " + itoa(i) + "\n")
		if i == 3 {
			diff.WriteString("-x := buf[0]\n+if len(buf) == 0 {\n+\treturn ErrEmpty\n+}\n")
		}
	}
	return proto.PermissionRequest{RequestID: "perm-1", SessionID: sid, RunID: "r5", ToolCallID: "call_0", ToolName: "edit", Kind: "write",
		Summary: "Edit parse.go (1 replacement)", Details: map[string]any{"diff": diff.String()}}
}

func TestPermissionDialog(t *testing.T) {
	for _, sz := range sizes {
		d := loaded(t, sz[0], sz[1])
		d.event(proto.EventPermissionRequested, sid, "r5", permission())
		require.NotNil(t, d.m.dlg)
		d.golden("permission")
		d.keys("down", "down")
		assert.Equal(t, 2, d.m.dlg.top)
		d.keys("pgdown", "pgdown", "pgdown")
		assert.Contains(t, d.screen(), "line 29", "the diff scrolls to its end")
		d.keys("up", "pgup", "pgup", "pgup")
		assert.Equal(t, 0, d.m.dlg.top)
		d.keys("esc")
		assert.False(t, d.hasCall("Cancel"), "Esc does not cancel the run under a dialog")
		d.keys("a")
		assert.True(t, d.hasCall("AnswerPermission perm-1 approve_once"), d.api.Calls())
		assert.NotNil(t, d.m.dlg, "the dialog stays until the server says it is resolved")
		d.event(proto.EventPermissionResolved, sid, "r5", map[string]any{"request_id": "perm-1", "result": "approved", "resolved_by": other, "resolved_by_name": "grace"})
		assert.Nil(t, d.m.dlg)
		assert.Contains(t, d.screen(), "edit: approved by grace")
	}
}

func TestPermissionApproveForSessionAndReject(t *testing.T) {
	d := loaded(t, 80, 24)
	d.event(proto.EventPermissionRequested, sid, "r5", permission())
	d.keys("s")
	assert.True(t, d.hasCall("AnswerPermission perm-1 approve_session"), d.api.Calls())

	d = loaded(t, 80, 24)
	d.event(proto.EventPermissionRequested, sid, "r5", permission())
	d.keys("r")
	assert.True(t, d.m.dlg.rejecting)
	d.keys("not like this", "esc")
	assert.False(t, d.m.dlg.rejecting, "Esc goes back to the choice")
	d.keys("r", "use a guard clause", "enter")
	assert.True(t, d.hasCall(`AnswerPermission perm-1 reject feedback="not like thisuse a guard clause"`) ||
		d.hasCall(`AnswerPermission perm-1 reject feedback="use a guard clause"`), d.api.Calls())
	d.event(proto.EventPermissionResolved, sid, "r5", map[string]any{"request_id": "perm-1", "result": "denied_by_user", "resolved_by": me, "feedback": "use a guard clause"})
	assert.Nil(t, d.m.dlg)
	assert.Contains(t, d.screen(), "edit: denied_by_user by you: use a guard clause")
}

func TestPendingPermissionShownOnLoadAndAfterReconnect(t *testing.T) {
	d := newDriver(t, 80, 24)
	d.api.pending = proto.PendingWork{Permissions: []proto.PermissionRequest{permission()}}
	d.ready(session())
	require.NotNil(t, d.m.dlg, "a permission pending when the TUI opens is asked")

	d = loaded(t, 80, 24)
	d.send(ConnMsg{State: "reconnecting…"})
	assert.Contains(t, d.screen(), "reconnecting…")
	d.api.pending = proto.PendingWork{Permissions: []proto.PermissionRequest{permission()}}
	d.event(proto.EventStreamOpened, "", "", proto.StreamOpened{})
	assert.Contains(t, d.screen(), "live")
	require.NotNil(t, d.m.dlg, "a permission asked while away is shown on return")
}

func TestRunsQueueAndWhoWorks(t *testing.T) {
	d := loaded(t, 80, 24)
	d.event(proto.EventRunAccepted, sid, "r7", proto.RunAccepted{RunID: "r7", State: proto.RunRunning, ClientID: other})
	d.event(proto.EventRunStarted, sid, "r7", map[string]any{})
	assert.Contains(t, d.screen(), "working ("+shortID(other)+")")
	d.event(proto.EventRunAccepted, sid, "r8", proto.RunAccepted{RunID: "r8", State: proto.RunQueued, ClientID: me, Prompt: "then write docs"})
	assert.Contains(t, d.screen(), "queued 1: then write docs")
	assert.Contains(t, d.screen(), "1 queued")
	d.event(proto.EventRunCompleted, sid, "r7", proto.RunCompleted{RunID: "r7", Outcome: proto.OutcomeCanceled})
	assert.Contains(t, d.screen(), "run canceled")
	d.event(proto.EventRunStarted, sid, "r8", map[string]any{})
	assert.NotContains(t, d.screen(), "queued 1:")
	assert.Contains(t, d.screen(), "working (you)")
	d.event(proto.EventRunAccepted, sid, "r8", proto.RunAccepted{RunID: "r10", State: proto.RunSteered, ClientID: other, Prompt: "use tabs"})
	assert.Contains(t, d.screen(), "steered the run: use tabs")
	d.event(proto.EventRunCompleted, sid, "r8", proto.RunCompleted{RunID: "r8", Outcome: proto.OutcomeError, Error: &proto.ErrorDetail{Code: "model_error", Message: "boom"}})
	assert.Contains(t, d.screen(), "the run failed: model_error: boom")
	assert.Contains(t, d.screen(), "idle")
}

func TestAuthorNameFromTheServer(t *testing.T) {
	d := loaded(t, 80, 24)
	d.event(proto.EventMessageCreated, sid, "r", map[string]any{"id": "m20", "role": "user", "client_id": other, "parts": []any{map[string]any{"type": "text", "text": "from grace"}},
		"author": map[string]any{"name": "grace", "client_id": other}})
	assert.Contains(t, d.screen(), "▍grace")
}

func TestOtherSessionsEventsAreNotShown(t *testing.T) {
	d := loaded(t, 120, 40)
	d.event(proto.EventMessageDelta, "sess-other", "r", proto.MessageDelta{MessageID: "x", Kind: "text", Text: "elsewhere"})
	assert.NotContains(t, d.screen(), "elsewhere")
	d.event(proto.EventClientAttached, "", "", proto.ClientPresence{ClientID: other, Clients: 3})
	assert.Contains(t, d.screen(), "3 clients")
}

// Everything from the server may try to drive the terminal: none of it may
// reach it as a control sequence.
func TestEscapeSequencesNeverReachTheTerminal(t *testing.T) {
	evil := "\x1b]0;PWNED\x07\x1b[2J\x1b[H\x1b]8;;http://evil\x1b\\link\x1b]8;;\x1b\\\a\u009b31m\u202e"
	for _, sz := range sizes {
		// A file name is anyone's too: a model's write tool makes files.
		files := fstest.MapFS{"\x1b]0;PWNED\x07\x1b[2J.txt": {Data: []byte("x")}}
		d := newDriver(t, sz[0], sz[1], func(c *Config) { c.Files = files })
		d.api.msgs[sid] = []proto.Message{
			{ID: "m1", Role: proto.RoleUser, ClientID: evil, Parts: []proto.Part{{Type: proto.PartText, Text: evil}, {Type: proto.PartAttachment, DisplayName: evil}}},
			{ID: "m2", Role: proto.RoleAssistant, Model: evil, Parts: []proto.Part{
				{Type: proto.PartReasoning, Text: evil}, {Type: proto.PartText, Text: "# " + evil + "\n\n[" + evil + "](http://x" + evil + ")\n\n```\n" + evil + "\n```"},
				{Type: proto.PartToolCall, ID: "c", Name: evil, Arguments: json.RawMessage(`{"path":"\u001b]0;PWNED\u0007"}`)},
				{Type: proto.PartFinish, Reason: proto.FinishError, Message: evil}}},
			{ID: "m3", Role: proto.RoleTool, Parts: []proto.Part{{Type: proto.PartToolResult, ToolCallID: "c", Content: evil}}},
		}
		d.ready(proto.Session{ID: sid, Title: evil, Model: evil, ReasoningEffort: evil})
		d.event(proto.EventMessageDelta, sid, "r", proto.MessageDelta{MessageID: "m4", Kind: "text", Text: evil})
		d.event(proto.EventSessionLog, sid, "r", proto.SessionLog{Level: "warn", Message: evil})
		d.keys("ctrl+o")
		s := d.screen() // checks that only SGR sequences are drawn
		assert.Contains(t, s, "␛]0;PWNED␇", "the sequence is shown, not obeyed")
		d.event(proto.EventPermissionRequested, sid, "r", proto.PermissionRequest{RequestID: "p", SessionID: sid, ToolCallID: "c", ToolName: evil, Kind: evil, Summary: evil,
			Details: map[string]any{"diff": "+" + evil}})
		d.screen()
		d.send(ConnMsg{State: "connecting…", Err: errString(evil)})
		d.keys("a")
		d.event(proto.EventPermissionResolved, sid, "r", map[string]any{"request_id": "p", "result": evil, "resolved_by": evil, "resolved_by_name": evil, "feedback": evil})
		d.keys("ctrl+home") // the tool block, whose state is now the answer's result
		d.screen()
		d.keys("ctrl+end")
		d.keys("/sessions", "enter")
		d.m.picker.list = []proto.Session{{ID: evil, Title: evil, Model: evil}}
		d.screen()
		d.keys("esc", "/fork", "enter")
		require.NotNil(t, d.m.fk, "/fork's picker lists the prompts")
		assert.Contains(t, d.screen(), "␛]0;PWNED␇", "a prompt in /fork's picker")
		d.keys("esc", "@")
		assert.Contains(t, d.screen(), "@␛]0;PWNED␇␛[2J.txt", "a file name completed after @")
	}
}

type errString string

func (e errString) Error() string { return string(e) }

func TestResizeRedraws(t *testing.T) {
	d := loaded(t, 120, 40)
	d.screen()
	for _, sz := range [][2]int{{80, 24}, {60, 15}, {200, 50}, {80, 24}} {
		d.send(tea.WindowSizeMsg{Width: sz[0], Height: sz[1]})
		d.screen() // exactly the new size, no line wider
	}
	d.golden("resized")
}

func TestLightBackground(t *testing.T) {
	d := loaded(t, 120, 40)
	d.send(tea.BackgroundColorMsg{Color: colorWhite{}})
	assert.False(t, d.m.dark)
	assert.Contains(t, d.screen(), "Why does the parser fail")
}

type colorWhite struct{}

func (colorWhite) RGBA() (r, g, b, a uint32) { return 0xffff, 0xffff, 0xffff, 0xffff }

func TestAFailedLoadIsRetriedAndWhoRunsComesFromTheHistory(t *testing.T) {
	d := newDriver(t, 80, 24)
	d.api.err = errString("server down")
	d.ready(session())
	assert.Contains(t, d.screen(), "load session: server down")
	assert.True(t, d.m.loading)
	d.event(proto.EventMessageDelta, sid, "r2", proto.MessageDelta{MessageID: "m9", Kind: "text", Text: "meanwhile"})
	d.api.mu.Lock()
	d.api.err = nil
	d.api.msgs[sid] = history()
	active := "r2"
	d.api.status = proto.AgentStatus{Busy: true, ActiveRunID: &active}
	d.api.mu.Unlock()
	d.send(retryLoadMsg{sid: sid})
	assert.False(t, d.m.loading)
	scr := d.screen()
	assert.Contains(t, scr, "meanwhile", "the events that came during the load are applied after it")
	assert.Contains(t, scr, "working ("+shortID(other)+")", "the active run's prompter, from the history")
}

// Events that come while a history loads wait for it, but no more than
// maxEarly of them: past that they are dropped, and the history is loaded
// again, since the one under way may have been read before them.
func TestEventsWhileLoadingAreBoundedAndTheHistoryReloaded(t *testing.T) {
	d := newDriver(t, 80, 24)
	d.api.msgs[sid] = history()
	// Ready, without running the load it starts: the load is under way.
	next, cmd := d.m.Update(ReadyMsg{Workspace: proto.Workspace{ID: wsID, Path: "/home/ada/project"}, Session: session()})
	d.m = next.(Model)
	require.NotNil(t, cmd)
	require.True(t, d.m.loading)
	for i := range maxEarly + 50 {
		d.event(proto.EventMessageDelta, sid, "r2", proto.MessageDelta{MessageID: "m9", Kind: "text", Text: " " + strconv.Itoa(i)})
	}
	assert.LessOrEqual(t, len(d.m.early), maxEarly, "the events kept while loading are bounded")
	loadedBefore := cmd() // the load under way ends
	loads := strings.Count(strings.Join(d.api.Calls(), "\n"), "Messages "+sid)
	d.send(loadedBefore)
	assert.Equal(t, loads+1, strings.Count(strings.Join(d.api.Calls(), "\n"), "Messages "+sid),
		"the history is loaded again after events were dropped")
	assert.False(t, d.m.loading)
	assert.Contains(t, d.screen(), "and add a test please", "the history reloaded is shown")
}

// A run canceled while its answer streamed says so once: the message's
// "· canceled", not also "run canceled" under it.
func TestCanceledRunIsSaidOnce(t *testing.T) {
	d := loaded(t, 80, 24)
	d.event(proto.EventRunAccepted, sid, "r7", proto.RunAccepted{RunID: "r7", State: proto.RunRunning, ClientID: me})
	d.event(proto.EventRunStarted, sid, "r7", map[string]any{})
	d.event(proto.EventMessageCreated, sid, "r7", proto.Message{ID: "m7", SessionID: sid, RunID: "r7", Role: proto.RoleAssistant,
		Parts: []proto.Part{{Type: proto.PartText, Text: "half an answer"}, {Type: proto.PartFinish, Reason: proto.FinishCanceled}}})
	d.event(proto.EventRunCompleted, sid, "r7", proto.RunCompleted{RunID: "r7", Outcome: proto.OutcomeCanceled})
	scr := d.screen()
	assert.Equal(t, 1, strings.Count(scr, "canceled"), "said once:\n%s", scr)
}
