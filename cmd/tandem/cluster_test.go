package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/internal/bus/natsbus/natstest"
	"github.com/tandem-dev/tandem/internal/store"
	"github.com/tandem-dev/tandem/internal/store/postgres"
	"github.com/tandem-dev/tandem/internal/store/postgres/pgtest"
	"github.com/tandem-dev/tandem/proto"
)

// A cluster of these tests: real tandem serve processes on one PostgreSQL
// database (pgtest: a throwaway server, or TANDEM_TEST_POSTGRES) and one
// NATS server run in this process. Without PostgreSQL the tests fail;
// they never skip.
type testCluster struct {
	t     testing.TB
	db    string
	env   []string
	nodes []*proc
}

func startCluster(t testing.TB, n int) *testCluster {
	t.Helper()
	db := pgtest.Database(t)
	ns := natstest.Start(t)
	c := &testCluster{t: t, db: db, env: []string{"TANDEM_TOKEN=crash-token", "TANDEM_STORE=" + db, "TANDEM_BUS=" + ns.ClientURL()}}
	for i := range n {
		c.nodes = append(c.nodes, c.start(i))
	}
	return c
}

func (c *testCluster) start(i int) *proc {
	env := append(append([]string{}, c.env...), "TANDEM_DATA_DIR="+c.t.TempDir(), "TANDEM_NODE_ID=node-"+strconv.Itoa(i))
	return startServe(c.t, env)
}

func (c *testCluster) url(i int) string { return c.nodes[i].url }

// clusterStream is one SSE stream of a test client.
type clusterStream struct {
	client string
	events chan proto.Event
	close  func()
}

// openStream opens the workspace's stream on a node, resuming after last
// when last >= 0.
func openStream(t *testing.T, url, wsID string, last int64) *clusterStream {
	t.Helper()
	s := &clusterStream{client: uuid.NewString(), events: make(chan proto.Event, 4096)}
	req, err := http.NewRequest("GET", fmt.Sprintf("%s/v1/workspaces/%s/events?client_id=%s", url, wsID, s.client), nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer crash-token")
	if last >= 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(last, 10))
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	ended := make(chan struct{})
	var once sync.Once
	s.close = func() {
		once.Do(func() {
			close(ended)
			resp.Body.Close()
		})
	}
	t.Cleanup(s.close)
	go func() {
		defer close(s.events)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
		var typ string
		for sc.Scan() {
			line := sc.Text()
			if v, ok := strings.CutPrefix(line, "event: "); ok {
				typ = v
				continue
			}
			data, ok := strings.CutPrefix(line, "data: ")
			if !ok {
				continue
			}
			var ev proto.Event
			if typ == "stream.reset" {
				ev.Type = typ // a control frame: the test wants to see it
			} else if json.Unmarshal([]byte(data), &ev) != nil || ev.Seq == 0 {
				continue
			}
			select {
			case s.events <- ev:
			case <-ended:
				return
			}
		}
	}()
	return s
}

// until collects the stream's events up to and including the first one
// of the type for the run.
func (s *clusterStream) until(t *testing.T, typ, runID string) []proto.Event {
	t.Helper()
	var got []proto.Event
	deadline := time.After(30 * time.Second)
	for {
		select {
		case ev, ok := <-s.events:
			require.True(t, ok, "the stream ended before %s", typ)
			require.NotEqual(t, "stream.reset", ev.Type, "a resume that can be served is never reset")
			got = append(got, ev)
			if ev.Type == typ && ev.RunID == runID {
				return got
			}
		case <-deadline:
			t.Fatalf("no %s for run %s", typ, runID)
		}
	}
}

// kept returns "seq type" of the kept events, in order.
func kept(evs []proto.Event) []string {
	var out []string
	for _, ev := range evs {
		if !ev.Ephemeral {
			out = append(out, fmt.Sprintf("%d %s %s", ev.Seq, ev.Type, ev.RunID))
		}
	}
	return out
}

func after(evs []proto.Event, seq int64) []proto.Event {
	for i, ev := range evs {
		if ev.Seq > seq {
			return evs[i:]
		}
	}
	return nil
}

func (c *testCluster) workspace(node int) (proto.Workspace, proto.Session) {
	t := c.t
	var ws proto.Workspace
	require.Equal(t, http.StatusCreated, crashCall(t, c.url(node), "POST", "/v1/workspaces", map[string]string{"path": t.TempDir()}, &ws))
	var sess proto.Session
	require.Equal(t, http.StatusCreated, crashCall(t, c.url(node), "POST", "/v1/workspaces/"+ws.ID+"/sessions", map[string]any{}, &sess))
	return ws, sess
}

func (c *testCluster) prompt(node int, wsID, sessionID, prompt string) proto.PromptAccepted {
	var acc proto.PromptAccepted
	require.Equal(c.t, http.StatusAccepted, crashCall(c.t, c.url(node), "POST", "/v1/workspaces/"+wsID+"/agent",
		proto.PromptRequest{SessionID: sessionID, Prompt: prompt}, &acc))
	return acc
}

// Clients on different nodes see one stream: the same kept events with
// the same seqs. A prompt sent to node 1 asks a permission that a client
// of node 2 answers, and node 3 streams the answer and the run's end. A
// client that moves to another node with Last-Event-ID gets the rest, no
// gap, no duplicate. Fifty clients answering one permission through the
// three nodes: one 200, 49 409s.
func TestClusterNodesShareOneWorkspace(t *testing.T) {
	c := startCluster(t, 3)
	ws, sess := c.workspace(0)
	streams := []*clusterStream{openStream(t, c.url(0), ws.ID, -1), openStream(t, c.url(1), ws.ID, -1), openStream(t, c.url(2), ws.ID, -1)}

	acc := c.prompt(0, ws.ID, sess.ID, `/tool bash {"command": "echo answered"}`)
	var pr proto.PermissionRequest
	first := streams[2].until(t, proto.EventPermissionRequested, acc.RunID)
	require.NoError(t, json.Unmarshal(first[len(first)-1].Data, &pr))
	var ans map[string]any
	require.Equal(t, http.StatusOK, crashCall(t, c.url(1), "POST", "/v1/workspaces/"+ws.ID+"/permissions/"+pr.RequestID,
		proto.PermissionAnswer{ClientID: streams[1].client, Decision: proto.DecisionApproveOnce}, &ans))
	rest := streams[2].until(t, proto.EventRunCompleted, acc.RunID)
	var sawFinish bool
	for _, ev := range rest {
		if ev.Type == proto.EventToolFinished && strings.Contains(string(ev.Data), "answered") {
			sawFinish = true
		}
	}
	assert.True(t, sawFinish, "node 3 streams the approved tool's output")
	all := [][]proto.Event{nil, nil, append(first, rest...)}
	for i := range 2 {
		all[i] = streams[i].until(t, proto.EventRunCompleted, acc.RunID)
	}
	require.NotEmpty(t, kept(all[0]))
	for i := 1; i < 3; i++ {
		assert.Equal(t, kept(all[0]), kept(all[i]), "node %d streams the same events with the same seqs", i+1)
	}

	// Resume on another node from the middle of the run.
	mid := all[0][len(all[0])/2].Seq
	resumed := openStream(t, c.url(2), ws.ID, mid)
	got := resumed.until(t, proto.EventRunCompleted, acc.RunID)
	assert.Equal(t, kept(after(all[0], mid)), kept(got), "a resume on another node loses nothing and repeats nothing")

	// Fifty answers to one permission, through every node.
	acc2 := c.prompt(1, ws.ID, sess.ID, `/tool bash {"command": "echo again"}`)
	evs := streams[0].until(t, proto.EventPermissionRequested, acc2.RunID)
	require.NoError(t, json.Unmarshal(evs[len(evs)-1].Data, &pr))
	var mu sync.Mutex
	codes := map[int]int{}
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() {
			code := crashCall(t, c.url(i%3), "POST", "/v1/workspaces/"+ws.ID+"/permissions/"+pr.RequestID,
				proto.PermissionAnswer{ClientID: uuid.NewString(), Decision: proto.DecisionApproveOnce}, nil)
			mu.Lock()
			codes[code]++
			mu.Unlock()
		})
	}
	wg.Wait()
	assert.Equal(t, map[int]int{http.StatusOK: 1, http.StatusConflict: 49}, codes)
	streams[1].until(t, proto.EventRunCompleted, acc2.RunID)
	outcomes := runOutcomes(t, c.url(2), ws.ID, sess.ID)
	assert.Equal(t, []string{proto.OutcomeEndTurn}, outcomes[acc.RunID])
	assert.Equal(t, []string{proto.OutcomeEndTurn}, outcomes[acc2.RunID])

	// A stream on any node is a claim on the owner: four streams, on
	// three nodes, are four clients; one closing is one less.
	clients := func() int {
		var info proto.Workspace
		require.Equal(t, http.StatusOK, crashCall(t, c.url(2), "GET", "/v1/workspaces/"+ws.ID, nil, &info))
		return info.Clients
	}
	require.Eventually(t, func() bool { return clients() == 4 }, 10*time.Second, 50*time.Millisecond, "clients of every node count")
	resumed.close()
	require.Eventually(t, func() bool { return clients() == 3 }, 10*time.Second, 50*time.Millisecond, "a stream closed on a follower is released on the owner")

	var h proto.Health
	resp, err := http.Get(c.url(1) + "/v1/health")
	require.NoError(t, err)
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&h))
	resp.Body.Close()
	assert.Equal(t, "node-1", h.NodeID)

	// DELETE through a follower closes the workspace everywhere: every
	// node's streams get workspace.closing and end.
	require.Equal(t, http.StatusNoContent, crashCall(t, c.url(2), "DELETE", "/v1/workspaces/"+ws.ID, nil, nil))
	for i, s := range streams {
		var closing bool
		deadline := time.After(10 * time.Second)
	drain:
		for {
			select {
			case ev, ok := <-s.events:
				if !ok {
					break drain
				}
				closing = closing || ev.Type == proto.EventWorkspaceClosing
			case <-deadline:
				t.Fatalf("the stream on node %d outlived the workspace", i+1)
			}
		}
		assert.True(t, closing, "the stream on node %d was told why it ends", i+1)
	}
}

// kill -9 of a workspace's owner in the middle of a run: another node owns
// the workspace within 15 s; the run ends interrupted, the work parked on
// a permission stays answerable (and its run goes on when answered), the
// run queued behind the lost one runs; every 202 has exactly one
// run.completed.
func TestClusterOwnerKilledMidRunIsReplaced(t *testing.T) {
	c := startCluster(t, 3)
	// Node 1's requests come first: it takes the workspace.
	ws, sess := c.workspace(0)
	var parkedSess proto.Session
	require.Equal(t, http.StatusCreated, crashCall(t, c.url(1), "POST", "/v1/workspaces/"+ws.ID+"/sessions", map[string]any{}, &parkedSess))
	s1 := openStream(t, c.url(1), ws.ID, -1)
	s2 := openStream(t, c.url(2), ws.ID, -1)

	parked := c.prompt(2, ws.ID, parkedSess.ID, `/tool bash {"command": "echo parked"}`)
	evs := s1.until(t, proto.EventPermissionRequested, parked.RunID)
	var pr proto.PermissionRequest
	require.NoError(t, json.Unmarshal(evs[len(evs)-1].Data, &pr))
	running := c.prompt(1, ws.ID, sess.ID, "/slow 100000 20")
	queued := c.prompt(2, ws.ID, sess.ID, "waiting in line")
	assert.Equal(t, proto.RunQueued, queued.State)
	s2.until(t, proto.EventMessageDelta, running.RunID)

	require.NoError(t, c.nodes[0].cmd.Process.Signal(syscall.SIGKILL))
	<-c.nodes[0].done
	killed := time.Now()
	end := s1.until(t, proto.EventRunCompleted, running.RunID)
	took := time.Since(killed)
	t.Logf("the lost run ended %v after the owner was killed", took)
	assert.Less(t, took, 15*time.Second, "another node takes the workspace within 15 s")
	var rc proto.RunCompleted
	require.NoError(t, json.Unmarshal(end[len(end)-1].Data, &rc))
	assert.Equal(t, proto.OutcomeInterrupted, rc.Outcome)
	s2.until(t, proto.EventRunCompleted, queued.RunID)

	// The parked work is answerable on the new owner, through either node.
	require.Equal(t, http.StatusOK, crashCall(t, c.url(2), "POST", "/v1/workspaces/"+ws.ID+"/permissions/"+pr.RequestID,
		proto.PermissionAnswer{ClientID: s2.client, Decision: proto.DecisionApproveOnce}, nil))
	s1.until(t, proto.EventRunCompleted, parked.RunID)

	outcomes := runOutcomes(t, c.url(1), ws.ID, sess.ID)
	assert.Equal(t, []string{proto.OutcomeInterrupted}, outcomes[running.RunID])
	assert.Equal(t, []string{proto.OutcomeEndTurn}, outcomes[queued.RunID])
	assert.Equal(t, []string{proto.OutcomeEndTurn}, runOutcomes(t, c.url(2), ws.ID, parkedSess.ID)[parked.RunID])

	// And new prompts run, through any node left.
	again := c.prompt(2, ws.ID, sess.ID, "after the takeover")
	s1.until(t, proto.EventRunCompleted, again.RunID)
	assert.Equal(t, []string{proto.OutcomeEndTurn}, runOutcomes(t, c.url(1), ws.ID, sess.ID)[again.RunID])
}

// An owner paused (SIGSTOP) past its lease loses the workspace to another
// node; resumed, it writes nothing more for it: its run's end is written
// once, by the new owner, as interrupted.
func TestClusterPausedOwnerWritesNothingAfterItsLease(t *testing.T) {
	c := startCluster(t, 2)
	ws, sess := c.workspace(0)
	s1 := openStream(t, c.url(1), ws.ID, -1)
	running := c.prompt(1, ws.ID, sess.ID, "/slow 100000 20")
	s1.until(t, proto.EventMessageDelta, running.RunID)

	require.NoError(t, c.nodes[0].cmd.Process.Signal(syscall.SIGSTOP))
	// A write sent to the paused owner now reaches it only once it runs
	// again, after another node took the workspace: the database refuses
	// it, whatever the old owner still believes.
	late := make(chan int, 1)
	go func() {
		late <- crashCall(t, c.url(1), "POST", fmt.Sprintf("/v1/workspaces/%s/sessions/%s/log", ws.ID, sess.ID),
			map[string]string{"level": "info", "message": "sent to the paused owner"}, nil)
	}()
	resumed := false
	t.Cleanup(func() {
		if !resumed {
			_ = c.nodes[0].cmd.Process.Signal(syscall.SIGCONT)
		}
	})
	s1.until(t, proto.EventRunCompleted, running.RunID)
	var before proto.EventList
	require.Equal(t, http.StatusOK, crashCall(t, c.url(1), "GET", fmt.Sprintf("/v1/workspaces/%s/sessions/%s/events?limit=1000", ws.ID, sess.ID), nil, &before))

	require.NoError(t, c.nodes[0].cmd.Process.Signal(syscall.SIGCONT))
	resumed = true
	select {
	case code := <-late:
		assert.Equal(t, http.StatusServiceUnavailable, code, "the paused owner's late write is refused")
	case <-time.After(30 * time.Second):
		t.Fatal("the request sent to the paused owner never got an answer")
	}
	// The old owner learns at its next renewal that it lost the lease.
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(c.nodes[0].stderr.String(), "workspace lost") {
		require.True(t, time.Now().Before(deadline), "the resumed node notices it lost the lease; stderr:\n%s", c.nodes[0].stderr)
		time.Sleep(20 * time.Millisecond)
	}
	// Its run has ended there too (its context is canceled), so whatever
	// it tried to write was tried by now. A prompt through it reaches the
	// new owner.
	again := c.prompt(0, ws.ID, sess.ID, "after the pause")
	s1.until(t, proto.EventRunCompleted, again.RunID)
	var afterList proto.EventList
	require.Equal(t, http.StatusOK, crashCall(t, c.url(1), "GET", fmt.Sprintf("/v1/workspaces/%s/sessions/%s/events?after=%d&limit=1000", ws.ID, sess.ID, before.Events[len(before.Events)-1].Seq), nil, &afterList))
	for _, ev := range afterList.Events {
		assert.Equal(t, again.RunID, ev.RunID, "nothing but the new run was written after the takeover: %s %s", ev.Type, ev.Data)
	}
	assert.Equal(t, []string{proto.OutcomeInterrupted}, runOutcomes(t, c.url(1), ws.ID, sess.ID)[running.RunID])
}

// A node stopped cleanly (SIGTERM) hands its workspaces over: it releases
// their leases once its runs ended, so another node takes them at once,
// without waiting for the lease to run out; the clients of the other nodes
// are not told the workspace is closing, and go on.
func TestClusterCleanStopHandsOver(t *testing.T) {
	c := startCluster(t, 2)
	ws, sess := c.workspace(0)
	s1 := openStream(t, c.url(1), ws.ID, -1)
	first := c.prompt(1, ws.ID, sess.ID, "before the stop")
	s1.until(t, proto.EventRunCompleted, first.RunID)

	require.NoError(t, c.nodes[0].cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, <-c.nodes[0].done, "a clean stop exits 0")
	db, err := postgres.Open(context.Background(), c.db, postgres.Options{})
	require.NoError(t, err)
	defer db.Close()
	lease, err := db.GetLease(context.Background(), ws.ID)
	require.NoError(t, err)
	if lease.Owner == "node-0" {
		assert.True(t, lease.Expires.IsZero(), "the stopped node released its lease: %+v", lease)
	}

	again := c.prompt(1, ws.ID, sess.ID, "after the stop")
	evs := s1.until(t, proto.EventRunCompleted, again.RunID)
	for _, ev := range evs {
		assert.NotEqual(t, proto.EventWorkspaceClosing, ev.Type, "another node's clients are not told the workspace closes")
	}
	assert.Equal(t, []string{proto.OutcomeEndTurn}, runOutcomes(t, c.url(1), ws.ID, sess.ID)[again.RunID])
}

// Forgetting a workspace through a node that does not own it forgets it
// on its owner: no node lists or finds it any more, and its lease is gone
// with it, so no node renews or takes over a workspace that is gone (a
// stream on the follower is told and ends).
func TestClusterForgetThroughAFollower(t *testing.T) {
	c := startCluster(t, 2)
	ws, sess := c.workspace(0)
	s1 := openStream(t, c.url(1), ws.ID, -1)
	run := c.prompt(1, ws.ID, sess.ID, "hello")
	s1.until(t, proto.EventRunCompleted, run.RunID)

	require.Equal(t, http.StatusNoContent, crashCall(t, c.url(1), "POST", "/v1/workspaces/"+ws.ID+"/forget", nil, nil))
	s1.until(t, proto.EventWorkspaceClosing, "")
	for i := range c.nodes {
		// Twice: the follower first asks the node it took for the owner,
		// then looks for itself.
		for range 2 {
			assert.Equal(t, http.StatusNotFound, crashCall(t, c.url(i), "GET", "/v1/workspaces/"+ws.ID, nil, nil), "node %d", i)
		}
		var list proto.WorkspaceList
		require.Equal(t, http.StatusOK, crashCall(t, c.url(i), "GET", "/v1/workspaces", nil, &list))
		assert.Empty(t, list.Workspaces, "node %d", i)
	}
	db, err := postgres.Open(context.Background(), c.db, postgres.Options{})
	require.NoError(t, err)
	defer db.Close()
	_, err = db.GetLease(context.Background(), ws.ID)
	require.ErrorIs(t, err, store.ErrNotFound, "the lease went with the workspace")
}
