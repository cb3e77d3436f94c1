package coordinator

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/tandem-dev/tandem/internal/config"
	"github.com/tandem-dev/tandem/internal/session"
	"github.com/tandem-dev/tandem/internal/workspace"
	"github.com/tandem-dev/tandem/internal/workspace/workspacetest"
)

// openWorkspace returns an open workspace over a real store.
func openWorkspace(t *testing.T) *workspace.Workspace {
	t.Helper()
	ws, _, _ := workspacetest.Open(t)
	return ws
}

// TestMCPServersUnderLoad: runs acquiring and releasing the workspace's and
// sessions' servers while the configuration changes and the workspace
// closes now and then: every manager made is closed once nobody uses it,
// and nothing is left running.
func TestMCPServersUnderLoad(t *testing.T) {
	ws := openWorkspace(t)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	m := newMCPServers(MCPOptions{HandshakeTimeout: time.Second}, slog.New(slog.DiscardHandler))
	sets := []map[string]config.MCPServer{
		{"a": {Type: config.TransportHTTP, URL: "http://127.0.0.1:1/mcp"}},
		{"a": {Type: config.TransportHTTP, URL: "http://127.0.0.1:1/other"}},
		{"b": {Type: config.TransportStdio, Command: "tandem-no-such-mcp-server"}},
	}
	var mu sync.Mutex
	var made []*mcpHolder
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 40 {
				session := ""
				if g%2 == 1 {
					session = "s" + string(rune('0'+g))
				}
				h := m.acquire(ctx, ws, session, sets[(g+i)%len(sets)])
				if h == nil {
					continue
				}
				mu.Lock()
				made = append(made, h)
				mu.Unlock()
				if i%5 == 0 {
					h.mgr.Start()
					_ = h.mgr.Wait(ctx)
				}
				m.release(h)
			}
		})
	}
	wg.Go(func() {
		for range 5 {
			m.closeWorkspace(ws)
			m.closeSession("s1")
		}
	})
	wg.Wait()
	cancel()
	assert.Nil(t, m.acquire(ctx, ws, "", sets[0]), "a run whose context ended starts nothing")
	m.closeWorkspace(ws)
	wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer wcancel()
	require.NoError(t, m.wait(wctx))

	m.mu.Lock()
	defer m.mu.Unlock()
	assert.Empty(t, m.workspaces)
	assert.Empty(t, m.sessions)
	require.NotEmpty(t, made)
	for _, h := range made {
		assert.True(t, h.closed, "every manager is closed")
		assert.Zero(t, h.users)
	}
}

// TestUsesServers: a workspace's servers start for a session that may call
// one of their tools: any session without an allow-list, else one whose
// allow-list names one.
func TestUsesServers(t *testing.T) {
	servers := map[string]config.MCPServer{"git": {Type: config.TransportStdio, Command: "git-mcp"}}
	assert.True(t, usesServers(session.Settings{}, servers))
	assert.True(t, usesServers(session.Settings{AvailableTools: []string{"bash", "mcp__git__status"}}, servers))
	assert.False(t, usesServers(session.Settings{AvailableTools: []string{"bash", "mcp__gitx__status"}}, servers))
	assert.False(t, usesServers(session.Settings{AvailableTools: []string{"view"}}, servers))
}
