package httpapi

import (
	"context"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/tandem-dev/tandem/proto"
)

// Agent runs prompts; the coordinator implements it.
type Agent interface {
	Prompt(ctx context.Context, workspaceID string, req proto.PromptRequest) (proto.PromptAccepted, error)
	Cancel(ctx context.Context, workspaceID, sessionID string) ([]string, error)
	Status(ctx context.Context, workspaceID, sessionID string) (proto.AgentStatus, error)
}

func (a *API) prompt(w http.ResponseWriter, r *http.Request) {
	var req proto.PromptRequest
	if !a.Decode(w, r, &req) {
		return
	}
	acc, err := a.cfg.Agent.Prompt(r.Context(), chi.URLParam(r, "wid"), req)
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
