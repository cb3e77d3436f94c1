package mcp

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/tandem-dev/tandem/internal/config"
)

// PoolOptions tune the servers a Pool runs; zero values take the
// Manager's defaults.
type PoolOptions struct {
	// HandshakeTimeout bounds a server's start up to its first tool list.
	HandshakeTimeout time.Duration
	// RetryAfter is how long a failed server waits before a run starts it
	// again.
	RetryAfter time.Duration
	// ClientVersion is told to servers in the handshake.
	ClientVersion string
}

// Scope is what a set of servers runs for: a workspace (SessionID "") or
// one of its sessions.
type Scope struct {
	WorkspaceID string
	// Dir is the workspace's root (Options.Dir).
	Dir       string
	SessionID string
	// Reporter hears of the servers' states; nil ignores them.
	Reporter Reporter
	// Confine starts the servers that ask for a sandbox (Options.Confine).
	Confine Confine
}

// Pool owns the MCP servers of workspaces (their configuration's
// mcp_servers) and of sessions (their own): a workspace's are started when a
// session that uses them first runs, and every run of the workspace shares
// them; a session's own get a manager of their own. Both stay up between
// runs and stop with their workspace (a session's also with its delete).
// When a workspace's configuration changes its servers, the next run gets
// new ones and the old ones stop once no run uses them.
type Pool struct {
	opts PoolOptions
	log  *slog.Logger

	mu sync.Mutex
	// workspaces and sessions hold the current manager of each workspace
	// (by id) and of each session with servers of its own (by id).
	workspaces map[string]*Held
	sessions   map[string]*Held
	// lost are the sessions whose own servers were not in memory when
	// they ran (the server restarted since they were given).
	lost map[string]lostServers
	// closing counts the Closes of retired managers running off a run's
	// path.
	closing sync.WaitGroup
}

// Held is one manager and the runs using it: what Acquire hands a run
// until it calls Release.
type Held struct {
	wsID      string
	sessionID string
	key       string // the servers it runs, as JSON
	mgr       *Manager
	users     int
	// retired is set when the holder left the maps; closed once its
	// manager's Close was started.
	retired, closed bool
}

// Manager is the manager running the held servers.
func (h *Held) Manager() *Manager { return h.mgr }

// lostServers are a session's own servers that are not in memory.
type lostServers struct {
	wsID  string
	names []string
}

// NewPool returns an empty Pool; log receives its managers' logs.
func NewPool(opts PoolOptions, log *slog.Logger) *Pool {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Pool{opts: opts, log: log, workspaces: make(map[string]*Held), sessions: make(map[string]*Held), lost: make(map[string]lostServers)}
}

// serversKey identifies a set of servers, values included: equal keys run
// the same servers.
func serversKey(servers map[string]config.MCPServer) string {
	b, _ := json.Marshal(servers) // maps encode sorted
	return string(b)
}

// Acquire returns the manager running servers for the scope, creating it if
// needed, and counts the caller among its users until Release. It returns
// nil when there are no servers, or when ctx (the run's, which the
// workspace's close cancels) is done: a closed workspace starts nothing.
func (p *Pool) Acquire(ctx context.Context, sc Scope, servers map[string]config.MCPServer) *Held {
	if len(servers) == 0 {
		return nil
	}
	key := serversKey(servers)
	p.mu.Lock()
	defer p.mu.Unlock()
	// Under mu: the workspace's close cancels ctx before it takes mu to
	// close its managers, so a manager made here is always closed.
	if ctx.Err() != nil {
		return nil
	}
	byID, id := p.workspaces, sc.WorkspaceID
	if sc.SessionID != "" {
		byID, id = p.sessions, sc.SessionID
	}
	if h := byID[id]; h != nil {
		if h.key == key {
			h.users++
			return h
		}
		p.retireLocked(h)
		delete(byID, id)
	}
	h := &Held{wsID: sc.WorkspaceID, sessionID: sc.SessionID, key: key, users: 1}
	h.mgr = New(servers, Options{
		Dir:              sc.Dir,
		SessionID:        sc.SessionID,
		Logger:           p.log.With("workspace_id", sc.WorkspaceID),
		Reporter:         sc.Reporter,
		ClientVersion:    p.opts.ClientVersion,
		Confine:          sc.Confine,
		HandshakeTimeout: p.opts.HandshakeTimeout,
		RetryAfter:       p.opts.RetryAfter,
	})
	byID[id] = h
	return h
}

// Release ends a use Acquire counted; a retired manager stops once its last
// run let it go. A nil h is a no-op.
func (p *Pool) Release(h *Held) {
	if h == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	h.users--
	if h.retired && h.users == 0 {
		p.closeLater(h)
	}
}

// takeLocked marks h's Close as started, reporting false when it was
// already. Callers hold p.mu.
func takeLocked(h *Held) bool {
	if h.closed {
		return false
	}
	h.closed = true
	return true
}

// retireLocked takes h out of service: it stops now if no run uses it,
// else when its last run releases it. Callers hold p.mu.
func (p *Pool) retireLocked(h *Held) {
	h.retired = true
	if h.users == 0 {
		p.closeLater(h)
	}
}

// closeLater stops h's servers off the caller's path (a stop may take a
// second or two); Wait waits for it. Callers hold p.mu.
func (p *Pool) closeLater(h *Held) {
	if !takeLocked(h) {
		return
	}
	p.closing.Add(1)
	go func() {
		defer p.closing.Done()
		_ = h.mgr.Close()
	}()
}

// CloseWorkspace stops every server of the workspace and of its sessions
// and waits for them: each stdio server's whole process group is gone when
// it returns.
func (p *Pool) CloseWorkspace(wsID string) {
	p.mu.Lock()
	var hs []*Held
	if h := p.workspaces[wsID]; h != nil {
		hs = append(hs, h)
		delete(p.workspaces, wsID)
	}
	for id, h := range p.sessions {
		if h.wsID == wsID {
			hs = append(hs, h)
			delete(p.sessions, id)
		}
	}
	for id, l := range p.lost {
		if l.wsID == wsID {
			delete(p.lost, id)
		}
	}
	hs = slices.DeleteFunc(hs, func(h *Held) bool {
		h.retired = true
		return !takeLocked(h)
	})
	p.mu.Unlock()
	closeHeld(hs)
}

// CloseSession stops the session's own servers (it was deleted), off the
// delete's path: a delete answers within 5 s whatever its servers do.
func (p *Pool) CloseSession(sessionID string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.lost, sessionID)
	if h := p.sessions[sessionID]; h != nil {
		delete(p.sessions, sessionID)
		h.retired = true
		p.closeLater(h)
	}
}

// closeHeld closes the managers side by side: each may take a moment.
func closeHeld(hs []*Held) {
	var wg sync.WaitGroup
	for _, h := range hs {
		wg.Go(func() { _ = h.mgr.Close() })
	}
	wg.Wait()
}

// Wait waits for the stops of retired managers, or ctx.
func (p *Pool) Wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		p.closing.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// NoteLost records that the session's own servers (names) are not in
// memory; it reports whether that is news, to be told to clients.
func (p *Pool) NoteLost(wsID, sessionID string, names []string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, told := p.lost[sessionID]; told {
		return false
	}
	p.lost[sessionID] = lostServers{wsID: wsID, names: names}
	return true
}

// Found records that the session's own servers are in memory again.
func (p *Pool) Found(sessionID string) {
	p.mu.Lock()
	delete(p.lost, sessionID)
	p.mu.Unlock()
}

// Statuses lists the workspace's servers: those of its configuration
// (servers, stopped when not started, or started with other settings), then
// those of its sessions that have run, sorted.
func (p *Pool) Statuses(wsID string, servers map[string]config.MCPServer) []Status {
	out := []Status{}
	p.mu.Lock()
	defer p.mu.Unlock()
	if h := p.workspaces[wsID]; h != nil && h.key == serversKey(servers) {
		out = append(out, h.mgr.Statuses()...)
	} else {
		for _, name := range sortedNames(servers) {
			out = append(out, Status{Server: name, Status: StatusStopped, Tools: []string{}})
		}
	}
	var sessions []*Held
	for _, h := range p.sessions {
		if h.wsID == wsID {
			sessions = append(sessions, h)
		}
	}
	for id, l := range p.lost {
		if l.wsID == wsID && p.sessions[id] == nil {
			sessions = append(sessions, &Held{sessionID: id})
		}
	}
	sort.Slice(sessions, func(i, j int) bool { return sessions[i].sessionID < sessions[j].sessionID })
	for _, h := range sessions {
		if h.mgr == nil {
			for _, name := range p.lost[h.sessionID].names {
				out = append(out, LostStatus(h.sessionID, name))
			}
			continue
		}
		out = append(out, h.mgr.Statuses()...)
	}
	return out
}

// LostStatus is the status of a session's own server that is not in memory.
func LostStatus(sessionID, name string) Status {
	return Status{Server: name, SessionID: sessionID, Status: StatusFailed, Tools: []string{}, Err: lostError}
}

// lostError is the error of a session's server that is not in memory.
const lostError = "the session's own MCP servers are kept in memory only (their settings may hold tokens) and the server restarted since they were given: resume the session with mcp_servers to give them again"

func sortedNames(servers map[string]config.MCPServer) []string {
	names := make([]string, 0, len(servers))
	for n := range servers {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// UsesServers reports whether a session with this allow-list of tools
// (empty: all) may call a tool of one of servers.
func UsesServers(availableTools []string, servers map[string]config.MCPServer) bool {
	if len(availableTools) == 0 {
		return true
	}
	for name := range servers {
		prefix := ToolName(name, "")
		if slices.ContainsFunc(availableTools, func(t string) bool { return strings.HasPrefix(t, prefix) }) {
			return true
		}
	}
	return false
}
