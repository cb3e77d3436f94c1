package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/internal/bus/natsbus/natstest"
	"github.com/tandem-dev/tandem/internal/store/postgres/pgtest"
	"github.com/tandem-dev/tandem/proto"
)

// The cluster under faults: nodes on one PostgreSQL database, each
// through a proxy of its own the test can cut or pause (a restart, a
// partition, a hang), and one NATS server the test can stop and start
// again on its port; runs play against a fake model the test holds.

// holdModel is an OpenAI-compatible model that answers "ok" at once,
// except to a prompt containing "hold", which it answers once released.
type holdModel struct {
	url     string
	release chan struct{}
	once    sync.Once
	// held receives a value as each held request arrives.
	held chan struct{}
}

func newHoldModel(t *testing.T) *holdModel {
	m := &holdModel{release: make(chan struct{}), held: make(chan struct{}, 64)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		if strings.Contains(string(raw), "hold") {
			select {
			case m.held <- struct{}{}:
			default:
			}
			select {
			case <-m.release:
			case <-r.Context().Done():
				return
			}
		}
		w.Header().Set("Content-Type", "text/event-stream")
		chunk := func(delta map[string]any, finish any) {
			b, _ := json.Marshal(map[string]any{"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "fake",
				"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}})
			fmt.Fprintf(w, "data: %s\n\n", b)
		}
		chunk(map[string]any{"role": "assistant", "content": ""}, nil)
		if strings.Contains(string(raw), "use a tool") && !strings.Contains(string(raw), `"role":"tool"`) {
			// A step with a tool call: the run writes before it runs it.
			chunk(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "id": "call-1", "type": "function",
				"function": map[string]any{"name": "bash", "arguments": `{"command": "true"}`}}}}, nil)
			chunk(map[string]any{}, "tool_calls")
			fmt.Fprint(w, "data: [DONE]\n\n")
			return
		}
		chunk(map[string]any{"content": "ok"}, nil)
		chunk(map[string]any{}, "stop")
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(m.Release)
	m.url = srv.URL
	return m
}

// awaitHeld waits for n held requests to arrive.
func (m *holdModel) awaitHeld(t *testing.T, n int) {
	t.Helper()
	for range n {
		select {
		case <-m.held:
		case <-time.After(10 * time.Second):
			t.Fatal("the run did not reach the model within 10 s")
		}
	}
}

// Release answers the held prompts, and every one after.
func (m *holdModel) Release() { m.once.Do(func() { close(m.release) }) }

// faultCluster is a cluster whose store and bus the test can fail.
type faultCluster struct {
	t        *testing.T
	db       string
	natsPort int
	nats     *natsserver.Server
	model    *holdModel
	nodes    []*faultNode
	cfg      func(*Config)
}

// faultNode is a node with its own way to the database.
type faultNode struct {
	testNode
	id    string
	srv   *Server
	hs    *httptest.Server
	proxy *pgtest.Proxy
	once  sync.Once
}

// startFaultCluster starts n nodes; cfg, when set, adjusts each node's
// configuration.
func startFaultCluster(t *testing.T, n int, cfg func(*Config)) *faultCluster {
	t.Helper()
	c := &faultCluster{t: t, db: pgtest.Database(t), model: newHoldModel(t), cfg: cfg}
	c.nats = natstest.Start(t)
	c.natsPort = natstest.Port(c.nats)
	for i := range n {
		c.nodes = append(c.nodes, c.startNode(fmt.Sprintf("n%d", i+1)))
	}
	return c
}

func (c *faultCluster) startNode(id string) *faultNode {
	t := c.t
	proxy := pgtest.NewProxy(t, c.db)
	cfg := Config{DataDir: t.TempDir(), Token: "secret", StoreURL: proxy.URL(c.db), BusURL: c.nats.ClientURL(), NodeID: id,
		CreateGrace: 2 * time.Second, DetachGrace: time.Second}
	if c.cfg != nil {
		c.cfg(&cfg)
	}
	srv, err := New(context.Background(), cfg)
	require.NoError(t, err)
	hs := httptest.NewServer(srv.Handler())
	n := &faultNode{testNode: testNode{url: hs.URL}, id: id, srv: srv, hs: hs, proxy: proxy}
	t.Cleanup(n.stop)
	return n
}

// stop shuts the node down cleanly (it hands its workspaces over).
func (n *faultNode) stop() {
	n.once.Do(func() {
		n.proxy.Restore()
		n.proxy.Resume()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_ = n.srv.Shutdown(ctx)
		n.hs.Close()
	})
}

// stopBus stops the NATS server; startBus starts a new one on its port.
func (c *faultCluster) stopBus() {
	c.nats.Shutdown()
	c.nats.WaitForShutdown()
}

func (c *faultCluster) startBus() { c.nats = natstest.StartOn(c.t, c.natsPort) }

// workspace creates a workspace on nodes[0] (its owner) and a session of
// the hold model in it, and returns their ids.
func (c *faultCluster) workspace() (wsID, sid string) {
	t := c.t
	owner := c.nodes[0]
	var ws proto.Workspace
	require.Equal(t, http.StatusCreated, owner.call(t, "POST", "/v1/workspaces", `{"path": "`+t.TempDir()+`"}`, &ws))
	var sess proto.Session
	body := fmt.Sprintf(`{"model": "openai/fake", "provider": {"type": "openai", "base_url": %q, "api_key": "sk-test"}}`, c.model.url+"/v1")
	require.Equal(t, http.StatusCreated, owner.call(t, "POST", "/v1/workspaces/"+ws.ID+"/sessions", body, &sess))
	return ws.ID, sess.ID
}

// answer is an API call's status and error code, and how long it took.
type answer struct {
	status int
	code   string
	took   time.Duration
	body   []byte
}

// try makes a call that may fail, on a client that gives up after 30 s.
func (n *faultNode) try(t *testing.T, method, path, body string, out any) answer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, n.url+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer secret")
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err, "%s %s: no answer", method, path)
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	a := answer{status: resp.StatusCode, took: time.Since(start), body: raw}
	var e proto.ErrorBody
	if json.Unmarshal(raw, &e) == nil && e.Error.Code != "" {
		a.code = e.Error.Code
	} else if out != nil {
		require.NoError(t, json.Unmarshal(raw, out))
	}
	return a
}

// prompt sends a prompt with an idempotency key ("" for none).
func (n *faultNode) prompt(t *testing.T, wsID, sid, text, key string) (proto.PromptAccepted, answer) {
	t.Helper()
	b, _ := json.Marshal(proto.PromptRequest{SessionID: sid, Prompt: text, IdempotencyKey: key})
	var acc proto.PromptAccepted
	a := n.try(t, "POST", "/v1/workspaces/"+wsID+"/agent", string(b), &acc)
	return acc, a
}

// promptUntilAccepted retries a keyed prompt until it is accepted, as a
// client does after a 503: the key makes every retry the same prompt.
func (n *faultNode) promptUntilAccepted(t *testing.T, wsID, sid, text, key string, within time.Duration) proto.PromptAccepted {
	t.Helper()
	deadline := time.Now().Add(within)
	retry := time.NewTicker(100 * time.Millisecond) // a client's back-off
	defer retry.Stop()
	for ; ; <-retry.C {
		acc, a := n.prompt(t, wsID, sid, text, key)
		if a.status == http.StatusAccepted {
			return acc
		}
		require.Equal(t, http.StatusServiceUnavailable, a.status, "%s", a.body)
		require.True(t, time.Now().Before(deadline), "the prompt was not accepted within %v: %s", within, a.body)
	}
}

// finish is the reason a run's last assistant message ended with, "" while
// it runs.
func finish(msgs []proto.Message, runID string) string {
	for _, m := range msgs {
		if m.RunID != runID || m.Role != proto.RoleAssistant || len(m.Parts) == 0 {
			continue
		}
		if p := m.Parts[len(m.Parts)-1]; p.Type == proto.PartFinish && p.Reason != proto.FinishToolUse {
			return p.Reason
		}
	}
	return ""
}

// waitEnded waits for the run to end, as the session's history on n tells,
// and returns its finish reason.
func (n *faultNode) waitEnded(t *testing.T, wsID, sid, runID string, within time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(within)
	poll := time.NewTicker(100 * time.Millisecond)
	defer poll.Stop()
	for ; ; <-poll.C {
		var list proto.MessageList
		if a := n.try(t, "GET", "/v1/workspaces/"+wsID+"/sessions/"+sid+"/messages", "", &list); a.status == http.StatusOK {
			if r := finish(list.Messages, runID); r != "" {
				return r
			}
		}
		require.True(t, time.Now().Before(deadline), "run %s did not end within %v", runID, within)
	}
}

// userPrompts are the session's user messages, in order.
func (n *faultNode) userPrompts(t *testing.T, wsID, sid string) []string {
	t.Helper()
	var list proto.MessageList
	require.Equal(t, http.StatusOK, n.call(t, "GET", "/v1/workspaces/"+wsID+"/sessions/"+sid+"/messages", "", &list))
	var out []string
	for _, m := range list.Messages {
		if m.Role == proto.RoleUser {
			out = append(out, m.Parts[0].Text)
		}
	}
	return out
}

// While the bus is down, a prompt sent to a node that does not own the
// workspace is refused at once (503 workspace_unavailable), and that
// answer is the truth: the prompt never runs, not even when the bus comes
// back. A client retrying with an idempotency key gets its prompt run
// once as soon as the bus is back.
func TestClusterPromptRefusedWhileTheBusIsDownNeverRuns(t *testing.T) {
	c := startFaultCluster(t, 2, nil)
	owner, other := c.nodes[0], c.nodes[1]
	wsID, sid := c.workspace()
	owner.stream(t, wsID)
	warm, a := other.prompt(t, wsID, sid, "warm", "")
	require.Equal(t, http.StatusAccepted, a.status, "%s", a.body)
	require.Equal(t, proto.FinishEndTurn, owner.waitEnded(t, wsID, sid, warm.RunID, 10*time.Second))

	c.stopBus()
	// Once the node knows (a request written in the instant before it
	// does is lost with the connection, and answered 503 at the forward
	// timeout: lost, never delivered late).
	require.Eventually(t, func() bool { return !other.srv.natsc.IsConnected() }, 5*time.Second, 10*time.Millisecond)
	_, a = other.prompt(t, wsID, sid, "lost", "")
	assert.Equal(t, http.StatusServiceUnavailable, a.status, "%s", a.body)
	assert.Equal(t, proto.CodeWorkspaceUnavailable, a.code)
	assert.Less(t, a.took, 3*time.Second, "the bus is known to be away at once")
	t.Logf("refused in %v while the bus was down", a.took)
	c.startBus()

	after := other.promptUntilAccepted(t, wsID, sid, "after", "after-1", 30*time.Second)
	require.Equal(t, proto.FinishEndTurn, owner.waitEnded(t, wsID, sid, after.RunID, 10*time.Second))
	assert.Equal(t, []string{"warm", "after"}, owner.userPrompts(t, wsID, sid), "the refused prompt never ran")
}

// A prompt retried with its idempotency key is the same run on every
// node, while it runs and after it ended, and still after its owner left
// and another node took the workspace over.
func TestClusterRetriedPromptIsTheSameRunOnEveryNode(t *testing.T) {
	c := startFaultCluster(t, 3, nil)
	wsID, sid := c.workspace()
	c.nodes[0].stream(t, wsID)
	c.nodes[2].stream(t, wsID) // keeps it open once its owner left
	first, a := c.nodes[1].prompt(t, wsID, sid, "hold on", "retry-me")
	require.Equal(t, http.StatusAccepted, a.status, "%s", a.body)
	for _, n := range c.nodes {
		acc, a := n.prompt(t, wsID, sid, "hold on", "retry-me")
		require.Equal(t, http.StatusAccepted, a.status, "%s: %s", n.id, a.body)
		assert.Equal(t, proto.PromptAccepted{RunID: first.RunID, SessionID: sid, State: proto.RunRunning}, acc, n.id)
	}
	c.model.Release()
	require.Equal(t, proto.FinishEndTurn, c.nodes[0].waitEnded(t, wsID, sid, first.RunID, 10*time.Second))
	for _, n := range c.nodes {
		acc, a := n.prompt(t, wsID, sid, "hold on", "retry-me")
		require.Equal(t, http.StatusAccepted, a.status, "%s: %s", n.id, a.body)
		assert.Equal(t, proto.PromptAccepted{RunID: first.RunID, SessionID: sid, State: proto.RunEnded}, acc, n.id)
	}

	c.nodes[0].stop()
	acc := c.nodes[1].promptUntilAccepted(t, wsID, sid, "hold on", "retry-me", 20*time.Second)
	assert.Equal(t, first.RunID, acc.RunID, "the key holds on the new owner")
	assert.Equal(t, proto.RunEnded, acc.State)
	assert.Equal(t, []string{"hold on"}, c.nodes[1].userPrompts(t, wsID, sid), "one run, however many retries")
}

// An owner that cannot hear the bus keeps the claims it last knew: a
// workspace whose only client streams from another node stays open
// across a bus outage longer than a claims report lives (and than the
// detach grace), and its run in flight ends normally.
func TestClusterOwnerKeepsClaimsWhileTheBusIsDown(t *testing.T) {
	c := startFaultCluster(t, 2, nil)
	owner, other := c.nodes[0], c.nodes[1]
	wsID, sid := c.workspace()
	other.stream(t, wsID)
	open := func() proto.Workspace {
		var ws proto.Workspace
		require.Equal(t, http.StatusOK, owner.call(t, "GET", "/v1/workspaces/"+wsID, "", &ws))
		return ws
	}
	require.Eventually(t, func() bool { return open().Clients == 1 }, 5*time.Second, 50*time.Millisecond, "the owner counts the other node's stream")
	run, a := other.prompt(t, wsID, sid, "hold on", "")
	require.Equal(t, http.StatusAccepted, a.status, "%s", a.body)

	c.stopBus()
	// Past a claims report's life (4 ticks of 1 s) and the detach grace
	// (1 s), the owner still counts the client: the outage lasts 8 s, the
	// owner's view sampled every 200 ms throughout.
	outage := time.Now().Add(8 * time.Second)
	for time.Now().Before(outage) {
		ws := open()
		require.True(t, ws.Open, "the workspace closed %v into the outage", 8*time.Second-time.Until(outage))
		require.Equal(t, 1, ws.Clients)
		<-time.After(200 * time.Millisecond)
	}
	c.startBus()
	c.model.Release()
	assert.Equal(t, proto.FinishEndTurn, owner.waitEnded(t, wsID, sid, run.RunID, 20*time.Second), "nobody canceled the run")
	_, a = owner.prompt(t, wsID, sid, "after", "")
	assert.Equal(t, http.StatusAccepted, a.status, "%s", a.body)
}

// When the database hangs (its connections neither answer nor break),
// every call that needs it answers 503 within seconds, on the owner and
// through another node, rather than when the outage ends; a client that
// gave up and retries with its key gets one run once the database
// answers again.
func TestClusterHangingStoreAnswersInTime(t *testing.T) {
	c := startFaultCluster(t, 2, func(cfg *Config) { cfg.LeaseTTL, cfg.ClusterTick = 2*time.Minute, 30*time.Second })
	owner, other := c.nodes[0], c.nodes[1]
	wsID, sid := c.workspace()
	owner.stream(t, wsID)
	warm, a := other.prompt(t, wsID, sid, "warm", "")
	require.Equal(t, http.StatusAccepted, a.status, "%s", a.body)
	require.Equal(t, proto.FinishEndTurn, owner.waitEnded(t, wsID, sid, warm.RunID, 10*time.Second))

	for _, n := range c.nodes {
		n.proxy.Pause()
	}
	const bound = 8 * time.Second
	for _, n := range c.nodes {
		_, a := n.prompt(t, wsID, sid, "during", "during-1")
		assert.Equal(t, http.StatusServiceUnavailable, a.status, "%s: %s", n.id, a.body)
		assert.Less(t, a.took, bound, n.id)
		t.Logf("%s: prompt answered %d %s in %v", n.id, a.status, a.code, a.took)
		a = n.try(t, "GET", "/v1/workspaces/"+wsID+"/sessions/"+sid+"/messages", "", nil)
		assert.Equal(t, http.StatusServiceUnavailable, a.status, "%s: %s", n.id, a.body)
		assert.Less(t, a.took, bound, n.id)
		t.Logf("%s: messages answered %d %s in %v", n.id, a.status, a.code, a.took)
	}
	_, a = owner.prompt(t, wsID, sid, "during", "during-1")
	assert.Equal(t, proto.CodeStorageUnavailable, a.code, "%s", a.body)
	for _, n := range c.nodes {
		n.proxy.Resume()
	}

	acc := other.promptUntilAccepted(t, wsID, sid, "during", "during-1", 20*time.Second)
	require.Equal(t, proto.FinishEndTurn, owner.waitEnded(t, wsID, sid, acc.RunID, 10*time.Second))
	assert.Equal(t, []string{"warm", "during"}, owner.userPrompts(t, wsID, sid), "the retried prompt ran once")
}

// A database restart of 5 s (every connection cut, none taken meanwhile)
// outlasts the owner's lease but interrupts nothing: the owner takes its
// lease back, no other node having taken it in between, and the runs in
// flight, whose model answered during the restart, wait for the database
// and end normally.
func TestClusterDatabaseRestartKeepsRunsGoing(t *testing.T) {
	c := startFaultCluster(t, 2, nil)
	owner, other := c.nodes[0], c.nodes[1]
	wsID, sid := c.workspace()
	owner.stream(t, wsID)
	var sess2 proto.Session
	body := fmt.Sprintf(`{"model": "openai/fake", "provider": {"type": "openai", "base_url": %q, "api_key": "sk-test"}, "permission_mode": "allow_all"}`,
		c.model.url+"/v1")
	require.Equal(t, http.StatusCreated, owner.call(t, "POST", "/v1/workspaces/"+wsID+"/sessions", body, &sess2))
	mine, a := owner.prompt(t, wsID, sid, "hold on", "")
	require.Equal(t, http.StatusAccepted, a.status, "%s", a.body)
	// Its model answers with a tool call: the run writes that step before
	// it runs the tool, during the restart, and goes on once it can.
	theirs, a := other.prompt(t, wsID, sess2.ID, "hold on, then use a tool", "")
	require.Equal(t, http.StatusAccepted, a.status, "%s", a.body)
	c.model.awaitHeld(t, 2) // both runs are waiting for the model
	require.Eventually(t, func() bool {
		return len(owner.userPrompts(t, wsID, sid)) == 1 && len(owner.userPrompts(t, wsID, sess2.ID)) == 1
	}, 10*time.Second, 20*time.Millisecond, "the runs' starts are written")

	for _, n := range c.nodes {
		n.proxy.Cut()
	}
	// The restart, 5 s: the model answers in its midst, and the runs'
	// ends wait for the database.
	<-time.After(2 * time.Second)
	c.model.Release()
	<-time.After(3 * time.Second)
	for _, n := range c.nodes {
		n.proxy.Restore()
	}
	// Once the database answers again, so does the cluster.
	later := other.promptUntilAccepted(t, wsID, sid, "later", "later-1", 15*time.Second)
	assert.Equal(t, proto.FinishEndTurn, owner.waitEnded(t, wsID, sid, mine.RunID, 15*time.Second))
	assert.Equal(t, proto.FinishEndTurn, owner.waitEnded(t, wsID, sess2.ID, theirs.RunID, 15*time.Second))
	assert.Equal(t, proto.FinishEndTurn, owner.waitEnded(t, wsID, sid, later.RunID, 15*time.Second))
}

// sseClient is a client's event stream, with the ids it saw.
type sseClient struct {
	frames chan sseFrame
	ended  chan struct{}
	close  func()
}

type sseFrame struct {
	id, event string
	data      []byte
}

// openSSE opens a stream of the workspace on n, resuming after lastID
// when set.
func openSSE(t *testing.T, n *faultNode, wsID, lastID string) *sseClient {
	t.Helper()
	req, err := http.NewRequest("GET", n.url+"/v1/workspaces/"+wsID+"/events?client_id="+uuid.NewString(), nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer secret")
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	s := &sseClient{frames: make(chan sseFrame, 4096), ended: make(chan struct{})}
	var once sync.Once
	s.close = func() { once.Do(func() { resp.Body.Close() }) }
	t.Cleanup(s.close)
	go func() {
		defer close(s.ended)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var f sseFrame
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if f.event != "" {
					select {
					case s.frames <- f:
					default:
					}
				}
				f = sseFrame{}
			case strings.HasPrefix(line, "id: "):
				f.id = line[4:]
			case strings.HasPrefix(line, "event: "):
				f.event = line[7:]
			case strings.HasPrefix(line, "data: "):
				f.data = []byte(line[6:])
			}
		}
	}()
	return s
}

// A node cut off from the database that cannot serve its streams (it
// must catch up from the database, after a bus restart) ends them within
// seconds, rather than keeping them open in silence; the client,
// reconnecting to a healthy node with Last-Event-ID, gets everything it
// missed.
func TestClusterCutOffNodeEndsItsStreams(t *testing.T) {
	c := startFaultCluster(t, 2, nil)
	owner, other := c.nodes[0], c.nodes[1]
	wsID, sid := c.workspace()
	owner.stream(t, wsID)
	s := openSSE(t, other, wsID, "")
	first, a := owner.prompt(t, wsID, sid, "before", "")
	require.Equal(t, http.StatusAccepted, a.status, "%s", a.body)
	lastID := ""
	for done := false; !done; {
		select {
		case f := <-s.frames:
			if f.id != "" {
				lastID = f.id
			}
			done = f.event == proto.EventRunCompleted && strings.Contains(string(f.data), first.RunID)
		case <-time.After(10 * time.Second):
			t.Fatal("the stream on the other node did not see the first run end")
		}
	}

	// Cut off from the database, the node can follow the workspace from
	// the bus, until the bus itself restarts: its feed must then catch up
	// from the database, which it cannot reach.
	other.proxy.Cut()
	cut := time.Now()
	c.stopBus()
	c.startBus()
	during := owner.promptUntilAccepted(t, wsID, sid, "during", "during-1", 20*time.Second)
	require.Equal(t, http.StatusAccepted, a.status, "%s", a.body)
	var seen []string
	for ended := false; !ended; {
		select {
		case f := <-s.frames:
			seen = append(seen, f.event)
			if f.id != "" {
				lastID = f.id
			}
		case <-s.ended:
			ended = true
		case <-time.After(20 * time.Second):
			t.Fatalf("the cut-off node's stream was still open 20 s into the outage (it got %v)", seen)
		}
	}
	took := time.Since(cut)
	t.Logf("the cut-off node ended its stream %v into the outage, after %v", took, seen)
	assert.Less(t, took, 10*time.Second)

	s2 := openSSE(t, owner, wsID, lastID)
	for done := false; !done; {
		select {
		case f := <-s2.frames:
			done = f.event == proto.EventRunCompleted && strings.Contains(string(f.data), during.RunID)
		case <-time.After(10 * time.Second):
			t.Fatal("the client did not catch up on a healthy node")
		}
	}
}
