package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/proto"
)

// A cancel ends a run suspended on a pending permission (kept on disk, not
// in memory) as it ends every run accepted before it: listed, ended
// canceled with a canceled finish, its request resolved so that a later
// answer is 409 already_resolved and never revives it (invariant 4).
func TestCancelEndsASuspendedRun(t *testing.T) {
	e := startEnv(t, withGraces(time.Minute, time.Minute))
	ws, sess, acc, pr, watcher := suspendOnPermission(t, e, newClientID())

	var canceled proto.CancelResponse
	e.must(http.StatusOK, "POST", fmt.Sprintf("/v1/workspaces/%s/agent/sessions/%s/cancel", ws.ID, sess.ID), nil, &canceled)
	assert.Contains(t, canceled.CanceledRuns, acc.RunID)
	rc, _ := watcher.completion(acc.RunID)
	assert.Equal(t, proto.OutcomeCanceled, rc.Outcome)
	assert.Equal(t, proto.FinishCanceled, lastFinish(t, e.messages(ws.ID, sess.ID), acc.RunID).Reason)

	status, _, bad := e.answerPermission(ws.ID, pr.RequestID, watcher.ClientID, proto.DecisionApproveOnce, "")
	assert.Equal(t, http.StatusConflict, status)
	assert.Equal(t, proto.CodeAlreadyResolved, bad.Error.Code)
	_, err := os.Stat(filepath.Join(e.workDir, "suspended.txt"))
	assert.ErrorIs(t, err, os.ErrNotExist, "the canceled run's write never ran")

	// A prompt after the cancel runs normally (invariant 4).
	next := e.prompt(ws.ID, sess.ID, "new work")
	rc, _ = watcher.completion(next.RunID)
	assert.Equal(t, proto.OutcomeEndTurn, rc.Outcome)
}

// What a client sees as ended is ended: a rewind sent as soon as the
// stream shows run.completed finds the session idle, never 409
// session_busy (it did one time in three).
func TestRewindRightAfterRunCompleted(t *testing.T) {
	e := startEnv(t)
	ws := e.createWorkspace()
	s := e.openStream(ws.ID, newClientID(), "")
	sess := e.createSession(ws.ID, map[string]any{"permission_mode": "allow_all"})
	for i := range 20 {
		acc := e.prompt(ws.ID, sess.ID, fmt.Sprintf(`/tool write {"path": "f.txt", "content": "v%d"}`, i))
		rc, _ := s.completion(acc.RunID)
		require.Equal(t, proto.OutcomeEndTurn, rc.Outcome)
		cks := e.checkpoints(ws.ID, sess.ID)
		require.NotEmpty(t, cks)
		status, raw := e.do("POST", e.sessionPath(ws.ID, sess.ID)+"/rewind", map[string]any{"checkpoint_id": cks[len(cks)-1].ID, "history": false}, nil)
		require.Equal(t, http.StatusOK, status, "rewind %d right after run.completed: %s", i, raw)
	}
}

// An import document without messages is not an export: 400
// invalid_argument, and nothing is created; an empty export ("messages":
// []) is one.
func TestImportNeedsMessages(t *testing.T) {
	e := startEnv(t)
	ws := e.createWorkspace()
	src := e.createSession(ws.ID, nil)
	var export proto.Export
	e.must(http.StatusOK, "GET", e.sessionPath(ws.ID, src.ID)+"/export", nil, &export)
	require.NotNil(t, export.Messages)
	raw, err := json.Marshal(export)
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, json.Unmarshal(raw, &doc))
	delete(doc, "messages")
	status, body := e.do("POST", "/v1/workspaces/"+ws.ID+"/sessions/import", doc, nil)
	require.Equal(t, http.StatusBadRequest, status, "%s", body)
	assert.Equal(t, proto.CodeInvalidArgument, errorCode(t, body))
	var list proto.SessionList
	e.must(http.StatusOK, "GET", "/v1/workspaces/"+ws.ID+"/sessions", nil, &list)
	assert.Len(t, list.Sessions, 1, "nothing was created")
	e.must(http.StatusCreated, "POST", "/v1/workspaces/"+ws.ID+"/sessions/import", export, nil)
}

// The audit entry of a workspace.open names the workspace it opened.
func TestAuditNamesOpenedWorkspace(t *testing.T) {
	e := startEnv(t)
	ws := e.createWorkspace()
	var log proto.AuditLog
	e.must(http.StatusOK, "GET", "/v1/audit", nil, &log)
	found := false
	for _, entry := range log.Entries {
		if entry.Action == "workspace.open" {
			found = true
			assert.Equal(t, ws.ID, entry.WorkspaceID)
		}
	}
	assert.True(t, found, "workspace.open is audited")
}
