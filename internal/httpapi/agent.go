package httpapi

import (
	"context"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/tandem-dev/tandem/internal/auth"
	"github.com/tandem-dev/tandem/internal/store"

	"github.com/tandem-dev/tandem/proto"
)

// Agent runs prompts; the coordinator implements it.
type Agent interface {
	Prompt(ctx context.Context, workspaceID string, req proto.PromptRequest) (proto.PromptAccepted, error)
	// Compact queues a compaction run of the session.
	Compact(ctx context.Context, workspaceID, sessionID string) (proto.PromptAccepted, error)
	Cancel(ctx context.Context, workspaceID, sessionID string) ([]string, error)
	Status(ctx context.Context, workspaceID, sessionID string) (proto.AgentStatus, error)
	Resume(ctx context.Context, workspaceID, sessionID string, req proto.ResumeRequest) (proto.ResumeResponse, error)
	Pending(ctx context.Context, workspaceID, sessionID string) (proto.PendingWork, error)
	Permissions(ctx context.Context, workspaceID string) ([]proto.PermissionRequest, error)
	AnswerPermission(ctx context.Context, workspaceID, requestID string, a proto.PermissionAnswer) (string, error)
	AnswerToolCall(ctx context.Context, workspaceID, requestID string, a proto.ToolCallAnswer) error
	// MCPServers lists the MCP servers of the workspace and its sessions.
	MCPServers(ctx context.Context, workspaceID string) ([]proto.MCPServerStatus, error)
}

func (a *API) prompt(w http.ResponseWriter, r *http.Request) {
	var req proto.PromptRequest
	if !a.Decode(w, r, &req) {
		return
	}
	acc, err := a.cfg.Agent.Prompt(auth.WithClient(r.Context(), req.ClientID), chi.URLParam(r, "wid"), req)
	noteAudit(r, func(e *store.AuditEntry) {
		e.SessionID, e.ClientID, e.RunID = req.SessionID, req.ClientID, acc.RunID
		if req.Delivery == proto.DeliverySteer {
			e.Action = string(auth.Steer)
		}
	})
	a.Respond(w, r, http.StatusAccepted, acc, err)
}

func (a *API) compact(w http.ResponseWriter, r *http.Request) {
	var empty struct{}
	if !a.Decode(w, r, &empty) {
		return
	}
	acc, err := a.cfg.Agent.Compact(r.Context(), chi.URLParam(r, "wid"), chi.URLParam(r, "sid"))
	noteAudit(r, func(e *store.AuditEntry) { e.RunID = acc.RunID })
	a.Respond(w, r, http.StatusAccepted, acc, err)
}

func (a *API) cancel(w http.ResponseWriter, r *http.Request) {
	var empty struct{}
	if !a.Decode(w, r, &empty) {
		return
	}
	ids, err := a.cfg.Agent.Cancel(r.Context(), chi.URLParam(r, "wid"), chi.URLParam(r, "sid"))
	a.Respond(w, r, http.StatusOK, proto.CancelResponse{CanceledRuns: ids}, err)
}

func (a *API) agentStatus(w http.ResponseWriter, r *http.Request) {
	st, err := a.cfg.Agent.Status(r.Context(), chi.URLParam(r, "wid"), chi.URLParam(r, "sid"))
	a.Respond(w, r, http.StatusOK, st, err)
}

func (a *API) resume(w http.ResponseWriter, r *http.Request) {
	var req proto.ResumeRequest
	if !a.Decode(w, r, &req) {
		return
	}
	res, err := a.cfg.Agent.Resume(auth.WithClient(r.Context(), req.ClientID), chi.URLParam(r, "wid"), chi.URLParam(r, "sid"), req)
	a.Respond(w, r, http.StatusOK, res, err)
}

func (a *API) pending(w http.ResponseWriter, r *http.Request) {
	res, err := a.cfg.Agent.Pending(r.Context(), chi.URLParam(r, "wid"), chi.URLParam(r, "sid"))
	a.Respond(w, r, http.StatusOK, res, err)
}

func (a *API) permissions(w http.ResponseWriter, r *http.Request) {
	list, err := a.cfg.Agent.Permissions(r.Context(), chi.URLParam(r, "wid"))
	a.Respond(w, r, http.StatusOK, proto.PermissionList{Permissions: list}, err)
}

func (a *API) answerPermission(w http.ResponseWriter, r *http.Request) {
	var req proto.PermissionAnswer
	if !a.Decode(w, r, &req) {
		return
	}
	result, err := a.cfg.Agent.AnswerPermission(auth.WithClient(r.Context(), req.ClientID), chi.URLParam(r, "wid"), chi.URLParam(r, "rid"), req)
	noteAudit(r, func(e *store.AuditEntry) {
		e.ClientID, e.Detail = req.ClientID, "request "+chi.URLParam(r, "rid")+", "+req.Decision
	})
	a.Respond(w, r, http.StatusOK, proto.PermissionAnswered{Resolved: true, Result: result}, err)
}

func (a *API) answerToolCall(w http.ResponseWriter, r *http.Request) {
	var req proto.ToolCallAnswer
	if !a.Decode(w, r, &req) {
		return
	}
	err := a.cfg.Agent.AnswerToolCall(auth.WithClient(r.Context(), req.ClientID), chi.URLParam(r, "wid"), chi.URLParam(r, "rid"), req)
	noteAudit(r, func(e *store.AuditEntry) { e.ClientID, e.Detail = req.ClientID, "request "+chi.URLParam(r, "rid") })
	a.Respond(w, r, http.StatusOK, proto.ToolCallAnswered{Resolved: true}, err)
}

func (a *API) mcpServers(w http.ResponseWriter, r *http.Request) {
	list, err := a.cfg.Agent.MCPServers(r.Context(), chi.URLParam(r, "wid"))
	a.Respond(w, r, http.StatusOK, proto.MCPServerList{Servers: list}, err)
}
