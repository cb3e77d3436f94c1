package coordinator

import (
	"context"
	"log/slog"

	"github.com/tandem-dev/tandem/internal/config"
	"github.com/tandem-dev/tandem/internal/mcp"
	"github.com/tandem-dev/tandem/internal/session"
	"github.com/tandem-dev/tandem/internal/workspace"
	"github.com/tandem-dev/tandem/proto"
)

func toProto(st mcp.Status) proto.MCPServerStatus {
	tools := st.Tools
	if tools == nil {
		tools = []string{}
	}
	return proto.MCPServerStatus{Name: st.Server, SessionID: st.SessionID, Status: st.Status, Tools: tools, Error: st.Err}
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

// scope is where a workspace's servers (sessionID "") or a session's run.
func (c *Coordinator) scope(ws *workspace.Workspace, sessionID string) mcp.Scope {
	return mcp.Scope{WorkspaceID: ws.ID, Dir: ws.Path, SessionID: sessionID, Reporter: statusReporter{ws: ws, log: c.log}, Confine: c.confineMCP(ws, sessionID)}
}

// runMCP acquires the MCP servers of the run: the session's own first,
// then the workspace's configured ones (if the session may use them). The
// returned release lets them go once the run has returned.
func (c *Coordinator) runMCP(ctx context.Context, ws *workspace.Workspace, sessionID string, settings session.Settings, cfg *config.Config) ([]*mcp.Manager, func()) {
	var held []*mcp.Held
	own, ok := c.cfg.Sessions.MCPServers(sessionID)
	switch {
	case ok:
		c.mcp.Found(sessionID)
	case len(settings.MCPServerNames) > 0 && c.mcp.NoteLost(ws.ID, sessionID, settings.MCPServerNames):
		for _, name := range settings.MCPServerNames {
			emitStatus(ws, c.log, toProto(mcp.LostStatus(sessionID, name)))
		}
	}
	if h := c.mcp.Acquire(ctx, c.scope(ws, sessionID), own); h != nil {
		held = append(held, h)
	}
	if mcp.UsesServers(settings.AvailableTools, cfg.MCPServers) {
		if h := c.mcp.Acquire(ctx, c.scope(ws, ""), cfg.MCPServers); h != nil {
			held = append(held, h)
		}
	}
	mgrs := make([]*mcp.Manager, len(held))
	for i, h := range held {
		mgrs[i] = h.Manager()
	}
	return mgrs, func() {
		for _, h := range held {
			c.mcp.Release(h)
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
	sts := c.mcp.Statuses(ws.ID, cfg.MCPServers)
	out := make([]proto.MCPServerStatus, len(sts))
	for i, st := range sts {
		out[i] = toProto(st)
	}
	return out, nil
}
