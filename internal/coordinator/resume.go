package coordinator

import (
	"context"
	"fmt"

	"github.com/tandem-dev/tandem/internal/agent"
	"github.com/tandem-dev/tandem/internal/apierr"
	"github.com/tandem-dev/tandem/internal/session"
	"github.com/tandem-dev/tandem/internal/workspace"
	"github.com/tandem-dev/tandem/proto"
)

// Resume attaches a client to a session: it registers the client's tools and
// provider, decides whether the session was active (a run in memory, or
// another of its clients attached), and settles suspended work: revived and
// announced again when asked to continue it, interrupted otherwise. Pending
// requests of an active session stay answerable whatever the flag.
func (c *Coordinator) Resume(ctx context.Context, wsID, sessionID string, req proto.ResumeRequest) (proto.ResumeResponse, error) {
	ws, sess, err := c.cfg.Sessions.Lookup(ctx, wsID, sessionID)
	if err != nil {
		return proto.ResumeResponse{}, err
	}
	if err := apierr.CheckUUID("client_id", req.ClientID); err != nil {
		return proto.ResumeResponse{}, err
	}
	if err := session.ValidProvider(req.Provider); err != nil {
		return proto.ResumeResponse{}, err
	}
	servers, err := session.ParseMCPServers(req.MCPServers)
	if err != nil {
		return proto.ResumeResponse{}, err
	}
	// Tools first: a tool conflict refuses the resume before anything changed.
	if err := c.cfg.Tools.Register(ws.ID, sess.ID, req.ClientID, req.Tools); err != nil {
		return proto.ResumeResponse{}, err
	}
	if req.Provider != nil {
		if err := c.cfg.Sessions.SetProvider(ctx, ws.ID, sess.ID, req.Provider); err != nil {
			return proto.ResumeResponse{}, err
		}
	}
	if req.MCPServers != nil {
		// Given, even empty: it replaces the session's own servers.
		if err := c.cfg.Sessions.SetMCPServers(ctx, ws.ID, sess.ID, servers); err != nil {
			return proto.ResumeResponse{}, err
		}
		c.mcp.Found(sess.ID)
	}
	active := c.inMemory(sess.ID) || c.cfg.Sessions.OtherClientAttached(ws, sess.ID, req.ClientID)
	c.cfg.Sessions.Join(ws, sess.ID, req.ClientID)

	if _, err := ws.Emit(ctx, workspace.Draft{Type: proto.EventSessionResumed, SessionID: sess.ID, Data: proto.SessionResumed{
		ClientID: req.ClientID, ContinuePendingWork: req.ContinuePendingWork, SessionWasActive: active,
	}}); err != nil {
		return proto.ResumeResponse{}, err
	}
	if !active {
		if err := c.settleSuspended(ctx, ws, sess.ID, req.ContinuePendingWork); err != nil {
			return proto.ResumeResponse{}, err
		}
	}
	pend, err := c.cfg.Broker.Pending(ctx, ws.ID, sess.ID)
	if err != nil {
		return proto.ResumeResponse{}, fmt.Errorf("list pending work: %w", err)
	}
	view, err := c.cfg.Sessions.Get(ctx, ws.ID, sess.ID)
	if err != nil {
		return proto.ResumeResponse{}, err
	}
	return proto.ResumeResponse{Session: view, Pending: pend}, nil
}

// settleSuspended revives or interrupts the session's suspended runs. The
// interruption of requests happens before Resume answers, so an answer sent
// right after it already gets 409.
func (c *Coordinator) settleSuspended(ctx context.Context, ws *workspace.Workspace, sessionID string, cont bool) error {
	runs, err := c.cfg.Broker.UnfinishedRuns(ctx, ws.ID, sessionID)
	if err != nil {
		return fmt.Errorf("list suspended runs: %w", err)
	}
	for _, runID := range runs {
		if cont {
			c.Revive(ws, sessionID, runID, agent.ReviveContinue, true)
			continue
		}
		if err := c.cfg.Broker.Interrupt(ctx, ws, runID); err != nil {
			return fmt.Errorf("interrupt run %s: %w", runID, err)
		}
		c.Revive(ws, sessionID, runID, agent.ReviveInterrupt, false)
	}
	return nil
}

// inMemory reports whether the session has a run in memory, running,
// parked or queued.
func (c *Coordinator) inMemory(sessionID string) bool {
	busy, queued := c.State("", sessionID)
	return busy || queued > 0
}

// Pending lists the open requests of a session.
func (c *Coordinator) Pending(ctx context.Context, wsID, sessionID string) (proto.PendingWork, error) {
	ws, sess, err := c.cfg.Sessions.Lookup(ctx, wsID, sessionID)
	if err != nil {
		return proto.PendingWork{}, err
	}
	return c.cfg.Broker.Pending(ctx, ws.ID, sess.ID)
}

// Permissions lists the open permission requests of a workspace.
func (c *Coordinator) Permissions(ctx context.Context, wsID string) ([]proto.PermissionRequest, error) {
	ws, err := c.cfg.Workspaces.Get(ctx, wsID)
	if err != nil {
		return nil, err
	}
	pend, err := c.cfg.Broker.Pending(ctx, ws.ID, "")
	return pend.Permissions, err
}

// AnswerPermission resolves a permission request.
func (c *Coordinator) AnswerPermission(ctx context.Context, wsID, requestID string, a proto.PermissionAnswer) (string, error) {
	ws, err := c.cfg.Workspaces.Get(ctx, wsID)
	if err != nil {
		return "", err
	}
	return c.cfg.Broker.AnswerPermission(ctx, ws, requestID, a)
}

// AnswerToolCall resolves a client tool call.
func (c *Coordinator) AnswerToolCall(ctx context.Context, wsID, requestID string, a proto.ToolCallAnswer) error {
	ws, err := c.cfg.Workspaces.Get(ctx, wsID)
	if err != nil {
		return err
	}
	return c.cfg.Broker.AnswerToolCall(ctx, ws, requestID, a)
}
