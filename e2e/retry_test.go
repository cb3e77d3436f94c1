package e2e

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/proto"
)

// TestRetryAfterIsHonoured: a model that answers 429 with Retry-After: 1
// twice, then answers: the run retries twice, each retry a session.log
// warning, waits at least the second asked for before each, and succeeds.
// The server's own backoff is shortened to a millisecond, so only
// Retry-After can make it wait.
func TestRetryAfterIsHonoured(t *testing.T) {
	for _, flavor := range []string{"openai", "anthropic"} {
		t.Run(flavor, func(t *testing.T) {
			fake := newFakeModel(t, flavor, func(n int, _ map[string]any) step {
				if n < 2 {
					return step{status: http.StatusTooManyRequests, header: map[string]string{"Retry-After": "1"}}
				}
				return step{text: []string{"at last"}}
			})
			e := startEnv(t, func(cfg *serverConfig) { cfg.ModelRetryBackoff = func(int) time.Duration { return time.Millisecond } })
			ws := e.createWorkspace()
			s := e.openStream(ws.ID, newClientID(), "")
			sess := e.fakeSession(ws.ID, fake)
			acc := e.prompt(ws.ID, sess.ID, "hello")
			rc, frames := s.completion(acc.RunID)
			require.Equal(t, proto.OutcomeEndTurn, rc.Outcome, "%+v", rc.Error)

			var warnings []string
			for _, f := range frames {
				if f.Event != proto.EventSessionLog {
					continue
				}
				var log proto.SessionLog
				require.NoError(t, json.Unmarshal(f.envelope(t).Data, &log))
				if log.Level == "warning" {
					warnings = append(warnings, log.Message)
				}
			}
			require.Len(t, warnings, 2, "each retry is a warning")
			for _, w := range warnings {
				assert.Contains(t, w, "model_rate_limited")
				assert.Contains(t, w, "asked to wait 1s")
			}
			reqs := fake.Requests()
			require.Len(t, reqs, 3, "two refused requests and the one answered")
			for i := 1; i < len(reqs); i++ {
				assert.GreaterOrEqual(t, reqs[i].At.Sub(reqs[i-1].At), time.Second, "wait before retry %d", i)
			}
		})
	}
}

// fakeSession creates a session whose provider is the fake model, of its
// flavor.
func (e *env) fakeSession(wsID string, f *fakeModel) proto.Session {
	e.t.Helper()
	if f.flavor == "openai" {
		return e.openAISession(wsID, f, nil)
	}
	return e.createSession(wsID, map[string]any{
		"model":    "anthropic/claude-test",
		"provider": map[string]any{"type": "anthropic", "base_url": f.URL(), "api_key": "sk-ant-secret-test-key"},
	})
}
