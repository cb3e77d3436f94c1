package e2e

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/proto"
)

// stressCall is what one call of the steer stress test got back.
type stressCall struct {
	kind     string // "prompt", "steer", "compact", "cancel"
	text     string
	accepted proto.PromptAccepted
	canceled []string
}

// Clients prompt, steer, compact and cancel several sessions at once, at
// random, against a model whose steps take a while and call tools now and
// then. Whatever the interleaving: no two runs of a session overlap and
// every 202 gets exactly one run.completed (a steer's: of the run it
// joined, which some other 202 accepted); every run listed by a cancel
// ends canceled, others end_turn (a compaction with nothing to summarize:
// compaction_failed); each run's last message is an assistant message
// whose finish matches its outcome, a compaction run has no user message;
// every steered prompt is in its run's history exactly once, answered by
// a later assistant message of that run; and every request the model got
// is well formed: each tool call followed by its result before anything
// else, a summary only ever in front. The sessions work normally after.
// Repeat it with -count to press harder.
func TestSteerCompactCancelStress(t *testing.T) {
	fake := newFakeModel(t, "openai", func(n int, req map[string]any) step {
		rng := rand.New(rand.NewPCG(uint64(n), 99))
		delay := time.Duration(rng.IntN(15)) * time.Millisecond
		raw, _ := json.Marshal(req)
		if strings.Contains(string(raw), "You summarize a conversation") {
			return step{text: []string{fmt.Sprint("SUMMARY ", n)}, delay: delay}
		}
		if rng.IntN(3) == 0 {
			return step{text: []string{"looking"}, toolCalls: []scriptedCall{{ID: fmt.Sprint("call_", n), Name: "ls", Args: `{}`}}, delay: delay}
		}
		return step{text: []string{"answer ", fmt.Sprint(n)}, delay: delay}
	})
	e := startEnv(t)
	ws := e.createWorkspace()
	const sessions, posters, perPoster = 3, 3, 25
	sids := make([]string, sessions)
	for i := range sids {
		sids[i] = e.openAISession(ws.ID, fake, nil).ID
	}

	var mu sync.Mutex
	calls := map[string][]stressCall{} // session -> what its posters got
	errs := make(chan error, sessions*posters)
	var wg sync.WaitGroup
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	for i, sid := range sids {
		for p := range posters {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(seed, uint64(i*posters+p)))
				client := &http.Client{}
				defer client.CloseIdleConnections()
				for j := range perPoster {
					// A short queue, so that most runs run rather than
					// wait for a cancel that sweeps dozens of them.
					if err := e.awaitShortQueue(client, ws.ID, sid, 2); err != nil {
						errs <- err
						return
					}
					c := stressCall{text: fmt.Sprintf("s%d p%d #%d", i, p, j)}
					var code int
					var err error
					want := http.StatusAccepted
					switch r := rng.IntN(40); {
					case r < 21:
						c.kind = "prompt"
						code, err = e.post(client, "/v1/workspaces/"+ws.ID+"/agent", proto.PromptRequest{SessionID: sid, Prompt: c.text}, &c.accepted)
					case r < 33:
						c.kind = "steer"
						code, err = e.post(client, "/v1/workspaces/"+ws.ID+"/agent", proto.PromptRequest{SessionID: sid, Prompt: c.text, Delivery: proto.DeliverySteer}, &c.accepted)
					case r < 37:
						c.kind = "compact"
						code, err = e.post(client, fmt.Sprintf("/v1/workspaces/%s/sessions/%s/compact", ws.ID, sid), struct{}{}, &c.accepted)
					default:
						c.kind = "cancel"
						var cr proto.CancelResponse
						code, err = e.post(client, fmt.Sprintf("/v1/workspaces/%s/agent/sessions/%s/cancel", ws.ID, sid), nil, &cr)
						c.canceled, want = cr.CanceledRuns, http.StatusOK
					}
					if err != nil || code != want {
						errs <- fmt.Errorf("%s: %d %v", c.kind, code, err)
						return
					}
					mu.Lock()
					calls[sid] = append(calls[sid], c)
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	require.False(t, t.Failed())
	for _, sid := range sids {
		eventually(t, func() bool {
			var st proto.AgentStatus
			e.must(http.StatusOK, "GET", fmt.Sprintf("/v1/workspaces/%s/agent/sessions/%s", ws.ID, sid), nil, &st)
			return !st.Busy && len(st.Queued) == 0
		}, "the session's runs all ended")
	}

	stats := map[string]int{}
	for _, sid := range sids {
		hist := e.allSessionEvents(ws.ID, sid)
		own := map[string]bool{}    // runs a 202 accepted as runs of their own
		listed := map[string]bool{} // runs a cancel listed
		compactions := map[string]bool{}
		steers := map[string]string{} // steered text -> the run it joined
		for _, c := range calls[sid] {
			stats[c.kind]++
			switch {
			case c.kind == "cancel":
				for _, id := range c.canceled {
					listed[id] = true
				}
			case c.accepted.State == proto.RunSteered:
				steers[c.text] = c.accepted.RunID
				stats["steered"]++
			default:
				own[c.accepted.RunID] = true
				if c.kind == "compact" {
					compactions[c.accepted.RunID] = true
				}
			}
		}
		checkOneRunAtATime(t, hist, own)

		outcomes := map[string]proto.RunCompleted{}
		steeredIDs := map[string]string{} // steered prompt's message id -> run
		for _, ev := range hist {
			switch ev.Type {
			case proto.EventRunCompleted:
				var rc proto.RunCompleted
				require.NoError(t, json.Unmarshal(ev.Data, &rc))
				outcomes[rc.RunID] = rc
			case proto.EventRunAccepted:
				var ra proto.RunAccepted
				require.NoError(t, json.Unmarshal(ev.Data, &ra))
				if ra.State == proto.RunSteered {
					assert.Equal(t, steers[ra.Prompt], ra.RunID, "the event names the run the 202 did")
					steeredIDs[ra.MessageID] = ra.RunID
				}
			}
		}
		for text, run := range steers {
			assert.True(t, own[run], "steer %q joined run %s, which a 202 accepted", text, run)
		}
		assert.Len(t, steeredIDs, len(steers), "each steer is announced once")

		msgs := e.messages(ws.ID, sid)
		for run := range own {
			rc := outcomes[run]
			switch {
			case listed[run]:
				assert.Equal(t, proto.OutcomeCanceled, rc.Outcome, "run %s was listed by a cancel", run)
			case compactions[run] && rc.Outcome == proto.OutcomeError:
				assert.Equal(t, proto.CodeCompactionFailed, rc.Error.Code)
				assert.Contains(t, rc.Error.Message, "nothing to compact")
			default:
				assert.Contains(t, []string{proto.OutcomeEndTurn, proto.OutcomeCanceled}, rc.Outcome, "run %s: %+v", run, rc.Error)
			}
			stats[rc.Outcome]++
			ms := runMessages(msgs, run)
			require.NotEmpty(t, ms, "run %s has messages", run)
			last := ms[len(ms)-1]
			require.Equal(t, proto.RoleAssistant, last.Role, "run %s ends with an assistant message", run)
			require.NotEmpty(t, last.Parts)
			assert.Equal(t, proto.Part{Type: proto.PartFinish, Reason: rc.Outcome, Message: last.Parts[len(last.Parts)-1].Message}, last.Parts[len(last.Parts)-1], "run %s", run)
			assert.Equal(t, rc.MessageID, last.ID)
			if compactions[run] {
				for _, m := range ms {
					assert.NotEqual(t, proto.RoleUser, m.Role, "compaction run %s has no user message", run)
				}
			} else {
				assert.Equal(t, proto.RoleUser, ms[0].Role, "run %s starts with its prompt", run)
			}
		}
		for id, run := range steeredIDs {
			ms := runMessages(msgs, run)
			at := slices.IndexFunc(ms, func(m proto.Message) bool { return m.ID == id })
			if !assert.GreaterOrEqual(t, at, 0, "steered message %s is in run %s", id, run) {
				continue
			}
			assert.Equal(t, proto.RoleUser, ms[at].Role)
			assert.Equal(t, 1, countID(msgs, id), "steered message %s is recorded once", id)
			assert.True(t, slices.ContainsFunc(ms[at+1:], func(m proto.Message) bool { return m.Role == proto.RoleAssistant }),
				"steered message %s is answered in its run", id)
		}
	}

	reqs := fake.Requests()
	for i, r := range reqs {
		checkRequestShape(t, i, r)
	}
	t.Logf("%d model requests; calls %v", len(reqs), stats)

	s := e.openStream(ws.ID, newClientID(), "")
	for _, sid := range sids {
		rc, _ := s.completion(e.prompt(ws.ID, sid, "and now, calmly").RunID)
		assert.Equal(t, proto.OutcomeEndTurn, rc.Outcome, "%+v", rc.Error)
	}
}

// awaitShortQueue waits until the session has at most n runs queued.
func (e *env) awaitShortQueue(client *http.Client, wsID, sid string, n int) error {
	deadline := time.Now().Add(wait)
	for {
		req, err := http.NewRequest("GET", fmt.Sprintf("%s/v1/workspaces/%s/agent/sessions/%s", e.ts.URL, wsID, sid), nil)
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+testToken)
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		var st proto.AgentStatus
		err = json.NewDecoder(resp.Body).Decode(&st)
		resp.Body.Close()
		if err != nil {
			return fmt.Errorf("agent status: %w", err)
		}
		if len(st.Queued) <= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("session %s: %d runs still queued after %v", sid, len(st.Queued), wait)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// allSessionEvents reads a session's whole kept history, page by page.
func (e *env) allSessionEvents(wsID, sid string) []proto.Event {
	e.t.Helper()
	var out []proto.Event
	after := int64(0)
	for {
		var page proto.EventList
		e.must(http.StatusOK, "GET", fmt.Sprintf("/v1/workspaces/%s/sessions/%s/events?after=%d&limit=500", wsID, sid, after), nil, &page)
		if len(page.Events) == 0 {
			return out
		}
		out = append(out, page.Events...)
		after = page.Events[len(page.Events)-1].Seq
	}
}

func countID(msgs []proto.Message, id string) int {
	n := 0
	for _, m := range msgs {
		if m.ID == id {
			n++
		}
	}
	return n
}

// checkRequestShape checks a recorded OpenAI request as the real API
// would: the system message first; each assistant tool call answered by a
// tool message before any other message; no tool message without its call;
// a compaction's summary only right after the system message; and the last
// message not the assistant's. A request whose body a cancel cut on the
// way is skipped.
func checkRequestShape(t *testing.T, i int, r recorded) {
	t.Helper()
	if r.Body == nil {
		// Its body was cut: a cancel closed the connection while the
		// request went out. The API would never see such a request.
		return
	}
	msgs, _ := r.Body["messages"].([]any)
	require.NotEmpty(t, msgs, "request %d: %s %d bytes: %.300s", i, r.Path, len(r.RawBody), r.RawBody)
	if summaryRequest(t, "openai", r) {
		return
	}
	roles := make([]string, len(msgs))
	owed := map[string]bool{}
	for k, m := range msgs {
		mm := m.(map[string]any)
		role := fmt.Sprint(mm["role"])
		roles[k] = role
		if k == 0 {
			assert.Equal(t, "system", role, "request %d starts with the system prompt", i)
			continue
		}
		if role != "tool" && len(owed) > 0 {
			t.Errorf("request %d: message %d (%s) comes before the results of calls %v; roles %v", i, k, role, owed, roles[:k+1])
			return
		}
		switch role {
		case "assistant":
			calls, _ := mm["tool_calls"].([]any)
			for _, c := range calls {
				owed[fmt.Sprint(c.(map[string]any)["id"])] = true
			}
		case "tool":
			id := fmt.Sprint(mm["tool_call_id"])
			if !owed[id] {
				t.Errorf("request %d: message %d answers call %s, which is not owed; roles %v", i, k, id, roles[:k+1])
				return
			}
			delete(owed, id)
		case "user":
			text := fmt.Sprint(mm["content"])
			if strings.Contains(text, "[The earlier part of this conversation was compacted") {
				assert.Equal(t, 1, k, "request %d: the summary comes right after the system prompt", i)
			}
		}
	}
	assert.Empty(t, owed, "request %d: calls without results", i)
	assert.NotEqual(t, "assistant", roles[len(roles)-1], "request %d ends with the model's own turn", i)
}
