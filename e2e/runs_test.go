package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/proto"
)

func (e *env) prompt(wsID, sid, text string) proto.PromptAccepted {
	e.t.Helper()
	var acc proto.PromptAccepted
	e.must(http.StatusAccepted, "POST", "/v1/workspaces/"+wsID+"/agent", proto.PromptRequest{SessionID: sid, Prompt: text}, &acc)
	return acc
}

func (e *env) cancel(wsID, sid string) []string {
	e.t.Helper()
	var out proto.CancelResponse
	e.must(http.StatusOK, "POST", fmt.Sprintf("/v1/workspaces/%s/agent/sessions/%s/cancel", wsID, sid), nil, &out)
	return out.CanceledRuns
}

func (e *env) messages(wsID, sid string) []proto.Message {
	e.t.Helper()
	var out proto.MessageList
	e.must(http.StatusOK, "GET", fmt.Sprintf("/v1/workspaces/%s/sessions/%s/messages", wsID, sid), nil, &out)
	return out.Messages
}

// openAISession creates a session whose provider is the fake model server.
func (e *env) openAISession(wsID string, f *fakeModel, extra map[string]any) proto.Session {
	e.t.Helper()
	body := map[string]any{
		"model":    "openai/gpt-test",
		"provider": map[string]any{"type": "openai", "base_url": f.URL() + "/v1", "api_key": "sk-secret-test-key"},
	}
	for k, v := range extra {
		body[k] = v
	}
	return e.createSession(wsID, body)
}

// completion waits for the run.completed of runID and returns it with the
// frames of that run seen before it.
func (s *stream) completion(runID string) (proto.RunCompleted, []frame) {
	s.t.Helper()
	var seen []frame
	deadline := time.After(wait)
	for {
		select {
		case f, ok := <-s.frames:
			require.True(s.t, ok, "stream ended before run.completed of %s", runID)
			if f.Event == "" || f.ID == "" {
				continue
			}
			ev := f.envelope(s.t)
			if ev.RunID != runID {
				continue
			}
			seen = append(seen, f)
			if f.Event == proto.EventRunCompleted {
				var rc proto.RunCompleted
				require.NoError(s.t, json.Unmarshal(ev.Data, &rc))
				return rc, seen
			}
		case <-deadline:
			s.t.Fatalf("no run.completed for %s on %s within %v", runID, s.ClientID, wait)
		}
	}
}

func types(frames []frame) []string {
	out := make([]string, 0, len(frames))
	for _, f := range frames {
		out = append(out, f.Event)
	}
	return out
}

// runMessages returns the messages of a run, checking every one carries its run_id.
func runMessages(msgs []proto.Message, runID string) []proto.Message {
	var out []proto.Message
	for _, m := range msgs {
		if m.RunID == runID {
			out = append(out, m)
		}
	}
	return out
}

// lastFinish returns the finish part ending the run's last assistant message.
func lastFinish(t *testing.T, msgs []proto.Message, runID string) proto.Part {
	t.Helper()
	run := runMessages(msgs, runID)
	require.NotEmpty(t, run, "run %s has messages", runID)
	assert.Equal(t, proto.RoleUser, run[0].Role, "a run starts with its user message")
	for i := len(run) - 1; i >= 0; i-- {
		if run[i].Role == proto.RoleAssistant {
			parts := run[i].Parts
			require.NotEmpty(t, parts)
			last := parts[len(parts)-1]
			require.Equal(t, proto.PartFinish, last.Type, "the last assistant message ends in a finish part")
			return last
		}
	}
	t.Fatalf("run %s has no assistant message", runID)
	return proto.Part{}
}

func TestEchoRunStreamsToEveryClientInContractOrder(t *testing.T) {
	e := startEnv(t)
	ws := e.createWorkspace()
	a := e.openStream(ws.ID, newClientID(), "")
	b := e.openStream(ws.ID, newClientID(), "")
	sess := e.createSession(ws.ID, nil)
	acc := e.prompt(ws.ID, sess.ID, "hello there tandem")
	assert.Equal(t, proto.RunRunning, acc.State)
	assert.Equal(t, 0, acc.Position)
	assert.Equal(t, sess.ID, acc.SessionID)

	var seqs [][]string
	for _, s := range []*stream{a, b} {
		rc, frames := s.completion(acc.RunID)
		assert.Equal(t, proto.OutcomeEndTurn, rc.Outcome)
		assert.Nil(t, rc.Error)
		ts := types(frames)
		require.GreaterOrEqual(t, len(ts), 7)
		assert.Equal(t, []string{proto.EventRunAccepted, proto.EventRunStarted, proto.EventMessageCreated, proto.EventMessageCreated}, ts[:4])
		deltas := 0
		i := 4
		for ; ts[i] == proto.EventMessageDelta; i++ {
			deltas++
		}
		assert.GreaterOrEqual(t, deltas, 3, "the echo model streams in several deltas")
		assert.Equal(t, []string{proto.EventMessageUpdated, proto.EventRunCompleted}, ts[i:])
		idle, _ := s.until(proto.EventSessionIdle)
		assert.Equal(t, sess.ID, idle.envelope(t).SessionID)
		var ids []string
		for _, f := range frames {
			ids = append(ids, f.ID)
		}
		seqs = append(seqs, ids)
	}
	assert.Equal(t, seqs[0], seqs[1], "both clients see the same events with the same seqs")

	msgs := e.messages(ws.ID, sess.ID)
	require.Len(t, msgs, 2)
	assert.Equal(t, "hello there tandem", msgs[0].Parts[0].Text)
	assert.Equal(t, "echo: hello there tandem", msgs[1].Parts[0].Text)
	assert.Equal(t, "echo", msgs[1].Model)
	assert.Equal(t, proto.Part{Type: proto.PartFinish, Reason: proto.FinishEndTurn}, lastFinish(t, msgs, acc.RunID))
	var s proto.Session
	e.must(http.StatusOK, "GET", "/v1/workspaces/"+ws.ID+"/sessions/"+sess.ID, nil, &s)
	assert.Equal(t, 2, s.MessageCount)
	assert.False(t, s.Busy)
}

func TestOpenAIProviderHappyPath(t *testing.T) {
	fake := newFakeModel(t, "openai", func(n int, req map[string]any) step {
		return step{reasoning: []string{"thinking"}, text: []string{"Hel", "lo ", "from ", "fake"}}
	})
	e := startEnv(t)
	ws := e.createWorkspace()
	s := e.openStream(ws.ID, newClientID(), "")
	sess := e.openAISession(ws.ID, fake, nil)
	acc := e.prompt(ws.ID, sess.ID, "say hello")
	rc, frames := s.completion(acc.RunID)
	require.Equal(t, proto.OutcomeEndTurn, rc.Outcome, "%+v", rc.Error)
	var kinds []string
	for _, f := range frames {
		if f.Event == proto.EventMessageDelta {
			var d proto.MessageDelta
			require.NoError(t, json.Unmarshal(f.envelope(t).Data, &d))
			kinds = append(kinds, d.Kind)
			assert.True(t, f.envelope(t).Ephemeral)
		}
	}
	assert.Equal(t, []string{"reasoning", "text", "text", "text", "text"}, kinds)

	reqs := fake.Requests()
	require.Len(t, reqs, 1)
	assert.Equal(t, "/v1/chat/completions", reqs[0].Path)
	assert.Equal(t, "gpt-test", reqs[0].Body["model"], "the provider is asked for the part after the first /")
	assert.Equal(t, "Bearer sk-secret-test-key", reqs[0].Header.Get("Authorization"))
	msgs := reqs[0].Body["messages"].([]any)
	sys := msgs[0].(map[string]any)
	assert.Equal(t, "system", sys["role"])
	assert.Contains(t, sys["content"], "Tandem")
	assert.Equal(t, "say hello", lastUserText(reqs[0].Body))
	toolNames := []string{}
	for _, tl := range reqs[0].Body["tools"].([]any) {
		toolNames = append(toolNames, tl.(map[string]any)["function"].(map[string]any)["name"].(string))
	}
	assert.ElementsMatch(t, []string{"view", "ls", "glob", "grep", "edit", "write", "bash"}, toolNames)

	got := e.messages(ws.ID, sess.ID)
	require.Len(t, got, 2)
	assert.Equal(t, []proto.Part{
		{Type: proto.PartReasoning, Text: "thinking"},
		{Type: proto.PartText, Text: "Hello from fake"},
		{Type: proto.PartFinish, Reason: proto.FinishEndTurn},
	}, got[1].Parts)
	assert.Equal(t, "openai/gpt-test", got[1].Model)

	// The session's API key is in memory only: not in any answer, not on disk.
	_, raw := e.do("GET", "/v1/workspaces/"+ws.ID+"/sessions/"+sess.ID, nil, nil)
	assert.NotContains(t, string(raw), "sk-secret-test-key")
	_, raw = e.do("GET", fmt.Sprintf("/v1/workspaces/%s/sessions/%s/events", ws.ID, sess.ID), nil, nil)
	assert.NotContains(t, string(raw), "sk-secret-test-key")
	e.stop()
	assertNotOnDisk(t, e.cfg.DataDir, "sk-secret-test-key")
}

func assertNotOnDisk(t *testing.T, dir, secret string) {
	t.Helper()
	require.NoError(t, filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		assert.NotContains(t, string(b), secret, "secret found in %s", path)
		return nil
	}))
}

func TestAnthropicProviderHappyPath(t *testing.T) {
	fake := newFakeModel(t, "anthropic", func(n int, req map[string]any) step {
		return step{text: []string{"Bonjour", " de ", "Claude"}}
	})
	e := startEnv(t)
	ws := e.createWorkspace()
	s := e.openStream(ws.ID, newClientID(), "")
	sess := e.createSession(ws.ID, map[string]any{
		"model":    "anthropic/claude-test",
		"provider": map[string]any{"type": "anthropic", "base_url": fake.URL(), "api_key": "ak-secret"},
	})
	acc := e.prompt(ws.ID, sess.ID, "salut")
	rc, _ := s.completion(acc.RunID)
	require.Equal(t, proto.OutcomeEndTurn, rc.Outcome, "%+v", rc.Error)
	reqs := fake.Requests()
	require.Len(t, reqs, 1)
	assert.Equal(t, "/v1/messages", reqs[0].Path)
	assert.Equal(t, "claude-test", reqs[0].Body["model"])
	assert.Equal(t, "ak-secret", reqs[0].Header.Get("X-Api-Key"))
	assert.Contains(t, reqs[0].RawBody, "Tandem", "the system prompt is sent")
	msgs := e.messages(ws.ID, sess.ID)
	require.Len(t, msgs, 2)
	assert.Equal(t, "Bonjour de Claude", msgs[1].Parts[0].Text)
}

func TestCancelByAnotherClientWhileStreaming(t *testing.T) {
	hold := make(chan struct{})
	defer close(hold)
	fake := newFakeModel(t, "openai", func(int, map[string]any) step {
		return step{text: []string{"partial ", "never"}, hold: hold}
	})
	e := startEnv(t)
	ws := e.createWorkspace()
	a := e.openStream(ws.ID, newClientID(), "")
	b := e.openStream(ws.ID, newClientID(), "")
	sess := e.openAISession(ws.ID, fake, nil)
	acc := e.prompt(ws.ID, sess.ID, "write a long essay")
	<-fake.started // the model is streaming
	a.until(proto.EventMessageCreated)

	canceled := e.cancel(ws.ID, sess.ID) // B's cancel, over REST
	assert.Equal(t, []string{acc.RunID}, canceled)
	for _, s := range []*stream{a, b} {
		rc, frames := s.completion(acc.RunID)
		assert.Equal(t, proto.OutcomeCanceled, rc.Outcome)
		assert.Nil(t, rc.Error)
		for _, f := range frames {
			assert.NotContains(t, f.Data, `"outcome":"error"`)
		}
	}
	msgs := e.messages(ws.ID, sess.ID)
	assert.Equal(t, proto.FinishCanceled, lastFinish(t, msgs, acc.RunID).Reason)
	for _, m := range msgs {
		for _, p := range m.Parts {
			assert.NotEqual(t, proto.FinishError, p.Reason)
		}
	}
}

func TestCancelRightAfterAcceptIsNotLost(t *testing.T) {
	e := startEnv(t)
	ws := e.createWorkspace()
	s := e.openStream(ws.ID, newClientID(), "")
	sess := e.createSession(ws.ID, nil)
	for range 20 {
		acc := e.prompt(ws.ID, sess.ID, "/slow 50 20")
		ids := e.cancel(ws.ID, sess.ID)
		require.Contains(t, ids, acc.RunID)
		rc, _ := s.completion(acc.RunID)
		require.Equal(t, proto.OutcomeCanceled, rc.Outcome)
	}
	msgs := e.messages(ws.ID, sess.ID)
	users := 0
	for _, m := range msgs {
		if m.Role == proto.RoleUser {
			users++
			assert.Equal(t, "/slow 50 20", m.Parts[0].Text, "the user message is recorded even when canceled before start")
		}
	}
	assert.Equal(t, 20, users)
}

func TestIdleCancelDoesNotPoisonTheNextPrompt(t *testing.T) {
	e := startEnv(t)
	ws := e.createWorkspace()
	s := e.openStream(ws.ID, newClientID(), "")
	sess := e.createSession(ws.ID, nil)
	assert.Empty(t, e.cancel(ws.ID, sess.ID))
	assert.Empty(t, e.cancel(ws.ID, sess.ID))
	acc := e.prompt(ws.ID, sess.ID, "still fine")
	rc, frames := s.completion(acc.RunID)
	assert.Equal(t, proto.OutcomeEndTurn, rc.Outcome)
	for _, f := range frames {
		assert.NotContains(t, f.Data, "canceled")
	}
	assert.Equal(t, proto.FinishEndTurn, lastFinish(t, e.messages(ws.ID, sess.ID), acc.RunID).Reason)
}

func TestRunOutlivesTheRequestAndTheClientThatStartedIt(t *testing.T) {
	e := startEnv(t)
	ws := e.createWorkspace()
	b := e.openStream(ws.ID, newClientID(), "")
	a := e.openStream(ws.ID, newClientID(), "")
	sess := e.createSession(ws.ID, nil)

	// A's request context ends right after the 202.
	ctx, cancel := context.WithCancel(context.Background())
	body, _ := json.Marshal(proto.PromptRequest{SessionID: sess.ID, Prompt: "/slow 5 20", ClientID: a.ClientID})
	req, _ := http.NewRequestWithContext(ctx, "POST", e.ts.URL+"/v1/workspaces/"+ws.ID+"/agent", strings.NewReader(string(body)))
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := e.client.Do(req)
	require.NoError(t, err)
	var acc proto.PromptAccepted
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&acc))
	resp.Body.Close()
	require.Equal(t, http.StatusAccepted, resp.StatusCode)
	cancel()
	// And A detaches.
	a.close()

	rc, _ := b.completion(acc.RunID)
	assert.Equal(t, proto.OutcomeEndTurn, rc.Outcome)
	assert.Equal(t, proto.FinishEndTurn, lastFinish(t, e.messages(ws.ID, sess.ID), acc.RunID).Reason)
}

func TestCancelStopsActiveAndAcceptedRunsButNotLaterOnes(t *testing.T) {
	e := startEnv(t)
	ws := e.createWorkspace()
	s := e.openStream(ws.ID, newClientID(), "")
	sess := e.createSession(ws.ID, nil)
	first := e.prompt(ws.ID, sess.ID, "/slow 100 20")
	second := e.prompt(ws.ID, sess.ID, "follow-up")
	assert.Equal(t, proto.RunQueued, second.State)
	assert.Equal(t, 1, second.Position)

	var st proto.AgentStatus
	e.must(http.StatusOK, "GET", fmt.Sprintf("/v1/workspaces/%s/agent/sessions/%s", ws.ID, sess.ID), nil, &st)
	assert.True(t, st.Busy)
	require.NotNil(t, st.ActiveRunID)
	assert.Equal(t, first.RunID, *st.ActiveRunID)
	assert.Equal(t, []proto.QueuedRun{{RunID: second.RunID, Prompt: "follow-up"}}, st.Queued)

	canceled := e.cancel(ws.ID, sess.ID)
	assert.Equal(t, []string{first.RunID, second.RunID}, canceled)
	third := e.prompt(ws.ID, sess.ID, "after the cancel")

	for _, id := range []string{first.RunID, second.RunID} {
		rc, _ := s.completion(id)
		assert.Equal(t, proto.OutcomeCanceled, rc.Outcome, id)
	}
	rc, _ := s.completion(third.RunID)
	assert.Equal(t, proto.OutcomeEndTurn, rc.Outcome)
	msgs := e.messages(ws.ID, sess.ID)
	assert.Equal(t, proto.FinishCanceled, lastFinish(t, msgs, first.RunID).Reason)
	assert.Equal(t, proto.FinishCanceled, lastFinish(t, msgs, second.RunID).Reason)
	assert.Equal(t, proto.FinishEndTurn, lastFinish(t, msgs, third.RunID).Reason)
}

func TestSessionsRunConcurrently(t *testing.T) {
	e := startEnv(t)
	ws := e.createWorkspace()
	s := e.openStream(ws.ID, newClientID(), "")
	s1 := e.createSession(ws.ID, nil)
	s2 := e.createSession(ws.ID, nil)
	long := e.prompt(ws.ID, s1.ID, "/slow 1000 10")
	short := e.prompt(ws.ID, s2.ID, "quick")
	assert.Equal(t, proto.RunRunning, short.State)
	rc, _ := s.completion(short.RunID)
	assert.Equal(t, proto.OutcomeEndTurn, rc.Outcome, "s2 is not stuck behind s1")
	e.cancel(ws.ID, s1.ID)
	rc, _ = s.completion(long.RunID)
	assert.Equal(t, proto.OutcomeCanceled, rc.Outcome)
}

func TestModelErrorsEndTheRunAndLeaveTheSessionUsable(t *testing.T) {
	cases := []struct {
		name    string
		fail    step
		code    string
		retries int
	}{
		{"bad key", step{status: 401}, "model_auth", 0},
		{"server error after retries", step{status: 500}, "model_unavailable", 3},
		{"rate limited after retries", step{status: 429}, "model_rate_limited", 3},
		{"broken stream", step{text: []string{"half"}, cut: true}, "model_unavailable", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var mu sync.Mutex
			failing := true
			fake := newFakeModel(t, "openai", func(n int, req map[string]any) step {
				mu.Lock()
				defer mu.Unlock()
				if failing {
					return c.fail
				}
				return step{text: []string{"recovered"}}
			})
			e := startEnv(t, func(cfg *serverConfig) { cfg.ModelRetryBackoff = func(int) time.Duration { return time.Millisecond } })
			ws := e.createWorkspace()
			s := e.openStream(ws.ID, newClientID(), "")
			sess := e.openAISession(ws.ID, fake, nil)
			acc := e.prompt(ws.ID, sess.ID, "try")
			rc, frames := s.completion(acc.RunID)
			require.Equal(t, proto.OutcomeError, rc.Outcome)
			require.NotNil(t, rc.Error)
			assert.Equal(t, c.code, rc.Error.Code)
			assert.NotEmpty(t, rc.Error.Message)
			assert.NotContains(t, rc.Error.Message, "sk-secret-test-key")
			warnings := 0
			for _, f := range frames {
				if f.Event == proto.EventSessionLog && strings.Contains(f.Data, `"level":"warning"`) {
					warnings++
				}
			}
			assert.Equal(t, c.retries, warnings, "each retry is visible as a session.log warning")
			assert.Equal(t, c.retries+1, len(fake.Requests()), "requests made")
			fin := lastFinish(t, e.messages(ws.ID, sess.ID), acc.RunID)
			assert.Equal(t, proto.FinishError, fin.Reason)

			mu.Lock()
			failing = false
			mu.Unlock()
			next := e.prompt(ws.ID, sess.ID, "again")
			rc, _ = s.completion(next.RunID)
			assert.Equal(t, proto.OutcomeEndTurn, rc.Outcome)
		})
	}
}

func TestToolLoopWithEcho(t *testing.T) {
	e := startEnv(t)
	ws := e.createWorkspace()
	s := e.openStream(ws.ID, newClientID(), "")
	sess := e.createSession(ws.ID, map[string]any{"permission_mode": "allow_all"})
	acc := e.prompt(ws.ID, sess.ID, `/tool write {"path": "notes/hello.txt", "content": "hi from the agent"}`)
	rc, frames := s.completion(acc.RunID)
	require.Equal(t, proto.OutcomeEndTurn, rc.Outcome)
	ts := types(frames)
	assert.Subset(t, ts, []string{proto.EventToolStarted, proto.EventToolFinished})
	b, err := os.ReadFile(filepath.Join(e.workDir, "notes", "hello.txt"))
	require.NoError(t, err)
	assert.Equal(t, "hi from the agent", string(b))

	msgs := runMessages(e.messages(ws.ID, sess.ID), acc.RunID)
	roles := []string{}
	for _, m := range msgs {
		roles = append(roles, m.Role)
	}
	assert.Equal(t, []string{"user", "assistant", "tool", "assistant"}, roles)
	assert.Equal(t, proto.PartToolCall, msgs[1].Parts[1].Type)
	assert.Equal(t, "write", msgs[1].Parts[1].Name)
	assert.Equal(t, proto.PartToolResult, msgs[2].Parts[0].Type)
	assert.False(t, msgs[2].Parts[0].IsError, msgs[2].Parts[0].Content)
	assert.Contains(t, msgs[3].Parts[0].Text, "tool write returned")
	assert.Equal(t, proto.FinishEndTurn, lastFinish(t, msgs, acc.RunID).Reason)
}

func TestOpenAIToolCallRoundTrip(t *testing.T) {
	fake := newFakeModel(t, "openai", func(n int, req map[string]any) step {
		if n == 0 {
			return step{text: []string{"Let me look."}, toolCalls: []scriptedCall{{ID: "call_a", Name: "ls", Args: `{"path": "."}`}}}
		}
		return step{text: []string{"Done."}}
	})
	e := startEnv(t)
	require.NoError(t, os.WriteFile(filepath.Join(e.workDir, "README.md"), []byte("hi"), 0o600))
	ws := e.createWorkspace()
	s := e.openStream(ws.ID, newClientID(), "")
	sess := e.openAISession(ws.ID, fake, nil)
	acc := e.prompt(ws.ID, sess.ID, "what is here?")
	rc, _ := s.completion(acc.RunID)
	require.Equal(t, proto.OutcomeEndTurn, rc.Outcome, "%+v", rc.Error)
	reqs := fake.Requests()
	require.Len(t, reqs, 2)
	msgs := reqs[1].Body["messages"].([]any)
	last := msgs[len(msgs)-1].(map[string]any)
	assert.Equal(t, "tool", last["role"])
	assert.Equal(t, "call_a", last["tool_call_id"])
	assert.Contains(t, fmt.Sprint(last["content"]), "README.md")
	prev := msgs[len(msgs)-2].(map[string]any)
	assert.Equal(t, "assistant", prev["role"])
	assert.NotEmpty(t, prev["tool_calls"])
}

// Invariant 1 under load: every 202 yields exactly one run.completed and its
// messages, whatever cancels land where, with prompts steered into running
// runs and compactions queued among them: a steered prompt's run ends
// once, the prompt answered by an assistant message after it; a
// compaction run has no user message and ends end_turn, canceled, or
// compaction_failed when there was nothing to compact; and no two runs of
// a session ever overlap.
func TestManyPromptsWithRandomCancels(t *testing.T) {
	e := startEnv(t)
	ws := e.createWorkspace()
	s := e.openStream(ws.ID, newClientID(), "")
	const sessions, perSession = 10, 20
	var sids []string
	for range sessions {
		sids = append(sids, e.createSession(ws.ID, nil).ID)
	}
	var mu sync.Mutex
	accepted := map[string]string{} // run -> session
	compactions := map[string]bool{}
	steered := map[string]string{} // steered prompt -> the run it joined
	var wg sync.WaitGroup
	for i, sid := range sids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			for j := range perSession {
				text := fmt.Sprintf("prompt %d of %d", j, i)
				if rng.IntN(3) == 0 {
					text = fmt.Sprintf("/slow %d 1", rng.IntN(20))
				}
				var acc proto.PromptAccepted
				var status int
				var raw []byte
				switch rng.IntN(8) {
				case 0:
					status, raw = e.do("POST", fmt.Sprintf("/v1/workspaces/%s/sessions/%s/compact", ws.ID, sid), nil, &acc)
				case 1, 2:
					status, raw = e.do("POST", "/v1/workspaces/"+ws.ID+"/agent", proto.PromptRequest{SessionID: sid, Prompt: text, Delivery: proto.DeliverySteer}, &acc)
				default:
					status, raw = e.do("POST", "/v1/workspaces/"+ws.ID+"/agent", proto.PromptRequest{SessionID: sid, Prompt: text}, &acc)
				}
				if status != http.StatusAccepted {
					t.Errorf("prompt: %d %s", status, raw)
					return
				}
				mu.Lock()
				accepted[acc.RunID] = sid
				if acc.State == proto.RunSteered {
					steered[text+"@"+sid] = acc.RunID
				}
				mu.Unlock()
				if rng.IntN(4) == 0 {
					e.do("POST", fmt.Sprintf("/v1/workspaces/%s/agent/sessions/%s/cancel", ws.ID, sid), nil, nil)
				}
			}
		}()
	}
	wg.Wait()
	require.NotEmpty(t, accepted)

	completed := map[string]int{}
	outcomes := map[string]proto.RunCompleted{}
	deadline := time.After(60 * time.Second)
	for len(completed) < len(accepted) {
		select {
		case f, ok := <-s.frames:
			require.True(t, ok)
			switch f.Event {
			case proto.EventRunAccepted:
				var ra proto.RunAccepted
				require.NoError(t, json.Unmarshal(f.envelope(t).Data, &ra))
				if ra.Compaction {
					compactions[ra.RunID] = true
				}
			case proto.EventRunCompleted:
				var rc proto.RunCompleted
				require.NoError(t, json.Unmarshal(f.envelope(t).Data, &rc))
				completed[rc.RunID]++
				outcomes[rc.RunID] = rc
			}
		case <-deadline:
			t.Fatalf("%d of %d runs completed", len(completed), len(accepted))
		}
	}
	for id := range accepted {
		assert.Equal(t, 1, completed[id], "run %s completed exactly once", id)
		rc := outcomes[id]
		if compactions[id] && rc.Outcome == proto.OutcomeError {
			assert.Equal(t, proto.CodeCompactionFailed, rc.Error.Code)
			assert.Contains(t, rc.Error.Message, "nothing to compact")
			continue
		}
		assert.Contains(t, []string{proto.OutcomeEndTurn, proto.OutcomeCanceled}, rc.Outcome, "run %s: %+v", id, rc.Error)
	}
	t.Logf("%d runs, %d compactions, %d prompts steered into a run", len(accepted), len(compactions), len(steered))
	for _, sid := range sids {
		msgs := e.messages(ws.ID, sid)
		for id, owner := range accepted {
			if owner != sid {
				continue
			}
			run := runMessages(msgs, id)
			require.NotEmpty(t, run, "run %s has messages", id)
			last := run[len(run)-1]
			require.Equal(t, proto.RoleAssistant, last.Role, "run %s: every prompt, steered ones too, is answered", id)
			require.NotEmpty(t, last.Parts)
			assert.Equal(t, outcomes[id].Outcome, last.Parts[len(last.Parts)-1].Reason, "run %s ends with its outcome", id)
			if compactions[id] {
				for _, m := range run {
					assert.NotEqual(t, proto.RoleUser, m.Role, "a compaction run has no user message")
				}
			} else {
				assert.Equal(t, proto.RoleUser, run[0].Role, "a run starts with its user message")
			}
		}
		for key, runID := range steered {
			text, owner, _ := strings.Cut(key, "@")
			if owner != sid {
				continue
			}
			found := false
			for _, m := range runMessages(msgs, runID) {
				if m.Role == proto.RoleUser && m.Parts[0].Text == text {
					found = true
				}
			}
			assert.True(t, found, "steered %q is in the history of run %s", text, runID)
		}
		var hist proto.EventList
		e.must(http.StatusOK, "GET", fmt.Sprintf("/v1/workspaces/%s/sessions/%s/events?limit=1000", ws.ID, sid), nil, &hist)
		own := map[string]bool{}
		for id, owner := range accepted {
			if owner == sid {
				own[id] = true
			}
		}
		checkOneRunAtATime(t, hist.Events, own)
	}
	// No duplicate completions arrive later either.
	for _, sid := range sids {
		var st proto.AgentStatus
		eventually(t, func() bool {
			e.must(http.StatusOK, "GET", fmt.Sprintf("/v1/workspaces/%s/agent/sessions/%s", ws.ID, sid), nil, &st)
			return !st.Busy && len(st.Queued) == 0
		}, "sessions go idle")
	}
}

// A session belongs to one workspace: reached through another, every route
// that takes prompts, cancels and log lines answers 404, also once the
// session has been prompted (and so is known to the server in memory).
func TestSessionIsNotFoundThroughAnotherWorkspace(t *testing.T) {
	e := startEnv(t)
	ws := e.createWorkspace()
	var other proto.Workspace
	e.must(http.StatusCreated, "POST", "/v1/workspaces", map[string]string{"path": t.TempDir()}, &other)
	sess := e.createSession(ws.ID, nil)
	s := e.openStream(ws.ID, newClientID(), "")
	acc := e.prompt(ws.ID, sess.ID, "hello")
	rc, _ := s.completion(acc.RunID)
	require.Equal(t, proto.OutcomeEndTurn, rc.Outcome)
	// The run titled the session; read it again through its workspace.
	e.log(ws.ID, sess.ID, "still here", false)

	owp := "/v1/workspaces/" + other.ID
	for _, r := range []struct {
		method, path string
		body         any
	}{
		{"POST", owp + "/agent", proto.PromptRequest{SessionID: sess.ID, Prompt: "x"}},
		{"POST", owp + "/agent/sessions/" + sess.ID + "/cancel", nil},
		{"GET", owp + "/agent/sessions/" + sess.ID, nil},
		{"POST", owp + "/sessions/" + sess.ID + "/log", proto.LogRequest{Level: "info", Message: "x"}},
		{"GET", owp + "/sessions/" + sess.ID + "/messages", nil},
		{"GET", owp + "/sessions/" + sess.ID + "/events", nil},
		{"GET", owp + "/sessions/" + sess.ID, nil},
		{"GET", owp + "/events?client_id=" + newClientID() + "&session_id=" + sess.ID, nil},
	} {
		e.scRefused(r.method, r.path, r.body, http.StatusNotFound, proto.CodeSessionNotFound)
	}
	assert.Len(t, e.messages(ws.ID, sess.ID), 2, "the session itself is untouched")
}

func TestBadPromptsAreRefusedAndNothingIsQueued(t *testing.T) {
	e := startEnv(t, withGraces(time.Minute, time.Minute))
	ws := e.createWorkspace()
	sess := e.createSession(ws.ID, nil)
	require.NoError(t, os.WriteFile(filepath.Join(e.workDir, "ok.txt"), []byte("fine"), 0o600))
	outside := filepath.Join(t.TempDir(), "secret.txt")
	require.NoError(t, os.WriteFile(outside, []byte("secret"), 0o600))
	agent := "/v1/workspaces/" + ws.ID + "/agent"
	cases := []struct {
		name   string
		body   any
		status int
		code   string
	}{
		{"empty prompt", proto.PromptRequest{SessionID: sess.ID, Prompt: "  "}, 400, proto.CodeInvalidArgument},
		{"missing session", map[string]any{"prompt": "x"}, 400, proto.CodeInvalidArgument},
		{"bad session uuid", map[string]any{"session_id": "nope", "prompt": "x"}, 400, proto.CodeInvalidArgument},
		{"unknown session", proto.PromptRequest{SessionID: uuid.NewString(), Prompt: "x"}, 404, proto.CodeSessionNotFound},
		{"unknown field", map[string]any{"session_id": sess.ID, "prompt": "x", "promt": "y"}, 400, proto.CodeInvalidArgument},
		{"attachment type", map[string]any{"session_id": sess.ID, "prompt": "x", "attachments": []any{map[string]any{"type": "url"}}}, 400, proto.CodeInvalidArgument},
		{"attachment outside", proto.PromptRequest{SessionID: sess.ID, Prompt: "x", Attachments: []proto.Attachment{{Type: "file", Path: outside}}}, 400, proto.CodeInvalidArgument},
		{"attachment escape", proto.PromptRequest{SessionID: sess.ID, Prompt: "x", Attachments: []proto.Attachment{{Type: "file", Path: "../../etc/passwd"}}}, 400, proto.CodeInvalidArgument},
		{"bad base64", proto.PromptRequest{SessionID: sess.ID, Prompt: "x", Attachments: []proto.Attachment{{Type: "blob", Data: "%%%", MimeType: "image/png"}}}, 400, proto.CodeInvalidArgument},
		{"bad line range", proto.PromptRequest{SessionID: sess.ID, Prompt: "x", Attachments: []proto.Attachment{{Type: "file", Path: "ok.txt", LineRange: &proto.LineRange{Start: 3, End: 1}}}}, 400, proto.CodeInvalidArgument},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var body proto.ErrorBody
			status, raw := e.do("POST", agent, c.body, &body)
			require.Equal(t, c.status, status, "%s", raw)
			assert.Equal(t, c.code, body.Error.Code)
		})
	}
	var body proto.ErrorBody
	status, _ := e.do("POST", "/v1/workspaces/"+uuid.NewString()+"/agent", proto.PromptRequest{SessionID: sess.ID, Prompt: "x"}, &body)
	assert.Equal(t, http.StatusNotFound, status)
	assert.Equal(t, proto.CodeWorkspaceNotFound, body.Error.Code)

	// A closed workspace takes no prompt.
	e.must(http.StatusNoContent, "DELETE", "/v1/workspaces/"+ws.ID, nil, nil)
	status, _ = e.do("POST", agent, proto.PromptRequest{SessionID: sess.ID, Prompt: "x"}, &body)
	assert.Equal(t, http.StatusConflict, status)
	assert.Equal(t, proto.CodeWorkspaceNotOpen, body.Error.Code)

	var hist proto.EventList
	e.must(http.StatusOK, "GET", fmt.Sprintf("/v1/workspaces/%s/sessions/%s/events", ws.ID, sess.ID), nil, &hist)
	for _, ev := range hist.Events {
		assert.NotEqual(t, proto.EventRunAccepted, ev.Type, "nothing was accepted")
	}
	assert.Empty(t, e.messages(ws.ID, sess.ID))
}

func TestClosingTheWorkspaceCancelsItsRuns(t *testing.T) {
	e := startEnv(t)
	ws := e.createWorkspace()
	s := e.openStream(ws.ID, newClientID(), "")
	sess := e.createSession(ws.ID, nil)
	acc := e.prompt(ws.ID, sess.ID, "/slow 1000 10")
	s.until(proto.EventMessageDelta)
	e.must(http.StatusNoContent, "DELETE", "/v1/workspaces/"+ws.ID, nil, nil)
	rc, _ := s.completion(acc.RunID)
	assert.Equal(t, proto.OutcomeCanceled, rc.Outcome)
}

// A model switch during a run applies to the run's next model request, and
// the system prompt lists the tools that request offers.
func TestModelSwitchAppliesToTheNextRequestOfARun(t *testing.T) {
	fake := newFakeModel(t, "openai", func(n int, req map[string]any) step {
		if n == 0 {
			return step{toolCalls: []scriptedCall{{ID: "w1", Name: "write", Args: `{"path": "m.txt", "content": "x"}`}}}
		}
		return step{text: []string{"done"}}
	})
	e := startEnv(t)
	ws := e.createWorkspace()
	s := e.openStream(ws.ID, newClientID(), "")
	sess := e.openAISession(ws.ID, fake, map[string]any{"available_tools": []string{"write", "view"}})
	acc := e.prompt(ws.ID, sess.ID, "write it")
	pr := s.permissionRequested()
	var switched proto.Session
	e.must(http.StatusOK, "PUT", fmt.Sprintf("/v1/workspaces/%s/sessions/%s/model", ws.ID, sess.ID),
		map[string]any{"model": "openai/second-model", "reasoning_effort": "low"}, &switched)
	status, _, _ := e.answerPermission(ws.ID, pr.RequestID, s.ClientID, proto.DecisionApproveOnce, "")
	require.Equal(t, http.StatusOK, status)
	rc, _ := s.completion(acc.RunID)
	require.Equal(t, proto.OutcomeEndTurn, rc.Outcome)
	reqs := fake.Requests()
	require.Len(t, reqs, 2)
	assert.Equal(t, "gpt-test", reqs[0].Body["model"])
	assert.Equal(t, "second-model", reqs[1].Body["model"])
	assert.Equal(t, "low", reqs[1].Body["reasoning_effort"])
	sys := reqs[0].Body["messages"].([]any)[0].(map[string]any)["content"].(string)
	assert.Contains(t, sys, "Tools available now: view, write", "the environment section names the offered tools")
}
