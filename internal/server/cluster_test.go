package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/tandem-dev/tandem/internal/bus/natsbus"
	"github.com/tandem-dev/tandem/internal/bus/natsbus/natstest"
	"github.com/tandem-dev/tandem/internal/store/postgres/pgtest"
	"github.com/tandem-dev/tandem/proto"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// A cluster node serves, takes the workspace it is asked about, and stops
// leaving no goroutine behind: its lease loop, its forwarded requests, its
// feeds and its connections all end with Shutdown.
func TestClusterNodeStopsEverything(t *testing.T) {
	db := pgtest.Database(t)
	ns := natstest.Start(t)
	// The bus's stream and its goroutines are the NATS server's: make it
	// before counting goroutines.
	nb, err := natsbus.Dial(natsbus.Config{URL: ns.ClientURL(), Name: "setup"})
	require.NoError(t, err)
	nb.Close()
	defer goleak.VerifyNone(t, append(natstest.IgnoreConsumers(), goleak.IgnoreCurrent())...)

	srv, err := New(context.Background(), Config{DataDir: t.TempDir(), Token: "secret", StoreURL: db, BusURL: ns.ClientURL(), NodeID: "n1"})
	require.NoError(t, err)
	h := srv.Handler()
	call := func(method, path, body string, out any) int {
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer secret")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if out != nil {
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), out))
		}
		return rec.Code
	}
	var health proto.Health
	require.Equal(t, http.StatusOK, call("GET", "/v1/health", "", &health))
	assert.Equal(t, "n1", health.NodeID)
	var ws proto.Workspace
	require.Equal(t, http.StatusCreated, call("POST", "/v1/workspaces", `{"path": "`+t.TempDir()+`"}`, &ws))
	var sess proto.Session
	require.Equal(t, http.StatusCreated, call("POST", "/v1/workspaces/"+ws.ID+"/sessions", `{}`, &sess))
	var acc proto.PromptAccepted
	require.Equal(t, http.StatusAccepted, call("POST", "/v1/workspaces/"+ws.ID+"/agent", `{"session_id": "`+sess.ID+`", "prompt": "hi"}`, &acc))

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, srv.Shutdown(ctx))
}

// A store without a bus (or the other way round) is refused: it would
// make a node nobody can reach.
func TestClusterNeedsStoreAndBus(t *testing.T) {
	_, err := New(context.Background(), Config{DataDir: t.TempDir(), Token: "secret", StoreURL: "postgres://127.0.0.1:1/none"})
	require.ErrorContains(t, err, "bus")
}

// testNode is a cluster node served over loopback.
type testNode struct {
	url string
}

// startNodes starts n nodes of one cluster on db and the bus. Their tick
// (lease renewal, claims refresh) is far longer than any wait of the
// tests: what they see comes at once or not at all.
func startNodes(t *testing.T, n int) []*testNode {
	t.Helper()
	db, busURL := pgtest.Database(t), natstest.Start(t).ClientURL()
	nodes := make([]*testNode, n)
	for i := range nodes {
		srv, err := New(context.Background(), Config{DataDir: t.TempDir(), Token: "secret", StoreURL: db, BusURL: busURL,
			NodeID: fmt.Sprintf("n%d", i+1), LeaseTTL: 2 * time.Minute, ClusterTick: 30 * time.Second})
		require.NoError(t, err)
		hs := httptest.NewServer(srv.Handler())
		t.Cleanup(hs.Close)
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			assert.NoError(t, srv.Shutdown(ctx))
		})
		nodes[i] = &testNode{url: hs.URL}
	}
	return nodes
}

// call makes an API call on the node and decodes its answer into out.
func (n *testNode) call(t *testing.T, method, path, body string, out any) int {
	t.Helper()
	return n.callAs(t, "secret", method, path, body, out)
}

// testStream is a client's event stream on a node.
type testStream struct {
	client string
	events chan proto.Event
	close  func()
}

func (n *testNode) stream(t *testing.T, wsID string) *testStream {
	t.Helper()
	s := &testStream{client: uuid.NewString(), events: make(chan proto.Event, 1024)}
	req, err := http.NewRequest("GET", n.url+"/v1/workspaces/"+wsID+"/events?client_id="+s.client, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer secret")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var once sync.Once
	ended := make(chan struct{})
	s.close = func() { once.Do(func() { close(ended); resp.Body.Close() }) }
	t.Cleanup(s.close)
	go func() {
		defer close(s.events)
		sc := bufio.NewScanner(resp.Body)
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
			_ = json.Unmarshal([]byte(data), &ev)
			ev.Type = typ
			select {
			case s.events <- ev:
			case <-ended:
				return
			}
		}
	}()
	return s
}

// waitPresence waits, a few seconds at most, for the stream to announce
// client's arrival or departure (typ), and returns how many clients the
// workspace then had.
func (s *testStream) waitPresence(t *testing.T, typ, client string) int {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case ev, ok := <-s.events:
			require.True(t, ok, "the stream ended")
			if ev.Type != typ {
				continue
			}
			var p proto.ClientPresence
			require.NoError(t, json.Unmarshal(ev.Data, &p))
			if p.ClientID == client {
				return p.Clients
			}
		case <-deadline:
			t.Fatalf("no %s of client %s within 5 s", typ, client)
		}
	}
}

// A stream on a node that does not own the workspace is a claim on it at
// once, not at the node's next claims refresh: the owner announces the
// client as soon as its stream opens, and its departure as soon as it
// ends.
func TestClusterStreamClaimsAtOnce(t *testing.T) {
	nodes := startNodes(t, 2)
	var ws proto.Workspace
	require.Equal(t, http.StatusCreated, nodes[0].call(t, "POST", "/v1/workspaces", `{"path": "`+t.TempDir()+`"}`, &ws))
	own := nodes[0].stream(t, ws.ID)
	require.Equal(t, 1, own.waitPresence(t, proto.EventClientAttached, own.client))

	other := nodes[1].stream(t, ws.ID)
	require.Equal(t, 2, own.waitPresence(t, proto.EventClientAttached, other.client), "the owner counts the other node's stream")
	other.close()
	require.Equal(t, 1, own.waitPresence(t, proto.EventClientDetached, other.client))
}

// GET /v1/workspaces and GET /v1/workspaces/{id} show, on every node,
// the workspace as its owner knows it: open, with the clients streaming
// it on any node.
func TestClusterListShowsTheOwnersView(t *testing.T) {
	nodes := startNodes(t, 2)
	var ws proto.Workspace
	require.Equal(t, http.StatusCreated, nodes[0].call(t, "POST", "/v1/workspaces", `{"path": "`+t.TempDir()+`"}`, &ws))
	own := nodes[0].stream(t, ws.ID)
	own.waitPresence(t, proto.EventClientAttached, own.client)
	check := func(clients int) {
		t.Helper()
		for i, n := range nodes {
			var list proto.WorkspaceList
			require.Equal(t, http.StatusOK, n.call(t, "GET", "/v1/workspaces", "", &list))
			require.Len(t, list.Workspaces, 1)
			got := list.Workspaces[0]
			assert.True(t, got.Open, "node %d lists the workspace open", i+1)
			assert.Equal(t, clients, got.Clients, "clients node %d lists", i+1)
			var one proto.Workspace
			require.Equal(t, http.StatusOK, n.call(t, "GET", "/v1/workspaces/"+ws.ID, "", &one))
			assert.True(t, one.Open, "node %d shows the workspace open", i+1)
			assert.Equal(t, clients, one.Clients, "clients node %d shows", i+1)
		}
	}
	check(1)
	other := nodes[1].stream(t, ws.ID)
	own.waitPresence(t, proto.EventClientAttached, other.client)
	check(2)
}

// Streams opening and closing at once on a node that does not own the
// workspace: the owner's count follows them without waiting for the
// node's claims refresh, however its reports are batched or reordered.
func TestClusterClaimsFollowStreamChurn(t *testing.T) {
	nodes := startNodes(t, 2)
	var ws proto.Workspace
	require.Equal(t, http.StatusCreated, nodes[0].call(t, "POST", "/v1/workspaces", `{"path": "`+t.TempDir()+`"}`, &ws))
	own := nodes[0].stream(t, ws.ID)
	own.waitPresence(t, proto.EventClientAttached, own.client)

	const n = 20
	streams := make([]*testStream, n)
	for i := range streams {
		streams[i] = nodes[1].stream(t, ws.ID)
	}
	var wg sync.WaitGroup
	want := map[string]bool{own.client: true}
	for i, s := range streams {
		if i%2 == 0 {
			wg.Go(s.close)
		} else {
			want[s.client] = true
		}
	}
	wg.Wait()

	// The owner's stream announces each client's arrival and departure;
	// the clients it counts in the end are the ones still streaming.
	present := map[string]bool{own.client: true}
	deadline := time.After(10 * time.Second)
	for !maps.Equal(present, want) {
		select {
		case ev, ok := <-own.events:
			require.True(t, ok, "the stream ended")
			var p proto.ClientPresence
			switch ev.Type {
			case proto.EventClientAttached:
				require.NoError(t, json.Unmarshal(ev.Data, &p))
				present[p.ClientID] = true
			case proto.EventClientDetached:
				require.NoError(t, json.Unmarshal(ev.Data, &p))
				delete(present, p.ClientID)
			}
		case <-deadline:
			t.Fatalf("the owner counts %d clients, want %d", len(present), len(want))
		}
	}
	for i, node := range nodes {
		var got proto.Workspace
		require.Equal(t, http.StatusOK, node.call(t, "GET", "/v1/workspaces/"+ws.ID, "", &got))
		assert.Equal(t, len(want), got.Clients, "clients node %d shows", i+1)
	}
}
