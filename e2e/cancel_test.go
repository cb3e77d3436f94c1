package e2e

import (
	"encoding/json"
	"fmt"
	"io"
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

// post sends a JSON request with the test token through a plain client, for
// goroutines other than the test's (it reports errors instead of failing).
func (e *env) post(client *http.Client, path string, body, out any) (int, error) {
	raw, err := json.Marshal(body)
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequest("POST", e.ts.URL+path, strings.NewReader(string(raw)))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, err
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return resp.StatusCode, fmt.Errorf("decode %s: %w", b, err)
		}
	}
	return resp.StatusCode, nil
}

// awaitCompleted reads the stream until the run's run.completed.
func (s *stream) awaitCompleted(runID string) (proto.RunCompleted, error) {
	deadline := time.After(wait)
	for {
		select {
		case f, ok := <-s.frames:
			if !ok {
				return proto.RunCompleted{}, fmt.Errorf("stream ended before run.completed of %s", runID)
			}
			if f.Event != proto.EventRunCompleted {
				continue
			}
			var ev proto.Event
			if err := json.Unmarshal([]byte(f.Data), &ev); err != nil {
				return proto.RunCompleted{}, err
			}
			var rc proto.RunCompleted
			if err := json.Unmarshal(ev.Data, &rc); err != nil {
				return proto.RunCompleted{}, err
			}
			if rc.RunID == runID {
				return rc, nil
			}
		case <-deadline:
			return proto.RunCompleted{}, fmt.Errorf("no run.completed of %s within %v", runID, wait)
		}
	}
}

// A cancel sent 0 to 10 ms after the 202 of a short prompt meets the run
// at every stage, its last step included (the issue saw 28 of 500 runs
// listed, 19 of them ending end_turn). Every run the cancel lists in
// canceled_runs ends canceled (run.completed and finish part); the others
// may end either way, but each run ends exactly once. Steers join some of
// the runs, or run on their own when they come too late: the same holds.
func TestEveryListedRunEndsCanceled(t *testing.T) {
	e := startEnv(t)
	ws := e.createWorkspace()
	const sessions, tries = 4, 100
	type outcome struct {
		sid     string
		listed  bool
		outcome string
	}
	var (
		mu   sync.Mutex
		runs = map[string]outcome{}
		wg   sync.WaitGroup
	)
	sids := make([]string, sessions)
	streams := make([]*stream, sessions)
	for i := range sessions {
		sids[i] = e.createSession(ws.ID, nil).ID
		streams[i] = e.openStream(ws.ID, newClientID(), "&session_id="+sids[i])
	}
	errs := make(chan error, sessions)
	for i := range sessions {
		wg.Go(func() {
			client := &http.Client{Timeout: wait}
			rng := rand.New(rand.NewPCG(uint64(i), uint64(time.Now().UnixNano())))
			for range tries {
				// Runs of different lengths, so the cancels land on every
				// stage of them, their last step included.
				prompt := []string{"hi", "/slow 1 1", "/slow 2 2", "/slow 1 5"}[rng.IntN(4)]
				var acc proto.PromptAccepted
				if st, err := e.post(client, "/v1/workspaces/"+ws.ID+"/agent", proto.PromptRequest{SessionID: sids[i], Prompt: prompt}, &acc); err != nil || st != http.StatusAccepted {
					errs <- fmt.Errorf("prompt: %d %v", st, err)
					return
				}
				time.Sleep(time.Duration(rng.IntN(max(1, 10_001>>rng.IntN(4)))) * time.Microsecond)
				// Now and then a steer, which joins the run or, when it
				// has ended (or is ending), runs on its own.
				ids := []string{acc.RunID}
				if rng.IntN(3) == 0 {
					var st proto.PromptAccepted
					if code, err := e.post(client, "/v1/workspaces/"+ws.ID+"/agent", proto.PromptRequest{SessionID: sids[i], Prompt: "/slow 1 1", Delivery: proto.DeliverySteer}, &st); err != nil || code != http.StatusAccepted {
						errs <- fmt.Errorf("steer: %d %v", code, err)
						return
					}
					if st.RunID != acc.RunID {
						ids = append(ids, st.RunID)
					}
				}
				var cr proto.CancelResponse
				if st, err := e.post(client, fmt.Sprintf("/v1/workspaces/%s/agent/sessions/%s/cancel", ws.ID, sids[i]), nil, &cr); err != nil || st != http.StatusOK {
					errs <- fmt.Errorf("cancel: %d %v", st, err)
					return
				}
				for _, id := range ids {
					rc, err := streams[i].awaitCompleted(id)
					if err != nil {
						errs <- err
						return
					}
					mu.Lock()
					runs[id] = outcome{sid: sids[i], listed: slices.Contains(cr.CanceledRuns, id), outcome: rc.Outcome}
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}

	listed, wrong := 0, 0
	for id, o := range runs {
		if !o.listed {
			assert.Contains(t, []string{proto.OutcomeEndTurn, proto.OutcomeCanceled}, o.outcome)
			continue
		}
		listed++
		if o.outcome != proto.OutcomeCanceled {
			wrong++
			t.Errorf("run %s was listed in canceled_runs but ended %s", id, o.outcome)
		}
	}
	t.Logf("%d runs, %d listed as canceled, %d of those did not end canceled", len(runs), listed, wrong)

	// Each run ended exactly once, as its history says too.
	for _, sid := range sids {
		var hist proto.EventList
		e.must(http.StatusOK, "GET", fmt.Sprintf("/v1/workspaces/%s/sessions/%s/events?limit=1000", ws.ID, sid), nil, &hist)
		completed := map[string]int{}
		for _, ev := range hist.Events {
			if ev.Type == proto.EventRunCompleted {
				completed[ev.RunID]++
			}
		}
		msgs := e.messages(ws.ID, sid)
		for id, o := range runs {
			if o.sid != sid {
				continue
			}
			assert.Equal(t, 1, completed[id], "run %s ends exactly once", id)
			assert.Equal(t, o.outcome, lastFinish(t, msgs, id).Reason, "run %s: finish part and outcome agree", id)
		}
	}
}
