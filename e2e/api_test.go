package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/proto"
)

func TestHealthNeedsNoToken(t *testing.T) {
	e := startEnv(t)
	var h proto.Health
	status, _ := e.doRaw("GET", "/v1/health", nil, &h, nil)
	require.Equal(t, http.StatusOK, status)
	assert.Equal(t, "ok", h.Status)
	assert.Equal(t, "echo", h.DefaultModel)
	assert.NotEmpty(t, h.Version)
}

func TestAuth(t *testing.T) {
	e := startEnv(t)
	ws := e.createWorkspace()
	cases := []struct {
		name    string
		path    string
		headers map[string]string
		want    int
	}{
		{"no token", "/v1/workspaces", nil, 401},
		{"wrong token", "/v1/workspaces", map[string]string{"Authorization": "Bearer nope"}, 401},
		{"not bearer", "/v1/workspaces", map[string]string{"Authorization": testToken}, 401},
		{"query token off the stream route", "/v1/workspaces?access_token=" + testToken, nil, 401},
		{"wrong query token on the stream", "/v1/workspaces/" + ws.ID + "/events?client_id=" + uuid.NewString() + "&access_token=nope", nil, 401},
		{"no token on the stream", "/v1/workspaces/" + ws.ID + "/events?client_id=" + uuid.NewString(), nil, 401},
		{"wrong token on the stream", "/v1/workspaces/" + ws.ID + "/events?client_id=" + uuid.NewString(), map[string]string{"Authorization": "Bearer nope"}, 401},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var body proto.ErrorBody
			status, raw := e.doRaw("GET", c.path, nil, &body, c.headers)
			require.Equal(t, c.want, status, "%s", raw)
			assert.Equal(t, proto.CodeUnauthorized, body.Error.Code)
			assert.NotContains(t, string(raw), testToken)
		})
	}
	// The stream takes ?access_token= because EventSource cannot set headers.
	s, status, body := e.tryStreamWithQueryToken(ws.ID)
	require.Equal(t, http.StatusOK, status, body)
	require.Equal(t, proto.EventStreamOpened, s.next().Event)
}

func (e *env) tryStreamWithQueryToken(wsID string) (*stream, int, string) {
	e.t.Helper()
	return e.tryStream(wsID, newClientID(), "&access_token="+testToken, func(r *http.Request) { r.Header.Del("Authorization") })
}

func TestWorkspaceRoutes(t *testing.T) {
	e := startEnv(t)
	ws := e.createWorkspace()
	assert.Equal(t, e.workDir, ws.Path)
	assert.True(t, ws.Open)
	_, err := uuid.Parse(ws.ID)
	require.NoError(t, err)

	// The same directory through a symlink is the same workspace.
	link := filepath.Join(t.TempDir(), "link")
	require.NoError(t, os.Symlink(e.workDir, link))
	var again proto.Workspace
	e.must(http.StatusOK, "POST", "/v1/workspaces", map[string]string{"path": link + "/"}, &again)
	assert.Equal(t, ws.ID, again.ID)

	var list proto.WorkspaceList
	e.must(http.StatusOK, "GET", "/v1/workspaces", nil, &list)
	require.Len(t, list.Workspaces, 1)
	assert.Equal(t, ws.ID, list.Workspaces[0].ID)

	e.must(http.StatusNoContent, "DELETE", "/v1/workspaces/"+ws.ID, "", nil)
	assert.False(t, e.workspace(ws.ID).Open)
	e.must(http.StatusNoContent, "DELETE", "/v1/workspaces/"+ws.ID, "{}", nil)
}

func TestSessionRoutes(t *testing.T) {
	e := startEnv(t)
	ws := e.createWorkspace()
	var last proto.LastSession
	e.must(http.StatusOK, "GET", "/v1/workspaces/"+ws.ID+"/sessions/last", nil, &last)
	assert.Nil(t, last.SessionID)

	chosen := uuid.NewString()
	s1 := e.createSession(ws.ID, map[string]any{"id": chosen, "title": "first", "reasoning_effort": "high"})
	assert.Equal(t, chosen, s1.ID)
	assert.Equal(t, "first", s1.Title)
	assert.Equal(t, "echo", s1.Model)
	assert.Equal(t, "high", s1.ReasoningEffort)
	assert.Equal(t, ws.Path, s1.Context.Cwd)
	assert.Equal(t, ws.ID, s1.WorkspaceID)

	var dup proto.ErrorBody
	status, _ := e.do("POST", "/v1/workspaces/"+ws.ID+"/sessions", map[string]any{"id": chosen}, &dup)
	assert.Equal(t, http.StatusConflict, status)
	assert.Equal(t, proto.CodeAlreadyExists, dup.Error.Code)

	s2 := e.createSession(ws.ID, map[string]any{"model": "openai/gpt-4.1"})
	assert.Equal(t, "openai/gpt-4.1", s2.Model)

	var list proto.SessionList
	e.must(http.StatusOK, "GET", "/v1/workspaces/"+ws.ID+"/sessions", nil, &list)
	require.Len(t, list.Sessions, 2)
	assert.Equal(t, s2.ID, list.Sessions[0].ID, "most recently updated first")
	e.must(http.StatusOK, "GET", "/v1/workspaces/"+ws.ID+"/sessions/last", nil, &last)
	require.NotNil(t, last.SessionID)
	assert.Equal(t, s2.ID, *last.SessionID)

	var got proto.Session
	e.must(http.StatusOK, "GET", "/v1/workspaces/"+ws.ID+"/sessions/"+s1.ID, nil, &got)
	assert.Equal(t, s1.ID, got.ID)

	var hist proto.EventList
	e.must(http.StatusOK, "GET", fmt.Sprintf("/v1/workspaces/%s/sessions/%s/events", ws.ID, s1.ID), nil, &hist)
	require.Len(t, hist.Events, 1)
	assert.Equal(t, proto.EventSessionStarted, hist.Events[0].Type)
	var started proto.SessionStarted
	require.NoError(t, json.Unmarshal(hist.Events[0].Data, &started))
	// The context as the new session's: its cwd, its system prompt's
	// estimated size, echo's window.
	assert.Equal(t, proto.SessionStarted{SessionID: s1.ID, Model: "echo", ReasoningEffort: "high", Context: s1.Context}, started)
	assert.Equal(t, ws.Path, started.Context.Cwd)
	assert.Positive(t, started.Context.Tokens)
	require.NotNil(t, started.Context.Window)
	assert.EqualValues(t, 128_000, *started.Context.Window)

	var msgs proto.MessageList
	e.must(http.StatusOK, "GET", fmt.Sprintf("/v1/workspaces/%s/sessions/%s/messages", ws.ID, s1.ID), nil, &msgs)
	assert.NotNil(t, msgs.Messages)
	assert.Empty(t, msgs.Messages)

	// Paging through the history.
	for i := range 3 {
		e.log(ws.ID, s1.ID, fmt.Sprint("line ", i), false)
	}
	var page proto.EventList
	e.must(http.StatusOK, "GET", fmt.Sprintf("/v1/workspaces/%s/sessions/%s/events?limit=2", ws.ID, s1.ID), nil, &page)
	require.Len(t, page.Events, 2)
	var rest proto.EventList
	e.must(http.StatusOK, "GET", fmt.Sprintf("/v1/workspaces/%s/sessions/%s/events?after=%d", ws.ID, s1.ID, page.Events[1].Seq), nil, &rest)
	require.Len(t, rest.Events, 2)
	assert.Greater(t, rest.Events[0].Seq, page.Events[1].Seq)

	// A stream may follow the session until it is deleted, not after.
	e.openStream(ws.ID, newClientID(), "&session_id="+s1.ID).close()
	e.must(http.StatusNoContent, "DELETE", "/v1/workspaces/"+ws.ID+"/sessions/"+s1.ID, nil, nil)
	_, status, raw := e.tryStream(ws.ID, newClientID(), "&session_id="+s1.ID)
	assert.Equal(t, http.StatusNotFound, status, raw)
	assert.Contains(t, raw, proto.CodeSessionNotFound)
	for _, p := range []string{"", "/messages", "/events"} {
		var body proto.ErrorBody
		status, _ := e.do("GET", "/v1/workspaces/"+ws.ID+"/sessions/"+s1.ID+p, nil, &body)
		assert.Equal(t, http.StatusNotFound, status, p)
		assert.Equal(t, proto.CodeSessionNotFound, body.Error.Code, p)
	}
	var body proto.ErrorBody
	status, _ = e.do("POST", "/v1/workspaces/"+ws.ID+"/sessions/"+s1.ID+"/log", proto.LogRequest{Level: "info", Message: "x"}, &body)
	assert.Equal(t, http.StatusNotFound, status)
	status, _ = e.do("DELETE", "/v1/workspaces/"+ws.ID+"/sessions/"+s1.ID, nil, &body)
	assert.Equal(t, http.StatusNotFound, status)
}

func TestSessionEventsAnnounced(t *testing.T) {
	e := startEnv(t)
	ws := e.createWorkspace()
	s := e.openStream(ws.ID, newClientID(), "")
	sess := e.createSession(ws.ID, nil)
	created, _ := s.until(proto.EventSessionCreated)
	ev := created.envelope(t)
	assert.Equal(t, sess.ID, ev.SessionID)
	assert.False(t, ev.Ephemeral)
	started, _ := s.until(proto.EventSessionStarted)
	assert.Greater(t, started.envelope(t).Seq, ev.Seq)

	seq := e.log(ws.ID, sess.ID, "warn me", false)
	lg, _ := s.until(proto.EventSessionLog)
	lev := lg.envelope(t)
	assert.Equal(t, seq, lev.Seq)
	var data proto.SessionLog
	require.NoError(t, json.Unmarshal(lev.Data, &data))
	assert.Equal(t, proto.SessionLog{Level: "info", Message: "warn me"}, data)

	e.log(ws.ID, sess.ID, "fleeting", true)
	eph, _ := s.until(proto.EventSessionLog)
	assert.True(t, eph.envelope(t).Ephemeral)
	var hist proto.EventList
	e.must(http.StatusOK, "GET", fmt.Sprintf("/v1/workspaces/%s/sessions/%s/events", ws.ID, sess.ID), nil, &hist)
	for _, h := range hist.Events {
		assert.NotContains(t, string(h.Data), "fleeting", "ephemeral logs stay out of history")
		assert.NotEqual(t, proto.EventSessionCreated, h.Type, "announcements stay out of session history")
	}

	e.must(http.StatusNoContent, "DELETE", "/v1/workspaces/"+ws.ID+"/sessions/"+sess.ID, nil, nil)
	del, _ := s.until(proto.EventSessionDeleted)
	var d proto.SessionDeleted
	require.NoError(t, json.Unmarshal(del.envelope(t).Data, &d))
	assert.Equal(t, sess.ID, d.SessionID)
}

// Every bad request gets the right 4xx with the error body, changes nothing,
// and leaves an open stream alive.
func TestBadInputIsRefusedCleanly(t *testing.T) {
	e := startEnv(t, func(c *serverConfig) { c.MaxBody = 1 << 10 })
	ws := e.createWorkspace()
	sess := e.createSession(ws.ID, nil)
	s := e.openStream(ws.ID, newClientID(), "")
	s.until(proto.EventClientAttached)
	file := filepath.Join(e.workDir, "file.txt")
	require.NoError(t, os.WriteFile(file, []byte("x"), 0o600))

	wsp := "/v1/workspaces/" + ws.ID
	sp := wsp + "/sessions/" + sess.ID
	cases := []struct {
		method, path string
		body         any
		status       int
		code         string
		mentions     string
	}{
		{"POST", "/v1/workspaces", `{"path":`, 400, proto.CodeInvalidJSON, ""},
		{"POST", "/v1/workspaces", `{"path": 5}`, 400, proto.CodeInvalidArgument, "path"},
		{"POST", "/v1/workspaces", `{"pth": "/tmp"}`, 400, proto.CodeInvalidArgument, "pth"},
		{"POST", "/v1/workspaces", `{}`, 400, proto.CodeInvalidArgument, "path"},
		{"POST", "/v1/workspaces", `{"path": "relative/dir"}`, 400, proto.CodeInvalidArgument, "absolute"},
		{"POST", "/v1/workspaces", `{"path": "/no/such/dir/anywhere"}`, 400, proto.CodeInvalidArgument, "exist"},
		{"POST", "/v1/workspaces", map[string]string{"path": file}, 400, proto.CodeInvalidArgument, "directory"},
		{"POST", "/v1/workspaces", `[]`, 400, proto.CodeInvalidArgument, "object"},
		{"POST", "/v1/workspaces", `{"path": "/tmp"} {}`, 400, proto.CodeInvalidJSON, ""},
		{"POST", "/v1/workspaces", `{"path": "` + strings.Repeat("a", 2<<10) + `"}`, 413, proto.CodeBodyTooLarge, ""},
		{"GET", "/v1/workspaces/not-a-uuid", nil, 404, proto.CodeWorkspaceNotFound, ""},
		{"GET", "/v1/workspaces/" + uuid.NewString(), nil, 404, proto.CodeWorkspaceNotFound, ""},
		{"DELETE", "/v1/workspaces/" + uuid.NewString(), nil, 404, proto.CodeWorkspaceNotFound, ""},
		{"DELETE", wsp, `{"force": true}`, 400, proto.CodeInvalidArgument, "force"},
		{"GET", wsp + "/events", nil, 400, proto.CodeInvalidArgument, "client_id"},
		{"GET", wsp + "/events?client_id=nope", nil, 400, proto.CodeInvalidArgument, "client_id"},
		{"GET", wsp + "/events?client_id=" + uuid.NewString() + "&last_event_id=abc", nil, 400, proto.CodeInvalidArgument, "Last-Event-ID"},
		{"GET", wsp + "/events?client_id=" + uuid.NewString() + "&session_id=" + uuid.NewString(), nil, 404, proto.CodeSessionNotFound, ""},
		{"GET", "/v1/workspaces/" + uuid.NewString() + "/events?client_id=" + uuid.NewString(), nil, 404, proto.CodeWorkspaceNotFound, ""},
		{"POST", wsp + "/sessions", `{"sesion_id": "x"}`, 400, proto.CodeInvalidArgument, "sesion_id"},
		{"POST", wsp + "/sessions", `{"id": "not-a-uuid"}`, 400, proto.CodeInvalidArgument, "id"},
		{"POST", wsp + "/sessions", `{"title": 7}`, 400, proto.CodeInvalidArgument, "title"},
		{"POST", wsp + "/sessions", `{"reasoning_effort": "max"}`, 400, proto.CodeInvalidArgument, "reasoning_effort"},
		{"POST", wsp + "/sessions", `{"permission_mode": "yolo"}`, 400, proto.CodeInvalidArgument, "permission_mode"},
		{"POST", wsp + "/sessions", `{"system_message": {"mode": "shout"}}`, 400, proto.CodeInvalidArgument, "mode"},
		{"POST", wsp + "/sessions", `{"system_message": {"mode": "customize", "sections": {"nope": {"action": "remove"}}}}`, 400, proto.CodeInvalidArgument, "nope"},
		{"POST", wsp + "/sessions", `{"system_message": {"mode": "customize", "sections": {"tone": {"action": "shred"}}}}`, 400, proto.CodeInvalidArgument, "action"},
		{"POST", wsp + "/sessions", `{"provider": {"type": "skynet"}}`, 400, proto.CodeInvalidArgument, "provider"},
		{"POST", wsp + "/sessions", `{"client_id": "` + uuid.NewString() + `", "tools": [{"name": "bad name!"}]}`, 400, proto.CodeInvalidArgument, "name"},
		{"POST", wsp + "/sessions", `{"tools": [{"name": "t"}]}`, 400, proto.CodeInvalidArgument, "client_id"},
		{"POST", "/v1/workspaces/" + uuid.NewString() + "/sessions", `{}`, 404, proto.CodeWorkspaceNotFound, ""},
		{"GET", wsp + "/sessions/not-a-uuid", nil, 404, proto.CodeSessionNotFound, ""},
		{"GET", wsp + "/sessions/" + uuid.NewString(), nil, 404, proto.CodeSessionNotFound, ""},
		{"GET", sp + "/events?after=-1", nil, 400, proto.CodeInvalidArgument, "after"},
		{"GET", sp + "/events?limit=x", nil, 400, proto.CodeInvalidArgument, "limit"},
		{"POST", sp + "/log", `{"level": "loud", "message": "x"}`, 400, proto.CodeInvalidArgument, "level"},
		{"POST", sp + "/log", `{"level": "info", "message": ""}`, 400, proto.CodeInvalidArgument, "message"},
		{"POST", sp + "/log", `{"level": "info", "message": "x", "ephemeral": "yes"}`, 400, proto.CodeInvalidArgument, "ephemeral"},
		{"GET", "/v1/nowhere", nil, 404, proto.CodeNotFound, ""},
		{"PATCH", "/v1/workspaces", nil, 405, proto.CodeMethodNotAllowed, ""},
	}
	for _, c := range cases {
		t.Run(c.method+" "+c.path, func(t *testing.T) {
			var body proto.ErrorBody
			status, raw := e.do(c.method, c.path, c.body, nil)
			require.Equal(t, c.status, status, "%s", raw)
			require.NoError(t, json.Unmarshal(raw, &body), "error body is JSON: %s", raw)
			assert.Equal(t, c.code, body.Error.Code, "%s", raw)
			assert.NotEmpty(t, body.Error.Message)
			if c.mentions != "" {
				assert.Contains(t, body.Error.Message, c.mentions)
			}
		})
	}

	// Nothing changed: one workspace, one session, history as before.
	var wl proto.WorkspaceList
	e.must(http.StatusOK, "GET", "/v1/workspaces", nil, &wl)
	assert.Len(t, wl.Workspaces, 1)
	var sl proto.SessionList
	e.must(http.StatusOK, "GET", wsp+"/sessions", nil, &sl)
	assert.Len(t, sl.Sessions, 1)
	var hist proto.EventList
	e.must(http.StatusOK, "GET", sp+"/events", nil, &hist)
	assert.Len(t, hist.Events, 1)

	// And the stream is still alive.
	e.log(ws.ID, sess.ID, "still here", false)
	f, _ := s.until(proto.EventSessionLog)
	assert.Contains(t, f.Data, "still here")
}
