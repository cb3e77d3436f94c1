package cluster

import (
	"context"
	"errors"

	"github.com/tandem-dev/tandem/internal/domain"
	"github.com/tandem-dev/tandem/internal/store"
	"github.com/tandem-dev/tandem/proto"
)

// Domain is the domain as the node's transports see it: each call on a
// workspace goes to the workspace's owner (this node's own domain when it
// is this node, taking the workspace when nobody owns it; a command to
// the owner otherwise), and while nobody can own it the call fails with
// workspace_unavailable. Streams are served here, from the bus.
func (n *Node) Domain() domain.Services {
	return domain.Services{
		Workspaces: workspaceRouter{n},
		Sessions:   sessionRouter{n},
		Runs:       agentRouter{n},
		Pending:    agentRouter{n},
		MCP:        agentRouter{n},
		Streams:    n.cfg.Local.Streams,
		Rewinds:    agentRouter{n},
	}
}

// routed makes the call c on the workspace's owner: local when that is
// this node (or when the workspace does not exist, for the local domain's
// own not-found answer), a command with body otherwise.
func routed[T any](ctx context.Context, n *Node, c command, body any, local func() (T, error)) (T, error) {
	out, err := routeOnce(ctx, n, c, body, local)
	if errors.Is(err, errOwnerGone) {
		// The owner this node knew of left, maybe cleanly, releasing its
		// lease: route once more, from the store, which may make this
		// node the owner. Nothing ran, so nothing runs twice.
		return routeOnce(ctx, n, c, body, local)
	}
	return out, err
}

func routeOnce[T any](ctx context.Context, n *Node, c command, body any, local func() (T, error)) (T, error) {
	var out T
	owner, err := n.route(ctx, c.WorkspaceID)
	switch {
	case errors.Is(err, store.ErrNotFound), err == nil && owner == n.cfg.NodeID:
		return local()
	case err != nil:
		n.log.Warn("route call", "op", c.Op, "workspace_id", c.WorkspaceID, "err", err)
		return out, errUnavailable(c.WorkspaceID)
	}
	err = n.send(ctx, owner, &c, body, &out)
	return out, err
}

// done adapts a call that returns only an error to routed.
func done(err error) (struct{}, error) { return struct{}{}, err }

// workspaceRouter is domain.Workspaces on a cluster.
type workspaceRouter struct{ n *Node }

// Open opens the workspace here, then holds it open on its owner (taking
// it when nobody owns it) for the create grace: the grace is a claim of
// the cluster, not of the node the client reached. The answer is the
// owner's view.
func (r workspaceRouter) Open(ctx context.Context, req proto.CreateWorkspaceRequest) (proto.Workspace, bool, error) {
	ws, created, err := r.n.cfg.Local.Workspaces.Open(ctx, req)
	if err != nil {
		return ws, created, err
	}
	owner, err := r.n.route(ctx, ws.ID)
	if err != nil || owner == r.n.cfg.NodeID {
		return ws, created, nil // taken here: the takeover held it open
	}
	ctx, cancel := context.WithTimeout(ctx, r.n.cfg.Tick*5)
	defer cancel()
	var held proto.Workspace
	if err := r.n.send(ctx, owner, &command{Op: opOpen, WorkspaceID: ws.ID}, proto.CreateWorkspaceRequest{Path: ws.Path}, &held); err != nil {
		r.n.log.Debug("hold workspace open on its owner", "workspace_id", ws.ID, "owner", owner, "err", err)
		return ws, created, nil
	}
	return held, created, nil
}

// List lists every workspace with its state as its owner knows it.
func (r workspaceRouter) List(ctx context.Context) ([]proto.Workspace, error) {
	list, err := r.n.cfg.Local.Workspaces.List(ctx)
	if err != nil {
		return nil, err
	}
	r.n.ownersView(ctx, list)
	return list, nil
}

func (r workspaceRouter) Get(ctx context.Context, id string) (proto.Workspace, error) {
	return routed(ctx, r.n, command{Op: opGetWorkspace, WorkspaceID: id}, nil, func() (proto.Workspace, error) {
		return r.n.cfg.Local.Workspaces.Get(ctx, id)
	})
}

func (r workspaceRouter) Delete(ctx context.Context, id string) error {
	_, err := routed(ctx, r.n, command{Op: opDeleteWorkspace, WorkspaceID: id}, nil, func() (struct{}, error) {
		return done(r.n.cfg.Local.Workspaces.Delete(ctx, id))
	})
	return err
}

// Forget forgets the workspace on its owner, or here when nobody owns it.
func (r workspaceRouter) Forget(ctx context.Context, id string) error {
	_, err := routed(ctx, r.n, command{Op: opForgetWorkspace, WorkspaceID: id}, nil, func() (struct{}, error) {
		return done(r.n.forgetHere(ctx, id))
	})
	return err
}

// sessionRouter is domain.Sessions on a cluster.
type sessionRouter struct{ n *Node }

func (r sessionRouter) local() domain.Sessions { return r.n.cfg.Local.Sessions }

func (r sessionRouter) Create(ctx context.Context, ws string, req proto.CreateSessionRequest) (proto.Session, error) {
	return routed(ctx, r.n, command{Op: opCreateSession, WorkspaceID: ws}, req, func() (proto.Session, error) {
		return r.local().Create(ctx, ws, req)
	})
}

func (r sessionRouter) List(ctx context.Context, ws string) ([]proto.Session, error) {
	return routed(ctx, r.n, command{Op: opListSessions, WorkspaceID: ws}, nil, func() ([]proto.Session, error) {
		return r.local().List(ctx, ws)
	})
}

func (r sessionRouter) Last(ctx context.Context, ws string) (*string, error) {
	return routed(ctx, r.n, command{Op: opLastSession, WorkspaceID: ws}, nil, func() (*string, error) {
		return r.local().Last(ctx, ws)
	})
}

func (r sessionRouter) Get(ctx context.Context, ws, sid string) (proto.Session, error) {
	return routed(ctx, r.n, command{Op: opGetSession, WorkspaceID: ws, SessionID: sid}, nil, func() (proto.Session, error) {
		return r.local().Get(ctx, ws, sid)
	})
}

func (r sessionRouter) Delete(ctx context.Context, ws, sid string) error {
	_, err := routed(ctx, r.n, command{Op: opDeleteSession, WorkspaceID: ws, SessionID: sid}, nil, func() (struct{}, error) {
		return done(r.local().Delete(ctx, ws, sid))
	})
	return err
}

func (r sessionRouter) Messages(ctx context.Context, ws, sid string) ([]proto.Message, error) {
	return routed(ctx, r.n, command{Op: opMessages, WorkspaceID: ws, SessionID: sid}, nil, func() ([]proto.Message, error) {
		return r.local().Messages(ctx, ws, sid)
	})
}

func (r sessionRouter) Events(ctx context.Context, ws, sid string, after int64, limit int) ([]proto.Event, error) {
	c := command{Op: opSessionEvents, WorkspaceID: ws, SessionID: sid, After: after, Limit: limit}
	return routed(ctx, r.n, c, nil, func() ([]proto.Event, error) {
		return r.local().Events(ctx, ws, sid, after, limit)
	})
}

func (r sessionRouter) Log(ctx context.Context, ws, sid string, req proto.LogRequest) (int64, error) {
	return routed(ctx, r.n, command{Op: opLog, WorkspaceID: ws, SessionID: sid}, req, func() (int64, error) {
		return r.local().Log(ctx, ws, sid, req)
	})
}

func (r sessionRouter) SetModel(ctx context.Context, ws, sid string, req proto.SetModelRequest) (proto.Session, error) {
	return routed(ctx, r.n, command{Op: opSetModel, WorkspaceID: ws, SessionID: sid}, req, func() (proto.Session, error) {
		return r.local().SetModel(ctx, ws, sid, req)
	})
}

func (r sessionRouter) Update(ctx context.Context, ws, sid string, req proto.UpdateSessionRequest) (proto.Session, error) {
	return routed(ctx, r.n, command{Op: opUpdateSession, WorkspaceID: ws, SessionID: sid}, req, func() (proto.Session, error) {
		return r.local().Update(ctx, ws, sid, req)
	})
}

func (r sessionRouter) AllMessages(ctx context.Context, ws, sid string) ([]proto.Message, error) {
	return routed(ctx, r.n, command{Op: opAllMessages, WorkspaceID: ws, SessionID: sid}, nil, func() ([]proto.Message, error) {
		return r.local().AllMessages(ctx, ws, sid)
	})
}

func (r sessionRouter) Fork(ctx context.Context, ws, sid string, req proto.ForkRequest) (proto.Session, error) {
	return routed(ctx, r.n, command{Op: opFork, WorkspaceID: ws, SessionID: sid}, req, func() (proto.Session, error) {
		return r.local().Fork(ctx, ws, sid, req)
	})
}

func (r sessionRouter) Export(ctx context.Context, ws, sid string) (proto.Export, error) {
	return routed(ctx, r.n, command{Op: opExport, WorkspaceID: ws, SessionID: sid}, nil, func() (proto.Export, error) {
		return r.local().Export(ctx, ws, sid)
	})
}

func (r sessionRouter) Import(ctx context.Context, ws string, doc proto.Export) (proto.Session, error) {
	return routed(ctx, r.n, command{Op: opImport, WorkspaceID: ws}, doc, func() (proto.Session, error) {
		return r.local().Import(ctx, ws, doc)
	})
}

// agentRouter is domain.Runs, domain.Pending and domain.MCP on a cluster.
type agentRouter struct{ n *Node }

func (r agentRouter) local() domain.Services { return r.n.cfg.Local }

func (r agentRouter) Prompt(ctx context.Context, ws string, req proto.PromptRequest) (proto.PromptAccepted, error) {
	return routed(ctx, r.n, command{Op: opPrompt, WorkspaceID: ws}, req, func() (proto.PromptAccepted, error) {
		return r.local().Runs.Prompt(ctx, ws, req)
	})
}

func (r agentRouter) Compact(ctx context.Context, ws, sid string) (proto.PromptAccepted, error) {
	return routed(ctx, r.n, command{Op: opCompact, WorkspaceID: ws, SessionID: sid}, nil, func() (proto.PromptAccepted, error) {
		return r.local().Runs.Compact(ctx, ws, sid)
	})
}

func (r agentRouter) Cancel(ctx context.Context, ws, sid string) ([]string, error) {
	return routed(ctx, r.n, command{Op: opCancel, WorkspaceID: ws, SessionID: sid}, nil, func() ([]string, error) {
		return r.local().Runs.Cancel(ctx, ws, sid)
	})
}

func (r agentRouter) Status(ctx context.Context, ws, sid string) (proto.AgentStatus, error) {
	return routed(ctx, r.n, command{Op: opStatus, WorkspaceID: ws, SessionID: sid}, nil, func() (proto.AgentStatus, error) {
		return r.local().Runs.Status(ctx, ws, sid)
	})
}

func (r agentRouter) Resume(ctx context.Context, ws, sid string, req proto.ResumeRequest) (proto.ResumeResponse, error) {
	return routed(ctx, r.n, command{Op: opResume, WorkspaceID: ws, SessionID: sid}, req, func() (proto.ResumeResponse, error) {
		return r.local().Runs.Resume(ctx, ws, sid, req)
	})
}

func (r agentRouter) Pending(ctx context.Context, ws, sid string) (proto.PendingWork, error) {
	return routed(ctx, r.n, command{Op: opPending, WorkspaceID: ws, SessionID: sid}, nil, func() (proto.PendingWork, error) {
		return r.local().Pending.Pending(ctx, ws, sid)
	})
}

func (r agentRouter) Permissions(ctx context.Context, ws string) ([]proto.PermissionRequest, error) {
	return routed(ctx, r.n, command{Op: opPermissions, WorkspaceID: ws}, nil, func() ([]proto.PermissionRequest, error) {
		return r.local().Pending.Permissions(ctx, ws)
	})
}

func (r agentRouter) AnswerPermission(ctx context.Context, ws, rid string, a proto.PermissionAnswer) (string, error) {
	return routed(ctx, r.n, command{Op: opAnswerPermission, WorkspaceID: ws, RequestID: rid}, a, func() (string, error) {
		return r.local().Pending.AnswerPermission(ctx, ws, rid, a)
	})
}

func (r agentRouter) AnswerToolCall(ctx context.Context, ws, rid string, a proto.ToolCallAnswer) error {
	_, err := routed(ctx, r.n, command{Op: opAnswerToolCall, WorkspaceID: ws, RequestID: rid}, a, func() (struct{}, error) {
		return done(r.local().Pending.AnswerToolCall(ctx, ws, rid, a))
	})
	return err
}

func (r agentRouter) MCPServers(ctx context.Context, ws string) ([]proto.MCPServerStatus, error) {
	return routed(ctx, r.n, command{Op: opMCPServers, WorkspaceID: ws}, nil, func() ([]proto.MCPServerStatus, error) {
		return r.local().MCP.MCPServers(ctx, ws)
	})
}

func (r agentRouter) Checkpoints(ctx context.Context, ws, sid string) ([]proto.Checkpoint, error) {
	return routed(ctx, r.n, command{Op: opCheckpoints, WorkspaceID: ws, SessionID: sid}, nil, func() ([]proto.Checkpoint, error) {
		return r.local().Rewinds.Checkpoints(ctx, ws, sid)
	})
}

func (r agentRouter) CheckpointDiff(ctx context.Context, ws, sid, cid string) (proto.CheckpointDiff, error) {
	c := command{Op: opCheckpointDiff, WorkspaceID: ws, SessionID: sid, CheckpointID: cid}
	return routed(ctx, r.n, c, nil, func() (proto.CheckpointDiff, error) {
		return r.local().Rewinds.CheckpointDiff(ctx, ws, sid, cid)
	})
}

func (r agentRouter) Rewind(ctx context.Context, ws, sid string, req proto.RewindRequest) (proto.RewindResult, error) {
	return routed(ctx, r.n, command{Op: opRewind, WorkspaceID: ws, SessionID: sid}, req, func() (proto.RewindResult, error) {
		return r.local().Rewinds.Rewind(ctx, ws, sid, req)
	})
}
