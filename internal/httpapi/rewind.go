package httpapi

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/tandem-dev/tandem/proto"
)

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
	s, err := a.cfg.Sessions.Import(r.Context(), chi.URLParam(r, "wid"), doc)
	a.Respond(w, r, http.StatusCreated, s, err)
}

func (a *API) listCheckpoints(w http.ResponseWriter, r *http.Request) {
	list, err := a.cfg.Rewinds.Checkpoints(r.Context(), chi.URLParam(r, "wid"), chi.URLParam(r, "sid"))
	a.Respond(w, r, http.StatusOK, proto.CheckpointList{Checkpoints: list}, err)
}

func (a *API) checkpointDiff(w http.ResponseWriter, r *http.Request) {
	d, err := a.cfg.Rewinds.CheckpointDiff(r.Context(), chi.URLParam(r, "wid"), chi.URLParam(r, "sid"), chi.URLParam(r, "cid"))
	a.Respond(w, r, http.StatusOK, d, err)
}

func (a *API) rewind(w http.ResponseWriter, r *http.Request) {
	var req proto.RewindRequest
	if !a.Decode(w, r, &req) {
		return
	}
	res, err := a.cfg.Rewinds.Rewind(r.Context(), chi.URLParam(r, "wid"), chi.URLParam(r, "sid"), req)
	a.Respond(w, r, http.StatusOK, res, err)
}
