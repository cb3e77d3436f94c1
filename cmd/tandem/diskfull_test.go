package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/tandem-dev/tandem/proto"
)

// limitFileSize sets the soft RLIMIT_FSIZE of process pid, keeping its
// hard limit. Lowering it needs no privilege: from then on the process can
// write no byte of any regular file past that size (Go ignores SIGXFSZ,
// so the write fails with EFBIG), which is a full disk as far as SQLite can
// tell, for this process alone.
func limitFileSize(t *testing.T, pid int, soft uint64) {
	t.Helper()
	var old unix.Rlimit
	err := unix.Prlimit(pid, unix.RLIMIT_FSIZE, nil, &old)
	if err == nil {
		err = unix.Prlimit(pid, unix.RLIMIT_FSIZE, &unix.Rlimit{Cur: min(soft, old.Max), Max: old.Max}, nil)
	}
	if errors.Is(err, unix.ESRCH) {
		return // the process is gone already
	}
	require.NoError(t, err)
}

// storageCall is crashCall for requests expected to fail: it returns the
// status and the error body.
func storageCall(t *testing.T, url, method, path string, body any) (int, proto.ErrorBody) {
	t.Helper()
	var eb proto.ErrorBody
	status := crashCall(t, url, method, path, body, &eb)
	return status, eb
}

// A store that refuses writes (here: no file of the server may grow, as on
// a full disk) makes every write answer 503 storage_unavailable, not a bare
// 500, and loses nothing accepted before. A run whose events could not be
// written ends as soon as the store takes writes again, with exactly one
// run.completed, streamed and stored, and its finish part; the server goes
// on as before.
func TestFullDiskAnswers503AndRunsEndWhenSpaceReturns(t *testing.T) {
	env := []string{"TANDEM_TOKEN=crash-token", "TANDEM_DATA_DIR=" + t.TempDir()}
	p := startServe(t, env)
	pid := p.cmd.Process.Pid
	t.Cleanup(func() { limitFileSize(t, pid, unix.RLIM_INFINITY) })
	var ws proto.Workspace
	require.Equal(t, http.StatusCreated, crashCall(t, p.url, "POST", "/v1/workspaces", map[string]string{"path": t.TempDir()}, &ws))
	var sess proto.Session
	require.Equal(t, http.StatusCreated, crashCall(t, p.url, "POST", "/v1/workspaces/"+ws.ID+"/sessions", map[string]any{}, &sess))
	_, events := crashStream(t, p.url, ws.ID)
	var before proto.PromptAccepted
	require.Equal(t, http.StatusAccepted, crashCall(t, p.url, "POST", "/v1/workspaces/"+ws.ID+"/agent", proto.PromptRequest{SessionID: sess.ID, Prompt: "accepted before"}, &before))
	awaitEvent(t, events, proto.EventRunCompleted, before.RunID)

	// A run streams while the disk fills up.
	var acc proto.PromptAccepted
	require.Equal(t, http.StatusAccepted, crashCall(t, p.url, "POST", "/v1/workspaces/"+ws.ID+"/agent", proto.PromptRequest{SessionID: sess.ID, Prompt: "/slow 30 50"}, &acc))
	awaitEvent(t, events, proto.EventMessageDelta, acc.RunID)
	limitFileSize(t, pid, 0)

	writes := []struct {
		method, path string
		body         any
	}{
		{"POST", "/v1/workspaces/" + ws.ID + "/agent", proto.PromptRequest{SessionID: sess.ID, Prompt: "refused"}},
		{"POST", "/v1/workspaces/" + ws.ID + "/sessions", map[string]any{}},
		{"POST", fmt.Sprintf("/v1/workspaces/%s/sessions/%s/log", ws.ID, sess.ID), proto.LogRequest{Level: "info", Message: "refused"}},
		{"PUT", fmt.Sprintf("/v1/workspaces/%s/sessions/%s/model", ws.ID, sess.ID), map[string]any{"model": "echo/other"}},
		{"POST", "/v1/workspaces", map[string]string{"path": t.TempDir()}},
	}
	for _, w := range writes {
		status, eb := storageCall(t, p.url, w.method, w.path, w.body)
		assert.Equal(t, http.StatusServiceUnavailable, status, "%s %s", w.method, w.path)
		assert.Equal(t, proto.CodeStorageUnavailable, eb.Error.Code, "%s %s", w.method, w.path)
	}
	// The run cannot write its end: it says so, and nothing is streamed.
	require.Eventually(t, func() bool { return strings.Contains(p.stderr.String(), "run waits for the store") },
		30*time.Second, 10*time.Millisecond, "the run never found the store refusing its writes; stderr: %s", p.stderr)
	for drained := false; !drained; {
		select {
		case ev := <-events:
			require.False(t, ev.Type == proto.EventRunCompleted && ev.RunID == acc.RunID, "run.completed streamed while the store refused it")
		default:
			drained = true
		}
	}
	var st proto.AgentStatus
	require.Equal(t, http.StatusOK, crashCall(t, p.url, "GET", fmt.Sprintf("/v1/workspaces/%s/agent/sessions/%s", ws.ID, sess.ID), nil, &st))
	require.NotNil(t, st.ActiveRunID, "the run is not over")
	assert.Equal(t, acc.RunID, *st.ActiveRunID)

	// Space comes back: the run ends, once.
	limitFileSize(t, pid, unix.RLIM_INFINITY)
	ev := awaitEvent(t, events, proto.EventRunCompleted, acc.RunID)
	var rc proto.RunCompleted
	require.NoError(t, json.Unmarshal(ev.Data, &rc))
	t.Logf("run ended %s %+v", rc.Outcome, rc.Error)
	assert.Contains(t, []string{proto.OutcomeEndTurn, proto.OutcomeError}, rc.Outcome)

	// The server works as before; the run after it proves no second
	// run.completed of the first was on its way.
	var after proto.PromptAccepted
	require.Equal(t, http.StatusAccepted, crashCall(t, p.url, "POST", "/v1/workspaces/"+ws.ID+"/agent", proto.PromptRequest{SessionID: sess.ID, Prompt: "after"}, &after))
	for {
		ev := <-events
		require.False(t, ev.Type == proto.EventRunCompleted && ev.RunID == acc.RunID, "a second run.completed")
		if ev.Type == proto.EventRunCompleted && ev.RunID == after.RunID {
			break
		}
	}
	outcomes := runOutcomes(t, p.url, ws.ID, sess.ID)
	assert.Equal(t, []string{proto.OutcomeEndTurn}, outcomes[before.RunID], "accepted before, kept")
	assert.Equal(t, []string{rc.Outcome}, outcomes[acc.RunID], "one run.completed stored")
	assert.Equal(t, []string{proto.OutcomeEndTurn}, outcomes[after.RunID])
	var msgs proto.MessageList
	require.Equal(t, http.StatusOK, crashCall(t, p.url, "GET", fmt.Sprintf("/v1/workspaces/%s/sessions/%s/messages", ws.ID, sess.ID), nil, &msgs))
	var last proto.Message
	for _, m := range msgs.Messages {
		if m.RunID == acc.RunID && m.Role == proto.RoleAssistant {
			last = m
		}
	}
	require.NotEmpty(t, last.Parts, "the run has its assistant message")
	fin := last.Parts[len(last.Parts)-1]
	assert.Equal(t, proto.PartFinish, fin.Type)
	assert.Equal(t, rc.Outcome, fin.Reason)

	// And it stops cleanly, the WAL checkpointed and all.
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, <-p.done)
}

// An answer to a pending request that the store cannot record is refused
// with 503 and changes nothing: the run goes on waiting, and the same
// answer, sent again once space returns, resolves the request.
func TestFullDiskRefusesAnswersUntilSpaceReturns(t *testing.T) {
	env := []string{"TANDEM_TOKEN=crash-token", "TANDEM_DATA_DIR=" + t.TempDir()}
	p := startServe(t, env)
	pid := p.cmd.Process.Pid
	t.Cleanup(func() { limitFileSize(t, pid, unix.RLIM_INFINITY) })
	var ws proto.Workspace
	require.Equal(t, http.StatusCreated, crashCall(t, p.url, "POST", "/v1/workspaces", map[string]string{"path": t.TempDir()}, &ws))
	var sess proto.Session
	require.Equal(t, http.StatusCreated, crashCall(t, p.url, "POST", "/v1/workspaces/"+ws.ID+"/sessions", map[string]any{}, &sess))
	client, events := crashStream(t, p.url, ws.ID)
	var acc proto.PromptAccepted
	require.Equal(t, http.StatusAccepted, crashCall(t, p.url, "POST", "/v1/workspaces/"+ws.ID+"/agent",
		proto.PromptRequest{SessionID: sess.ID, Prompt: `/tool bash {"command": "echo approved"}`}, &acc))
	var pr proto.PermissionRequest
	require.NoError(t, json.Unmarshal(awaitEvent(t, events, proto.EventPermissionRequested, acc.RunID).Data, &pr))

	limitFileSize(t, pid, 0)
	answer := proto.PermissionAnswer{ClientID: client, Decision: proto.DecisionApproveOnce}
	status, eb := storageCall(t, p.url, "POST", "/v1/workspaces/"+ws.ID+"/permissions/"+pr.RequestID, answer)
	assert.Equal(t, http.StatusServiceUnavailable, status)
	assert.Equal(t, proto.CodeStorageUnavailable, eb.Error.Code)
	var pending struct {
		Permissions []proto.PermissionRequest `json:"permissions"`
	}
	require.Equal(t, http.StatusOK, crashCall(t, p.url, "GET", "/v1/workspaces/"+ws.ID+"/permissions", nil, &pending))
	require.Len(t, pending.Permissions, 1, "the request is still open")

	limitFileSize(t, pid, unix.RLIM_INFINITY)
	require.Equal(t, http.StatusOK, crashCall(t, p.url, "POST", "/v1/workspaces/"+ws.ID+"/permissions/"+pr.RequestID, answer, nil))
	ev := awaitEvent(t, events, proto.EventRunCompleted, acc.RunID)
	var rc proto.RunCompleted
	require.NoError(t, json.Unmarshal(ev.Data, &rc))
	assert.Equal(t, proto.OutcomeEndTurn, rc.Outcome)
	assert.Equal(t, []string{proto.OutcomeEndTurn}, runOutcomes(t, p.url, ws.ID, sess.ID)[acc.RunID])
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, <-p.done)
}
