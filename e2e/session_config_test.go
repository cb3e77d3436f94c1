package e2e

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/proto"
)

// This file proves the session configuration of contract section 4 and the
// attachments of section 5 end to end, checking what the model was sent.

// scSystem returns the system prompt of a recorded OpenAI request: the
// request's first message, which must be the only system message.
func scSystem(t *testing.T, req recorded) string {
	t.Helper()
	msgs, ok := req.Body["messages"].([]any)
	require.True(t, ok, "request has messages: %s", req.RawBody)
	require.NotEmpty(t, msgs)
	first, ok := msgs[0].(map[string]any)
	require.True(t, ok)
	require.Equal(t, "system", first["role"], "the first message is the system message")
	systems := 0
	for _, m := range msgs {
		if m.(map[string]any)["role"] == "system" {
			systems++
		}
	}
	require.Equal(t, 1, systems, "the system prompt goes to the model as one system message")
	content, ok := first["content"].(string)
	require.True(t, ok, "the system content is a string: %v", first["content"])
	return content
}

// scOffered names the tools of a recorded OpenAI request, failing on a duplicate.
func scOffered(t *testing.T, req recorded) []string {
	t.Helper()
	names := []string{}
	tools, _ := req.Body["tools"].([]any)
	seen := map[string]bool{}
	for _, tl := range tools {
		name := tl.(map[string]any)["function"].(map[string]any)["name"].(string)
		require.False(t, seen[name], "tool %s offered twice", name)
		seen[name] = true
		names = append(names, name)
	}
	return names
}

// scLastUser returns the content of the last user message of a recorded
// OpenAI request: a string, or a list of content parts.
func scLastUser(t *testing.T, req recorded) any {
	t.Helper()
	msgs := req.Body["messages"].([]any)
	for i := len(msgs) - 1; i >= 0; i-- {
		m := msgs[i].(map[string]any)
		if m["role"] == "user" {
			return m["content"]
		}
	}
	t.Fatalf("no user message in %s", req.RawBody)
	return nil
}

// scHistory returns a session's persisted events.
func (e *env) scHistory(wsID, sid string) []proto.Event {
	e.t.Helper()
	var out proto.EventList
	e.must(http.StatusOK, "GET", fmt.Sprintf("/v1/workspaces/%s/sessions/%s/events", wsID, sid), nil, &out)
	return out.Events
}

// scSession returns one session.
func (e *env) scSession(wsID, sid string) proto.Session {
	e.t.Helper()
	var s proto.Session
	e.must(http.StatusOK, "GET", fmt.Sprintf("/v1/workspaces/%s/sessions/%s", wsID, sid), nil, &s)
	return s
}

// scListIDs returns the ids of the workspace's sessions in list order, and
// the id of GET .../sessions/last.
func (e *env) scListIDs(wsID string) (ids []string, last *string) {
	e.t.Helper()
	var list proto.SessionList
	e.must(http.StatusOK, "GET", "/v1/workspaces/"+wsID+"/sessions", nil, &list)
	ids = []string{}
	for _, s := range list.Sessions {
		ids = append(ids, s.ID)
	}
	var l proto.LastSession
	e.must(http.StatusOK, "GET", "/v1/workspaces/"+wsID+"/sessions/last", nil, &l)
	return ids, l.SessionID
}

// scRefused sends a request that must fail with status and code and the
// contract's error body.
func (e *env) scRefused(method, path string, body any, status int, code string) proto.ErrorDetail {
	e.t.Helper()
	got, raw := e.do(method, path, body, nil)
	require.Equal(e.t, status, got, "%s %s: %s", method, path, raw)
	var eb map[string]map[string]any
	require.NoError(e.t, json.Unmarshal(raw, &eb), "error body is JSON: %s", raw)
	require.Len(e.t, eb, 1, "the body is exactly {\"error\": ...}: %s", raw)
	detail := eb["error"]
	require.NotNil(e.t, detail, "%s", raw)
	assert.Equal(e.t, code, detail["code"], "%s %s: %s", method, path, raw)
	msg, _ := detail["message"].(string)
	assert.NotEmpty(e.t, msg, "%s %s: %s", method, path, raw)
	return proto.ErrorDetail{Code: fmt.Sprint(detail["code"]), Message: msg}
}

// scRun prompts and waits for the run to end well; it returns the fake
// model's requests made by that run.
func (e *env) scRun(wsID string, s *stream, fake *fakeModel, req proto.PromptRequest) (proto.PromptAccepted, []recorded) {
	e.t.Helper()
	before := len(fake.Requests())
	var acc proto.PromptAccepted
	e.must(http.StatusAccepted, "POST", "/v1/workspaces/"+wsID+"/agent", req, &acc)
	rc, _ := s.completion(acc.RunID)
	require.Equal(e.t, proto.OutcomeEndTurn, rc.Outcome, "%+v", rc.Error)
	reqs := fake.Requests()
	require.Greater(e.t, len(reqs), before, "the run called the model")
	return acc, reqs[before:]
}

// scIdle waits for the session.idle of the session: the moment its runs
// are over and it is no longer busy.
func (s *stream) scIdle(sid string) {
	s.t.Helper()
	for {
		f, _ := s.until(proto.EventSessionIdle)
		if f.envelope(s.t).SessionID == sid {
			return
		}
	}
}

// defaultHeadings are the headings of the default sections, in order.
var defaultHeadings = []string{"# Identity", "# Tone and style", "# Tool usage", "# Code changes", "# Environment", "# Working guidelines", "# Safety"}

// todayLine is the only line of the default prompt that may change between
// two requests (at midnight).
var todayLine = regexp.MustCompile(`(?m)^- Today's date: \d{4}-\d{2}-\d{2}$`)

func sameDay(s string) string { return todayLine.ReplaceAllString(s, "- Today's date: D") }

// scSections splits the default prompt into its sections, in order.
func scSections(t *testing.T, def string) []string {
	t.Helper()
	pieces := strings.Split(def, "\n\n# ")
	require.Len(t, pieces, len(defaultHeadings), "the default prompt has the seven sections: %s", def)
	for i := range pieces {
		if i > 0 {
			pieces[i] = "# " + pieces[i]
		}
		require.True(t, strings.HasPrefix(pieces[i], defaultHeadings[i]+"\n"), "section %d starts with %q: %q", i, defaultHeadings[i], pieces[i])
	}
	return pieces
}

func assertInOrder(t *testing.T, s string, subs ...string) {
	t.Helper()
	pos := 0
	for _, sub := range subs {
		i := strings.Index(s[pos:], sub)
		if !assert.GreaterOrEqualf(t, i, 0, "%q missing or out of order in %q", sub, s) {
			return
		}
		pos += i + len(sub)
	}
}

func TestSystemMessageModesReachTheModel(t *testing.T) {
	fake := newFakeModel(t, "openai", reply("ok"))
	e := startEnv(t)
	ws := e.createWorkspace()
	s := e.openStream(ws.ID, newClientID(), "")

	run := func(extra map[string]any) string {
		t.Helper()
		sess := e.openAISession(ws.ID, fake, extra)
		_, reqs := e.scRun(ws.ID, s, fake, proto.PromptRequest{SessionID: sess.ID, Prompt: "hello"})
		require.Len(t, reqs, 1)
		return scSystem(t, reqs[0])
	}

	def := run(nil)
	sections := scSections(t, def)
	assert.Contains(t, sections[0], "You are Tandem", "identity says the agent is Tandem")
	assert.Contains(t, sections[4], ws.Path, "environment names the workspace")
	for _, tool := range []string{"`view`", "`ls`", "`glob`", "`grep`", "`edit`", "`write`", "`bash`"} {
		assert.Contains(t, sections[2], tool, "tool_usage describes %s", tool)
	}

	t.Run("append", func(t *testing.T) {
		const added = "Always answer in French.\nSign every answer with -- the bot."
		got := run(map[string]any{"system_message": map[string]any{"mode": "append", "content": added}})
		assert.Contains(t, got, "You are Tandem")
		assert.True(t, strings.HasPrefix(sameDay(got), sameDay(def)), "append keeps the whole default prompt:\n%s", got)
		assert.True(t, strings.HasSuffix(got, added), "and ends with the added text:\n%s", got)
		rest := sameDay(got)[len(sameDay(def)):]
		assert.Equal(t, added, strings.TrimLeft(rest, "\n"), "nothing but the added text comes after the default")
		assertInOrder(t, got, append(defaultHeadings, added)...)
	})

	t.Run("replace", func(t *testing.T) {
		const content = "You are a pirate.\n\nSpeak only in rhymes.  "
		got := run(map[string]any{"system_message": map[string]any{"mode": "replace", "content": content}})
		assert.Equal(t, content, got, "replace sends exactly the content")
	})

	t.Run("customize", func(t *testing.T) {
		got := run(map[string]any{"system_message": map[string]any{
			"mode":    "customize",
			"content": "CUSTOM TAIL: the user is on call tonight.",
			"sections": map[string]any{
				"tone":              map[string]any{"action": "replace", "content": "# Tone\nAnswer like a polite butler."},
				"code_change_rules": map[string]any{"action": "remove"},
				"identity":          map[string]any{"action": "prepend", "content": "PREFACE: staging environment."},
				"safety":            map[string]any{"action": "append", "content": "EXTRA SAFETY: never touch prod."},
			},
		}})
		// The tone is replaced: the new text is there, the default one is not.
		assert.Contains(t, got, "Answer like a polite butler.")
		assert.NotContains(t, got, "# Tone and style")
		assert.NotContains(t, got, strings.TrimPrefix(sections[1], "# Tone and style\n"))
		for _, line := range strings.Split(sections[1], "\n") {
			assert.NotContains(t, got, line, "no line of the default tone is left")
		}
		// The code change rules are gone.
		assert.NotContains(t, got, "# Code changes")
		for _, line := range strings.Split(sections[3], "\n") {
			assert.NotContains(t, got, line, "no line of the default code change rules is left")
		}
		// The other sections are untouched, in order, and the content comes last.
		for _, i := range []int{0, 2, 4, 5, 6} {
			assert.Contains(t, sameDay(got), sameDay(sections[i]))
		}
		assert.Contains(t, got, "You are Tandem")
		assertInOrder(t, sameDay(got), "PREFACE: staging environment.", sections[0], "Answer like a polite butler.", sections[2],
			sameDay(sections[4]), sections[5], sections[6], "EXTRA SAFETY: never touch prod.", "CUSTOM TAIL: the user is on call tonight.")
		assert.True(t, strings.HasSuffix(got, "CUSTOM TAIL: the user is on call tonight."), "the content is appended at the end:\n%s", got)
	})
}

func TestToolFiltersApplyToBuiltinAndClientTools(t *testing.T) {
	fake := newFakeModel(t, "openai", reply("ok"))
	e := startEnv(t)
	ws := e.createWorkspace()
	s := e.openStream(ws.ID, newClientID(), "")
	builtins := []string{"view", "ls", "glob", "grep", "edit", "write", "bash"}
	schema := json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`)
	clientTools := []proto.ToolSpec{
		{Name: "deploy", Description: "deploy the app", Parameters: schema},
		{Name: "lookup", Description: "look something up", Parameters: schema, SkipPermission: true},
	}

	cases := []struct {
		name   string
		extra  map[string]any
		client bool
		want   []string
	}{
		{"no filter", nil, false, builtins},
		{"allow list", map[string]any{"available_tools": []string{"view", "edit"}}, false, []string{"view", "edit"}},
		{"deny list", map[string]any{"excluded_tools": []string{"view"}}, false, []string{"ls", "glob", "grep", "edit", "write", "bash"}},
		{"unknown names are accepted", map[string]any{
			"available_tools": []string{"view", "edit", "registered_later"},
			"excluded_tools":  []string{"not_a_tool"},
		}, false, []string{"view", "edit"}},
		{"deny wins over allow", map[string]any{
			"available_tools": []string{"view", "edit", "bash"},
			"excluded_tools":  []string{"edit"},
		}, false, []string{"view", "bash"}},
		{"client tools unfiltered", nil, true, append(append([]string{}, builtins...), "deploy", "lookup")},
		{"client tool in the allow list", map[string]any{"available_tools": []string{"view", "deploy"}}, true, []string{"view", "deploy"}},
		{"client tool in the deny list", map[string]any{"excluded_tools": []string{"lookup", "bash"}}, true,
			[]string{"view", "ls", "glob", "grep", "edit", "write", "deploy"}},
		{"allow list without client tools", map[string]any{"available_tools": []string{"view", "edit"}}, true, []string{"view", "edit"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			extra := map[string]any{}
			for k, v := range c.extra {
				extra[k] = v
			}
			if c.client {
				extra["client_id"] = s.ClientID
				extra["tools"] = clientTools
			}
			sess := e.openAISession(ws.ID, fake, extra) // 201, unknown names and all
			_, reqs := e.scRun(ws.ID, s, fake, proto.PromptRequest{SessionID: sess.ID, Prompt: "what can you do?"})
			require.Len(t, reqs, 1)
			assert.ElementsMatch(t, c.want, scOffered(t, reqs[0]))
		})
	}

	// An unknown name in the allow list is how a session takes a client tool
	// that registers later.
	later := e.openAISession(ws.ID, fake, map[string]any{"available_tools": []string{"view", "registered_later"}})
	_, reqs := e.scRun(ws.ID, s, fake, proto.PromptRequest{SessionID: later.ID, Prompt: "before"})
	assert.Equal(t, []string{"view"}, scOffered(t, reqs[0]))
	var resumed proto.ResumeResponse
	e.must(http.StatusOK, "POST", fmt.Sprintf("/v1/workspaces/%s/sessions/%s/resume", ws.ID, later.ID), proto.ResumeRequest{
		ClientID: s.ClientID,
		Tools:    []proto.ToolSpec{{Name: "registered_later", Parameters: schema}, {Name: "not_allowed", Parameters: schema}},
	}, &resumed)
	_, reqs = e.scRun(ws.ID, s, fake, proto.PromptRequest{SessionID: later.ID, Prompt: "after"})
	assert.ElementsMatch(t, []string{"view", "registered_later"}, scOffered(t, reqs[0]))

	// The filter holds on every request of a run, and a call to a filtered
	// tool is refused to the model rather than run.
	fake2 := newFakeModel(t, "openai", func(n int, req map[string]any) step {
		if n == 0 {
			return step{toolCalls: []scriptedCall{{ID: "call_1", Name: "write", Args: `{"path": "x.txt", "content": "no"}`}}}
		}
		return step{text: []string{"done"}}
	})
	sess := e.openAISession(ws.ID, fake2, map[string]any{"available_tools": []string{"view"}, "permission_mode": "allow_all"})
	_, reqs = e.scRun(ws.ID, s, fake2, proto.PromptRequest{SessionID: sess.ID, Prompt: "write x.txt"})
	require.Len(t, reqs, 2)
	for _, r := range reqs {
		assert.Equal(t, []string{"view"}, scOffered(t, r))
	}
	_, err := os.Stat(filepath.Join(e.workDir, "x.txt"))
	assert.True(t, os.IsNotExist(err), "a tool the session does not offer never runs")
	assert.Contains(t, reqs[1].RawBody, "unknown tool")
}

func TestModelSwitchAndReasoningEffort(t *testing.T) {
	fake := newFakeModel(t, "openai", reply("ok"))
	e := startEnv(t)
	ws := e.createWorkspace()
	s := e.openStream(ws.ID, newClientID(), "")
	sp := func(sid string) string { return fmt.Sprintf("/v1/workspaces/%s/sessions/%s", ws.ID, sid) }

	// model and reasoning_effort on create: session.started carries them.
	sess := e.openAISession(ws.ID, fake, map[string]any{"reasoning_effort": "low"})
	assert.Equal(t, "openai/gpt-test", sess.Model)
	assert.Equal(t, "low", sess.ReasoningEffort)
	started, _ := s.until(proto.EventSessionStarted)
	ev := started.envelope(t)
	assert.Equal(t, sess.ID, ev.SessionID)
	var st proto.SessionStarted
	require.NoError(t, json.Unmarshal(ev.Data, &st))
	assert.Equal(t, proto.SessionStarted{SessionID: sess.ID, Model: "openai/gpt-test", ReasoningEffort: "low",
		Context: sess.Context}, st)
	assert.Equal(t, ws.Path, st.Context.Cwd)
	assert.Nil(t, st.Context.Window, "gpt-test's window is unknown")
	hist := e.scHistory(ws.ID, sess.ID)
	require.NotEmpty(t, hist)
	assert.Equal(t, proto.EventSessionStarted, hist[0].Type, "the first event of a session is session.started")
	assert.Equal(t, ev.Seq, hist[0].Seq)

	_, reqs := e.scRun(ws.ID, s, fake, proto.PromptRequest{SessionID: sess.ID, Prompt: "first"})
	assert.Equal(t, "gpt-test", reqs[0].Body["model"])
	assert.Equal(t, "low", reqs[0].Body["reasoning_effort"])

	// The switch.
	var switched proto.Session
	e.must(http.StatusOK, "PUT", sp(sess.ID)+"/model", map[string]any{"model": "openai/other-model", "reasoning_effort": "high"}, &switched)
	assert.Equal(t, sess.ID, switched.ID)
	assert.Equal(t, "openai/other-model", switched.Model)
	assert.Equal(t, "high", switched.ReasoningEffort)
	assert.Equal(t, 2, switched.MessageCount)
	changed, _ := s.until(proto.EventSessionModelChanged)
	cev := changed.envelope(t)
	assert.Equal(t, sess.ID, cev.SessionID)
	assert.False(t, cev.Ephemeral)
	var mc proto.SessionModelChanged
	require.NoError(t, json.Unmarshal(cev.Data, &mc))
	assert.Equal(t, proto.SessionModelChanged{Model: "openai/other-model", PreviousModel: "openai/gpt-test", ReasoningEffort: "high"}, mc)
	var inHistory []proto.Event
	for _, h := range e.scHistory(ws.ID, sess.ID) {
		if h.Type == proto.EventSessionModelChanged {
			inHistory = append(inHistory, h)
		}
	}
	require.Len(t, inHistory, 1, "session.model_changed is kept")
	assert.Equal(t, cev.Seq, inHistory[0].Seq)
	assert.JSONEq(t, string(cev.Data), string(inHistory[0].Data))
	got := e.scSession(ws.ID, sess.ID)
	assert.Equal(t, "openai/other-model", got.Model)
	assert.Equal(t, "high", got.ReasoningEffort)

	acc, reqs := e.scRun(ws.ID, s, fake, proto.PromptRequest{SessionID: sess.ID, Prompt: "second"})
	require.Len(t, reqs, 1)
	assert.Equal(t, "other-model", reqs[0].Body["model"], "the next request uses the new model")
	assert.Equal(t, "high", reqs[0].Body["reasoning_effort"], "and passes the effort on")
	msgs := runMessages(e.messages(ws.ID, sess.ID), acc.RunID)
	require.Len(t, msgs, 2)
	assert.Equal(t, "openai/other-model", msgs[1].Model, "the assistant message records the new model")

	// Without reasoning_effort the effort stays; previous_model is the string replaced.
	e.must(http.StatusOK, "PUT", sp(sess.ID)+"/model", map[string]any{"model": "openai/acme/third-v2"}, &switched)
	assert.Equal(t, "openai/acme/third-v2", switched.Model)
	assert.Equal(t, "high", switched.ReasoningEffort)
	changed, _ = s.until(proto.EventSessionModelChanged)
	require.NoError(t, json.Unmarshal(changed.envelope(t).Data, &mc))
	assert.Equal(t, proto.SessionModelChanged{Model: "openai/acme/third-v2", PreviousModel: "openai/other-model", ReasoningEffort: "high"}, mc)
	_, reqs = e.scRun(ws.ID, s, fake, proto.PromptRequest{SessionID: sess.ID, Prompt: "third"})
	assert.Equal(t, "acme/third-v2", reqs[0].Body["model"], "the provider is asked for everything after the first /")
	assert.Equal(t, "high", reqs[0].Body["reasoning_effort"])

	// A session without an effort sends none.
	plain := e.openAISession(ws.ID, fake, nil)
	assert.Empty(t, plain.ReasoningEffort)
	_, reqs = e.scRun(ws.ID, s, fake, proto.PromptRequest{SessionID: plain.ID, Prompt: "plain"})
	assert.NotContains(t, reqs[0].Body, "reasoning_effort")

	// Bad switches change nothing.
	before := len(e.scHistory(ws.ID, sess.ID))
	e.scRefused("PUT", sp(sess.ID)+"/model", map[string]any{"model": "openai/x", "reasoning_effort": "extreme"}, 400, proto.CodeInvalidArgument)
	e.scRefused("PUT", sp(sess.ID)+"/model", map[string]any{"model": "skynet/t-800"}, 400, proto.CodeInvalidArgument)
	e.scRefused("PUT", sp(sess.ID)+"/model", map[string]any{"model": "openai/"}, 400, proto.CodeInvalidArgument)
	e.scRefused("PUT", sp(sess.ID)+"/model", map[string]any{"model": ""}, 400, proto.CodeInvalidArgument)
	e.scRefused("PUT", sp(sess.ID)+"/model", map[string]any{"reasoning_effort": "low"}, 400, proto.CodeInvalidArgument)
	e.scRefused("PUT", sp(sess.ID)+"/model", map[string]any{"model": "openai/x", "effort": "low"}, 400, proto.CodeInvalidArgument)
	e.scRefused("PUT", sp(uuid.NewString())+"/model", map[string]any{"model": "openai/x"}, 404, proto.CodeSessionNotFound)
	got = e.scSession(ws.ID, sess.ID)
	assert.Equal(t, "openai/acme/third-v2", got.Model)
	assert.Equal(t, "high", got.ReasoningEffort)
	assert.Len(t, e.scHistory(ws.ID, sess.ID), before, "no event for a refused switch")

	// Unknown effort on create is refused too.
	e.scRefused("POST", "/v1/workspaces/"+ws.ID+"/sessions", map[string]any{"reasoning_effort": "max"}, 400, proto.CodeInvalidArgument)
	e.scRefused("POST", "/v1/workspaces/"+ws.ID+"/sessions", map[string]any{"model": "skynet/t-800"}, 400, proto.CodeInvalidArgument)
	ids, _ := e.scListIDs(ws.ID)
	assert.ElementsMatch(t, []string{sess.ID, plain.ID}, ids, "no session was created")
}

// scPNG encodes a 1x1 PNG.
func scPNG(t *testing.T) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 1, 1))
	img.Set(0, 0, color.RGBA{R: 200, G: 30, B: 60, A: 255})
	var b bytes.Buffer
	require.NoError(t, png.Encode(&b, img))
	return b.Bytes()
}

func TestAttachmentsReachTheModel(t *testing.T) {
	fake := newFakeModel(t, "openai", reply("seen"))
	e := startEnv(t)
	ws := e.createWorkspace()
	s := e.openStream(ws.ID, newClientID(), "")
	pngData := scPNG(t)
	b64 := base64.StdEncoding.EncodeToString(pngData)
	todo := "buy milk\nfix the login bug\ncall Ada\n"
	mainGo := "package main\n\nfunc main() {\n\tprintln(\"LINE FOUR\")\n}\n"
	require.NoError(t, os.MkdirAll(filepath.Join(e.workDir, "notes"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(e.workDir, "src"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(e.workDir, "notes", "todo.txt"), []byte(todo), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(e.workDir, "src", "main.go"), []byte(mainGo), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(e.workDir, "shot.png"), pngData, 0o600))

	sess := e.openAISession(ws.ID, fake, nil)
	acc, reqs := e.scRun(ws.ID, s, fake, proto.PromptRequest{SessionID: sess.ID, Prompt: "look at these", Attachments: []proto.Attachment{
		{Type: "blob", Data: b64, MimeType: "image/png", DisplayName: "dot.png"},
		{Type: "file", Path: "notes/todo.txt"},
		{Type: "file", Path: filepath.Join(ws.Path, "src", "main.go"), DisplayName: "middle of main", LineRange: &proto.LineRange{Start: 3, End: 4}},
		{Type: "file", Path: "shot.png"},
	}})
	require.Len(t, reqs, 1)

	content, ok := scLastUser(t, reqs[0]).([]any)
	require.True(t, ok, "a user message with images is a list of content parts: %s", reqs[0].RawBody)
	var text strings.Builder
	var images []string
	for _, p := range content {
		part := p.(map[string]any)
		switch part["type"] {
		case "text":
			text.WriteString(part["text"].(string))
		case "image_url":
			images = append(images, part["image_url"].(map[string]any)["url"].(string))
		default:
			t.Errorf("unexpected content part %v", part)
		}
	}
	want := "data:image/png;base64," + b64
	assert.Equal(t, []string{want, want}, images, "the blob and the image file reach the model as image input")
	sent := text.String()
	assert.True(t, strings.HasPrefix(sent, "look at these"), sent)
	assert.Contains(t, sent, "buy milk\nfix the login bug\ncall Ada", "the whole file reaches the model as text")
	assert.Contains(t, sent, "notes/todo.txt")
	assert.Contains(t, sent, "func main() {\n\tprintln(\"LINE FOUR\")", "the line range reaches the model")
	assert.NotContains(t, sent, "package main", "lines before the range are left out")
	assert.NotContains(t, sent, "println(\"LINE FOUR\")\n}", "lines after the range are left out")
	assert.NotContains(t, sent, b64[:20], "images are not sent as text")

	// The stored user message keeps the prompt and one attachment part each.
	msgs := runMessages(e.messages(ws.ID, sess.ID), acc.RunID)
	require.NotEmpty(t, msgs)
	user := msgs[0]
	assert.Equal(t, proto.RoleUser, user.Role)
	assert.Equal(t, []proto.Part{
		{Type: proto.PartText, Text: "look at these"},
		{Type: proto.PartAttachment, Kind: "blob", MimeType: "image/png", DisplayName: "dot.png", Size: int64(len(pngData))},
		{Type: proto.PartAttachment, Kind: "file", Path: "notes/todo.txt", MimeType: "text/plain", DisplayName: "todo.txt", Size: int64(len(todo))},
		{Type: proto.PartAttachment, Kind: "file", Path: "src/main.go", MimeType: "text/plain", DisplayName: "middle of main", Size: int64(len(mainGo))},
		{Type: proto.PartAttachment, Kind: "file", Path: "shot.png", MimeType: "image/png", DisplayName: "shot.png", Size: int64(len(pngData))},
	}, user.Parts)
	// The raw JSON has exactly the contract's attachment fields.
	_, raw := e.do("GET", fmt.Sprintf("/v1/workspaces/%s/sessions/%s/messages", ws.ID, sess.ID), nil, nil)
	var rawList struct {
		Messages []struct {
			Parts []map[string]any `json:"parts"`
		} `json:"messages"`
	}
	require.NoError(t, json.Unmarshal(raw, &rawList))
	blob := rawList.Messages[0].Parts[1]
	assert.Equal(t, map[string]any{"type": "attachment", "kind": "blob", "mime_type": "image/png", "display_name": "dot.png", "size": float64(len(pngData))}, blob)
	file := rawList.Messages[0].Parts[2]
	assert.Equal(t, map[string]any{"type": "attachment", "kind": "file", "path": "notes/todo.txt", "mime_type": "text/plain", "display_name": "todo.txt", "size": float64(len(todo))}, file)

	// A blob of text goes as text; media types are compared without case or
	// parameters, as RFC 2045 has it.
	csv := "col_a,col_b\n1,2\n"
	acc, reqs = e.scRun(ws.ID, s, fake, proto.PromptRequest{SessionID: sess.ID, Prompt: "and this", Attachments: []proto.Attachment{
		{Type: "blob", Data: base64.StdEncoding.EncodeToString([]byte(csv)), MimeType: "text/csv; charset=utf-8"},
	}})
	last, ok := scLastUser(t, reqs[0]).(string)
	require.True(t, ok, "a user message without images is a string: %s", reqs[0].RawBody)
	assert.Contains(t, last, "col_a,col_b\n1,2")
	assert.NotContains(t, reqs[0].RawBody, "image_url", "earlier images are not sent again")
	msgs = runMessages(e.messages(ws.ID, sess.ID), acc.RunID)
	require.NotEmpty(t, msgs)
	require.Len(t, msgs[0].Parts, 2)
	assert.Equal(t, proto.Part{Type: proto.PartAttachment, Kind: "blob", MimeType: "text/csv", DisplayName: "attachment", Size: int64(len(csv))}, msgs[0].Parts[1])

	acc, reqs = e.scRun(ws.ID, s, fake, proto.PromptRequest{SessionID: sess.ID, Prompt: "shouting", Attachments: []proto.Attachment{
		{Type: "blob", Data: b64, MimeType: "Image/PNG", DisplayName: "loud.png"},
	}})
	content, ok = scLastUser(t, reqs[0]).([]any)
	require.True(t, ok, "%s", reqs[0].RawBody)
	require.Len(t, content, 2)
	assert.Equal(t, map[string]any{"type": "image_url", "image_url": map[string]any{"url": want}}, content[1])
	msgs = runMessages(e.messages(ws.ID, sess.ID), acc.RunID)
	require.NotEmpty(t, msgs)
	require.Len(t, msgs[0].Parts, 2)
	assert.Equal(t, proto.Part{Type: proto.PartAttachment, Kind: "blob", MimeType: "image/png", DisplayName: "loud.png", Size: int64(len(pngData))}, msgs[0].Parts[1])
}

func TestSessionLogsLiveAndInHistory(t *testing.T) {
	e := startEnv(t)
	ws := e.createWorkspace()
	s := e.openStream(ws.ID, newClientID(), "")
	sess := e.createSession(ws.ID, nil)
	started, _ := s.until(proto.EventSessionStarted)
	lp := fmt.Sprintf("/v1/workspaces/%s/sessions/%s/log", ws.ID, sess.ID)

	logs := []proto.LogRequest{
		{Level: "info", Message: "build started"},
		{Level: "warning", Message: "typing...", Ephemeral: true},
		{Level: "warning", Message: "disk almost full"},
		{Level: "error", Message: "build failed"},
	}
	var seqs []int64
	for _, l := range logs {
		var out proto.LogResponse
		e.must(http.StatusOK, "POST", lp, l, &out)
		require.Positive(t, out.Seq)
		seqs = append(seqs, out.Seq)
	}
	for i := 1; i < len(seqs); i++ {
		assert.Greater(t, seqs[i], seqs[i-1])
	}

	// All live, in order, the ephemeral one marked.
	for i, l := range logs {
		f, _ := s.until(proto.EventSessionLog)
		ev := f.envelope(t)
		assert.Equal(t, fmt.Sprint(seqs[i]), f.ID, "every event has an id, kept or not")
		assert.Equal(t, seqs[i], ev.Seq)
		assert.Equal(t, sess.ID, ev.SessionID)
		assert.Equal(t, l.Ephemeral, ev.Ephemeral)
		assert.Equal(t, l.Ephemeral, strings.Contains(f.Data, `"ephemeral":true`), f.Data)
		var data proto.SessionLog
		require.NoError(t, json.Unmarshal(ev.Data, &data))
		assert.Equal(t, proto.SessionLog{Level: l.Level, Message: l.Message}, data)
	}

	// History: the kept ones, in order; the ephemeral one is absent.
	var kept []proto.Event
	for _, h := range e.scHistory(ws.ID, sess.ID) {
		assert.NotEqual(t, seqs[1], h.Seq)
		assert.NotContains(t, string(h.Data), "typing...")
		if h.Type == proto.EventSessionLog {
			kept = append(kept, h)
		}
	}
	require.Len(t, kept, 3)
	for i, want := range []int{0, 2, 3} {
		assert.Equal(t, seqs[want], kept[i].Seq)
		var data proto.SessionLog
		require.NoError(t, json.Unmarshal(kept[i].Data, &data))
		assert.Equal(t, proto.SessionLog{Level: logs[want].Level, Message: logs[want].Message}, data)
	}

	// A replay from before the logs skips the ephemeral one too.
	r := e.openStream(ws.ID, newClientID(), "", lastEventID(started.envelope(t).Seq))
	var replayed []int64
	for range 3 {
		f, _ := r.until(proto.EventSessionLog)
		replayed = append(replayed, f.envelope(t).Seq)
	}
	assert.Equal(t, []int64{seqs[0], seqs[2], seqs[3]}, replayed)
}

func TestSessionLifecycleAndMetadata(t *testing.T) {
	e := startEnv(t)
	ws := e.createWorkspace()
	u := e.openStream(ws.ID, newClientID(), "")
	wsp := "/v1/workspaces/" + ws.ID
	sp := func(sid string) string { return wsp + "/sessions/" + sid }

	ids, last := e.scListIDs(ws.ID)
	assert.Empty(t, ids)
	assert.Nil(t, last)

	// A client-chosen id, then 409 on reuse.
	chosen := uuid.NewString()
	s1 := e.createSession(ws.ID, map[string]any{"id": chosen})
	assert.Equal(t, chosen, s1.ID)
	assert.Equal(t, ws.ID, s1.WorkspaceID)
	assert.Equal(t, "echo", s1.Model, "the server's default model")
	assert.Zero(t, s1.MessageCount)
	assert.False(t, s1.Busy)
	assert.Zero(t, s1.Queued)
	assert.Zero(t, s1.AttachedClients)
	assert.Equal(t, ws.Path, s1.Context.Cwd)
	assert.False(t, s1.CreatedAt.IsZero())
	assert.Equal(t, s1.CreatedAt, s1.UpdatedAt)
	untitled := s1.Title
	e.scRefused("POST", wsp+"/sessions", map[string]any{"id": chosen}, 409, proto.CodeAlreadyExists)
	e.scRefused("POST", wsp+"/sessions", map[string]any{"id": chosen, "title": "other"}, 409, proto.CodeAlreadyExists)
	assert.Equal(t, untitled, e.scSession(ws.ID, chosen).Title, "the refused create changed nothing")

	s2 := e.createSession(ws.ID, map[string]any{"title": "Given title"})
	assert.Equal(t, "Given title", s2.Title)
	ids, last = e.scListIDs(ws.ID)
	assert.Equal(t, []string{s2.ID, s1.ID}, ids, "most recently updated first")
	require.NotNil(t, last)
	assert.Equal(t, s2.ID, *last)

	// A prompt to the older session moves it to the top and names it.
	acc := e.prompt(ws.ID, s1.ID, "  Fix the flaky   login test\nThe second line is not part of the title.")
	ids, last = e.scListIDs(ws.ID)
	assert.Equal(t, []string{s1.ID, s2.ID}, ids, "a prompt updates the session")
	require.NotNil(t, last)
	assert.Equal(t, s1.ID, *last)
	rc, _ := u.completion(acc.RunID)
	require.Equal(t, proto.OutcomeEndTurn, rc.Outcome)
	u.scIdle(s1.ID)
	got := e.scSession(ws.ID, s1.ID)
	assert.Equal(t, "Fix the flaky login test", got.Title, "a title made from the first prompt")
	assert.Equal(t, 2, got.MessageCount)
	assert.False(t, got.Busy)
	assert.Zero(t, got.Queued)
	assert.True(t, got.UpdatedAt.After(got.CreatedAt.Time))

	// A given title is kept; only the first prompt names a session.
	acc = e.prompt(ws.ID, s2.ID, "rename me please")
	rc, _ = u.completion(acc.RunID)
	require.Equal(t, proto.OutcomeEndTurn, rc.Outcome)
	assert.Equal(t, "Given title", e.scSession(ws.ID, s2.ID).Title)
	ids, _ = e.scListIDs(ws.ID)
	assert.Equal(t, []string{s2.ID, s1.ID}, ids)
	acc = e.prompt(ws.ID, s1.ID, "a second prompt")
	rc, _ = u.completion(acc.RunID)
	require.Equal(t, proto.OutcomeEndTurn, rc.Outcome)
	u.scIdle(s1.ID)
	got = e.scSession(ws.ID, s1.ID)
	assert.Equal(t, "Fix the flaky login test", got.Title)
	assert.Equal(t, 4, got.MessageCount)
	ids, _ = e.scListIDs(ws.ID)
	assert.Equal(t, []string{s1.ID, s2.ID}, ids)

	// attached_clients counts a client whose stream is filtered on the session.
	c := e.openStream(ws.ID, newClientID(), "&session_id="+s1.ID)
	assert.Equal(t, 1, e.scSession(ws.ID, s1.ID).AttachedClients)
	assert.Equal(t, 0, e.scSession(ws.ID, s2.ID).AttachedClients)

	// busy while a run is active; queued counts the prompts behind it.
	slow := e.prompt(ws.ID, s1.ID, "/slow 1000 20")
	assert.Equal(t, proto.RunRunning, slow.State)
	got = e.scSession(ws.ID, s1.ID)
	assert.True(t, got.Busy, "busy from the 202 on")
	assert.Zero(t, got.Queued, "the running prompt is not queued")
	behind := e.prompt(ws.ID, s1.ID, "queued behind the slow one")
	assert.Equal(t, proto.RunQueued, behind.State)
	assert.Equal(t, 1, behind.Position)
	got = e.scSession(ws.ID, s1.ID)
	assert.True(t, got.Busy)
	assert.Equal(t, 1, got.Queued)
	assert.Equal(t, 1, got.AttachedClients)
	var list proto.SessionList
	e.must(http.StatusOK, "GET", wsp+"/sessions", nil, &list)
	require.Len(t, list.Sessions, 2)
	assert.Equal(t, s1.ID, list.Sessions[0].ID)
	assert.True(t, list.Sessions[0].Busy, "the list shows the same metadata")
	assert.Equal(t, 1, list.Sessions[0].Queued)
	assert.False(t, list.Sessions[1].Busy)
	assert.Zero(t, list.Sessions[1].Queued)

	// The filtered client leaves: it no longer counts.
	c.close()
	for {
		f, _ := u.until(proto.EventClientDetached)
		var p proto.ClientPresence
		require.NoError(t, json.Unmarshal(f.envelope(t).Data, &p))
		if p.ClientID == c.ClientID {
			break
		}
	}
	assert.Equal(t, 0, e.scSession(ws.ID, s1.ID).AttachedClients)

	// Delete cancels the runs and every session route answers 404 afterwards.
	e.must(http.StatusNoContent, "DELETE", sp(s1.ID), nil, nil)
	for _, id := range []string{slow.RunID, behind.RunID} {
		rc, _ := u.completion(id)
		assert.Equal(t, proto.OutcomeCanceled, rc.Outcome, id)
	}
	del, _ := u.until(proto.EventSessionDeleted)
	assert.Equal(t, s1.ID, del.envelope(t).SessionID)
	routes := []struct {
		method, path string
		body         any
	}{
		{"GET", sp(s1.ID), nil},
		{"DELETE", sp(s1.ID), nil},
		{"GET", sp(s1.ID) + "/messages", nil},
		{"GET", sp(s1.ID) + "/events", nil},
		{"GET", sp(s1.ID) + "/events?after=1&limit=5", nil},
		{"POST", sp(s1.ID) + "/log", proto.LogRequest{Level: "info", Message: "anyone?"}},
		{"PUT", sp(s1.ID) + "/model", map[string]any{"model": "openai/gpt-4.1"}},
		{"POST", sp(s1.ID) + "/resume", proto.ResumeRequest{ClientID: newClientID()}},
		{"GET", sp(s1.ID) + "/pending", nil},
		{"GET", wsp + "/agent/sessions/" + s1.ID, nil},
		{"POST", wsp + "/agent/sessions/" + s1.ID + "/cancel", nil},
		{"POST", wsp + "/agent", proto.PromptRequest{SessionID: s1.ID, Prompt: "hello?"}},
		{"GET", wsp + "/events?client_id=" + newClientID() + "&session_id=" + s1.ID, nil},
	}
	for _, r := range routes {
		e.scRefused(r.method, r.path, r.body, http.StatusNotFound, proto.CodeSessionNotFound)
	}
	ids, last = e.scListIDs(ws.ID)
	assert.Equal(t, []string{s2.ID}, ids)
	require.NotNil(t, last)
	assert.Equal(t, s2.ID, *last)

	// The id is free again once deleted, and the workspace goes on.
	again := e.createSession(ws.ID, map[string]any{"id": chosen})
	assert.Equal(t, 0, again.MessageCount)
	hist := e.scHistory(ws.ID, chosen)
	require.Len(t, hist, 1, "nothing of the deleted session's history is left")
	assert.Equal(t, proto.EventSessionStarted, hist[0].Type)
	assert.Empty(t, e.messages(ws.ID, chosen))

	e.must(http.StatusNoContent, "DELETE", sp(chosen), nil, nil)
	e.must(http.StatusNoContent, "DELETE", sp(s2.ID), "{}", nil)
	_, raw := e.do("GET", wsp+"/sessions", nil, nil)
	assert.JSONEq(t, `{"sessions": []}`, string(raw))
	_, raw = e.do("GET", wsp+"/sessions/last", nil, nil)
	assert.JSONEq(t, `{"session_id": null}`, string(raw))
}

func TestBadSessionAndAttachmentInputIsRefused(t *testing.T) {
	fake := newFakeModel(t, "openai", reply("ok"))
	e := startEnv(t)
	ws := e.createWorkspace()
	s := e.openStream(ws.ID, newClientID(), "")
	sess := e.openAISession(ws.ID, fake, nil)
	wsp := "/v1/workspaces/" + ws.ID

	require.NoError(t, os.WriteFile(filepath.Join(e.workDir, "ok.txt"), []byte("fine\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(e.workDir, "big.txt"), bytes.Repeat([]byte("a"), 1<<20+1), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(e.workDir, "limit.txt"), bytes.Repeat([]byte("b"), 1<<20), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(e.workDir, "bin.dat"), []byte{0x7f, 'E', 'L', 'F', 0, 0, 1, 2}, 0o600))
	require.NoError(t, os.Mkdir(filepath.Join(e.workDir, "dir"), 0o755))
	outsideDir := t.TempDir()
	outside := filepath.Join(outsideDir, "private.txt")
	require.NoError(t, os.WriteFile(outside, []byte("TOP-SECRET-CONTENT"), 0o600))
	require.NoError(t, os.Symlink(outside, filepath.Join(e.workDir, "link.txt")))
	pngB64 := base64.StdEncoding.EncodeToString(scPNG(t))

	file := func(path string) proto.Attachment { return proto.Attachment{Type: "file", Path: path} }
	blob := func(data, mime string) proto.Attachment {
		return proto.Attachment{Type: "blob", Data: data, MimeType: mime}
	}
	cases := []struct {
		name string
		att  proto.Attachment
	}{
		{"outside the workspace", file(outside)},
		{"relative escape", file("../" + filepath.Base(outsideDir) + "/private.txt")},
		{"symlink out of the workspace", file("link.txt")},
		{"missing file", file("nope.txt")},
		{"a directory", file("dir")},
		{"a binary file", file("bin.dat")},
		{"file over 1 MiB", file("big.txt")},
		{"line range past the end", proto.Attachment{Type: "file", Path: "ok.txt", LineRange: &proto.LineRange{Start: 5, End: 6}}},
		{"line range from 0", proto.Attachment{Type: "file", Path: "ok.txt", LineRange: &proto.LineRange{Start: 0, End: 1}}},
		{"bad base64", blob("not base64 at all!", "image/png")},
		{"truncated base64", blob(pngB64[:len(pngB64)-3], "image/png")},
		{"blob over 10 MiB", blob(base64.StdEncoding.EncodeToString(make([]byte, 10<<20+1)), "image/png")},
		{"unsupported mime type", blob(base64.StdEncoding.EncodeToString([]byte("PK\x03\x04")), "application/zip")},
		{"blob without mime type", blob(pngB64, "")},
		{"malformed mime type", blob(pngB64, "image/")},
		{"svg is no image input", blob(base64.StdEncoding.EncodeToString([]byte("<svg/>")), "image/svg+xml")},
		{"blob without data", blob("", "image/png")},
		{"blob with a path", proto.Attachment{Type: "blob", Data: pngB64, MimeType: "image/png", Path: "ok.txt"}},
		{"file with data", proto.Attachment{Type: "file", Path: "ok.txt", Data: pngB64}},
		{"unknown type", proto.Attachment{Type: "url", Path: "https://example.com"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// A good attachment first: the whole prompt is refused for the bad one.
			body := proto.PromptRequest{SessionID: sess.ID, Prompt: "see attached", Attachments: []proto.Attachment{file("ok.txt"), c.att}}
			detail := e.scRefused("POST", wsp+"/agent", body, http.StatusBadRequest, proto.CodeInvalidArgument)
			assert.Contains(t, detail.Message, "attachments[1]", "the message names the attachment")
			assert.NotContains(t, detail.Message, "TOP-SECRET", "file contents never leak into errors")
		})
	}
	e.scRefused("POST", wsp+"/sessions", map[string]any{"reasoning_effort": "maximum"}, 400, proto.CodeInvalidArgument)
	e.scRefused("PUT", wsp+"/sessions/"+sess.ID+"/model", map[string]any{"model": "openai/gpt-test", "reasoning_effort": "none"}, 400, proto.CodeInvalidArgument)

	// Nothing was accepted, nothing reached the model, nothing changed.
	for _, h := range e.scHistory(ws.ID, sess.ID) {
		assert.NotEqual(t, proto.EventRunAccepted, h.Type, "nothing was accepted")
		assert.NotEqual(t, proto.EventSessionModelChanged, h.Type)
	}
	assert.Empty(t, e.messages(ws.ID, sess.ID))
	assert.Empty(t, fake.Requests())
	got := e.scSession(ws.ID, sess.ID)
	assert.Equal(t, "openai/gpt-test", got.Model)
	assert.Empty(t, got.ReasoningEffort)
	ids, _ := e.scListIDs(ws.ID)
	assert.Equal(t, []string{sess.ID}, ids)

	// At the limit, a file is taken, and the stream is alive throughout. (A
	// blob over its limit got its 400, not a 413: the body limit leaves room.)
	_, reqs := e.scRun(ws.ID, s, fake, proto.PromptRequest{SessionID: sess.ID, Prompt: "at the limit", Attachments: []proto.Attachment{file("limit.txt")}})
	assert.Contains(t, lastUserText(reqs[0].Body), strings.Repeat("b", 1<<20))
}

// A 202 that says "running" is a busy session at once, before the run's
// worker has picked it up.
func TestSessionIsBusyFromTheAccept(t *testing.T) {
	e := startEnv(t)
	ws := e.createWorkspace()
	s := e.openStream(ws.ID, newClientID(), "")
	for range 30 {
		sess := e.createSession(ws.ID, nil)
		acc := e.prompt(ws.ID, sess.ID, "/slow 1000 20")
		require.Equal(t, proto.RunRunning, acc.State)
		got := e.scSession(ws.ID, sess.ID)
		assert.True(t, got.Busy)
		assert.Zero(t, got.Queued)
		next := e.prompt(ws.ID, sess.ID, "behind it")
		require.Equal(t, proto.RunQueued, next.State)
		got = e.scSession(ws.ID, sess.ID)
		assert.True(t, got.Busy)
		assert.Equal(t, 1, got.Queued)
		assert.Equal(t, []string{acc.RunID, next.RunID}, e.cancel(ws.ID, sess.ID))
		for _, id := range []string{acc.RunID, next.RunID} {
			rc, _ := s.completion(id)
			require.Equal(t, proto.OutcomeCanceled, rc.Outcome)
		}
		s.scIdle(sess.ID)
		got = e.scSession(ws.ID, sess.ID)
		assert.False(t, got.Busy, "not busy once idle")
		assert.Zero(t, got.Queued)
	}
}
