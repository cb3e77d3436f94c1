package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/proto"
)

func (e *env) answerPermission(wsID, requestID, clientID, decision, feedback string) (int, proto.PermissionAnswered, proto.ErrorBody) {
	e.t.Helper()
	var ok proto.PermissionAnswered
	var bad proto.ErrorBody
	status, raw := e.do("POST", fmt.Sprintf("/v1/workspaces/%s/permissions/%s", wsID, requestID),
		proto.PermissionAnswer{ClientID: clientID, Decision: decision, Feedback: feedback}, nil)
	if status == http.StatusOK {
		require.NoError(e.t, json.Unmarshal(raw, &ok))
	} else {
		require.NoError(e.t, json.Unmarshal(raw, &bad), "%s", raw)
	}
	return status, ok, bad
}

func (e *env) answerTool(wsID, requestID, clientID string, result string) int {
	e.t.Helper()
	status, _ := e.do("POST", fmt.Sprintf("/v1/workspaces/%s/tool-calls/%s", wsID, requestID),
		proto.ToolCallAnswer{ClientID: clientID, Result: &result}, nil)
	return status
}

func (e *env) resume(wsID, sid string, req proto.ResumeRequest) proto.ResumeResponse {
	e.t.Helper()
	var out proto.ResumeResponse
	e.must(http.StatusOK, "POST", fmt.Sprintf("/v1/workspaces/%s/sessions/%s/resume", wsID, sid), req, &out)
	return out
}

// approveToEnd approves a permission request as clientID and waits for the
// run to end, which must be end_turn.
func (e *env) approveToEnd(s *stream, wsID, requestID, clientID, runID string) {
	e.t.Helper()
	status, _, bad := e.answerPermission(wsID, requestID, clientID, proto.DecisionApproveOnce, "")
	require.Equal(e.t, http.StatusOK, status, "%+v", bad)
	rc, _ := s.completion(runID)
	assert.Equal(e.t, proto.OutcomeEndTurn, rc.Outcome)
}

// assertFile checks that the file at path holds want.
func assertFile(t *testing.T, path, want string) {
	t.Helper()
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, want, string(got))
}

// dataOf waits for the next event of type typ and decodes its data.
func dataOf[T any](s *stream, typ string) T {
	s.t.Helper()
	f, _ := s.until(typ)
	var v T
	require.NoError(s.t, json.Unmarshal(f.envelope(s.t).Data, &v))
	return v
}

func (s *stream) permissionRequested() proto.PermissionRequest {
	return dataOf[proto.PermissionRequest](s, proto.EventPermissionRequested)
}

func (s *stream) toolRequested() proto.ToolCallRequest {
	return dataOf[proto.ToolCallRequest](s, proto.EventToolRequested)
}

func (s *stream) permissionResolved() proto.PermissionResolved {
	return dataOf[proto.PermissionResolved](s, proto.EventPermissionResolved)
}

func (s *stream) resumed() proto.SessionResumed {
	return dataOf[proto.SessionResumed](s, proto.EventSessionResumed)
}

func TestPermissionSeenByAllFirstAnswerWins(t *testing.T) {
	e := startEnv(t)
	ws := e.createWorkspace()
	a := e.openStream(ws.ID, newClientID(), "")
	b := e.openStream(ws.ID, newClientID(), "")
	sess := e.createSession(ws.ID, map[string]any{"client_id": a.ClientID})
	acc := e.prompt(ws.ID, sess.ID, `/tool write {"path": "out.txt", "content": "approved content"}`)

	pa, pb := a.permissionRequested(), b.permissionRequested()
	assert.Equal(t, pa, pb)
	assert.Equal(t, proto.PermissionWrite, pa.Kind)
	assert.Equal(t, "write", pa.ToolName)
	assert.Equal(t, acc.RunID, pa.RunID)
	assert.Equal(t, sess.ID, pa.SessionID)
	assert.NotEmpty(t, pa.ToolCallID)
	assert.NotEmpty(t, pa.Summary)
	_, err := os.Stat(filepath.Join(e.workDir, "out.txt"))
	require.ErrorIs(t, err, os.ErrNotExist, "nothing is written before the answer")

	var list proto.PermissionList
	e.must(http.StatusOK, "GET", "/v1/workspaces/"+ws.ID+"/permissions", nil, &list)
	require.Len(t, list.Permissions, 1)
	assert.Equal(t, pa.RequestID, list.Permissions[0].RequestID)

	status, ok, _ := e.answerPermission(ws.ID, pa.RequestID, a.ClientID, proto.DecisionApproveOnce, "")
	require.Equal(t, http.StatusOK, status)
	assert.Equal(t, proto.PermissionAnswered{Resolved: true, Result: proto.ResultApproved}, ok)
	status, _, bad := e.answerPermission(ws.ID, pa.RequestID, b.ClientID, proto.DecisionReject, "too late")
	assert.Equal(t, http.StatusConflict, status)
	assert.Equal(t, proto.CodeAlreadyResolved, bad.Error.Code)

	for _, s := range []*stream{a, b} {
		res := s.permissionResolved()
		// The owner token answered: v1.2 names it (resolved_by_name).
		assert.Equal(t, proto.PermissionResolved{RequestID: pa.RequestID, Result: proto.ResultApproved, ResolvedBy: a.ClientID, ResolvedByName: "owner"}, res)
		rc, _ := s.completion(acc.RunID)
		assert.Equal(t, proto.OutcomeEndTurn, rc.Outcome)
	}
	assertFile(t, filepath.Join(e.workDir, "out.txt"), "approved content")
	e.must(http.StatusOK, "GET", "/v1/workspaces/"+ws.ID+"/permissions", nil, &list)
	assert.Empty(t, list.Permissions)
}

func TestRejectedEditLeavesTheFileAndTellsTheModel(t *testing.T) {
	e := startEnv(t)
	protected := filepath.Join(e.workDir, "protected.txt")
	require.NoError(t, os.WriteFile(protected, []byte("keep me\n"), 0o600))
	ws := e.createWorkspace()
	a := e.openStream(ws.ID, newClientID(), "")
	b := e.openStream(ws.ID, newClientID(), "")
	sess := e.createSession(ws.ID, nil)
	acc := e.prompt(ws.ID, sess.ID, `/tool edit {"path": "protected.txt", "old_string": "keep", "new_string": "lose"}`)
	pr := a.permissionRequested()
	assert.Equal(t, proto.PermissionWrite, pr.Kind)
	status, ok, _ := e.answerPermission(ws.ID, pr.RequestID, a.ClientID, proto.DecisionReject, "that file is protected")
	require.Equal(t, http.StatusOK, status)
	assert.Equal(t, proto.ResultDeniedByUser, ok.Result)
	for _, s := range []*stream{a, b} {
		res := s.permissionResolved()
		assert.Equal(t, proto.ResultDeniedByUser, res.Result)
		assert.Equal(t, "that file is protected", res.Feedback)
		s.completion(acc.RunID)
	}
	got, err := os.ReadFile(protected)
	require.NoError(t, err)
	assert.Equal(t, "keep me\n", string(got))
	msgs := runMessages(e.messages(ws.ID, sess.ID), acc.RunID)
	require.Len(t, msgs, 4)
	result := msgs[2].Parts[0]
	assert.True(t, result.IsError)
	assert.Contains(t, result.Content, "that file is protected", "the feedback reaches the model")
	assert.Contains(t, msgs[3].Parts[0].Text, "tool edit failed")
}

func TestApproveForSessionIsNotAskedAgain(t *testing.T) {
	e := startEnv(t)
	ws := e.createWorkspace()
	s := e.openStream(ws.ID, newClientID(), "")
	sess := e.createSession(ws.ID, nil)
	first := e.prompt(ws.ID, sess.ID, `/tool write {"path": "a.txt", "content": "a"}`)
	pr := s.permissionRequested()
	status, ok, _ := e.answerPermission(ws.ID, pr.RequestID, s.ClientID, proto.DecisionApproveSession, "")
	require.Equal(t, http.StatusOK, status)
	assert.Equal(t, proto.ResultApprovedForSession, ok.Result)
	s.completion(first.RunID)
	second := e.prompt(ws.ID, sess.ID, `/tool write {"path": "b.txt", "content": "b"}`)
	rc, frames := s.completion(second.RunID)
	assert.Equal(t, proto.OutcomeEndTurn, rc.Outcome)
	assert.NotContains(t, types(frames), proto.EventPermissionRequested, "the kind was approved for the session")
	_, err := os.Stat(filepath.Join(e.workDir, "b.txt"))
	assert.NoError(t, err)

	// The approval is the session's, not the process's: it holds after a restart.
	e.restart()
	s = e.openStream(ws.ID, newClientID(), "")
	third := e.prompt(ws.ID, sess.ID, `/tool write {"path": "c.txt", "content": "c"}`)
	rc, frames = s.completion(third.RunID)
	assert.Equal(t, proto.OutcomeEndTurn, rc.Outcome)
	assert.NotContains(t, types(frames), proto.EventPermissionRequested, "approved for the session before the restart")
	assertFile(t, filepath.Join(e.workDir, "c.txt"), "c")

	// Other kinds are still asked.
	fourth := e.prompt(ws.ID, sess.ID, `/tool bash {"command": "true"}`)
	e.approveToEnd(s, ws.ID, s.permissionRequested().RequestID, s.ClientID, fourth.RunID)
}

func TestPermissionModes(t *testing.T) {
	for _, c := range []struct {
		mode    string
		written bool
	}{{"allow_all", true}, {"deny_all", false}} {
		t.Run(c.mode, func(t *testing.T) {
			e := startEnv(t)
			ws := e.createWorkspace()
			s := e.openStream(ws.ID, newClientID(), "")
			sess := e.createSession(ws.ID, map[string]any{"permission_mode": c.mode})
			acc := e.prompt(ws.ID, sess.ID, `/tool bash {"command": "echo hi > shell.txt"}`)
			rc, frames := s.completion(acc.RunID)
			assert.Equal(t, proto.OutcomeEndTurn, rc.Outcome)
			assert.NotContains(t, types(frames), proto.EventPermissionRequested, "nobody is asked")
			_, err := os.Stat(filepath.Join(e.workDir, "shell.txt"))
			assert.Equal(t, c.written, err == nil)
		})
	}
}

func TestClientToolsUnionAndDetach(t *testing.T) {
	var mu sync.Mutex
	var script []step
	fake := newFakeModel(t, "openai", func(n int, req map[string]any) step {
		mu.Lock()
		defer mu.Unlock()
		if len(script) == 0 {
			return step{text: []string{"ok"}}
		}
		s := script[0]
		script = script[1:]
		return s
	})
	e := startEnv(t, withGraces(time.Minute, 200*time.Millisecond))
	ws := e.createWorkspace()
	a := e.openStream(ws.ID, newClientID(), "")
	bID := newClientID()
	b := e.openStream(ws.ID, bID, "")
	schema := json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`)
	sess := e.openAISession(ws.ID, fake, map[string]any{
		"client_id": a.ClientID,
		"tools":     []proto.ToolSpec{{Name: "city_lookup", Description: "find a city", Parameters: schema, SkipPermission: true}},
	})
	e.resume(ws.ID, sess.ID, proto.ResumeRequest{ClientID: bID, Tools: []proto.ToolSpec{{Name: "currency_lookup", Parameters: schema, SkipPermission: true}}})

	mu.Lock()
	script = []step{
		{toolCalls: []scriptedCall{{ID: "c1", Name: "city_lookup", Args: `{"q":"Paris"}`}}},
		{toolCalls: []scriptedCall{{ID: "c2", Name: "currency_lookup", Args: `{"q":"France"}`}}},
		{text: []string{"Paris uses the euro."}},
	}
	mu.Unlock()
	acc := e.prompt(ws.ID, sess.ID, "where and what money?")
	tr := a.toolRequested()
	assert.Equal(t, "city_lookup", tr.ToolName)
	assert.Equal(t, []string{a.ClientID}, tr.OwnerClientIDs)
	assert.JSONEq(t, `{"q":"Paris"}`, string(tr.Arguments))
	require.Equal(t, http.StatusOK, e.answerTool(ws.ID, tr.RequestID, a.ClientID, "Paris, France"))
	tr2 := b.toolRequested()
	for tr2.ToolName != "currency_lookup" {
		tr2 = b.toolRequested()
	}
	assert.Equal(t, []string{bID}, tr2.OwnerClientIDs)
	require.Equal(t, http.StatusOK, e.answerTool(ws.ID, tr2.RequestID, bID, "EUR"))
	assert.Equal(t, http.StatusConflict, e.answerTool(ws.ID, tr2.RequestID, a.ClientID, "late"))
	rc, _ := a.completion(acc.RunID)
	require.Equal(t, proto.OutcomeEndTurn, rc.Outcome)

	reqs := fake.Requests()
	require.Len(t, reqs, 3)
	assert.Subset(t, offered(reqs[0].Body), []string{"city_lookup", "currency_lookup", "view", "bash"})
	assert.Contains(t, reqs[1].RawBody, "Paris, France", "the model receives A's answer")
	assert.Contains(t, reqs[2].RawBody, "EUR", "the model receives B's answer")

	// B leaves; after the detach grace its tool is gone and the model is told.
	b.close()
	deadline := time.Now().Add(wait)
	for {
		next := e.prompt(ws.ID, sess.ID, "still there?")
		a.completion(next.RunID)
		reqs = fake.Requests()
		last := reqs[len(reqs)-1]
		if !slices.Contains(offered(last.Body), "currency_lookup") {
			assert.Contains(t, offered(last.Body), "city_lookup")
			assert.Contains(t, last.RawBody, "currency_lookup", "a notice names the tool that is gone")
			break
		}
		require.True(t, time.Now().Before(deadline), "B's tool never left")
	}
}

func offered(body map[string]any) []string {
	var names []string
	tools, _ := body["tools"].([]any)
	for _, t := range tools {
		names = append(names, t.(map[string]any)["function"].(map[string]any)["name"].(string))
	}
	return names
}

func TestPendingPermissionSurvivesItsClient(t *testing.T) {
	e := startEnv(t, withGraces(time.Minute, time.Minute))
	ws := e.createWorkspace()
	watcher := e.openStream(ws.ID, newClientID(), "")
	a := e.openStream(ws.ID, newClientID(), "")
	sess := e.createSession(ws.ID, map[string]any{"client_id": a.ClientID})
	acc := e.prompt(ws.ID, sess.ID, `/tool write {"path": "late.txt", "content": "written after all"}`)
	pr := a.permissionRequested()
	a.close() // the asking client dies

	c := newClientID()
	res := e.resume(ws.ID, sess.ID, proto.ResumeRequest{ClientID: c, ContinuePendingWork: true})
	require.Len(t, res.Pending.Permissions, 1)
	assert.Equal(t, pr.RequestID, res.Pending.Permissions[0].RequestID)
	var pend proto.PendingWork
	e.must(http.StatusOK, "GET", fmt.Sprintf("/v1/workspaces/%s/sessions/%s/pending", ws.ID, sess.ID), nil, &pend)
	assert.Equal(t, res.Pending, pend)
	e.approveToEnd(watcher, ws.ID, pr.RequestID, c, acc.RunID)
	assertFile(t, filepath.Join(e.workDir, "late.txt"), "written after all")
}

func TestParallelClientToolCallsAnsweredInReverseOrder(t *testing.T) {
	fake := newFakeModel(t, "openai", func(n int, req map[string]any) step {
		if n == 0 {
			return step{toolCalls: []scriptedCall{
				{ID: "t1", Name: "first_tool", Args: `{}`},
				{ID: "t2", Name: "second_tool", Args: `{}`},
			}}
		}
		return step{text: []string{"both done"}}
	})
	e := startEnv(t, withGraces(time.Minute, time.Minute))
	ws := e.createWorkspace()
	watcher := e.openStream(ws.ID, newClientID(), "")
	owner := e.openStream(ws.ID, newClientID(), "")
	sess := e.openAISession(ws.ID, fake, map[string]any{
		"client_id": owner.ClientID,
		"tools":     []proto.ToolSpec{{Name: "first_tool", SkipPermission: true}, {Name: "second_tool", SkipPermission: true}},
	})
	acc := e.prompt(ws.ID, sess.ID, "use both")
	got := map[string]proto.ToolCallRequest{}
	for len(got) < 2 {
		tr := watcher.toolRequested()
		got[tr.ToolName] = tr
	}
	var pend proto.PendingWork
	e.must(http.StatusOK, "GET", fmt.Sprintf("/v1/workspaces/%s/sessions/%s/pending", ws.ID, sess.ID), nil, &pend)
	assert.Len(t, pend.ToolCalls, 2, "both wait at once")
	owner.close() // the owner dies; anyone may answer
	c := newClientID()
	require.Equal(t, http.StatusOK, e.answerTool(ws.ID, got["second_tool"].RequestID, c, "second answer"))
	require.Equal(t, http.StatusOK, e.answerTool(ws.ID, got["first_tool"].RequestID, c, "first answer"))
	rc, _ := watcher.completion(acc.RunID)
	require.Equal(t, proto.OutcomeEndTurn, rc.Outcome)
	reqs := fake.Requests()
	require.Len(t, reqs, 2)
	assert.Contains(t, reqs[1].RawBody, "first answer")
	assert.Contains(t, reqs[1].RawBody, "second answer")
}

// suspend parks a write permission, then closes the workspace so the run is
// suspended, and reopens it with a new stream.
func suspendOnPermission(t *testing.T, e *env, creator string) (proto.Workspace, proto.Session, proto.PromptAccepted, proto.PermissionRequest, *stream) {
	ws := e.createWorkspace()
	s := e.openStream(ws.ID, creator, "")
	sess := e.createSession(ws.ID, map[string]any{"client_id": creator})
	acc := e.prompt(ws.ID, sess.ID, `/tool write {"path": "suspended.txt", "content": "revived"}`)
	pr := s.permissionRequested()
	e.must(http.StatusNoContent, "DELETE", "/v1/workspaces/"+ws.ID, nil, nil)
	s.ended()
	eventually(t, func() bool { return !e.workspace(ws.ID).Open }, "closed")
	// The suspended run has not completed.
	var st proto.AgentStatus
	e.must(http.StatusOK, "GET", fmt.Sprintf("/v1/workspaces/%s/agent/sessions/%s", ws.ID, sess.ID), nil, &st)
	assert.False(t, st.Busy, "a suspended run is not in memory")
	var pend proto.PendingWork
	e.must(http.StatusOK, "GET", fmt.Sprintf("/v1/workspaces/%s/sessions/%s/pending", ws.ID, sess.ID), nil, &pend)
	require.Len(t, pend.Permissions, 1, "suspended work is kept")
	status, _, bad := e.answerPermission(ws.ID, pr.RequestID, creator, proto.DecisionApproveOnce, "")
	require.Equal(t, http.StatusConflict, status, "the workspace must be open to answer")
	assert.Equal(t, proto.CodeWorkspaceNotOpen, bad.Error.Code)
	watcher := e.openStream(ws.ID, newClientID(), "")
	watcher.until(proto.EventClientAttached)
	return ws, sess, acc, pr, watcher
}

func TestColdResumeWithoutContinuingInterrupts(t *testing.T) {
	e := startEnv(t, withGraces(time.Minute, time.Minute))
	ws, sess, acc, pr, watcher := suspendOnPermission(t, e, newClientID())
	c := newClientID()
	res := e.resume(ws.ID, sess.ID, proto.ResumeRequest{ClientID: c, ContinuePendingWork: false})
	assert.Empty(t, res.Pending.Permissions)
	resumed := watcher.resumed()
	assert.Equal(t, proto.SessionResumed{ClientID: c, ContinuePendingWork: false, SessionWasActive: false}, resumed)
	status, _, bad := e.answerPermission(ws.ID, pr.RequestID, c, proto.DecisionApproveOnce, "")
	assert.Equal(t, http.StatusConflict, status)
	assert.Equal(t, proto.CodeAlreadyResolved, bad.Error.Code)
	rc, _ := watcher.completion(acc.RunID)
	assert.Equal(t, proto.OutcomeInterrupted, rc.Outcome)
	msgs := e.messages(ws.ID, sess.ID)
	assert.Equal(t, proto.FinishInterrupted, lastFinish(t, msgs, acc.RunID).Reason)
	_, err := os.Stat(filepath.Join(e.workDir, "suspended.txt"))
	assert.ErrorIs(t, err, os.ErrNotExist)

	next := e.prompt(ws.ID, sess.ID, "new work")
	rc, _ = watcher.completion(next.RunID)
	assert.Equal(t, proto.OutcomeEndTurn, rc.Outcome)
}

func TestColdResumeContinuingRevivesAndReannounces(t *testing.T) {
	e := startEnv(t, withGraces(time.Minute, time.Minute))
	ws, sess, acc, pr, watcher := suspendOnPermission(t, e, newClientID())
	c := newClientID()
	res := e.resume(ws.ID, sess.ID, proto.ResumeRequest{ClientID: c, ContinuePendingWork: true})
	require.Len(t, res.Pending.Permissions, 1)
	assert.False(t, watcher.resumed().SessionWasActive)
	again := watcher.permissionRequested()
	assert.Equal(t, pr.RequestID, again.RequestID, "announced again with the same id")
	e.approveToEnd(watcher, ws.ID, pr.RequestID, c, acc.RunID)
	assertFile(t, filepath.Join(e.workDir, "suspended.txt"), "revived")
}

func TestAnsweringASuspendedRequestRevivesTheRun(t *testing.T) {
	e := startEnv(t, withGraces(time.Minute, time.Minute))
	ws, sess, acc, pr, watcher := suspendOnPermission(t, e, newClientID())
	e.approveToEnd(watcher, ws.ID, pr.RequestID, watcher.ClientID, acc.RunID)
	assert.Equal(t, proto.FinishEndTurn, lastFinish(t, e.messages(ws.ID, sess.ID), acc.RunID).Reason)
}

func TestWarmResumeKeepsRequestsAnswerable(t *testing.T) {
	e := startEnv(t, withGraces(time.Minute, time.Minute))
	ws := e.createWorkspace()
	a := e.openStream(ws.ID, newClientID(), "")
	sess := e.createSession(ws.ID, map[string]any{"client_id": a.ClientID})
	acc := e.prompt(ws.ID, sess.ID, `/tool write {"path": "warm.txt", "content": "warm"}`)
	pr := a.permissionRequested()
	b := newClientID()
	res := e.resume(ws.ID, sess.ID, proto.ResumeRequest{ClientID: b, ContinuePendingWork: false})
	require.Len(t, res.Pending.Permissions, 1)
	assert.True(t, a.resumed().SessionWasActive)
	e.approveToEnd(a, ws.ID, pr.RequestID, b, acc.RunID)
}

func TestResumeEmitsOneEventAndReportsActivity(t *testing.T) {
	e := startEnv(t, withGraces(time.Minute, time.Minute))
	ws := e.createWorkspace()
	w := e.openStream(ws.ID, newClientID(), "")
	sess := e.createSession(ws.ID, nil)
	c := newClientID()
	e.resume(ws.ID, sess.ID, proto.ResumeRequest{ClientID: c})
	f, _ := w.until(proto.EventSessionResumed)
	var sr proto.SessionResumed
	require.NoError(t, json.Unmarshal(f.envelope(t).Data, &sr))
	assert.Equal(t, proto.SessionResumed{ClientID: c}, sr, "idle session, nobody else: not active")
	var hist proto.EventList
	e.must(http.StatusOK, "GET", fmt.Sprintf("/v1/workspaces/%s/sessions/%s/events", ws.ID, sess.ID), nil, &hist)
	n := 0
	for _, ev := range hist.Events {
		if ev.Type == proto.EventSessionResumed {
			n++
		}
	}
	assert.Equal(t, 1, n)
}

func TestPendingPermissionSurvivesRestart(t *testing.T) {
	e := startEnv(t, withGraces(time.Minute, time.Minute))
	ws := e.createWorkspace()
	a := e.openStream(ws.ID, newClientID(), "")
	sess := e.createSession(ws.ID, map[string]any{"client_id": a.ClientID})
	acc := e.prompt(ws.ID, sess.ID, `/tool write {"path": "restart.txt", "content": "after restart"}`)
	pr := a.permissionRequested()
	e.restart()

	w := e.openStream(ws.ID, newClientID(), "")
	w.until(proto.EventClientAttached)
	var list proto.PermissionList
	e.must(http.StatusOK, "GET", "/v1/workspaces/"+ws.ID+"/permissions", nil, &list)
	require.Len(t, list.Permissions, 1)
	assert.Equal(t, pr, list.Permissions[0])
	e.approveToEnd(w, ws.ID, pr.RequestID, w.ClientID, acc.RunID)
	assertFile(t, filepath.Join(e.workDir, "restart.txt"), "after restart")
}

func TestCancelKillsARunningShellQuickly(t *testing.T) {
	e := startEnv(t)
	ws := e.createWorkspace()
	s := e.openStream(ws.ID, newClientID(), "")
	sess := e.createSession(ws.ID, map[string]any{"permission_mode": "allow_all"})
	marker := "tandem-e2e-" + uuid.NewString()[:8]
	acc := e.prompt(ws.ID, sess.ID, fmt.Sprintf(`/tool bash {"command": "exec -a %s sleep 100"}`, marker))
	s.until(proto.EventToolStarted)
	eventually(t, func() bool { return processRunning(marker) }, "the shell runs")
	e.cancel(ws.ID, sess.ID)
	canceledAt := time.Now()
	rc, _ := s.completion(acc.RunID)
	assert.Equal(t, proto.OutcomeCanceled, rc.Outcome)
	assert.False(t, processRunning(marker), "the process is gone")
	assert.Less(t, time.Since(canceledAt), 2*time.Second, "invariant 6: tools die within 2 s of a cancel")
	next := e.prompt(ws.ID, sess.ID, "next")
	rc, _ = s.completion(next.RunID)
	assert.Equal(t, proto.OutcomeEndTurn, rc.Outcome)
}

// processRunning reports whether a live process has marker in its command line.
func processRunning(marker string) bool {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		cmd, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !strings.Contains(string(cmd), marker) {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err == nil && !strings.Contains(string(stat), ") Z ") {
			return true
		}
	}
	return false
}

func TestToolPathEscapesAreErrorsForTheModel(t *testing.T) {
	e := startEnv(t)
	outside := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(outside, "secret"), []byte("s3cret"), 0o600))
	require.NoError(t, os.Symlink(outside, filepath.Join(e.workDir, "link")))
	ws := e.createWorkspace()
	s := e.openStream(ws.ID, newClientID(), "")
	sess := e.createSession(ws.ID, map[string]any{"permission_mode": "allow_all"})
	for _, call := range []string{
		`/tool view {"path": "../../../../etc/passwd"}`,
		`/tool view {"path": "link/secret"}`,
		fmt.Sprintf(`/tool view {"path": %q}`, filepath.Join(outside, "secret")),
		`/tool write {"path": "link/new.txt", "content": "x"}`,
		`/tool ls {"path": "link"}`,
		`/tool grep {"pattern": "s3cret", "path": "link"}`,
	} {
		acc := e.prompt(ws.ID, sess.ID, call)
		rc, _ := s.completion(acc.RunID)
		require.Equal(t, proto.OutcomeEndTurn, rc.Outcome, call)
		msgs := runMessages(e.messages(ws.ID, sess.ID), acc.RunID)
		require.Len(t, msgs, 4, call)
		res := msgs[2].Parts[0]
		assert.True(t, res.IsError, "%s: %s", call, res.Content)
		assert.NotContains(t, res.Content, "s3cret", call)
	}
	_, err := os.Stat(filepath.Join(outside, "new.txt"))
	assert.ErrorIs(t, err, os.ErrNotExist)
}

func TestPendingBadInput(t *testing.T) {
	e := startEnv(t, withGraces(time.Minute, time.Minute))
	ws := e.createWorkspace()
	s := e.openStream(ws.ID, newClientID(), "")
	sess := e.createSession(ws.ID, map[string]any{"client_id": s.ClientID, "tools": []proto.ToolSpec{{Name: "mine"}}})
	acc := e.prompt(ws.ID, sess.ID, `/tool write {"path": "x.txt", "content": "x"}`)
	pr := s.permissionRequested()

	perm := func(id string) string { return fmt.Sprintf("/v1/workspaces/%s/permissions/%s", ws.ID, id) }
	cases := []struct {
		method, path string
		body         any
		status       int
		code         string
	}{
		{"POST", perm(uuid.NewString()), proto.PermissionAnswer{ClientID: s.ClientID, Decision: "approve_once"}, 404, proto.CodeRequestNotFound},
		{"POST", perm("not-a-uuid"), proto.PermissionAnswer{ClientID: s.ClientID, Decision: "approve_once"}, 404, proto.CodeRequestNotFound},
		{"POST", perm(pr.RequestID), proto.PermissionAnswer{ClientID: s.ClientID, Decision: "maybe"}, 400, proto.CodeInvalidArgument},
		{"POST", perm(pr.RequestID), proto.PermissionAnswer{Decision: "approve_once"}, 400, proto.CodeInvalidArgument},
		{"POST", perm(pr.RequestID), `{"client_id": 1}`, 400, proto.CodeInvalidArgument},
		{"POST", fmt.Sprintf("/v1/workspaces/%s/tool-calls/%s", ws.ID, pr.RequestID), map[string]any{"client_id": s.ClientID, "result": "x"}, 404, proto.CodeRequestNotFound},
		{"POST", fmt.Sprintf("/v1/workspaces/%s/tool-calls/%s", ws.ID, uuid.NewString()), map[string]any{"client_id": s.ClientID}, 400, proto.CodeInvalidArgument},
		{"POST", fmt.Sprintf("/v1/workspaces/%s/sessions/%s/resume", ws.ID, sess.ID), map[string]any{}, 400, proto.CodeInvalidArgument},
		{"POST", fmt.Sprintf("/v1/workspaces/%s/sessions/%s/resume", ws.ID, sess.ID), map[string]any{"client_id": newClientID(), "tools": []any{map[string]any{"name": "x", "parameters": "not a schema"}}}, 400, proto.CodeInvalidArgument},
		{"POST", fmt.Sprintf("/v1/workspaces/%s/sessions/%s/resume", ws.ID, sess.ID), map[string]any{"client_id": newClientID(), "tools": []any{map[string]any{"name": "mine"}}}, 409, proto.CodeToolConflict},
		{"POST", fmt.Sprintf("/v1/workspaces/%s/sessions/%s/resume", ws.ID, sess.ID), map[string]any{"client_id": newClientID(), "tools": []any{map[string]any{"name": "bash"}}}, 409, proto.CodeToolConflict},
		{"POST", fmt.Sprintf("/v1/workspaces/%s/sessions/%s/resume", ws.ID, uuid.NewString()), map[string]any{"client_id": newClientID()}, 404, proto.CodeSessionNotFound},
		{"POST", "/v1/workspaces/" + ws.ID + "/sessions", map[string]any{"client_id": newClientID(), "tools": []any{map[string]any{"name": "view"}}}, 409, proto.CodeToolConflict},
	}
	for _, c := range cases {
		t.Run(c.method+" "+c.path, func(t *testing.T) {
			var body proto.ErrorBody
			status, raw := e.do(c.method, c.path, c.body, &body)
			require.Equal(t, c.status, status, "%s", raw)
			assert.Equal(t, c.code, body.Error.Code, "%s", raw)
		})
	}
	var sl proto.SessionList
	e.must(http.StatusOK, "GET", "/v1/workspaces/"+ws.ID+"/sessions", nil, &sl)
	assert.Len(t, sl.Sessions, 1, "the refused create left nothing behind")

	// The request is still pending and answerable after all that.
	status, _, _ := e.answerPermission(ws.ID, pr.RequestID, s.ClientID, proto.DecisionApproveOnce, "")
	require.Equal(t, http.StatusOK, status)
	status, _, bad := e.answerPermission(ws.ID, pr.RequestID, s.ClientID, proto.DecisionApproveOnce, "")
	assert.Equal(t, http.StatusConflict, status)
	assert.Equal(t, proto.CodeAlreadyResolved, bad.Error.Code)
	rc, _ := s.completion(acc.RunID)
	assert.Equal(t, proto.OutcomeEndTurn, rc.Outcome)
}

func TestDeletingASessionCancelsItsPendingRequests(t *testing.T) {
	e := startEnv(t)
	ws := e.createWorkspace()
	s := e.openStream(ws.ID, newClientID(), "")
	sess := e.createSession(ws.ID, nil)
	acc := e.prompt(ws.ID, sess.ID, `/tool bash {"command": "true"}`)
	pr := s.permissionRequested()
	e.must(http.StatusNoContent, "DELETE", fmt.Sprintf("/v1/workspaces/%s/sessions/%s", ws.ID, sess.ID), nil, nil)
	res := s.permissionResolved()
	assert.Equal(t, proto.PermissionResolved{RequestID: pr.RequestID, Result: proto.ResultCanceled}, res)
	rc, _ := s.completion(acc.RunID)
	assert.Equal(t, proto.OutcomeCanceled, rc.Outcome)
	status, _, _ := e.answerPermission(ws.ID, pr.RequestID, s.ClientID, proto.DecisionApproveOnce, "")
	assert.Equal(t, http.StatusNotFound, status)
}

// First answer wins under a crowd: 32 clients answer the same request at
// once; exactly one gets 200, every other one 409 already_resolved, and one
// permission.resolved goes out.
func TestConcurrentAnswersOneWinner(t *testing.T) {
	e := startEnv(t)
	ws := e.createWorkspace()
	s := e.openStream(ws.ID, newClientID(), "")
	sess := e.createSession(ws.ID, nil)
	acc := e.prompt(ws.ID, sess.ID, `/tool write {"path": "crowd.txt", "content": "x"}`)
	pr := s.permissionRequested()

	const crowd = 32
	statuses := make([]int, crowd)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range crowd {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			decision := proto.DecisionApproveOnce
			if i%2 == 1 {
				decision = proto.DecisionReject
			}
			status, _ := e.doRaw("POST", fmt.Sprintf("/v1/workspaces/%s/permissions/%s", ws.ID, pr.RequestID),
				proto.PermissionAnswer{ClientID: newClientID(), Decision: decision}, nil,
				map[string]string{"Authorization": "Bearer " + testToken})
			statuses[i] = status
		}()
	}
	close(start)
	wg.Wait()
	ok, conflict := 0, 0
	for _, st := range statuses {
		switch st {
		case http.StatusOK:
			ok++
		case http.StatusConflict:
			conflict++
		}
	}
	assert.Equal(t, 1, ok)
	assert.Equal(t, crowd-1, conflict)
	_, frames := s.completion(acc.RunID)
	resolved := 0
	for _, f := range frames {
		if f.Event == proto.EventPermissionResolved {
			resolved++
		}
	}
	assert.Equal(t, 1, resolved, "one resolution is announced")
}
