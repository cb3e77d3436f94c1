package e2e

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/proto"
)

// The idle sweeps, made here one after the other all along while sessions
// run in turn, drop the histories and state of sessions between their runs:
// every model request still carries the session's whole conversation, and
// every run ends.
func TestIdleSweepsUnderLoad(t *testing.T) {
	// The model answers with the prompts it was sent, so a history that
	// lost or repeated a message shows in the answers.
	fake := newFakeModel(t, "openai", func(_ int, req map[string]any) step {
		var prompts []string
		msgs, _ := req["messages"].([]any)
		for _, m := range msgs {
			if m, ok := m.(map[string]any); ok && m["role"] == "user" {
				prompts = append(prompts, fmt.Sprint(m["content"]))
			}
		}
		return step{text: []string{fmt.Sprint(prompts)}}
	})
	ticks := make(chan time.Time)
	e := startEnv(t, func(c *serverConfig) { c.IdleSweeps = ticks })
	stop := make(chan struct{})
	var sweeping sync.WaitGroup
	sweeping.Go(func() {
		for {
			select {
			case ticks <- time.Now():
			case <-stop:
				return
			}
		}
	})
	defer func() {
		close(stop)
		sweeping.Wait()
	}()

	ws := e.createWorkspace()
	s := e.openStream(ws.ID, newClientID(), "")
	sessions := make([]proto.Session, 3)
	for i := range sessions {
		sessions[i] = e.openAISession(ws.ID, fake, nil)
	}
	const rounds = 8
	for r := range rounds {
		for i, sess := range sessions {
			acc := e.prompt(ws.ID, sess.ID, fmt.Sprintf("s%d r%d", i, r))
			rc, _ := s.completion(acc.RunID)
			require.Equal(t, proto.OutcomeEndTurn, rc.Outcome, "session %d round %d", i, r)
		}
	}
	for i, sess := range sessions {
		var answers []string
		for _, m := range e.messages(ws.ID, sess.ID) {
			if m.Role == proto.RoleAssistant {
				answers = append(answers, m.Parts[0].Text)
			}
		}
		require.Len(t, answers, rounds)
		var want []string
		for r := range rounds {
			want = append(want, fmt.Sprintf("s%d r%d", i, r))
			assert.Equal(t, fmt.Sprint(want), answers[r], "session %d round %d", i, r)
		}
	}
}
