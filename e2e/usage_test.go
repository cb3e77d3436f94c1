package e2e

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/proto"
)

// price is a model's prices in the built-in table, USD per million tokens.
type price struct{ in, cacheRead, cacheWrite, out float64 }

// cost prices u as the contract says: uncached input at the input price,
// cached input at the cache prices, output at the output price.
func (p price) cost(u fakeUsage) float64 {
	uncached := u.Input - u.CacheRead - u.CacheWrite
	return (float64(uncached)*p.in + float64(u.CacheRead)*p.cacheRead + float64(u.CacheWrite)*p.cacheWrite + float64(u.Output)*p.out) / 1e6
}

func (u fakeUsage) plus(v fakeUsage) fakeUsage {
	return fakeUsage{u.Input + v.Input, u.Output + v.Output, u.CacheRead + v.CacheRead, u.CacheWrite + v.CacheWrite, u.Reasoning + v.Reasoning}
}

// assertUsage checks a wire Usage against what the fakes reported and the
// cost the table gives.
func assertUsage(t *testing.T, want fakeUsage, cost float64, got *proto.Usage, what string) {
	t.Helper()
	require.NotNil(t, got, "%s has usage", what)
	assert.Equal(t, proto.Usage{InputTokens: want.Input, OutputTokens: want.Output, CacheReadTokens: want.CacheRead,
		CacheWriteTokens: want.CacheWrite, ReasoningTokens: want.Reasoning, CostUSD: got.CostUSD}, *got, what)
	if assert.NotNil(t, got.CostUSD, "%s is priced", what) {
		assert.InDelta(t, cost, *got.CostUSD, 1e-12, what)
	}
}

func withFastRetries() option {
	return func(c *serverConfig) { c.ModelRetryBackoff = func(int) time.Duration { return time.Millisecond } }
}

// The usage the models report is what the messages, run.completed and the
// session's totals carry, exactly; a retried request counts every attempt
// the provider billed; the cost is the built-in table's; the totals
// survive a restart; the context is the last request's size.
func TestUsageIsCountedAndPriced(t *testing.T) {
	for _, tc := range []struct {
		flavor, model string
		window        int64
		price         price
	}{
		{"openai", "openai/gpt-4.1", 1_047_576, price{2.00, 0.50, 0, 8.00}},
		{"anthropic", "anthropic/claude-sonnet-4-5", 200_000, price{3.00, 0.30, 3.75, 15.00}},
	} {
		t.Run(tc.flavor, func(t *testing.T) {
			cut := fakeUsage{Input: 900, Output: 1, CacheRead: 300, CacheWrite: 100}
			u1 := fakeUsage{Input: 1000, Output: 50, CacheRead: 400, CacheWrite: 100, Reasoning: 10}
			u2 := fakeUsage{Input: 1200, Output: 30, CacheRead: 800, CacheWrite: 0, Reasoning: 0}
			u3 := fakeUsage{Input: 1500, Output: 70, CacheRead: 1000, CacheWrite: 200, Reasoning: 20}
			if tc.flavor == "openai" {
				// OpenAI has no cache writes, and reports usage only at the
				// end of a stream: a refused request reports nothing.
				u1.CacheWrite, u3.CacheWrite = 0, 0
				cut = fakeUsage{}
			} else {
				// Anthropic counts the input at message_start, and an output
				// token or so, billed even when the stream is then cut.
				cut.Output = 1
			}
			fake := newFakeModel(t, tc.flavor, func(n int, _ map[string]any) step {
				switch n {
				case 0:
					if tc.flavor == "openai" {
						return step{status: http.StatusBadGateway}
					}
					// Cut after content_block_start: no delta was streamed.
					u := cut
					return step{cut: true, text: []string{"par", "tial"}, usage: &u}
				case 1:
					u := u1
					return step{toolCalls: []scriptedCall{{ID: "call_1", Name: "ls", Args: `{}`}}, usage: &u}
				case 2:
					u := u2
					return step{text: []string{"listed"}, usage: &u}
				default:
					u := u3
					return step{text: []string{"again"}, usage: &u}
				}
			})
			e := startEnv(t, withFastRetries())
			ws := e.createWorkspace()
			s := e.openStream(ws.ID, newClientID(), "")
			key := "sk-secret-test-key"
			base := fake.URL()
			if tc.flavor == "openai" {
				base += "/v1"
			}
			sess := e.createSession(ws.ID, map[string]any{
				"model": tc.model, "provider": map[string]any{"type": tc.flavor, "base_url": base, "api_key": key},
			})

			acc := e.prompt(ws.ID, sess.ID, "list the files")
			rc, _ := s.completion(acc.RunID)
			require.Equal(t, proto.OutcomeEndTurn, rc.Outcome, "%+v", rc.Error)
			require.Len(t, fake.Requests(), 3, "a failed request, retried, then the tool's answer")

			var steps []proto.Message
			for _, m := range runMessages(e.messages(ws.ID, sess.ID), acc.RunID) {
				if m.Role == proto.RoleAssistant {
					steps = append(steps, m)
				}
			}
			require.Len(t, steps, 2)
			first := cut.plus(u1)
			assertUsage(t, first, tc.price.cost(cut)+tc.price.cost(u1), steps[0].Usage, "the retried step (both attempts)")
			assertUsage(t, u2, tc.price.cost(u2), steps[1].Usage, "the last step")
			run1 := first.plus(u2)
			run1Cost := tc.price.cost(cut) + tc.price.cost(u1) + tc.price.cost(u2)
			assertUsage(t, run1, run1Cost, rc.Usage, "run.completed")

			acc2 := e.prompt(ws.ID, sess.ID, "once more")
			rc2, _ := s.completion(acc2.RunID)
			require.Equal(t, proto.OutcomeEndTurn, rc2.Outcome)
			assertUsage(t, u3, tc.price.cost(u3), rc2.Usage, "the second run")
			s.scIdle(sess.ID)

			check := func(what string) {
				t.Helper()
				var got proto.Session
				e.must(http.StatusOK, "GET", fmt.Sprintf("/v1/workspaces/%s/sessions/%s", ws.ID, sess.ID), nil, &got)
				assertUsage(t, run1.plus(u3), run1Cost+tc.price.cost(u3), &got.Usage, what+": the session's totals")
				assert.Equal(t, u3.Input+u3.Output, got.Context.Tokens, what+": the last request's input and output")
				require.NotNil(t, got.Context.Window)
				assert.Equal(t, tc.window, *got.Context.Window)
				var list proto.SessionList
				e.must(http.StatusOK, "GET", "/v1/workspaces/"+ws.ID+"/sessions", nil, &list)
				require.Len(t, list.Sessions, 1)
				assert.Equal(t, got.Usage, list.Sessions[0].Usage, what+": listed the same")
			}
			check("before a restart")
			s.close()
			e.restart()
			check("after a restart")
		})
	}
}
