package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/proto"
)

// A run waiting on a client tool that skips permission, lost in a kill -9,
// goes on after the restart exactly where it stopped: once the call is
// answered (whether straight away, or after a cold resume that announces it
// again) the run finishes, and nobody is asked for a permission the tool
// never needed. After the restart the tool's owner is gone, so its
// skip_permission is unknown; the tool call request on disk is what proves
// the permission step was passed.
func TestAnsweredClientToolIsNotAskedPermissionAfterACrash(t *testing.T) {
	for _, resume := range []bool{false, true} {
		t.Run(fmt.Sprintf("resume=%v", resume), func(t *testing.T) {
			env := []string{"TANDEM_TOKEN=crash-token", "TANDEM_DATA_DIR=" + t.TempDir()}
			p := startServe(t, env)
			var ws proto.Workspace
			require.Equal(t, http.StatusCreated, crashCall(t, p.url, "POST", "/v1/workspaces", map[string]string{"path": t.TempDir()}, &ws))
			owner, events := crashStream(t, p.url, ws.ID)
			var sess proto.Session
			require.Equal(t, http.StatusCreated, crashCall(t, p.url, "POST", "/v1/workspaces/"+ws.ID+"/sessions", proto.CreateSessionRequest{
				ClientID: owner,
				Tools: []proto.ToolSpec{{
					Name: "mytool", Description: "a tool of the client", SkipPermission: true,
					Parameters: json.RawMessage(`{"type": "object", "properties": {"x": {"type": "integer"}}}`),
				}},
			}, &sess))
			var acc proto.PromptAccepted
			require.Equal(t, http.StatusAccepted, crashCall(t, p.url, "POST", "/v1/workspaces/"+ws.ID+"/agent",
				proto.PromptRequest{SessionID: sess.ID, Prompt: `/tool mytool {"x": 1}`}, &acc))
			var tc proto.ToolCallRequest
			require.NoError(t, json.Unmarshal(awaitEvent(t, events, proto.EventToolRequested, acc.RunID).Data, &tc))
			require.NoError(t, p.cmd.Process.Signal(syscall.SIGKILL))
			<-p.done

			p2 := startServe(t, env)
			client, events := crashStream(t, p2.url, ws.ID)
			requestID := tc.RequestID
			if resume {
				var rr proto.ResumeResponse
				require.Equal(t, http.StatusOK, crashCall(t, p2.url, "POST", fmt.Sprintf("/v1/workspaces/%s/sessions/%s/resume", ws.ID, sess.ID),
					proto.ResumeRequest{ClientID: client, ContinuePendingWork: true}, &rr))
				// The call is announced again, and no permission is asked first.
				ev := awaitRunEvent(t, events, acc.RunID, proto.EventToolRequested, proto.EventPermissionRequested)
				require.Equal(t, proto.EventToolRequested, ev.Type, "a permission was asked for a tool that skips it")
				var again proto.ToolCallRequest
				require.NoError(t, json.Unmarshal(ev.Data, &again))
				assert.Equal(t, tc.RequestID, again.RequestID, "the same request, not a new one")
				requestID = again.RequestID
			}
			result := "42"
			require.Equal(t, http.StatusOK, crashCall(t, p2.url, "POST", "/v1/workspaces/"+ws.ID+"/tool-calls/"+requestID,
				proto.ToolCallAnswer{ClientID: client, Result: &result}, nil))

			var seen []string
			for {
				ev := awaitRunEvent(t, events, acc.RunID, proto.EventToolResolved, proto.EventToolFinished,
					proto.EventPermissionRequested, proto.EventRunCompleted)
				seen = append(seen, ev.Type)
				require.NotEqual(t, proto.EventPermissionRequested, ev.Type, "the run asked permission after the call was answered (saw %v)", seen)
				if ev.Type == proto.EventRunCompleted {
					var rc proto.RunCompleted
					require.NoError(t, json.Unmarshal(ev.Data, &rc))
					assert.Equal(t, proto.OutcomeEndTurn, rc.Outcome)
					break
				}
			}
			assert.Equal(t, []string{proto.EventToolResolved, proto.EventToolFinished, proto.EventRunCompleted}, seen)
			require.NoError(t, p2.cmd.Process.Signal(syscall.SIGTERM))
			require.NoError(t, <-p2.done)
		})
	}
}

// awaitRunEvent returns the run's next event of one of the types.
func awaitRunEvent(t *testing.T, events <-chan proto.Event, runID string, types ...string) proto.Event {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case ev, ok := <-events:
			require.True(t, ok, "the stream ended before any of %v", types)
			for _, typ := range types {
				if ev.Type == typ && ev.RunID == runID {
					return ev
				}
			}
		case <-deadline:
			t.Fatalf("none of %v for run %s", types, runID)
		}
	}
}
