package client

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/proto"
)

// decode decodes an event's data or fails the test.
func decode[T any](t *testing.T, ev proto.Event) T {
	t.Helper()
	v, err := DecodeData[T](ev)
	require.NoError(t, err)
	return v
}

// untilRun reads up to the first event of type typ caused by run runID and
// returns it with the events before it.
func untilRun(t *testing.T, s *EventStream, typ, runID string) (proto.Event, []proto.Event) {
	t.Helper()
	var seen []proto.Event
	for {
		ev := next(t, s)
		if ev.Type == typ && ev.RunID == runID {
			return ev, seen
		}
		seen = append(seen, ev)
	}
}

// types lists the types of evs.
func types(evs []proto.Event) []string {
	out := make([]string, 0, len(evs))
	for _, ev := range evs {
		out = append(out, ev.Type)
	}
	return out
}

// newClient is a second SDK client (another client id) of the same server.
func (e *env) newClient() *Client {
	c := New(e.ts.URL, testToken)
	e.t.Cleanup(c.CloseIdleConnections)
	return c
}

// defaultModel is the test server's model: no --model, so echo.
const defaultModel = "echo"

// lookupTool is the client tool of these tests; its calls ask no permission.
var lookupTool = proto.ToolSpec{
	Name:           "lookup",
	Description:    "Looks a word up in the client's dictionary.",
	Parameters:     json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}`),
	SkipPermission: true,
}

// TestWholeSessionThroughTheSDK drives a session from start to end through
// the SDK only, against the real server and the echo model: a permission
// approved, a client tool answered, a cancel, a resume from a second client,
// a model change, and nothing left pending at the end.
func TestWholeSessionThroughTheSDK(t *testing.T) {
	e := startServer(t)
	ctx := ctxT(t)
	c := e.c

	ws, created, err := c.CreateWorkspace(ctx, e.dir)
	require.NoError(t, err)
	require.True(t, created)
	stream := openStream(t, c, ws.ID, EventsOptions{})
	require.Equal(t, proto.EventStreamOpened, next(t, stream).Type)

	// The session is created with the client's tool; CreateSession fills in
	// the client's id, which makes the tool this client's.
	sess, err := c.CreateSession(ctx, ws.ID, proto.CreateSessionRequest{Title: "sdk e2e", Tools: []proto.ToolSpec{lookupTool}})
	require.NoError(t, err)
	assert.Equal(t, defaultModel, sess.Model)
	assert.Equal(t, 1, sess.AttachedClients, "the creator, whose stream is open, is attached")

	// 1. The write tool asks a write permission; approve it.
	acc, err := c.Prompt(ctx, ws.ID, proto.PromptRequest{SessionID: sess.ID, Prompt: `/tool write {"path":"sdk.txt","content":"from sdk"}`})
	require.NoError(t, err)
	ev, _ := untilRun(t, stream, proto.EventPermissionRequested, acc.RunID)
	pr := decode[proto.PermissionRequest](t, ev)
	assert.Equal(t, proto.PermissionWrite, pr.Kind)
	assert.Equal(t, "write", pr.ToolName)
	assert.Equal(t, sess.ID, pr.SessionID)
	assert.Equal(t, acc.RunID, pr.RunID)
	assert.NotEmpty(t, pr.ToolCallID)
	assert.NotEmpty(t, pr.Summary)
	_, err = os.Stat(filepath.Join(e.dir, "sdk.txt"))
	require.ErrorIs(t, err, os.ErrNotExist, "nothing is written before the answer")

	perms, err := c.ListPermissions(ctx, ws.ID)
	require.NoError(t, err)
	assert.Equal(t, []proto.PermissionRequest{pr}, perms)
	pend, err := c.Pending(ctx, ws.ID, sess.ID)
	require.NoError(t, err)
	assert.Equal(t, []proto.PermissionRequest{pr}, pend.Permissions)
	assert.Empty(t, pend.ToolCalls)

	answered, err := c.AnswerPermission(ctx, ws.ID, pr.RequestID, proto.PermissionAnswer{Decision: proto.DecisionApproveOnce})
	require.NoError(t, err)
	assert.Equal(t, proto.PermissionAnswered{Resolved: true, Result: proto.ResultApproved}, answered)
	var resolved []proto.PermissionResolved
	done, err := WaitRunFunc(ctx, stream, acc.RunID, func(ev proto.Event) {
		if ev.Type == proto.EventPermissionResolved {
			resolved = append(resolved, decode[proto.PermissionResolved](t, ev))
		}
	})
	require.NoError(t, err)
	assert.Equal(t, proto.OutcomeEndTurn, done.Outcome)
	assert.Equal(t, []proto.PermissionResolved{{RequestID: pr.RequestID, Result: proto.ResultApproved, ResolvedBy: c.ClientID(), ResolvedByName: "owner"}},
		resolved, "AnswerPermission sends the client's id")
	got, err := os.ReadFile(filepath.Join(e.dir, "sdk.txt"))
	require.NoError(t, err)
	assert.Equal(t, "from sdk", string(got))

	// 2. The echo model calls the client tool, which asks no permission;
	// answer it.
	acc, err = c.Prompt(ctx, ws.ID, proto.PromptRequest{SessionID: sess.ID, Prompt: `/tool lookup {"q":"x"}`})
	require.NoError(t, err)
	ev, before := untilRun(t, stream, proto.EventToolRequested, acc.RunID)
	assert.NotContains(t, types(before), proto.EventPermissionRequested, "skip_permission: nothing asked")
	tr := decode[proto.ToolCallRequest](t, ev)
	assert.Equal(t, "lookup", tr.ToolName)
	assert.JSONEq(t, `{"q":"x"}`, string(tr.Arguments))
	assert.Equal(t, []string{c.ClientID()}, tr.OwnerClientIDs, "CreateSession sent the client's id")
	assert.Equal(t, sess.ID, tr.SessionID)
	assert.Equal(t, acc.RunID, tr.RunID)
	pend, err = c.Pending(ctx, ws.ID, sess.ID)
	require.NoError(t, err)
	assert.Empty(t, pend.Permissions)
	assert.Equal(t, []proto.ToolCallRequest{tr}, pend.ToolCalls)

	toolAnswered, err := c.AnswerToolCall(ctx, ws.ID, tr.RequestID, ToolResult("x means ten"))
	require.NoError(t, err)
	assert.True(t, toolAnswered.Resolved)
	var toolResolved []proto.ToolResolved
	var text strings.Builder
	done, err = WaitRunFunc(ctx, stream, acc.RunID, func(ev proto.Event) {
		switch ev.Type {
		case proto.EventToolResolved:
			toolResolved = append(toolResolved, decode[proto.ToolResolved](t, ev))
		case proto.EventMessageDelta:
			text.WriteString(decode[proto.MessageDelta](t, ev).Text)
		}
	})
	require.NoError(t, err)
	assert.Equal(t, proto.OutcomeEndTurn, done.Outcome)
	assert.Equal(t, []proto.ToolResolved{{RequestID: tr.RequestID, ResolvedBy: c.ClientID(), ResolvedByName: "owner"}}, toolResolved)
	assert.Contains(t, text.String(), "tool lookup returned: x means ten")
	assert.Contains(t, textOf(lastAssistant(t, e, ws.ID, sess.ID)), "tool lookup returned: x means ten")

	// 3. A slow run, canceled in the middle.
	acc, err = c.Prompt(ctx, ws.ID, proto.PromptRequest{SessionID: sess.ID, Prompt: "/slow 1000 10"})
	require.NoError(t, err)
	untilRun(t, stream, proto.EventMessageDelta, acc.RunID)
	canceled, err := c.Cancel(ctx, ws.ID, sess.ID)
	require.NoError(t, err)
	assert.Equal(t, []string{acc.RunID}, canceled)
	done, err = WaitRun(ctx, stream, acc.RunID)
	require.NoError(t, err)
	assert.Equal(t, proto.OutcomeCanceled, done.Outcome)

	// 4. A second client resumes the session. The first one is attached, so
	// the session was active.
	c2 := e.newClient()
	res, err := c2.Resume(ctx, ws.ID, sess.ID, proto.ResumeRequest{ContinuePendingWork: false})
	require.NoError(t, err)
	assert.Equal(t, sess.ID, res.Session.ID)
	assert.Empty(t, res.Pending.Permissions)
	assert.Empty(t, res.Pending.ToolCalls)
	ev, _ = until(t, stream, proto.EventSessionResumed)
	assert.Equal(t, sess.ID, ev.SessionID)
	assert.Equal(t, proto.SessionResumed{ClientID: c2.ClientID(), ContinuePendingWork: false, SessionWasActive: true},
		decode[proto.SessionResumed](t, ev), "Resume sends the client's own id")

	// 5. A model change, seen by every client.
	s, err := c2.SetModel(ctx, ws.ID, sess.ID, proto.SetModelRequest{Model: "echo/other", ReasoningEffort: Effort(proto.ReasoningEffortHigh)})
	require.NoError(t, err)
	assert.Equal(t, "echo/other", s.Model)
	assert.Equal(t, proto.ReasoningEffortHigh, s.ReasoningEffort)
	ev, _ = until(t, stream, proto.EventSessionModelChanged)
	assert.Equal(t, sess.ID, ev.SessionID)
	assert.Equal(t, proto.SessionModelChanged{Model: "echo/other", PreviousModel: defaultModel, ReasoningEffort: proto.ReasoningEffortHigh},
		decode[proto.SessionModelChanged](t, ev))

	// The new model answers the next prompt.
	acc, err = c2.Prompt(ctx, ws.ID, proto.PromptRequest{SessionID: sess.ID, Prompt: "still there?"})
	require.NoError(t, err)
	done, err = WaitRun(ctx, stream, acc.RunID)
	require.NoError(t, err)
	assert.Equal(t, proto.OutcomeEndTurn, done.Outcome)
	last := lastAssistant(t, e, ws.ID, sess.ID)
	assert.Equal(t, "echo/other", last.Model)
	assert.Equal(t, "echo: still there?", textOf(last))

	// Nothing is left waiting.
	pend, err = c.Pending(ctx, ws.ID, sess.ID)
	require.NoError(t, err)
	assert.Empty(t, pend.Permissions)
	assert.Empty(t, pend.ToolCalls)
	perms, err = c.ListPermissions(ctx, ws.ID)
	require.NoError(t, err)
	assert.Empty(t, perms)
	until(t, stream, proto.EventSessionIdle) // busy until then
	st, err := c.AgentStatus(ctx, ws.ID, sess.ID)
	require.NoError(t, err)
	assert.False(t, st.Busy)
}

// textOf joins a message's text parts.
func textOf(m proto.Message) string {
	var b strings.Builder
	for _, p := range m.Parts {
		if p.Type == proto.PartText {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}
