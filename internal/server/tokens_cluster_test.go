package server

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/proto"
)

// callAs is testNode.call with a person's secret.
func (n *testNode) callAs(t *testing.T, secret, method, path, body string, out any) int {
	t.Helper()
	req, err := http.NewRequest(method, n.url+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+secret)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	if out != nil {
		require.NoError(t, json.NewDecoder(resp.Body).Decode(out))
	}
	return resp.StatusCode
}

// streamEnds opens a stream with secret and returns a channel closed when
// the server ends it.
func (n *testNode) streamEnds(t *testing.T, secret, wsID string) <-chan struct{} {
	t.Helper()
	req, err := http.NewRequest("GET", n.url+"/v1/workspaces/"+wsID+"/events?client_id="+uuid.NewString()+"&access_token="+secret, nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	t.Cleanup(func() { resp.Body.Close() })
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		_, _ = io.Copy(io.Discard, resp.Body)
	}()
	return ended
}

// In a cluster the nodes share people's tokens: a token made on one node
// works on the other (forwarded requests included), and revoked on one it
// is refused by the other at once, and its streams on both end within 2 s.
func TestClusterSharesTokens(t *testing.T) {
	nodes := startNodes(t, 2)
	var ws proto.Workspace
	require.Equal(t, http.StatusCreated, nodes[0].call(t, "POST", "/v1/workspaces", `{"path": "`+t.TempDir()+`"}`, &ws))
	var created proto.TokenCreated
	require.Equal(t, http.StatusCreated, nodes[0].call(t, "POST", "/v1/tokens", `{"name": "alice", "role": "member"}`, &created))
	secret := created.Secret

	var me proto.Me
	require.Equal(t, http.StatusOK, nodes[1].callAs(t, secret, "GET", "/v1/me", "", &me))
	assert.Equal(t, "alice", me.Name)
	// Node 2 forwards to the owner, node 1, which checks the role again.
	var sess proto.Session
	require.Equal(t, http.StatusCreated, nodes[1].callAs(t, secret, "POST", "/v1/workspaces/"+ws.ID+"/sessions", `{}`, &sess))
	assert.Equal(t, http.StatusForbidden, nodes[1].callAs(t, secret, "DELETE", "/v1/workspaces/"+ws.ID+"/sessions/"+sess.ID, "", nil))

	onOwner := nodes[0].streamEnds(t, secret, ws.ID)
	onOther := nodes[1].streamEnds(t, secret, ws.ID)
	start := time.Now()
	require.Equal(t, http.StatusNoContent, nodes[0].call(t, "DELETE", "/v1/tokens/"+created.Token.ID, "", nil))
	assert.Equal(t, http.StatusUnauthorized, nodes[1].callAs(t, secret, "GET", "/v1/me", "", nil), "refused on the other node at once")
	for i, ended := range []<-chan struct{}{onOwner, onOther} {
		select {
		case <-ended:
		case <-time.After(2 * time.Second):
			t.Fatalf("the stream on node %d is still open 2 s after the revocation", i+1)
		}
	}
	t.Logf("both streams ended %v after the revocation", time.Since(start))
}
