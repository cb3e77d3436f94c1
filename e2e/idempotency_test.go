package e2e

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/proto"
)

// promptKeyed sends a prompt with an idempotency key and returns its 202.
func (e *env) promptKeyed(wsID, sid, text, key string) proto.PromptAccepted {
	e.t.Helper()
	var acc proto.PromptAccepted
	e.must(http.StatusAccepted, "POST", "/v1/workspaces/"+wsID+"/agent",
		proto.PromptRequest{SessionID: sid, Prompt: text, IdempotencyKey: key}, &acc)
	return acc
}

// A prompt retried with its idempotency key (after a timeout or a 5xx) is
// the run its first send started, never a second one: the retry answers
// 202 with that run's id and its state now (running, queued at its place,
// completed), while it runs, after it ended and after a restart. The key
// is its session's: another session's same key is a prompt of its own.
func TestIdempotencyKeyRetryIsTheSameRun(t *testing.T) {
	hold := make(chan struct{})
	fake := newFakeModel(t, "openai", func(n int, _ map[string]any) step {
		if n == 0 {
			return step{text: []string{"first"}, hold: hold}
		}
		return step{text: []string{"done"}}
	})
	e := startEnv(t)
	ws := e.createWorkspace()
	s := e.openStream(ws.ID, newClientID(), "")
	sess := e.openAISession(ws.ID, fake, nil)

	first := e.promptKeyed(ws.ID, sess.ID, "one", "key-1")
	fake.awaitRequest(t)
	again := e.promptKeyed(ws.ID, sess.ID, "one", "key-1")
	assert.Equal(t, proto.PromptAccepted{RunID: first.RunID, SessionID: sess.ID, State: proto.RunRunning}, again)

	second := e.promptKeyed(ws.ID, sess.ID, "two", "key 2: ✓")
	require.Equal(t, proto.RunQueued, second.State)
	againQueued := e.promptKeyed(ws.ID, sess.ID, "two", "key 2: ✓")
	assert.Equal(t, proto.PromptAccepted{RunID: second.RunID, SessionID: sess.ID, State: proto.RunQueued, Position: 1}, againQueued)

	close(hold)
	rc, _ := s.completion(first.RunID)
	require.Equal(t, proto.OutcomeEndTurn, rc.Outcome)
	rc, _ = s.completion(second.RunID)
	require.Equal(t, proto.OutcomeEndTurn, rc.Outcome)
	ended := e.promptKeyed(ws.ID, sess.ID, "one", "key-1")
	assert.Equal(t, proto.PromptAccepted{RunID: first.RunID, SessionID: sess.ID, State: proto.RunEnded}, ended)

	other := e.createSession(ws.ID, nil)
	mine := e.promptKeyed(ws.ID, other.ID, "one", "key-1")
	assert.NotEqual(t, first.RunID, mine.RunID, "a key is its session's")

	e.restart()
	e.openStream(ws.ID, newClientID(), "")
	afterRestart := e.promptKeyed(ws.ID, sess.ID, "one", "key-1")
	assert.Equal(t, first.RunID, afterRestart.RunID, "the key outlives the process")
	assert.Equal(t, proto.RunEnded, afterRestart.State)

	var msgs proto.MessageList
	e.must(http.StatusOK, "GET", "/v1/workspaces/"+ws.ID+"/sessions/"+sess.ID+"/messages", nil, &msgs)
	var users []string
	for _, m := range msgs.Messages {
		if m.Role == proto.RoleUser {
			users = append(users, m.Parts[0].Text)
		}
	}
	assert.Equal(t, []string{"one", "two"}, users, "each prompt entered the history once")
}

// A key that is not 1 to 128 printable characters is refused, changing
// nothing.
func TestIdempotencyKeyBounds(t *testing.T) {
	e := startEnv(t)
	ws := e.createWorkspace()
	sess := e.createSession(ws.ID, nil)
	for _, key := range []string{strings.Repeat("k", 129), "tab\there", "nul\x00", "\u200b"} {
		status, body := e.do("POST", "/v1/workspaces/"+ws.ID+"/agent", proto.PromptRequest{SessionID: sess.ID, Prompt: "x", IdempotencyKey: key}, nil)
		assert.Equal(t, http.StatusBadRequest, status, "%q: %s", key, body)
		assert.Contains(t, string(body), "idempotency_key")
	}
	var st proto.AgentStatus
	e.must(http.StatusOK, "GET", "/v1/workspaces/"+ws.ID+"/agent/sessions/"+sess.ID, nil, &st)
	assert.False(t, st.Busy)
	assert.Equal(t, http.StatusAccepted, func() int {
		status, _ := e.do("POST", "/v1/workspaces/"+ws.ID+"/agent", proto.PromptRequest{SessionID: sess.ID, Prompt: "x", IdempotencyKey: strings.Repeat("é", 128)}, nil)
		return status
	}())
}
