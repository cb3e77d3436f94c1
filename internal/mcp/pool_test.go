package mcp

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
)

// TestPoolUnderLoad: runs acquiring and releasing the workspace's and
// sessions' servers while the configuration changes and the workspace
// closes now and then: every manager made is closed once nobody uses it,
// and nothing is left running.
func TestPoolUnderLoad(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	dir := t.TempDir()
	p := NewPool(PoolOptions{HandshakeTimeout: time.Second}, slog.New(slog.DiscardHandler))
	sets := []map[string]config.MCPServer{
		{"a": {Type: config.TransportHTTP, URL: "http://127.0.0.1:1/mcp"}},
		{"a": {Type: config.TransportHTTP, URL: "http://127.0.0.1:1/other"}},
		{"b": {Type: config.TransportStdio, Command: "tandem-no-such-mcp-server"}},
	}
	var mu sync.Mutex
	var made []*Held
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 40 {
				sc := Scope{WorkspaceID: "w", Dir: dir}
				if g%2 == 1 {
					sc.SessionID = "s" + string(rune('0'+g))
				}
				h := p.Acquire(ctx, sc, sets[(g+i)%len(sets)])
				if h == nil {
					continue
				}
				mu.Lock()
				made = append(made, h)
				mu.Unlock()
				if i%5 == 0 {
					h.Manager().Start()
					_ = h.Manager().Wait(ctx)
				}
				p.Release(h)
			}
		})
	}
	wg.Go(func() {
		for range 5 {
			p.CloseWorkspace("w")
			p.CloseSession("s1")
		}
	})
	wg.Wait()
	cancel()
	assert.Nil(t, p.Acquire(ctx, Scope{WorkspaceID: "w", Dir: dir}, sets[0]), "a run whose context ended starts nothing")
	p.CloseWorkspace("w")
	wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer wcancel()
	require.NoError(t, p.Wait(wctx))

	p.mu.Lock()
	defer p.mu.Unlock()
	assert.Empty(t, p.workspaces)
	assert.Empty(t, p.sessions)
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
	assert.True(t, UsesServers(nil, servers))
	assert.True(t, UsesServers([]string{"bash", "mcp__git__status"}, servers))
	assert.False(t, UsesServers([]string{"bash", "mcp__gitx__status"}, servers))
	assert.False(t, UsesServers([]string{"view"}, servers))
}

// TestPoolStatuses: a workspace's configured servers are listed stopped
// until a run starts them, and a session's own servers lost in a restart
// are listed failed, with why, once noted, until found again.
func TestPoolStatuses(t *testing.T) {
	p := NewPool(PoolOptions{}, nil)
	servers := map[string]config.MCPServer{"b": {Type: config.TransportStdio, Command: "x"}, "a": {Type: config.TransportStdio, Command: "y"}}
	assert.Equal(t, []Status{{Server: "a", Status: StatusStopped, Tools: []string{}}, {Server: "b", Status: StatusStopped, Tools: []string{}}}, p.Statuses("w", servers))
	assert.True(t, p.NoteLost("w", "s1", []string{"mine"}))
	assert.False(t, p.NoteLost("w", "s1", []string{"mine"}), "told once")
	assert.Equal(t, []Status{LostStatus("s1", "mine")}, p.Statuses("w", nil))
	assert.Empty(t, p.Statuses("other", nil))
	p.Found("s1")
	assert.Empty(t, p.Statuses("w", nil))
}
