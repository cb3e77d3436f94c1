package httpapi

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/tandem-dev/tandem/internal/auth"
	"github.com/tandem-dev/tandem/internal/store"

	"github.com/tandem-dev/tandem/proto"
)

func (a *API) prompt(w http.ResponseWriter, r *http.Request) {
	var req proto.PromptRequest
	if !a.Decode(w, r, &req) {
		return
	}
	acc, err := a.cfg.Runs.Prompt(caller(r, req.ClientID), chi.URLParam(r, "wid"), req)
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
	acc, err := a.cfg.Runs.Compact(r.Context(), chi.URLParam(r, "wid"), chi.URLParam(r, "sid"))
	noteAudit(r, func(e *store.AuditEntry) { e.RunID = acc.RunID })
	a.Respond(w, r, http.StatusAccepted, acc, err)
}

func (a *API) cancel(w http.ResponseWriter, r *http.Request) {
	var empty struct{}
	if !a.Decode(w, r, &empty) {
		return
	}
	ids, err := a.cfg.Runs.Cancel(r.Context(), chi.URLParam(r, "wid"), chi.URLParam(r, "sid"))
	a.Respond(w, r, http.StatusOK, proto.CancelResponse{CanceledRuns: ids}, err)
}

func (a *API) agentStatus(w http.ResponseWriter, r *http.Request) {
	st, err := a.cfg.Runs.Status(r.Context(), chi.URLParam(r, "wid"), chi.URLParam(r, "sid"))
	a.Respond(w, r, http.StatusOK, st, err)
}

func (a *API) resume(w http.ResponseWriter, r *http.Request) {
	var req proto.ResumeRequest
	if !a.Decode(w, r, &req) {
		return
	}
	res, err := a.cfg.Runs.Resume(caller(r, req.ClientID), chi.URLParam(r, "wid"), chi.URLParam(r, "sid"), req)
	a.Respond(w, r, http.StatusOK, res, err)
}

func (a *API) pending(w http.ResponseWriter, r *http.Request) {
	res, err := a.cfg.Pending.Pending(r.Context(), chi.URLParam(r, "wid"), chi.URLParam(r, "sid"))
	a.Respond(w, r, http.StatusOK, res, err)
}

func (a *API) permissions(w http.ResponseWriter, r *http.Request) {
	list, err := a.cfg.Pending.Permissions(r.Context(), chi.URLParam(r, "wid"))
	a.Respond(w, r, http.StatusOK, proto.PermissionList{Permissions: list}, err)
}

func (a *API) answerPermission(w http.ResponseWriter, r *http.Request) {
	var req proto.PermissionAnswer
	if !a.Decode(w, r, &req) {
		return
	}
	result, err := a.cfg.Pending.AnswerPermission(caller(r, req.ClientID), chi.URLParam(r, "wid"), chi.URLParam(r, "rid"), req)
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
	err := a.cfg.Pending.AnswerToolCall(caller(r, req.ClientID), chi.URLParam(r, "wid"), chi.URLParam(r, "rid"), req)
	noteAudit(r, func(e *store.AuditEntry) { e.ClientID, e.Detail = req.ClientID, "request "+chi.URLParam(r, "rid") })
	a.Respond(w, r, http.StatusOK, proto.ToolCallAnswered{Resolved: true}, err)
}

func (a *API) mcpServers(w http.ResponseWriter, r *http.Request) {
	list, err := a.cfg.MCP.MCPServers(r.Context(), chi.URLParam(r, "wid"))
	a.Respond(w, r, http.StatusOK, proto.MCPServerList{Servers: list}, err)
}
