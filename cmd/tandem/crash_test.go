package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
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
// their user messages and a finish part; a prompt steered into the running
// one is in its history, once, answered by its end; a compaction queued
// behind them ends interrupted too, with no user message.
func TestRunsLostInACrashEndInterruptedAfterRestart(t *testing.T) {
	dataDir := t.TempDir()
	env := []string{"TANDEM_TOKEN=crash-token", "TANDEM_DATA_DIR=" + dataDir}
	p := startServe(t, env)
	var ws proto.Workspace
	require.Equal(t, http.StatusCreated, crashCall(t, p.url, "POST", "/v1/workspaces", map[string]string{"path": t.TempDir()}, &ws))
	var sess proto.Session
	require.Equal(t, http.StatusCreated, crashCall(t, p.url, "POST", "/v1/workspaces/"+ws.ID+"/sessions", map[string]any{}, &sess))

	_, events := crashStream(t, p.url, ws.ID)

	var running, queued proto.PromptAccepted
	require.Equal(t, http.StatusAccepted, crashCall(t, p.url, "POST", "/v1/workspaces/"+ws.ID+"/agent", proto.PromptRequest{SessionID: sess.ID, Prompt: "/slow 100000 10"}, &running))
	require.Equal(t, http.StatusAccepted, crashCall(t, p.url, "POST", "/v1/workspaces/"+ws.ID+"/agent", proto.PromptRequest{SessionID: sess.ID, Prompt: "waiting in line"}, &queued))
	var compaction proto.PromptAccepted
	require.Equal(t, http.StatusAccepted, crashCall(t, p.url, "POST", fmt.Sprintf("/v1/workspaces/%s/sessions/%s/compact", ws.ID, sess.ID), nil, &compaction))
	awaitEvent(t, events, proto.EventMessageDelta, running.RunID)
	var steered proto.PromptAccepted
	require.Equal(t, http.StatusAccepted, crashCall(t, p.url, "POST", "/v1/workspaces/"+ws.ID+"/agent", proto.PromptRequest{SessionID: sess.ID, Prompt: "steered before the crash", Delivery: proto.DeliverySteer}, &steered))
	require.Equal(t, running.RunID, steered.RunID)
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGKILL))
	<-p.done

	p2 := startServe(t, env)
	completed := runOutcomes(t, p2.url, ws.ID, sess.ID)
	assert.Equal(t, []string{proto.OutcomeInterrupted}, completed[running.RunID])
	assert.Equal(t, []string{proto.OutcomeInterrupted}, completed[queued.RunID])
	assert.Equal(t, []string{proto.OutcomeInterrupted}, completed[compaction.RunID])

	var msgs proto.MessageList
	require.Equal(t, http.StatusOK, crashCall(t, p2.url, "GET", fmt.Sprintf("/v1/workspaces/%s/sessions/%s/messages", ws.ID, sess.ID), nil, &msgs))
	for _, id := range []string{running.RunID, queued.RunID, compaction.RunID} {
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
		switch id {
		case running.RunID:
			assert.Equal(t, 2, users, "run %s keeps its user message and the steered one", id)
		case compaction.RunID:
			assert.Zero(t, users, "a compaction run has no user message")
		default:
			assert.Equal(t, 1, users, "run %s keeps its user message", id)
		}
		require.NotEmpty(t, last.Parts, "run %s has an assistant message", id)
		fin := last.Parts[len(last.Parts)-1]
		assert.Equal(t, proto.PartFinish, fin.Type)
		assert.Equal(t, proto.FinishInterrupted, fin.Reason)
	}

	// A third start finds nothing left to end.
	require.NoError(t, p2.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, <-p2.done)
	p3 := startServe(t, env)
	n := 0
	for _, outcomes := range runOutcomes(t, p3.url, ws.ID, sess.ID) {
		n += len(outcomes)
	}
	assert.Equal(t, 3, n, "recovery is done once")
	require.NoError(t, p3.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, <-p3.done)
}

// crashCall makes a request to a server of these tests and decodes its
// answer into out, returning the status.
func crashCall(t testing.TB, url, method, path string, body any, out any) int {
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

// crashStream opens the workspace's stream as a new client and returns the
// client id and a channel of its events (type and data).
func crashStream(t *testing.T, url, wsID string) (string, <-chan proto.Event) {
	t.Helper()
	clientID := uuid.NewString()
	req, err := http.NewRequest("GET", fmt.Sprintf("%s/v1/workspaces/%s/events?client_id=%s", url, wsID, clientID), nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer crash-token")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	events := make(chan proto.Event, 1024)
	ended := make(chan struct{})
	t.Cleanup(func() {
		close(ended)
		resp.Body.Close()
	})
	go func() {
		defer close(events)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var ev proto.Event
				if json.Unmarshal([]byte(data), &ev) != nil {
					continue
				}
				select {
				case events <- ev:
				case <-ended:
					return
				}
			}
		}
	}()
	return clientID, events
}

// awaitEvent returns the first event of the type for the run.
func awaitEvent(t *testing.T, events <-chan proto.Event, typ, runID string) proto.Event {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case ev, ok := <-events:
			require.True(t, ok, "the stream ended before %s", typ)
			if ev.Type == typ && ev.RunID == runID {
				return ev
			}
		case <-deadline:
			t.Fatalf("no %s for run %s", typ, runID)
		}
	}
}

// A run suspended on a permission across a clean restart, revived by the
// answer and then lost in a crash, still ends interrupted at the next
// start: what the start in between recovered never lets a later start
// skip a run that had not completed.
func TestRevivedRunLostInACrashEndsInterrupted(t *testing.T) {
	env := []string{"TANDEM_TOKEN=crash-token", "TANDEM_DATA_DIR=" + t.TempDir()}
	// The command says when it runs through a FIFO the test reads.
	dir := t.TempDir()
	require.NoError(t, syscall.Mkfifo(filepath.Join(dir, "running"), 0o600))
	p := startServe(t, env)
	var ws proto.Workspace
	require.Equal(t, http.StatusCreated, crashCall(t, p.url, "POST", "/v1/workspaces", map[string]string{"path": dir}, &ws))
	var sess proto.Session
	require.Equal(t, http.StatusCreated, crashCall(t, p.url, "POST", "/v1/workspaces/"+ws.ID+"/sessions", map[string]any{}, &sess))
	_, events := crashStream(t, p.url, ws.ID)
	var acc proto.PromptAccepted
	require.Equal(t, http.StatusAccepted, crashCall(t, p.url, "POST", "/v1/workspaces/"+ws.ID+"/agent",
		proto.PromptRequest{SessionID: sess.ID, Prompt: `/tool bash {"command": "echo up > running; sleep 5"}`}, &acc))
	var pr proto.PermissionRequest
	require.NoError(t, json.Unmarshal(awaitEvent(t, events, proto.EventPermissionRequested, acc.RunID).Data, &pr))
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, <-p.done)

	p2 := startServe(t, env)
	client, _ := crashStream(t, p2.url, ws.ID)
	running := make(chan error, 1)
	t.Cleanup(func() {
		// Releases the reader below if the command never opened the FIFO.
		if f, err := os.OpenFile(filepath.Join(dir, "running"), os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
	})
	go func() {
		// Opening a FIFO to read waits for its writer: the revived run's command.
		f, err := os.Open(filepath.Join(dir, "running"))
		if err == nil {
			_, err = io.ReadAll(f)
			f.Close()
		}
		running <- err
	}()
	require.Equal(t, http.StatusOK, crashCall(t, p2.url, "POST", "/v1/workspaces/"+ws.ID+"/permissions/"+pr.RequestID,
		proto.PermissionAnswer{ClientID: client, Decision: proto.DecisionApproveOnce}, nil))
	select {
	case err := <-running:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("the revived run never ran its command")
	}
	require.NoError(t, p2.cmd.Process.Signal(syscall.SIGKILL))
	<-p2.done

	p3 := startServe(t, env)
	outcomes := runOutcomes(t, p3.url, ws.ID, sess.ID)[acc.RunID]
	assert.Equal(t, []string{proto.OutcomeInterrupted}, outcomes)
	require.NoError(t, p3.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, <-p3.done)
}

// runOutcomes reads the session's history and returns, per run, the
// outcomes of its run.completed events in order.
func runOutcomes(t *testing.T, url, wsID, sessionID string) map[string][]string {
	t.Helper()
	var hist proto.EventList
	require.Equal(t, http.StatusOK, crashCall(t, url, "GET", fmt.Sprintf("/v1/workspaces/%s/sessions/%s/events?limit=1000", wsID, sessionID), nil, &hist))
	out := map[string][]string{}
	for _, ev := range hist.Events {
		if ev.Type == proto.EventRunCompleted {
			var rc proto.RunCompleted
			require.NoError(t, json.Unmarshal(ev.Data, &rc))
			out[rc.RunID] = append(out[rc.RunID], rc.Outcome)
		}
	}
	return out
}
