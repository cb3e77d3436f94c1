package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/proto"
)

// steer posts a steered prompt as clientID.
func (e *env) steer(wsID, sid, text, clientID string) proto.PromptAccepted {
	e.t.Helper()
	var acc proto.PromptAccepted
	e.must(http.StatusAccepted, "POST", "/v1/workspaces/"+wsID+"/agent",
		proto.PromptRequest{SessionID: sid, Prompt: text, ClientID: clientID, Delivery: proto.DeliverySteer}, &acc)
	return acc
}

// completions counts the run.completed of each run among frames.
func completions(t *testing.T, frames []frame) map[string]int {
	out := map[string]int{}
	for _, f := range frames {
		if f.Event == proto.EventRunCompleted {
			out[f.envelope(t).RunID]++
		}
	}
	return out
}

// A steered prompt joins the active run: the 202 carries its run_id and
// state steered, other clients see a run.accepted saying so, its user
// message (that run_id, the client's id) is in the request of the run's
// next step, after the results of the step's tool calls, and the run ends
// with one run.completed. Steered while the model gives its last answer,
// the run goes on to answer it. With no active run, a steer is a prompt.
func TestSteerJoinsTheActiveRun(t *testing.T) {
	for _, flavor := range []string{"openai", "anthropic"} {
		t.Run(flavor, func(t *testing.T) { testSteerJoinsTheActiveRun(t, flavor) })
	}
}

func testSteerJoinsTheActiveRun(t *testing.T, flavor string) {
	holds := map[int]chan struct{}{0: make(chan struct{}), 1: make(chan struct{})}
	fake := newFakeModel(t, flavor, func(n int, req map[string]any) step {
		switch n {
		case 0:
			return step{text: []string{"looking"}, toolCalls: []scriptedCall{{ID: "call_1", Name: "ls", Args: `{}`}}, hold: holds[0]}
		case 1:
			return step{text: []string{"all done"}, hold: holds[1]}
		}
		return step{text: []string{fmt.Sprint("answer ", n)}}
	})
	e := startEnv(t)
	ws := e.createWorkspace()
	s := e.openStream(ws.ID, newClientID(), "")
	sess := e.fakeSession(ws.ID, fake)
	steerer := newClientID()
	acc := e.prompt(ws.ID, sess.ID, "start")
	fake.awaitRequest(t) // the first step is with the model
	before := e.scSession(ws.ID, sess.ID).UpdatedAt
	st := e.steer(ws.ID, sess.ID, "also check the tests", steerer)
	assert.True(t, e.scSession(ws.ID, sess.ID).UpdatedAt.After(before.Time), "a steer is activity: the session moves up the list")
	assert.Equal(t, proto.PromptAccepted{RunID: acc.RunID, SessionID: sess.ID, State: proto.RunSteered, Position: 0}, st)
	close(holds[0])
	fake.awaitRequest(t) // the next step: held while the model gives its last answer
	st2 := e.steer(ws.ID, sess.ID, "and the docs", steerer)
	assert.Equal(t, acc.RunID, st2.RunID)
	close(holds[1])
	rc, frames := s.completion(acc.RunID)
	require.Equal(t, proto.OutcomeEndTurn, rc.Outcome, "%+v", rc.Error)

	var steered []proto.RunAccepted
	for _, f := range frames {
		if f.Event == proto.EventRunAccepted {
			var ra proto.RunAccepted
			require.NoError(t, json.Unmarshal(f.envelope(t).Data, &ra))
			if ra.State == proto.RunSteered {
				steered = append(steered, ra)
			}
		}
	}
	require.Len(t, steered, 2, "each steer is announced")
	assert.Equal(t, steerer, steered[0].ClientID)
	assert.Equal(t, "also check the tests", steered[0].Prompt)
	assert.Equal(t, 1, completions(t, frames)[acc.RunID], "one run.completed")

	reqs := fake.Requests()
	require.Len(t, reqs, 3, "the tool step, the step after it, one more for the last steer")
	_, sent := turns(t, flavor, reqs[1])
	require.GreaterOrEqual(t, len(sent), 3)
	if flavor == "anthropic" {
		// One user turn: the tool's result first, then the steered prompt.
		assert.Equal(t, turn{"user", "<result call_1>also check the tests"}, sent[len(sent)-1])
	} else {
		assert.Equal(t, "tool", sent[len(sent)-2].Role, "the tool's result first")
		assert.Contains(t, sent[len(sent)-2].Text, "<result call_1>")
		assert.Equal(t, turn{"user", "also check the tests"}, sent[len(sent)-1], "then the steered prompt")
	}
	_, sent = turns(t, flavor, reqs[2])
	assert.Equal(t, turn{"assistant", "all done"}, sent[len(sent)-2])
	assert.Equal(t, turn{"user", "and the docs"}, sent[len(sent)-1], "steered during the last answer: answered too")

	msgs := runMessages(e.messages(ws.ID, sess.ID), acc.RunID)
	var users []proto.Message
	for _, m := range msgs {
		if m.Role == proto.RoleUser {
			users = append(users, m)
		}
	}
	require.Len(t, users, 3)
	assert.Equal(t, steered[0].MessageID, users[1].ID)
	assert.Equal(t, steerer, users[1].ClientID)
	assert.Equal(t, steered[1].MessageID, users[2].ID)
	last := msgs[len(msgs)-1]
	assert.Equal(t, rc.MessageID, last.ID)
	assert.Equal(t, proto.PartFinish, last.Parts[len(last.Parts)-1].Type)

	// Idle: a steer is a prompt of its own.
	s.scIdle(sess.ID)
	own := e.steer(ws.ID, sess.ID, "new work", steerer)
	assert.Equal(t, proto.RunRunning, own.State)
	assert.NotEqual(t, acc.RunID, own.RunID)
	rc, _ = s.completion(own.RunID)
	assert.Equal(t, proto.OutcomeEndTurn, rc.Outcome)

	e.scRefused("POST", "/v1/workspaces/"+ws.ID+"/agent", map[string]any{"session_id": sess.ID, "prompt": "x", "delivery": "shove"}, http.StatusBadRequest, proto.CodeInvalidArgument)
}

// A cancel after a steer cancels the run the steered prompt joined: it is
// listed once, ends canceled with no run.completed of the steer's own, and
// the steered prompt is in its history, answered by the run's end. A steer
// after the cancel runs on its own.
func TestCancelAfterASteerCancelsTheRun(t *testing.T) {
	hold := make(chan struct{})
	defer close(hold)
	fake := newFakeModel(t, "openai", func(n int, req map[string]any) step {
		if n == 0 {
			return step{text: []string{"thinking"}, hold: hold}
		}
		return step{text: []string{fmt.Sprint("answer ", n)}}
	})
	e := startEnv(t)
	ws := e.createWorkspace()
	s := e.openStream(ws.ID, newClientID(), "")
	sess := e.openAISession(ws.ID, fake, nil)
	acc := e.prompt(ws.ID, sess.ID, "start")
	fake.awaitRequest(t)
	st := e.steer(ws.ID, sess.ID, "steer me", "")
	require.Equal(t, acc.RunID, st.RunID)
	assert.Equal(t, []string{acc.RunID}, e.cancel(ws.ID, sess.ID))
	after := e.steer(ws.ID, sess.ID, "after the cancel", "")
	assert.NotEqual(t, acc.RunID, after.RunID, "a canceled run takes no steer")

	rc, frames := s.completion(acc.RunID)
	assert.Equal(t, proto.OutcomeCanceled, rc.Outcome)
	rc2, more := s.completion(after.RunID)
	assert.Equal(t, proto.OutcomeEndTurn, rc2.Outcome)
	counts := completions(t, append(frames, more...))
	assert.Equal(t, map[string]int{acc.RunID: 1, after.RunID: 1}, counts)

	msgs := runMessages(e.messages(ws.ID, sess.ID), acc.RunID)
	var roles []string
	for _, m := range msgs {
		roles = append(roles, m.Role)
	}
	assert.Equal(t, []string{"user", "assistant", "user", "assistant"}, roles, "the steer, then the run's end after it")
	assert.Equal(t, "steer me", msgs[2].Parts[0].Text)
	for _, m := range []proto.Message{msgs[1], msgs[3]} {
		assert.Equal(t, proto.Part{Type: proto.PartFinish, Reason: proto.FinishCanceled}, m.Parts[len(m.Parts)-1])
	}
	assert.Equal(t, msgs[3].ID, rc.MessageID)
}
