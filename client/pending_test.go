package client

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/proto"
)

func TestRejectedPermissionAndFirstAnswerWins(t *testing.T) {
	e := startServer(t)
	ctx := ctxT(t)
	ws := e.workspace()
	stream := openStream(t, e.c, ws.ID, EventsOptions{})
	sess := e.session(ws.ID)
	acc, err := e.c.Prompt(ctx, ws.ID, proto.PromptRequest{SessionID: sess.ID, Prompt: `/tool write {"path":"no.txt","content":"x"}`})
	require.NoError(t, err)
	ev, _ := untilRun(t, stream, proto.EventPermissionRequested, acc.RunID)
	pr := decode[proto.PermissionRequest](t, ev)

	res, err := e.c.AnswerPermission(ctx, ws.ID, pr.RequestID, proto.PermissionAnswer{Decision: proto.DecisionReject, Feedback: "not now"})
	require.NoError(t, err)
	assert.Equal(t, proto.PermissionAnswered{Resolved: true, Result: proto.ResultDeniedByUser}, res)

	// Another client comes second: a typed 409.
	c2 := e.newClient()
	_, err = c2.AnswerPermission(ctx, ws.ID, pr.RequestID, proto.PermissionAnswer{Decision: proto.DecisionApproveOnce})
	assert.True(t, IsCode(err, proto.CodeAlreadyResolved), "%v", err)
	var apiErr *APIError
	require.ErrorAs(t, err, &apiErr)
	assert.Equal(t, http.StatusConflict, apiErr.Status)
	assert.NotEmpty(t, apiErr.Message)

	var resolved proto.PermissionResolved
	done, err := WaitRunFunc(ctx, stream, acc.RunID, func(ev proto.Event) {
		if ev.Type == proto.EventPermissionResolved {
			resolved = decode[proto.PermissionResolved](t, ev)
		}
	})
	require.NoError(t, err)
	assert.Equal(t, proto.OutcomeEndTurn, done.Outcome)
	assert.Equal(t, proto.PermissionResolved{RequestID: pr.RequestID, Result: proto.ResultDeniedByUser, Feedback: "not now",
		ResolvedBy: e.c.ClientID(), ResolvedByName: "owner"}, resolved)
	_, err = os.Stat(filepath.Join(e.dir, "no.txt"))
	assert.ErrorIs(t, err, os.ErrNotExist, "a rejected write does not run")
}

func TestClientToolAnswers(t *testing.T) {
	e := startServer(t)
	ctx := ctxT(t)
	ws := e.workspace()
	stream := openStream(t, e.c, ws.ID, EventsOptions{})
	sess, err := e.c.CreateSession(ctx, ws.ID, proto.CreateSessionRequest{Tools: []proto.ToolSpec{lookupTool}})
	require.NoError(t, err)

	call := func(t *testing.T, answer proto.ToolCallAnswer) (finished proto.ToolFinished, answerText string) {
		t.Helper()
		acc, err := e.c.Prompt(ctx, ws.ID, proto.PromptRequest{SessionID: sess.ID, Prompt: `/tool lookup {"q":"y"}`})
		require.NoError(t, err)
		ev, _ := untilRun(t, stream, proto.EventToolRequested, acc.RunID)
		tr := decode[proto.ToolCallRequest](t, ev)
		res, err := e.c.AnswerToolCall(ctx, ws.ID, tr.RequestID, answer)
		require.NoError(t, err)
		assert.Equal(t, proto.ToolCallAnswered{Resolved: true}, res)

		// The first answer won; a second one, of any client, is a 409.
		_, err = e.newClient().AnswerToolCall(ctx, ws.ID, tr.RequestID, ToolResult("late"))
		assert.True(t, IsCode(err, proto.CodeAlreadyResolved), "%v", err)

		done, err := WaitRunFunc(ctx, stream, acc.RunID, func(ev proto.Event) {
			if ev.Type == proto.EventToolFinished {
				finished = decode[proto.ToolFinished](t, ev)
			}
		})
		require.NoError(t, err)
		assert.Equal(t, proto.OutcomeEndTurn, done.Outcome)
		return finished, textOf(lastAssistant(t, e, ws.ID, sess.ID))
	}

	t.Run("error", func(t *testing.T) {
		finished, text := call(t, ToolError("dictionary offline"))
		assert.True(t, finished.IsError)
		assert.Equal(t, "dictionary offline", finished.Content)
		assert.Equal(t, "tool lookup failed: dictionary offline", text)
	})
	t.Run("empty result is still a result", func(t *testing.T) {
		finished, text := call(t, ToolResult(""))
		assert.False(t, finished.IsError)
		assert.Empty(t, finished.Content)
		assert.Contains(t, text, "tool lookup returned:")
	})

	// An answer with neither result nor error is refused.
	_, err = e.c.AnswerToolCall(ctx, ws.ID, uuid.NewString(), proto.ToolCallAnswer{})
	assert.True(t, IsCode(err, proto.CodeInvalidArgument), "%v", err)
}

func TestPendingRouteErrors(t *testing.T) {
	e := startServer(t)
	ctx := ctxT(t)
	ws := e.workspace()
	sess, err := e.c.CreateSession(ctx, ws.ID, proto.CreateSessionRequest{Tools: []proto.ToolSpec{lookupTool}, ReasoningEffort: proto.ReasoningEffortLow})
	require.NoError(t, err)
	unknown := uuid.NewString()

	_, err = e.c.ListPermissions(ctx, unknown)
	assert.True(t, IsCode(err, proto.CodeWorkspaceNotFound), "%v", err)
	_, err = e.c.Pending(ctx, ws.ID, unknown)
	assert.True(t, IsCode(err, proto.CodeSessionNotFound), "%v", err)
	_, err = e.c.Resume(ctx, ws.ID, unknown, proto.ResumeRequest{})
	assert.True(t, IsCode(err, proto.CodeSessionNotFound), "%v", err)
	_, err = e.c.SetModel(ctx, ws.ID, unknown, proto.SetModelRequest{Model: "echo"})
	assert.True(t, IsCode(err, proto.CodeSessionNotFound), "%v", err)
	_, err = e.c.AnswerPermission(ctx, ws.ID, unknown, proto.PermissionAnswer{Decision: proto.DecisionApproveOnce})
	assert.True(t, IsCode(err, proto.CodeRequestNotFound), "%v", err)
	_, err = e.c.AnswerToolCall(ctx, ws.ID, unknown, ToolResult("x"))
	assert.True(t, IsCode(err, proto.CodeRequestNotFound), "%v", err)
	_, err = e.c.AnswerPermission(ctx, ws.ID, unknown, proto.PermissionAnswer{Decision: "maybe"})
	assert.True(t, IsCode(err, proto.CodeInvalidArgument), "%v", err)

	// Idle session: nothing pending, anywhere.
	pend, err := e.c.Pending(ctx, ws.ID, sess.ID)
	require.NoError(t, err)
	assert.Empty(t, pend.Permissions)
	assert.Empty(t, pend.ToolCalls)
	perms, err := e.c.ListPermissions(ctx, ws.ID)
	require.NoError(t, err)
	assert.Empty(t, perms)

	// Tool names clash with another client's tool or a built-in.
	c2 := e.newClient()
	_, err = c2.Resume(ctx, ws.ID, sess.ID, proto.ResumeRequest{Tools: []proto.ToolSpec{{Name: "lookup"}}})
	assert.True(t, IsCode(err, proto.CodeToolConflict), "%v", err)
	_, err = c2.Resume(ctx, ws.ID, sess.ID, proto.ResumeRequest{Tools: []proto.ToolSpec{{Name: "bash"}}})
	assert.True(t, IsCode(err, proto.CodeToolConflict), "%v", err)
	// The owner itself may offer its tool again.
	_, err = e.c.Resume(ctx, ws.ID, sess.ID, proto.ResumeRequest{Tools: []proto.ToolSpec{lookupTool}})
	require.NoError(t, err)

	// A nil effort keeps the current one; a bad one is refused.
	s, err := e.c.SetModel(ctx, ws.ID, sess.ID, proto.SetModelRequest{Model: "echo/next"})
	require.NoError(t, err)
	assert.Equal(t, "echo/next", s.Model)
	assert.Equal(t, proto.ReasoningEffortLow, s.ReasoningEffort)
	_, err = e.c.SetModel(ctx, ws.ID, sess.ID, proto.SetModelRequest{Model: "echo", ReasoningEffort: Effort("extreme")})
	assert.True(t, IsCode(err, proto.CodeInvalidArgument), "%v", err)
	got, err := e.c.GetSession(ctx, ws.ID, sess.ID)
	require.NoError(t, err)
	assert.Equal(t, "echo/next", got.Model, "a bad request changes nothing")
}

// suspend parks a run of a new session on a write permission, then deletes
// (closes) the workspace so that the run is suspended, and opens the stream
// of a watcher, which reopens the workspace.
func suspend(t *testing.T, e *env) (wsID string, sess proto.Session, runID string, pr proto.PermissionRequest, watcher *Client, stream *EventStream) {
	t.Helper()
	ctx := ctxT(t)
	ws := e.workspace()
	creator := openStream(t, e.c, ws.ID, EventsOptions{})
	sess = e.session(ws.ID)
	acc, err := e.c.Prompt(ctx, ws.ID, proto.PromptRequest{SessionID: sess.ID, Prompt: `/tool write {"path":"suspended.txt","content":"revived"}`})
	require.NoError(t, err)
	ev, _ := untilRun(t, creator, proto.EventPermissionRequested, acc.RunID)
	pr = decode[proto.PermissionRequest](t, ev)

	require.NoError(t, e.c.DeleteWorkspace(ctx, ws.ID))
	for {
		if _, err := creator.Next(ctx); err != nil {
			require.ErrorIs(t, err, ErrWorkspaceDeleted)
			break
		}
	}
	pend, err := e.c.Pending(ctx, ws.ID, sess.ID)
	require.NoError(t, err)
	require.Equal(t, []proto.PermissionRequest{pr}, pend.Permissions, "suspended work is kept")
	_, err = e.c.AnswerPermission(ctx, ws.ID, pr.RequestID, proto.PermissionAnswer{Decision: proto.DecisionApproveOnce})
	require.True(t, IsCode(err, proto.CodeWorkspaceNotOpen), "%v", err)

	watcher = e.newClient()
	stream = openStream(t, watcher, ws.ID, EventsOptions{})
	until(t, stream, proto.EventClientAttached)
	return ws.ID, sess, acc.RunID, pr, watcher, stream
}

func TestColdResume(t *testing.T) {
	t.Run("continuing revives and announces again", func(t *testing.T) {
		e := startServer(t)
		ctx := ctxT(t)
		wsID, sess, runID, pr, c, stream := suspend(t, e)

		res, err := c.Resume(ctx, wsID, sess.ID, proto.ResumeRequest{ContinuePendingWork: true})
		require.NoError(t, err)
		assert.Equal(t, []proto.PermissionRequest{pr}, res.Pending.Permissions)
		ev, _ := until(t, stream, proto.EventSessionResumed)
		assert.Equal(t, proto.SessionResumed{ClientID: c.ClientID(), ContinuePendingWork: true, SessionWasActive: false},
			decode[proto.SessionResumed](t, ev))
		ev, _ = untilRun(t, stream, proto.EventPermissionRequested, runID)
		assert.Equal(t, pr, decode[proto.PermissionRequest](t, ev), "announced again, same request")

		_, err = c.AnswerPermission(ctx, wsID, pr.RequestID, proto.PermissionAnswer{Decision: proto.DecisionApproveOnce})
		require.NoError(t, err)
		done, err := WaitRun(ctx, stream, runID)
		require.NoError(t, err)
		assert.Equal(t, proto.OutcomeEndTurn, done.Outcome)
		got, err := os.ReadFile(filepath.Join(e.dir, "suspended.txt"))
		require.NoError(t, err)
		assert.Equal(t, "revived", string(got))
	})

	t.Run("not continuing interrupts", func(t *testing.T) {
		e := startServer(t)
		ctx := ctxT(t)
		wsID, sess, runID, pr, c, stream := suspend(t, e)

		res, err := c.Resume(ctx, wsID, sess.ID, proto.ResumeRequest{ContinuePendingWork: false})
		require.NoError(t, err)
		assert.Empty(t, res.Pending.Permissions)
		ev, _ := until(t, stream, proto.EventSessionResumed)
		assert.Equal(t, proto.SessionResumed{ClientID: c.ClientID(), ContinuePendingWork: false, SessionWasActive: false},
			decode[proto.SessionResumed](t, ev))
		_, err = c.AnswerPermission(ctx, wsID, pr.RequestID, proto.PermissionAnswer{Decision: proto.DecisionApproveOnce})
		assert.True(t, IsCode(err, proto.CodeAlreadyResolved), "%v", err)
		done, err := WaitRun(ctx, stream, runID)
		require.NoError(t, err)
		assert.Equal(t, proto.OutcomeInterrupted, done.Outcome)
		_, err = os.Stat(filepath.Join(e.dir, "suspended.txt"))
		assert.ErrorIs(t, err, os.ErrNotExist)

		// New prompts work.
		acc, err := c.Prompt(ctx, wsID, proto.PromptRequest{SessionID: sess.ID, Prompt: "again"})
		require.NoError(t, err)
		done, err = WaitRun(ctx, stream, acc.RunID)
		require.NoError(t, err)
		assert.Equal(t, proto.OutcomeEndTurn, done.Outcome)
	})
}
