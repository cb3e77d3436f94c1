package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/proto"
)

// maxEventData is the contract's bound on an event's data (section 1).
const maxEventData = 1 << 20

// A model whose error message is megabytes long (an HTML page, a dump) ends
// the run with a short error: the 20 attached streams, each with the
// default 1 MiB queue and a reader that keeps up, all get run.completed and
// stay attached, and what is stored stays small.
func TestHugeModelErrorKeepsStreamsAttached(t *testing.T) {
	for _, size := range []int{2 << 20, 5 << 20} {
		t.Run(fmt.Sprintf("%dMiB", size>>20), func(t *testing.T) {
			message := strings.Repeat("x", size)
			model := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusBadRequest)
				_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": message, "type": "invalid_request_error"}})
			}))
			defer model.Close()

			e := startEnv(t)
			ws := e.createWorkspace()
			var streams []*stream
			for range 20 {
				streams = append(streams, e.openStream(ws.ID, newClientID(), ""))
			}
			sess := e.createSession(ws.ID, map[string]any{
				"model":    "openai/gpt-test",
				"provider": map[string]any{"type": "openai", "base_url": model.URL + "/v1", "api_key": "sk-test"},
			})
			acc := e.prompt(ws.ID, sess.ID, "hello")
			for i, s := range streams {
				rc, frames := s.completion(acc.RunID)
				assert.Equal(t, proto.OutcomeError, rc.Outcome, "stream %d", i)
				require.NotNil(t, rc.Error)
				assert.Less(t, len(rc.Error.Message), 16<<10, "the error message is cut")
				assert.Contains(t, rc.Error.Message, "bytes cut")
				for _, f := range frames {
					assert.LessOrEqual(t, len(f.envelope(t).Data), maxEventData)
				}
			}
			// Every stream is still attached: a later event reaches them all.
			seq := e.log(ws.ID, sess.ID, "still here?", false)
			for i, s := range streams {
				for {
					f := s.next()
					require.NotEqual(t, "stream.evicted", f.Event, "stream %d was evicted", i)
					if f.ID == fmt.Sprint(seq) {
						break
					}
				}
			}
			fin := lastFinish(t, e.messages(ws.ID, sess.ID), acc.RunID)
			assert.Equal(t, proto.FinishError, fin.Reason)
			assert.Less(t, len(fin.Message), 16<<10)
			var hist proto.EventList
			e.must(http.StatusOK, "GET", fmt.Sprintf("/v1/workspaces/%s/sessions/%s/events", ws.ID, sess.ID), nil, &hist)
			stored := 0
			for _, ev := range hist.Events {
				stored += len(ev.Data)
			}
			assert.Less(t, stored, 64<<10, "the session's stored events are small")
		})
	}
}

// A tool result over 64 KiB reaches the model cut, with a line saying how
// much was cut and how to read the rest; tool.finished and the stored tool
// message carry exactly what the model got. Every tool result goes through
// the same cut in the agent; the built-in tools cap their own output lower,
// so a client tool's answer is what reaches it here.
func TestLongToolResultsAreCutForTheModel(t *testing.T) {
	const long = 200_000
	fake := newFakeModel(t, "openai", func(n int, _ map[string]any) step {
		if n == 0 {
			return step{toolCalls: []scriptedCall{{ID: "call_1", Name: "bigtool", Args: `{}`}}}
		}
		return step{text: []string{"done"}}
	})
	e := startEnv(t)
	ws := e.createWorkspace()
	s := e.openStream(ws.ID, newClientID(), "")
	sess := e.openAISession(ws.ID, fake, map[string]any{
		"client_id": s.ClientID,
		"tools":     []map[string]any{{"name": "bigtool", "skip_permission": true}},
	})
	acc := e.prompt(ws.ID, sess.ID, "go")
	req := s.toolRequested()
	require.Equal(t, http.StatusOK, e.answerTool(ws.ID, req.RequestID, s.ClientID, strings.Repeat("b", long)))
	rc, frames := s.completion(acc.RunID)
	require.Equal(t, proto.OutcomeEndTurn, rc.Outcome)

	reqs := fake.Requests()
	require.Len(t, reqs, 2)
	var got string
	msgs, _ := reqs[1].Body["messages"].([]any)
	for _, m := range msgs {
		if mm, _ := m.(map[string]any); mm["role"] == "tool" {
			got = fmt.Sprint(mm["content"])
		}
	}
	assert.LessOrEqual(t, len(got), 64<<10, "the model gets at most 64 KiB")
	assert.Greater(t, len(got), 60<<10, "and not much less")
	kept, notice, found := strings.Cut(got, "\n\n[")
	require.True(t, found, "a line says what was cut")
	assert.Equal(t, strings.Repeat("b", len(kept)), kept, "the output's start, unchanged")
	assert.Regexp(t, fmt.Sprintf(`^%d bytes of this output were cut`, long-len(kept)), notice)
	assert.Contains(t, notice, "view")
	assert.Contains(t, notice, "offset")

	var finished proto.ToolFinished
	for _, f := range frames {
		if f.Event == proto.EventToolFinished {
			require.NoError(t, json.Unmarshal(f.envelope(t).Data, &finished))
		}
	}
	assert.True(t, got == finished.Content, "tool.finished carries what the model got (%d bytes, model %d)", len(finished.Content), len(got))
	var stored string
	for _, m := range e.messages(ws.ID, sess.ID) {
		if m.Role == proto.RoleTool {
			stored = m.Parts[0].Content
		}
	}
	assert.True(t, got == stored, "the history keeps what the model got (%d bytes, model %d)", len(stored), len(got))
}

// Strings a client controls that end up in events have limits; over them a
// request is refused with 413 body_too_large and changes nothing.
func TestClientStringsOverTheirLimitsAreRefused(t *testing.T) {
	e := startEnv(t)
	ws := e.createWorkspace()
	s := e.openStream(ws.ID, newClientID(), "")
	sess := e.createSession(ws.ID, nil)
	tooLarge := func(method, path string, body any) {
		t.Helper()
		var eb proto.ErrorBody
		status, raw := e.do(method, path, body, &eb)
		require.Equal(t, http.StatusRequestEntityTooLarge, status, "%s %s: %s", method, path, raw)
		assert.Equal(t, proto.CodeBodyTooLarge, eb.Error.Code)
	}
	big := func(n int) string { return strings.Repeat("y", n) }

	tooLarge("POST", "/v1/workspaces/"+ws.ID+"/agent", proto.PromptRequest{SessionID: sess.ID, Prompt: big(256<<10 + 1)})
	tooLarge("POST", fmt.Sprintf("/v1/workspaces/%s/sessions/%s/log", ws.ID, sess.ID), proto.LogRequest{Level: "info", Message: big(64<<10 + 1)})
	tooLarge("POST", "/v1/workspaces/"+ws.ID+"/sessions", map[string]any{"title": big(1<<10 + 1)})
	tooLarge("POST", "/v1/workspaces/"+ws.ID+"/sessions", map[string]any{"model": "openai/" + big(256)})
	tooLarge("PUT", fmt.Sprintf("/v1/workspaces/%s/sessions/%s/model", ws.ID, sess.ID), map[string]any{"model": "openai/" + big(256)})

	var st proto.AgentStatus
	e.must(http.StatusOK, "GET", fmt.Sprintf("/v1/workspaces/%s/agent/sessions/%s", ws.ID, sess.ID), nil, &st)
	assert.False(t, st.Busy, "the refused prompt queued nothing")
	var list proto.SessionList
	e.must(http.StatusOK, "GET", "/v1/workspaces/"+ws.ID+"/sessions", nil, &list)
	assert.Len(t, list.Sessions, 1, "the refused creates made nothing")

	// At the limits, all is fine.
	e.log(ws.ID, sess.ID, big(64<<10), false)
	acc := e.prompt(ws.ID, sess.ID, `/tool bash {"command": "true"}`)
	pr := s.permissionRequested()
	code, _, _ := e.answerPermission(ws.ID, pr.RequestID, s.ClientID, proto.DecisionReject, big(64<<10+1))
	assert.Equal(t, http.StatusRequestEntityTooLarge, code, "permission feedback has a limit too")
	code, _, _ = e.answerPermission(ws.ID, pr.RequestID, s.ClientID, proto.DecisionReject, big(64<<10))
	assert.Equal(t, http.StatusOK, code, "the refused answer changed nothing: the request is still open")
	rc, _ := s.completion(acc.RunID)
	assert.Equal(t, proto.OutcomeEndTurn, rc.Outcome)
	e.prompt(ws.ID, sess.ID, big(256<<10))
}
