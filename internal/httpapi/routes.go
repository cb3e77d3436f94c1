package httpapi

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/tandem-dev/tandem/internal/apierr"
	"github.com/tandem-dev/tandem/internal/auth"
	"github.com/tandem-dev/tandem/internal/domain"
	"github.com/tandem-dev/tandem/internal/httpapi/sse"
	"github.com/tandem-dev/tandem/internal/store"
	"github.com/tandem-dev/tandem/proto"
)

// Decode reads a strict JSON body into v, writing the error answer itself when
// it fails; routes mounted by other packages use it too.
func (a *API) Decode(w http.ResponseWriter, r *http.Request, v any) bool {
	if err := decode(r, v); err != nil {
		if errors.Is(err, errBodyTimeout) {
			// What is left of the body must not be read as the next request.
			w.Header().Set("Connection", "close")
			err = apierr.Errorf(proto.CodeInvalidJSON, "the request body did not arrive within %s of its headers", a.cfg.BodyTimeout)
		}
		a.writeError(w, r, err)
		return false
	}
	return true
}

// Respond writes v as JSON with status, or the error answer for err.
func (a *API) Respond(w http.ResponseWriter, r *http.Request, status int, v any, err error) {
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	if status == http.StatusNoContent {
		w.WriteHeader(status)
		return
	}
	writeJSON(w, status, v)
}

func (a *API) createWorkspace(w http.ResponseWriter, r *http.Request) {
	var req proto.CreateWorkspaceRequest
	if !a.Decode(w, r, &req) {
		return
	}
	ws, created, err := a.cfg.Workspaces.Open(r.Context(), req)
	noteAudit(r, func(e *store.AuditEntry) { e.WorkspaceID = ws.ID })
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	a.Respond(w, r, status, ws, err)
}

func (a *API) listWorkspaces(w http.ResponseWriter, r *http.Request) {
	list, err := a.cfg.Workspaces.List(r.Context())
	a.Respond(w, r, http.StatusOK, proto.WorkspaceList{Workspaces: list}, err)
}

func (a *API) getWorkspace(w http.ResponseWriter, r *http.Request) {
	ws, err := a.cfg.Workspaces.Get(r.Context(), chi.URLParam(r, "wid"))
	a.Respond(w, r, http.StatusOK, ws, err)
}

func (a *API) deleteWorkspace(w http.ResponseWriter, r *http.Request) {
	var empty struct{}
	if !a.Decode(w, r, &empty) {
		return
	}
	err := a.cfg.Workspaces.Delete(r.Context(), chi.URLParam(r, "wid"))
	a.Respond(w, r, http.StatusNoContent, nil, err)
}

// forgetWorkspace removes a workspace the server should no longer know
// (typically one whose directory is gone): 204, then 404 for its id.
func (a *API) forgetWorkspace(w http.ResponseWriter, r *http.Request) {
	var empty struct{}
	if !a.Decode(w, r, &empty) {
		return
	}
	err := a.cfg.Workspaces.Forget(r.Context(), chi.URLParam(r, "wid"))
	a.Respond(w, r, http.StatusNoContent, nil, err)
}

// streamEvents serves a workspace's event stream (see streamDetached).
// Where the stream cannot take its connection over, it parks this
// goroutine for as long as the client stays, under the whole middleware
// chain: the work around the wait is done in functions of their own, so
// that what stays on the stack is small and the runtime can shrink it (it
// does when a parked goroutine uses under a quarter of its stack).
func (a *API) streamEvents(w http.ResponseWriter, r *http.Request) {
	st := a.streamRequest(w, r)
	if st == nil {
		return
	}
	a.streamDetached(w, r, st)
}

// streamDetached serves the stream on a goroutine of its own, which takes
// the connection over from net/http as the stream opens (sse.Conn): the
// handler then returns, and net/http lets go of the request, its buffers
// and its goroutines; an idle stream holds half the memory it held served
// from its handler. A refusal before the stream opens is answered here;
// where the connection cannot be taken over (HTTP/2), the handler stays
// until the stream ends, as a handler does. Wait waits for the stream.
//
//go:noinline
func (a *API) streamDetached(w http.ResponseWriter, r *http.Request, st *streamCall) {
	ctx, cancel := context.WithCancel(auth.WithIdentity(context.WithoutCancel(r.Context()), st.id))
	sink := sse.NewConn(w, cancel)
	ended := make(chan error, 1)
	unwatch := a.auth.Watch(st.id, cancel)
	a.enter()
	go func() {
		defer a.leave()
		defer unwatch()
		err := st.stream.Serve(ctx, sink)
		cancel()
		select {
		case <-sink.Opened():
			if sink.TakenOver() {
				_ = sink.Close()
				a.streamEnded(nil, nil, st, err)
				return
			}
		default:
		}
		ended <- err
	}()
	opened, gone := sink.Opened(), r.Context().Done()
	for {
		select {
		case <-opened:
			if sink.TakenOver() {
				return
			}
			opened = nil // written through w, which lasts as long as this handler
		case <-gone:
			cancel()
			gone = nil
		case err := <-ended:
			a.streamEnded(w, r, st, err)
			return
		}
	}
}

// streamCall is a stream request, decoded and subscribed.
type streamCall struct {
	stream      domain.Stream
	workspaceID string
	clientID    string
	id          auth.Identity // who opened it: the stream ends when its token does
}

// streamRequest admits and decodes a stream request, answering it itself
// when it is refused or bad. The route is outside the middlewares of the
// other /v1 routes (see Handler), so it checks what they check first.
//
//go:noinline
func (a *API) streamRequest(w http.ResponseWriter, r *http.Request) *streamCall {
	if a.refused(w, r) {
		return nil
	}
	r, _, done := a.admit(w, r)
	if r == nil {
		return nil
	}
	done()
	st, err := a.subscribe(r)
	if err != nil {
		a.writeError(w, r, err)
		return nil
	}
	return st
}

func (a *API) subscribe(r *http.Request) (*streamCall, error) {
	q := r.URL.Query()
	n, resume, err := parseLastEventID(r.Header.Get("Last-Event-ID"), q.Get("last_event_id"))
	if err != nil {
		return nil, err
	}
	id, _ := auth.FromContext(r.Context())
	req := domain.StreamRequest{ClientID: q.Get("client_id"), SessionID: q.Get("session_id"), LastEventID: n, Resume: resume, Name: id.Name}
	wid := chi.URLParam(r, "wid")
	stream, err := a.cfg.Streams.Subscribe(caller(r, req.ClientID), wid, req)
	if err != nil {
		return nil, err
	}
	return &streamCall{stream: stream, workspaceID: wid, clientID: req.ClientID, id: id}, nil
}

// streamEnded answers a claim refusal, which comes before the stream
// starts, and logs why a stream ended; w is nil once the stream took its
// connection over (there is nothing left to answer).
//
//go:noinline
func (a *API) streamEnded(w http.ResponseWriter, r *http.Request, st *streamCall, err error) {
	var te *apierr.Error
	if w != nil && errors.As(err, &te) {
		a.writeError(w, r, err)
		return
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		a.log.Debug("stream ended", "workspace_id", st.workspaceID, "client_id", st.clientID, "err", err)
	}
}

// parseLastEventID reads the resume point of a stream: the Last-Event-ID
// header, else the last_event_id query parameter (for clients that cannot set
// headers). resume is false when neither is given.
func parseLastEventID(header, query string) (n int64, resume bool, err error) {
	last := strings.TrimSpace(header)
	if last == "" {
		last = strings.TrimSpace(query)
	}
	if last == "" {
		return 0, false, nil
	}
	n, perr := strconv.ParseInt(last, 10, 64)
	if perr != nil || n < 0 {
		if len(last) > 64 {
			last = last[:64] + "..."
		}
		return 0, false, apierr.Invalid("Last-Event-ID must be a non-negative integer, got %q", last)
	}
	return n, true, nil
}

func (a *API) createSession(w http.ResponseWriter, r *http.Request) {
	var req proto.CreateSessionRequest
	if !a.Decode(w, r, &req) {
		return
	}
	s, err := a.cfg.Sessions.Create(caller(r, req.ClientID), chi.URLParam(r, "wid"), req)
	noteAudit(r, func(e *store.AuditEntry) { e.SessionID, e.ClientID = s.ID, req.ClientID })
	a.Respond(w, r, http.StatusCreated, s, err)
}

func (a *API) listSessions(w http.ResponseWriter, r *http.Request) {
	list, err := a.cfg.Sessions.List(r.Context(), chi.URLParam(r, "wid"))
	a.Respond(w, r, http.StatusOK, proto.SessionList{Sessions: list}, err)
}

func (a *API) lastSession(w http.ResponseWriter, r *http.Request) {
	id, err := a.cfg.Sessions.Last(r.Context(), chi.URLParam(r, "wid"))
	a.Respond(w, r, http.StatusOK, proto.LastSession{SessionID: id}, err)
}

func (a *API) getSession(w http.ResponseWriter, r *http.Request) {
	s, err := a.cfg.Sessions.Get(r.Context(), chi.URLParam(r, "wid"), chi.URLParam(r, "sid"))
	a.Respond(w, r, http.StatusOK, s, err)
}

func (a *API) deleteSession(w http.ResponseWriter, r *http.Request) {
	var empty struct{}
	if !a.Decode(w, r, &empty) {
		return
	}
	err := a.cfg.Sessions.Delete(r.Context(), chi.URLParam(r, "wid"), chi.URLParam(r, "sid"))
	a.Respond(w, r, http.StatusNoContent, nil, err)
}

func (a *API) listMessages(w http.ResponseWriter, r *http.Request) {
	list := a.cfg.Sessions.Messages
	if v := r.URL.Query().Get("include_rewound"); v == "true" || v == "1" {
		list = a.cfg.Sessions.AllMessages
	}
	msgs, err := list(r.Context(), chi.URLParam(r, "wid"), chi.URLParam(r, "sid"))
	a.Respond(w, r, http.StatusOK, proto.MessageList{Messages: msgs}, err)
}

func (a *API) listSessionEvents(w http.ResponseWriter, r *http.Request) {
	after, limit, err := pageQuery(r)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	evs, err := a.cfg.Sessions.Events(r.Context(), chi.URLParam(r, "wid"), chi.URLParam(r, "sid"), after, int(limit))
	a.Respond(w, r, http.StatusOK, proto.EventList{Events: evs}, err)
}

// pageQuery reads the paging parameters ?after=N&limit=N of a list.
func pageQuery(r *http.Request) (after, limit int64, err error) {
	q := r.URL.Query()
	if after, err = queryInt(q.Get("after"), "after"); err != nil {
		return 0, 0, err
	}
	limit, err = queryInt(q.Get("limit"), "limit")
	return after, limit, err
}

func queryInt(v, name string) (int64, error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, apierr.Invalid("%s must be a non-negative integer, got %q", name, v)
	}
	return n, nil
}

func (a *API) logToSession(w http.ResponseWriter, r *http.Request) {
	var req proto.LogRequest
	if !a.Decode(w, r, &req) {
		return
	}
	seq, err := a.cfg.Sessions.Log(r.Context(), chi.URLParam(r, "wid"), chi.URLParam(r, "sid"), req)
	a.Respond(w, r, http.StatusOK, proto.LogResponse{Seq: seq}, err)
}

func (a *API) setModel(w http.ResponseWriter, r *http.Request) {
	var req proto.SetModelRequest
	if !a.Decode(w, r, &req) {
		return
	}
	s, err := a.cfg.Sessions.SetModel(r.Context(), chi.URLParam(r, "wid"), chi.URLParam(r, "sid"), req)
	a.Respond(w, r, http.StatusOK, s, err)
}

func (a *API) updateSession(w http.ResponseWriter, r *http.Request) {
	var req proto.UpdateSessionRequest
	if !a.Decode(w, r, &req) {
		return
	}
	s, err := a.cfg.Sessions.Update(r.Context(), chi.URLParam(r, "wid"), chi.URLParam(r, "sid"), req)
	a.Respond(w, r, http.StatusOK, s, err)
}
