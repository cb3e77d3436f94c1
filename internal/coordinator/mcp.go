package coordinator

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
	"github.com/tandem-dev/tandem/internal/mcp"
	"github.com/tandem-dev/tandem/internal/session"
	"github.com/tandem-dev/tandem/internal/workspace"
	"github.com/tandem-dev/tandem/proto"
)

// MCPOptions tune the MCP servers the coordinator runs; zero values take
// package mcp's defaults.
type MCPOptions struct {
	// HandshakeTimeout bounds a server's start up to its first tool list.
	HandshakeTimeout time.Duration
	// RetryAfter is how long a failed server waits before a run starts it
	// again.
	RetryAfter time.Duration
	// ClientVersion is told to servers in the handshake.
	ClientVersion string
}

// mcpServers owns the MCP servers of workspaces (their configuration's
// mcp_servers) and of sessions (their own): a workspace's are started when a
// session that uses them first runs, and every run of the workspace shares
// them; a session's own get a manager of their own. Both stay up between
// runs and stop with their workspace (a session's also with its delete).
// When a workspace's configuration changes its servers, the next run gets
// new ones and the old ones stop once no run uses them.
type mcpServers struct {
	opts MCPOptions
	log  *slog.Logger

	mu sync.Mutex
	// workspaces and sessions hold the current manager of each workspace
	// (by id) and of each session with servers of its own (by id).
	workspaces map[string]*mcpHolder
	sessions   map[string]*mcpHolder
	// lost are the sessions whose own servers were not in memory when
	// they ran (the server restarted since they were given).
	lost map[string]lostServers
	// closing counts the Closes of retired managers running off a run's
	// path.
	closing sync.WaitGroup
}

// mcpHolder is one manager and the runs using it.
type mcpHolder struct {
	ws        *workspace.Workspace
	sessionID string
	key       string // the servers it runs, as JSON
	mgr       *mcp.Manager
	users     int
	// retired is set when the holder left the maps; closed once its
	// manager's Close was started.
	retired, closed bool
}

// lostServers are a session's own servers that are not in memory.
type lostServers struct {
	wsID  string
	names []string
}

func newMCPServers(opts MCPOptions, log *slog.Logger) *mcpServers {
	return &mcpServers{opts: opts, log: log, workspaces: make(map[string]*mcpHolder), sessions: make(map[string]*mcpHolder), lost: make(map[string]lostServers)}
}

// serversKey identifies a set of servers, values included: equal keys run
// the same servers.
func serversKey(servers map[string]config.MCPServer) string {
	b, _ := json.Marshal(servers) // maps encode sorted
	return string(b)
}

// acquire returns the manager running servers for the workspace (sessionID
// "") or the session, creating it if needed, and counts the caller among
// its users until release. It returns nil when there are no servers, or
// when ctx (the run's, which the workspace's close cancels) is done: a
// closed workspace starts nothing.
func (m *mcpServers) acquire(ctx context.Context, ws *workspace.Workspace, sessionID string, servers map[string]config.MCPServer) *mcpHolder {
	if len(servers) == 0 {
		return nil
	}
	key := serversKey(servers)
	m.mu.Lock()
	defer m.mu.Unlock()
	// Under mu: the workspace's close cancels ctx before it takes mu to
	// close its managers, so a manager made here is always closed.
	if ctx.Err() != nil {
		return nil
	}
	byID, id := m.workspaces, ws.ID
	if sessionID != "" {
		byID, id = m.sessions, sessionID
	}
	if h := byID[id]; h != nil {
		if h.key == key {
			h.users++
			return h
		}
		m.retireLocked(h)
		delete(byID, id)
	}
	h := &mcpHolder{ws: ws, sessionID: sessionID, key: key, users: 1}
	h.mgr = mcp.New(servers, mcp.Options{
		Dir:              ws.Path,
		SessionID:        sessionID,
		Logger:           m.log.With("workspace_id", ws.ID),
		Reporter:         statusReporter{ws: ws, log: m.log},
		ClientVersion:    m.opts.ClientVersion,
		HandshakeTimeout: m.opts.HandshakeTimeout,
		RetryAfter:       m.opts.RetryAfter,
	})
	byID[id] = h
	return h
}

// release ends a use acquire counted; a retired manager stops once its last
// run let it go.
func (m *mcpServers) release(h *mcpHolder) {
	if h == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	h.users--
	if h.retired && h.users == 0 {
		m.closeLater(h)
	}
}

// takeLocked marks h's Close as started, reporting false when it was
// already. Callers hold m.mu.
func takeLocked(h *mcpHolder) bool {
	if h.closed {
		return false
	}
	h.closed = true
	return true
}

// retireLocked takes h out of service: it stops now if no run uses it,
// else when its last run releases it. Callers hold m.mu.
func (m *mcpServers) retireLocked(h *mcpHolder) {
	h.retired = true
	if h.users == 0 {
		m.closeLater(h)
	}
}

// closeLater stops h's servers off the caller's path (a stop may take a
// second or two); wait waits for it. Callers hold m.mu.
func (m *mcpServers) closeLater(h *mcpHolder) {
	if !takeLocked(h) {
		return
	}
	m.closing.Add(1)
	go func() {
		defer m.closing.Done()
		_ = h.mgr.Close()
	}()
}

// closeWorkspace stops every server of the workspace and of its sessions
// and waits for them: each stdio server's whole process group is gone when
// it returns.
func (m *mcpServers) closeWorkspace(ws *workspace.Workspace) {
	m.mu.Lock()
	var hs []*mcpHolder
	if h := m.workspaces[ws.ID]; h != nil {
		hs = append(hs, h)
		delete(m.workspaces, ws.ID)
	}
	for id, h := range m.sessions {
		if h.ws.ID == ws.ID {
			hs = append(hs, h)
			delete(m.sessions, id)
		}
	}
	for id, l := range m.lost {
		if l.wsID == ws.ID {
			delete(m.lost, id)
		}
	}
	hs = slices.DeleteFunc(hs, func(h *mcpHolder) bool {
		h.retired = true
		return !takeLocked(h)
	})
	m.mu.Unlock()
	closeAll(hs)
}

// closeSession stops the session's own servers (it was deleted), off the
// delete's path: a delete answers within 5 s whatever its servers do.
func (m *mcpServers) closeSession(sessionID string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.lost, sessionID)
	if h := m.sessions[sessionID]; h != nil {
		delete(m.sessions, sessionID)
		h.retired = true
		m.closeLater(h)
	}
}

// closeAll closes the managers side by side: each may take a moment.
func closeAll(hs []*mcpHolder) {
	var wg sync.WaitGroup
	for _, h := range hs {
		wg.Go(func() { _ = h.mgr.Close() })
	}
	wg.Wait()
}

// wait waits for the stops of retired managers, or ctx.
func (m *mcpServers) wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		m.closing.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// noteLost records that the session's own servers (names) are not in
// memory; it reports whether that is news, to be told to clients.
func (m *mcpServers) noteLost(ws *workspace.Workspace, sessionID string, names []string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, told := m.lost[sessionID]; told {
		return false
	}
	m.lost[sessionID] = lostServers{wsID: ws.ID, names: names}
	return true
}

// found records that the session's own servers are in memory again.
func (m *mcpServers) found(sessionID string) {
	m.mu.Lock()
	delete(m.lost, sessionID)
	m.mu.Unlock()
}

// statuses lists the workspace's servers: those of its configuration
// (servers, stopped when not started, or started with other settings), then
// those of its sessions that have run, sorted.
func (m *mcpServers) statuses(wsID string, servers map[string]config.MCPServer) []proto.MCPServerStatus {
	out := []proto.MCPServerStatus{}
	m.mu.Lock()
	defer m.mu.Unlock()
	if h := m.workspaces[wsID]; h != nil && h.key == serversKey(servers) {
		out = appendStatuses(out, h.mgr.Statuses())
	} else {
		for _, name := range sortedNames(servers) {
			out = append(out, proto.MCPServerStatus{Name: name, Status: proto.MCPStopped, Tools: []string{}})
		}
	}
	var sessions []*mcpHolder
	for _, h := range m.sessions {
		if h.ws.ID == wsID {
			sessions = append(sessions, h)
		}
	}
	for id, l := range m.lost {
		if l.wsID == wsID && m.sessions[id] == nil {
			sessions = append(sessions, &mcpHolder{sessionID: id})
		}
	}
	sort.Slice(sessions, func(i, j int) bool { return sessions[i].sessionID < sessions[j].sessionID })
	for _, h := range sessions {
		if h.mgr == nil {
			for _, name := range m.lost[h.sessionID].names {
				out = append(out, lostStatus(h.sessionID, name))
			}
			continue
		}
		out = appendStatuses(out, h.mgr.Statuses())
	}
	return out
}

func lostStatus(sessionID, name string) proto.MCPServerStatus {
	return proto.MCPServerStatus{Name: name, SessionID: sessionID, Status: proto.MCPFailed, Tools: []string{}, Error: lostError}
}

func appendStatuses(out []proto.MCPServerStatus, sts []mcp.Status) []proto.MCPServerStatus {
	for _, st := range sts {
		out = append(out, toProto(st))
	}
	return out
}

func toProto(st mcp.Status) proto.MCPServerStatus {
	tools := st.Tools
	if tools == nil {
		tools = []string{}
	}
	return proto.MCPServerStatus{Name: st.Server, SessionID: st.SessionID, Status: st.Status, Tools: tools, Error: st.Err}
}

func sortedNames(servers map[string]config.MCPServer) []string {
	names := make([]string, 0, len(servers))
	for n := range servers {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// statusReporter tells a workspace's clients of its servers' states, as
// kept mcp.server_status events: a session's servers in its history too.
type statusReporter struct {
	ws  *workspace.Workspace
	log *slog.Logger
}

func (r statusReporter) MCPStatus(st mcp.Status) {
	emitStatus(r.ws, r.log, toProto(st))
}

func emitStatus(ws *workspace.Workspace, log *slog.Logger, st proto.MCPServerStatus) {
	if _, err := ws.Emit(context.Background(), workspace.Draft{Type: proto.EventMCPServerStatus, SessionID: st.SessionID, Data: st}); err != nil {
		log.Error("emit mcp.server_status", "workspace_id", ws.ID, "server", st.Name, "err", err)
	}
}

// usesServers reports whether a session with these settings may call a
// tool of one of servers: its allow-list (when it has one) names one.
func usesServers(settings session.Settings, servers map[string]config.MCPServer) bool {
	if len(settings.AvailableTools) == 0 {
		return true
	}
	for name := range servers {
		prefix := mcp.ToolName(name, "")
		if slices.ContainsFunc(settings.AvailableTools, func(t string) bool { return strings.HasPrefix(t, prefix) }) {
			return true
		}
	}
	return false
}

// lostError is the error of a session's server that is not in memory.
const lostError = "the session's own MCP servers are kept in memory only (their settings may hold tokens) and the server restarted since they were given: resume the session with mcp_servers to give them again"

// runMCP acquires the MCP servers of the run: the session's own first,
// then the workspace's configured ones (if the session may use them). The
// returned release lets them go once the run has returned.
func (c *Coordinator) runMCP(ctx context.Context, ws *workspace.Workspace, sessionID string, settings session.Settings, cfg *config.Config) ([]*mcp.Manager, func()) {
	var held []*mcpHolder
	own, ok := c.cfg.Sessions.MCPServers(sessionID)
	switch {
	case ok:
		c.mcp.found(sessionID)
	case len(settings.MCPServerNames) > 0 && c.mcp.noteLost(ws, sessionID, settings.MCPServerNames):
		for _, name := range settings.MCPServerNames {
			emitStatus(ws, c.log, lostStatus(sessionID, name))
		}
	}
	if h := c.mcp.acquire(ctx, ws, sessionID, own); h != nil {
		held = append(held, h)
	}
	if usesServers(settings, cfg.MCPServers) {
		if h := c.mcp.acquire(ctx, ws, "", cfg.MCPServers); h != nil {
			held = append(held, h)
		}
	}
	mgrs := make([]*mcp.Manager, len(held))
	for i, h := range held {
		mgrs[i] = h.mgr
	}
	return mgrs, func() {
		for _, h := range held {
			c.mcp.release(h)
		}
	}
}

// MCPServers lists the MCP servers of the workspace and of its sessions
// that have run, with their states (GET /v1/workspaces/{id}/mcp).
func (c *Coordinator) MCPServers(ctx context.Context, wsID string) ([]proto.MCPServerStatus, error) {
	ws, err := c.cfg.Workspaces.Get(ctx, wsID)
	if err != nil {
		return nil, err
	}
	cfg, err := c.cfg.Configs.Workspace(ws.Path)
	if err != nil {
		return nil, session.InvalidConfig(err)
	}
	return c.mcp.statuses(ws.ID, cfg.MCPServers), nil
}
