package client

import (
	"bytes"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/proto"
)

func TestHealth(t *testing.T) {
	e := startServer(t)
	ctx := ctxT(t)

	h, err := e.c.Health(ctx)
	require.NoError(t, err)
	assert.Equal(t, "ok", h.Status)
	assert.Equal(t, "echo", h.DefaultModel)
	assert.NotEmpty(t, h.Version)

	// Health needs no token, so it works with a wrong one.
	wrong := New(e.ts.URL, "wrong")
	t.Cleanup(wrong.CloseIdleConnections)
	_, err = wrong.Health(ctx)
	require.NoError(t, err)
}

func TestWrongTokenIsUnauthorizedAndNeverLeaks(t *testing.T) {
	e := startServer(t)
	ctx := ctxT(t)
	const secret = "secret-token-that-must-not-leak"
	var logs bytes.Buffer
	c := New(e.ts.URL+"/", secret, WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	t.Cleanup(c.CloseIdleConnections)

	_, err := c.ListWorkspaces(ctx)
	require.Error(t, err)
	var apiErr *APIError
	require.ErrorAs(t, err, &apiErr)
	assert.Equal(t, http.StatusUnauthorized, apiErr.Status)
	assert.True(t, IsCode(err, proto.CodeUnauthorized))
	assert.NotContains(t, err.Error(), secret)

	_, err = c.Events(ctx, uuid.NewString(), EventsOptions{})
	assert.True(t, IsCode(err, proto.CodeUnauthorized), "%v", err)
	assert.NotContains(t, err.Error(), secret)

	assert.NotEmpty(t, logs.String(), "debug logging was on")
	assert.NotContains(t, logs.String(), secret)
}

func TestWorkspaceRoutes(t *testing.T) {
	e := startServer(t)
	ctx := ctxT(t)

	ws, created, err := e.c.CreateWorkspace(ctx, e.dir)
	require.NoError(t, err)
	assert.True(t, created)
	assert.True(t, ws.Open)
	require.NoError(t, uuid.Validate(ws.ID))

	// The same directory, through a symlink, is the same workspace: 200.
	link := filepath.Join(t.TempDir(), "link")
	require.NoError(t, os.Symlink(e.dir, link))
	again, created, err := e.c.CreateWorkspace(ctx, link)
	require.NoError(t, err)
	assert.False(t, created)
	assert.Equal(t, ws.ID, again.ID)

	list, err := e.c.ListWorkspaces(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Equal(t, ws.ID, list[0].ID)

	got, err := e.c.GetWorkspace(ctx, ws.ID)
	require.NoError(t, err)
	assert.Equal(t, ws.ID, got.ID)
	assert.Equal(t, ws.Path, got.Path)

	require.NoError(t, e.c.DeleteWorkspace(ctx, ws.ID))
	got, err = e.c.GetWorkspace(ctx, ws.ID)
	require.NoError(t, err)
	assert.False(t, got.Open, "delete closes the workspace")

	_, err = e.c.GetWorkspace(ctx, uuid.NewString())
	assert.True(t, IsCode(err, proto.CodeWorkspaceNotFound), "%v", err)
	assert.True(t, IsNotFound(err))
	err = e.c.DeleteWorkspace(ctx, uuid.NewString())
	assert.True(t, IsCode(err, proto.CodeWorkspaceNotFound), "%v", err)

	// A path id that is not a UUID is a 404 too, and escaping keeps it on
	// the route it was meant for.
	_, err = e.c.GetWorkspace(ctx, "../health")
	assert.True(t, IsNotFound(err), "%v", err)

	_, _, err = e.c.CreateWorkspace(ctx, "relative/path")
	assert.True(t, IsCode(err, proto.CodeInvalidArgument), "%v", err)
	var apiErr *APIError
	require.ErrorAs(t, err, &apiErr)
	assert.Equal(t, http.StatusBadRequest, apiErr.Status)
	assert.NotEmpty(t, apiErr.Message)
}

func TestSessionRoutes(t *testing.T) {
	e := startServer(t)
	ctx := ctxT(t)
	ws := e.workspace()

	_, ok, err := e.c.LastSession(ctx, ws.ID)
	require.NoError(t, err)
	assert.False(t, ok, "no session yet")

	id := uuid.NewString()
	s, err := e.c.CreateSession(ctx, ws.ID, proto.CreateSessionRequest{ID: id, Title: "first", ReasoningEffort: "low"})
	require.NoError(t, err)
	assert.Equal(t, id, s.ID)
	assert.Equal(t, "first", s.Title)
	assert.Equal(t, "echo", s.Model)
	assert.Equal(t, ws.ID, s.WorkspaceID)

	_, err = e.c.CreateSession(ctx, ws.ID, proto.CreateSessionRequest{ID: id})
	assert.True(t, IsCode(err, proto.CodeAlreadyExists), "%v", err)
	_, err = e.c.CreateSession(ctx, ws.ID, proto.CreateSessionRequest{ReasoningEffort: "extreme"})
	assert.True(t, IsCode(err, proto.CodeInvalidArgument), "%v", err)
	_, err = e.c.CreateSession(ctx, uuid.NewString(), proto.CreateSessionRequest{})
	assert.True(t, IsCode(err, proto.CodeWorkspaceNotFound), "%v", err)

	second := e.session(ws.ID)
	list, err := e.c.ListSessions(ctx, ws.ID)
	require.NoError(t, err)
	require.Len(t, list, 2)
	assert.Equal(t, second.ID, list[0].ID, "most recently updated first")

	last, ok, err := e.c.LastSession(ctx, ws.ID)
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, second.ID, last)

	got, err := e.c.GetSession(ctx, ws.ID, s.ID)
	require.NoError(t, err)
	assert.Equal(t, s.ID, got.ID)

	msgs, err := e.c.Messages(ctx, ws.ID, s.ID)
	require.NoError(t, err)
	assert.Empty(t, msgs)

	seq, err := e.c.Log(ctx, ws.ID, s.ID, proto.LogRequest{Level: proto.LogLevelWarning, Message: "careful"})
	require.NoError(t, err)
	assert.Positive(t, seq)
	_, err = e.c.Log(ctx, ws.ID, s.ID, proto.LogRequest{Level: "loud", Message: "x"})
	assert.True(t, IsCode(err, proto.CodeInvalidArgument), "%v", err)

	evs, err := e.c.SessionEvents(ctx, ws.ID, s.ID, 0, 0)
	require.NoError(t, err)
	require.Len(t, evs, 2)
	assert.Equal(t, proto.EventSessionStarted, evs[0].Type)
	assert.Equal(t, proto.EventSessionLog, evs[1].Type)
	assert.Equal(t, seq, evs[1].Seq)
	lg, err := DecodeData[proto.SessionLog](evs[1])
	require.NoError(t, err)
	assert.Equal(t, proto.SessionLog{Level: proto.LogLevelWarning, Message: "careful"}, lg)

	after, err := e.c.SessionEvents(ctx, ws.ID, s.ID, evs[0].Seq, 0)
	require.NoError(t, err)
	require.Len(t, after, 1)
	assert.Equal(t, seq, after[0].Seq)
	limited, err := e.c.SessionEvents(ctx, ws.ID, s.ID, 0, 1)
	require.NoError(t, err)
	require.Len(t, limited, 1)
	assert.Equal(t, evs[0].Seq, limited[0].Seq)

	require.NoError(t, e.c.DeleteSession(ctx, ws.ID, s.ID))
	_, err = e.c.GetSession(ctx, ws.ID, s.ID)
	assert.True(t, IsCode(err, proto.CodeSessionNotFound), "%v", err)
	_, err = e.c.Messages(ctx, ws.ID, s.ID)
	assert.True(t, IsCode(err, proto.CodeSessionNotFound), "%v", err)
	_, err = e.c.SessionEvents(ctx, ws.ID, s.ID, 0, 0)
	assert.True(t, IsCode(err, proto.CodeSessionNotFound), "%v", err)
	_, err = e.c.Log(ctx, ws.ID, s.ID, proto.LogRequest{Level: proto.LogLevelInfo, Message: "x"})
	assert.True(t, IsCode(err, proto.CodeSessionNotFound), "%v", err)
	err = e.c.DeleteSession(ctx, ws.ID, s.ID)
	assert.True(t, IsCode(err, proto.CodeSessionNotFound), "%v", err)
}

func TestAgentRouteErrors(t *testing.T) {
	e := startServer(t)
	ctx := ctxT(t)
	ws := e.workspace()
	s := e.session(ws.ID)

	_, err := e.c.Prompt(ctx, ws.ID, proto.PromptRequest{SessionID: s.ID, Prompt: ""})
	assert.True(t, IsCode(err, proto.CodeInvalidArgument), "%v", err)
	_, err = e.c.Prompt(ctx, ws.ID, proto.PromptRequest{SessionID: uuid.NewString(), Prompt: "hi"})
	assert.True(t, IsCode(err, proto.CodeSessionNotFound), "%v", err)
	_, err = e.c.Cancel(ctx, ws.ID, uuid.NewString())
	assert.True(t, IsCode(err, proto.CodeSessionNotFound), "%v", err)
	_, err = e.c.AgentStatus(ctx, ws.ID, uuid.NewString())
	assert.True(t, IsCode(err, proto.CodeSessionNotFound), "%v", err)

	// Idle: status says so and a cancel is a no-op.
	st, err := e.c.AgentStatus(ctx, ws.ID, s.ID)
	require.NoError(t, err)
	assert.False(t, st.Busy)
	assert.Nil(t, st.ActiveRunID)
	canceled, err := e.c.Cancel(ctx, ws.ID, s.ID)
	require.NoError(t, err)
	assert.Empty(t, canceled)

	// A closed workspace takes no prompts.
	require.NoError(t, e.c.DeleteWorkspace(ctx, ws.ID))
	_, err = e.c.Prompt(ctx, ws.ID, proto.PromptRequest{SessionID: s.ID, Prompt: "hi"})
	assert.True(t, IsCode(err, proto.CodeWorkspaceNotOpen), "%v", err)
}

func TestEventsOpenErrors(t *testing.T) {
	e := startServer(t)
	ctx := ctxT(t)
	ws := e.workspace()

	_, err := e.c.Events(ctx, uuid.NewString(), EventsOptions{})
	assert.True(t, IsCode(err, proto.CodeWorkspaceNotFound), "%v", err)
	_, err = e.c.Events(ctx, ws.ID, EventsOptions{SessionID: uuid.NewString()})
	assert.True(t, IsCode(err, proto.CodeSessionNotFound), "%v", err)
	_, err = e.c.Events(ctx, ws.ID, EventsOptions{SessionID: "not-a-uuid"})
	assert.True(t, IsCode(err, proto.CodeInvalidArgument), "%v", err)

	bad := New(e.ts.URL, testToken, WithClientID("not-a-uuid"))
	t.Cleanup(bad.CloseIdleConnections)
	_, err = bad.Events(ctx, ws.ID, EventsOptions{})
	assert.True(t, IsCode(err, proto.CodeInvalidArgument), "%v", err)
}
