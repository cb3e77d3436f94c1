package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/proto"
)

// A server killed mid-run (SIGKILL: no shutdown at all) ends the lost runs
// when it comes back, so every 202 still yields exactly one run.completed:
// the running one and the one queued behind it both end interrupted, with
// their user messages and a finish part.
func TestRunsLostInACrashEndInterruptedAfterRestart(t *testing.T) {
	dataDir := t.TempDir()
	env := []string{"TANDEM_TOKEN=crash-token", "TANDEM_DATA_DIR=" + dataDir}
	p := startServe(t, env)
	call := func(url, method, path string, body any, out any) int {
		t.Helper()
		var rd *strings.Reader
		if body != nil {
			raw, err := json.Marshal(body)
			require.NoError(t, err)
			rd = strings.NewReader(string(raw))
		} else {
			rd = strings.NewReader("")
		}
		req, err := http.NewRequest(method, url+path, rd)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer crash-token")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		if out != nil {
			require.NoError(t, json.NewDecoder(resp.Body).Decode(out))
		}
		return resp.StatusCode
	}
	var ws proto.Workspace
	require.Equal(t, http.StatusCreated, call(p.url, "POST", "/v1/workspaces", map[string]string{"path": t.TempDir()}, &ws))
	var sess proto.Session
	require.Equal(t, http.StatusCreated, call(p.url, "POST", "/v1/workspaces/"+ws.ID+"/sessions", map[string]any{}, &sess))

	req, err := http.NewRequest("GET", fmt.Sprintf("%s/v1/workspaces/%s/events?client_id=%s", p.url, ws.ID, uuid.NewString()), nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer crash-token")
	stream, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer stream.Body.Close()
	deltas := make(chan struct{}, 1)
	go func() {
		sc := bufio.NewScanner(stream.Body)
		for sc.Scan() {
			if sc.Text() == "event: "+proto.EventMessageDelta {
				select {
				case deltas <- struct{}{}:
				default:
				}
			}
		}
	}()

	var running, queued proto.PromptAccepted
	require.Equal(t, http.StatusAccepted, call(p.url, "POST", "/v1/workspaces/"+ws.ID+"/agent", proto.PromptRequest{SessionID: sess.ID, Prompt: "/slow 100000 10"}, &running))
	require.Equal(t, http.StatusAccepted, call(p.url, "POST", "/v1/workspaces/"+ws.ID+"/agent", proto.PromptRequest{SessionID: sess.ID, Prompt: "waiting in line"}, &queued))
	select {
	case <-deltas:
	case <-time.After(30 * time.Second):
		t.Fatal("the run never streamed")
	}
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGKILL))
	<-p.done

	p2 := startServe(t, env)
	var hist proto.EventList
	require.Equal(t, http.StatusOK, call(p2.url, "GET", fmt.Sprintf("/v1/workspaces/%s/sessions/%s/events?limit=1000", ws.ID, sess.ID), nil, &hist))
	completed := map[string][]string{}
	for _, ev := range hist.Events {
		if ev.Type == proto.EventRunCompleted {
			var rc proto.RunCompleted
			require.NoError(t, json.Unmarshal(ev.Data, &rc))
			completed[rc.RunID] = append(completed[rc.RunID], rc.Outcome)
		}
	}
	assert.Equal(t, []string{proto.OutcomeInterrupted}, completed[running.RunID])
	assert.Equal(t, []string{proto.OutcomeInterrupted}, completed[queued.RunID])

	var msgs proto.MessageList
	require.Equal(t, http.StatusOK, call(p2.url, "GET", fmt.Sprintf("/v1/workspaces/%s/sessions/%s/messages", ws.ID, sess.ID), nil, &msgs))
	for _, id := range []string{running.RunID, queued.RunID} {
		var users int
		var last proto.Message
		for _, m := range msgs.Messages {
			if m.RunID != id {
				continue
			}
			if m.Role == proto.RoleUser {
				users++
			}
			if m.Role == proto.RoleAssistant {
				last = m
			}
		}
		assert.Equal(t, 1, users, "run %s keeps its user message", id)
		require.NotEmpty(t, last.Parts, "run %s has an assistant message", id)
		fin := last.Parts[len(last.Parts)-1]
		assert.Equal(t, proto.PartFinish, fin.Type)
		assert.Equal(t, proto.FinishInterrupted, fin.Reason)
	}

	// A third start finds nothing left to end.
	require.NoError(t, p2.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, <-p2.done)
	p3 := startServe(t, env)
	require.Equal(t, http.StatusOK, call(p3.url, "GET", fmt.Sprintf("/v1/workspaces/%s/sessions/%s/events?limit=1000", ws.ID, sess.ID), nil, &hist))
	n := 0
	for _, ev := range hist.Events {
		if ev.Type == proto.EventRunCompleted {
			n++
		}
	}
	assert.Equal(t, 2, n, "recovery is done once")
	require.NoError(t, p3.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, <-p3.done)
}
