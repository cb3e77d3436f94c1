package e2e

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/internal/server"
	"github.com/tandem-dev/tandem/proto"
)

// Runs compute a few at a time (one per CPU), so that requests find a CPU
// when runs keep them busy; a run waiting for its model must not count.
// With a single slot, a run whose model is thinking (it sent the headers
// and a first chunk, then nothing) leaves the slot to another session's
// run, which runs to its end meanwhile; the first then ends too.
func TestARunWaitingForItsModelLetsOthersRun(t *testing.T) {
	hold := make(chan struct{})
	fake := newFakeModel(t, "openai", func(n int, req map[string]any) step {
		if lastUserText(req) == "think long" {
			return step{text: []string{"let me", " think"}, hold: hold}
		}
		return step{text: []string{"quick answer"}}
	})
	e := startEnv(t, func(c *server.Config) { c.ComputeSlots = 1 })
	ws := e.createWorkspace()
	s := e.openStream(ws.ID, newClientID(), "")
	thinking := e.openAISession(ws.ID, fake, nil)
	other := e.openAISession(ws.ID, fake, nil)

	slow := e.prompt(ws.ID, thinking.ID, "think long")
	fake.awaitRequest(t) // its model is thinking now
	rc, _ := s.completion(e.prompt(ws.ID, other.ID, "quick").RunID)
	require.Equal(t, proto.OutcomeEndTurn, rc.Outcome, "%+v", rc.Error)
	close(hold)
	rc, _ = s.completion(slow.RunID)
	require.Equal(t, proto.OutcomeEndTurn, rc.Outcome, "%+v", rc.Error)
}
