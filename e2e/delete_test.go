package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/proto"
)

// deleteDeadline is how long DELETE of a session may take whatever other
// clients do (contract section 4).
const deleteDeadline = 5 * time.Second

// posted is one prompt a poster sent and what it got.
type posted struct {
	poster     int
	status     int
	runID      string
	sent, done time.Time
}

// posters prompt one session from n goroutines, back to back, until stop
// is closed. They use a plain client, not the validating one, so they press
// as hard as the server answers.
type posters struct {
	accepted atomic.Int64
	stop     chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup
	mu       sync.Mutex
	got      []posted
	errs     []error
}

// A prompt "@compact" posts a compaction instead (POST .../compact), and
// "@steer TEXT" steers TEXT (delivery steer).
func (e *env) startPosters(wsID, sid string, n int, prompts ...string) *posters {
	p := &posters{stop: make(chan struct{})}
	// A test that fails early still stops its posters before the server.
	e.t.Cleanup(func() { p.halt() })
	client := &http.Client{Timeout: 30 * time.Second}
	url := e.ts.URL + "/v1/workspaces/" + wsID + "/agent"
	for i := range n {
		p.wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(i), uint64(time.Now().UnixNano())))
			for {
				select {
				case <-p.stop:
					return
				default:
				}
				text := "hi"
				if len(prompts) > 0 {
					text = prompts[rng.IntN(len(prompts))]
				}
				pr := proto.PromptRequest{SessionID: sid, Prompt: text}
				target := url
				if rest, ok := strings.CutPrefix(text, "@steer "); ok {
					pr.Prompt, pr.Delivery = rest, proto.DeliverySteer
				}
				body, _ := json.Marshal(pr)
				if text == "@compact" {
					target = fmt.Sprintf("%s/v1/workspaces/%s/sessions/%s/compact", e.ts.URL, wsID, sid)
					body = []byte("{}")
				}
				req, _ := http.NewRequest("POST", target, strings.NewReader(string(body)))
				req.Header.Set("Authorization", "Bearer "+testToken)
				req.Header.Set("Content-Type", "application/json")
				r := posted{poster: i, sent: time.Now()}
				resp, err := client.Do(req)
				if err != nil {
					p.fail(err)
					return
				}
				raw, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				r.status, r.done = resp.StatusCode, time.Now()
				if r.status == http.StatusAccepted {
					var acc proto.PromptAccepted
					if err := json.Unmarshal(raw, &acc); err != nil {
						p.fail(err)
						return
					}
					r.runID = acc.RunID
					p.accepted.Add(1)
				}
				p.mu.Lock()
				p.got = append(p.got, r)
				p.mu.Unlock()
			}
		})
	}
	return p
}

func (p *posters) halt() {
	p.stopOnce.Do(func() { close(p.stop) })
	p.wg.Wait()
}

func (p *posters) fail(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.errs = append(p.errs, err)
}

// finish stops the posters and returns what they got, in the order each
// poster sent it.
func (p *posters) finish(t *testing.T) []posted {
	t.Helper()
	p.halt()
	require.Empty(t, p.errs)
	return p.got
}

// deleteSession deletes the session with a client that gives up only well
// after the contract's deadline, and returns the status and how long it took.
func (e *env) deleteSession(wsID, sid string) (int, time.Duration) {
	e.t.Helper()
	client := &http.Client{Timeout: 4 * deleteDeadline}
	req, err := http.NewRequest("DELETE", fmt.Sprintf("%s/v1/workspaces/%s/sessions/%s", e.ts.URL, wsID, sid), nil)
	require.NoError(e.t, err)
	req.Header.Set("Authorization", "Bearer "+testToken)
	start := time.Now()
	resp, err := client.Do(req)
	took := time.Since(start)
	require.NoError(e.t, err, "DELETE did not answer within %v", 4*deleteDeadline)
	resp.Body.Close()
	return resp.StatusCode, took
}

// checkPosted checks what the posters got around a delete that answered at
// deleted: every answer is a 202 or a 404, a poster that got a 404 gets
// nothing else afterwards (the fence holds), and every prompt sent after
// the delete answered is a 404. It returns the accepted runs.
func checkPosted(t *testing.T, got []posted, deleted time.Time) map[string]bool {
	t.Helper()
	accepted := map[string]bool{}
	fenced := map[int]bool{}
	for _, r := range got {
		switch r.status {
		case http.StatusAccepted:
			accepted[r.runID] = true
			assert.False(t, fenced[r.poster], "poster %d got a 202 after a 404", r.poster)
			assert.False(t, r.sent.After(deleted), "a prompt sent after the delete answered was accepted")
		case http.StatusNotFound:
			fenced[r.poster] = true
		default:
			t.Errorf("a prompt got %d", r.status)
		}
	}
	return accepted
}

// sessionEvents reads the stream until the session's session.deleted and
// returns the session's events before it, in seq order.
func sessionEvents(t *testing.T, s *stream, sid string) []proto.Event {
	t.Helper()
	var out []proto.Event
	for {
		f := s.next()
		if f.ID == "" {
			require.NotEqual(t, "stream.evicted", f.Event, "the test's stream fell behind")
			continue
		}
		ev := f.envelope(t)
		if ev.SessionID != sid {
			continue
		}
		if ev.Type == proto.EventSessionDeleted {
			return out
		}
		out = append(out, ev)
	}
}

// checkOneRunAtATime checks invariant 7 on a session's events: no run
// starts before the one before it completed. It also checks that every
// accepted run completed exactly once (invariant 1).
func checkOneRunAtATime(t *testing.T, evs []proto.Event, accepted map[string]bool) {
	t.Helper()
	active := ""
	completed := map[string]int{}
	overlaps := 0
	for _, ev := range evs {
		switch ev.Type {
		case proto.EventRunStarted:
			if active != "" {
				overlaps++
				if overlaps <= 5 {
					t.Errorf("run %s started (seq %d) while run %s was still running", ev.RunID, ev.Seq, active)
				}
			}
			active = ev.RunID
		case proto.EventRunCompleted:
			completed[ev.RunID]++
			if ev.RunID == active {
				active = ""
			}
		}
	}
	assert.Zero(t, overlaps, "runs of one session overlapped")
	assert.Empty(t, active, "a run was still running when the session was deleted")
	missing := 0
	for id := range accepted {
		if completed[id] != 1 {
			missing++
			if missing <= 5 {
				t.Errorf("run %s: %d run.completed, want 1", id, completed[id])
			}
		}
	}
	assert.Zero(t, missing, "accepted runs without exactly one run.completed")
}

// Three clients prompt one session back to back; a DELETE in the middle
// answers within the contract's deadline, fences the session at once (every
// later prompt is a 404), and no two runs of the session ever overlap.
func TestDeleteOfASessionUnderPromptingClients(t *testing.T) {
	e := startEnv(t)
	ws := e.createWorkspace()
	s := e.openStream(ws.ID, newClientID(), "")
	sess := e.createSession(ws.ID, nil)

	p := e.startPosters(ws.ID, sess.ID, 3)
	eventually(t, func() bool { return p.accepted.Load() >= 300 }, "the posters got 300 prompts accepted")

	status, took := e.deleteSession(ws.ID, sess.ID)
	deleted := time.Now()
	assert.Equal(t, http.StatusNoContent, status)
	assert.Less(t, took, deleteDeadline, "DELETE answered in %v", took)
	for range 10 {
		st, _ := e.do("POST", "/v1/workspaces/"+ws.ID+"/agent", proto.PromptRequest{SessionID: sess.ID, Prompt: "hi"}, nil)
		assert.Equal(t, http.StatusNotFound, st)
	}
	accepted := checkPosted(t, p.finish(t), deleted)
	t.Logf("DELETE took %v with %d prompts accepted", took, len(accepted))
	checkOneRunAtATime(t, sessionEvents(t, s, sess.ID), accepted)
	e.must(http.StatusNotFound, "GET", "/v1/workspaces/"+ws.ID+"/sessions/"+sess.ID, nil, nil)
}

// Deletes, prompts, steers, compactions, cancels and the re-creation of a
// deleted session's id, interleaved at random, never let two runs of one
// session execute at once, and every 202 (a steer's: of the run it
// joined) gets its run.completed.
// Repeat it with -count to press harder.
func TestDeleteCancelPromptStress(t *testing.T) {
	e := startEnv(t)
	ws := e.createWorkspace()
	s := e.openStream(ws.ID, newClientID(), "")
	sid := e.createSession(ws.ID, nil).ID
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 13))
	for round := range 6 {
		p := e.startPosters(ws.ID, sid, 3, "hi", "/slow 3 2", "/slow 20 1", "@steer /slow 2 1", "@steer hello", "@compact")
		cancels := make(chan struct{})
		var cwg sync.WaitGroup
		crng := rand.New(rand.NewPCG(rng.Uint64(), 17))
		cwg.Go(func() {
			client := &http.Client{Timeout: 30 * time.Second}
			for {
				select {
				case <-cancels:
					return
				case <-time.After(time.Duration(crng.IntN(20)) * time.Millisecond):
				}
				req, _ := http.NewRequest("POST", fmt.Sprintf("%s/v1/workspaces/%s/agent/sessions/%s/cancel", e.ts.URL, ws.ID, sid), nil)
				req.Header.Set("Authorization", "Bearer "+testToken)
				if resp, err := client.Do(req); err == nil {
					resp.Body.Close()
				}
			}
		})
		target := int64(20 + rng.IntN(200))
		eventually(t, func() bool { return p.accepted.Load() >= target }, "prompts accepted")

		status, took := e.deleteSession(ws.ID, sid)
		deleted := time.Now()
		close(cancels)
		cwg.Wait()
		assert.Equal(t, http.StatusNoContent, status, "round %d", round)
		assert.Less(t, took, deleteDeadline, "round %d: DELETE answered in %v", round, took)
		accepted := checkPosted(t, p.finish(t), deleted)
		checkOneRunAtATime(t, sessionEvents(t, s, sid), accepted)
		if t.Failed() {
			return
		}
		// The same id again: its runs must not overlap any run of the
		// session it replaces.
		e.createSession(ws.ID, map[string]any{"id": sid})
	}
}
