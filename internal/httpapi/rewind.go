package httpapi

import (
	"context"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/tandem-dev/tandem/proto"
)

// Rewinder keeps checkpoints and rewinds sessions (contract section 11);
// the coordinator implements it, as it owns the runs a rewind must not
// overlap.
type Rewinder interface {
	Checkpoints(ctx context.Context, workspaceID, sessionID string) ([]proto.Checkpoint, error)
	CheckpointDiff(ctx context.Context, workspaceID, sessionID, checkpointID string) (proto.CheckpointDiff, error)
	Rewind(ctx context.Context, workspaceID, sessionID string, req proto.RewindRequest) (proto.RewindResult, error)
}

// routeRewinds mounts the routes of section 11 under .../sessions/{sid}.
func (a *API) routeRewinds(r chi.Router) {
	r.Post("/fork", a.forkSession)
	r.Get("/export", a.exportSession)
	r.Get("/checkpoints", a.listCheckpoints)
	r.Get("/checkpoints/{cid}/diff", a.checkpointDiff)
	r.Post("/rewind", a.rewind)
}

func (a *API) forkSession(w http.ResponseWriter, r *http.Request) {
	var req proto.ForkRequest
	if !a.Decode(w, r, &req) {
		return
	}
	s, err := a.cfg.Sessions.Fork(r.Context(), chi.URLParam(r, "wid"), chi.URLParam(r, "sid"), req)
	a.Respond(w, r, http.StatusCreated, s, err)
}

func (a *API) exportSession(w http.ResponseWriter, r *http.Request) {
	doc, err := a.cfg.Sessions.Export(r.Context(), chi.URLParam(r, "wid"), chi.URLParam(r, "sid"))
	a.Respond(w, r, http.StatusOK, doc, err)
}

func (a *API) importSession(w http.ResponseWriter, r *http.Request) {
	var doc proto.Export
	if !a.Decode(w, r, &doc) {
		return
	}
	allowAll := a.cfg.MayAllowAll != nil && a.cfg.MayAllowAll(r)
	s, err := a.cfg.Sessions.Import(r.Context(), chi.URLParam(r, "wid"), doc, allowAll)
	a.Respond(w, r, http.StatusCreated, s, err)
}

func (a *API) listCheckpoints(w http.ResponseWriter, r *http.Request) {
	list, err := a.rewinder().Checkpoints(r.Context(), chi.URLParam(r, "wid"), chi.URLParam(r, "sid"))
	a.Respond(w, r, http.StatusOK, proto.CheckpointList{Checkpoints: list}, err)
}

func (a *API) checkpointDiff(w http.ResponseWriter, r *http.Request) {
	d, err := a.rewinder().CheckpointDiff(r.Context(), chi.URLParam(r, "wid"), chi.URLParam(r, "sid"), chi.URLParam(r, "cid"))
	a.Respond(w, r, http.StatusOK, d, err)
}

func (a *API) rewind(w http.ResponseWriter, r *http.Request) {
	var req proto.RewindRequest
	if !a.Decode(w, r, &req) {
		return
	}
	res, err := a.rewinder().Rewind(r.Context(), chi.URLParam(r, "wid"), chi.URLParam(r, "sid"), req)
	a.Respond(w, r, http.StatusOK, res, err)
}

// rewinder is the Agent's Rewinder; every Agent of a server has one.
func (a *API) rewinder() Rewinder { return a.cfg.Agent.(Rewinder) }
