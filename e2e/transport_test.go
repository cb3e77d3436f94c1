package e2e

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/proto"
)

// TestRunsShareModelConnections checks that runs reuse the server's
// connections to a model instead of opening (and leaving open) one each:
// 1,000 runs over 4 sessions, so at most 4 requests are in flight at once,
// must open a few connections, not one per run. A connection goes back to
// the pool only once the transport's read loop has seen the end of the
// response, which on a loaded machine can come after the session's next
// request has dialed: so the bound is a few connections per session, far
// below the 1,000 that runs with a transport each would open.
func TestRunsShareModelConnections(t *testing.T) {
	fake := newFakeModel(t, "openai", reply("ok"))
	e := startEnv(t)
	ws := e.createWorkspace()
	s := e.openStream(ws.ID, newClientID(), "")
	const sessions, perSession = 4, 250
	var ids []string
	for range sessions {
		ids = append(ids, e.openAISession(ws.ID, fake, nil).ID)
	}
	runs := map[string]bool{}
	for range perSession {
		for _, sid := range ids {
			runs[e.prompt(ws.ID, sid, "hi").RunID] = true
		}
	}
	deadline := time.After(3 * time.Minute)
	for done := 0; done < len(runs); {
		select {
		case f, ok := <-s.frames:
			require.True(t, ok, "stream ended")
			if f.Event != proto.EventRunCompleted {
				continue
			}
			var rc proto.RunCompleted
			require.NoError(t, json.Unmarshal(f.envelope(t).Data, &rc))
			require.True(t, runs[rc.RunID], "unknown run %s", rc.RunID)
			require.Equal(t, proto.OutcomeEndTurn, rc.Outcome, "run %s: %+v", rc.RunID, rc.Error)
			done++
		case <-deadline:
			t.Fatalf("only some of %d runs completed in time", len(runs))
		}
	}
	require.Len(t, fake.Requests(), sessions*perSession)
	t.Logf("%d runs opened %d connections to the model", sessions*perSession, fake.Connections())
	require.LessOrEqual(t, fake.Connections(), int64(4*sessions),
		"%d runs opened %d connections to the model", sessions*perSession, fake.Connections())
}
