package cluster

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/tandem-dev/tandem/internal/store"
	"github.com/tandem-dev/tandem/proto"
)

// maxServing bounds the forwarded requests a node answers at once.
const maxServing = 1024

// forwardedHeader marks a request forwarded by another node: it is served
// where it arrives, never forwarded again.
const forwardedHeader = "X-Tandem-Forwarded-By"

// subject is where a node takes the requests forwarded to it. Node ids may
// hold any character; hex keeps the subject a single token.
func subject(nodeID string) string {
	return "tandem.node." + hex.EncodeToString([]byte(nodeID)) + ".http"
}

// forwarded is a request on its way to the owner, and its answer back.
type forwarded struct {
	Method string      `json:"method,omitempty"`
	URL    string      `json:"url,omitempty"`
	Status int         `json:"status,omitempty"`
	Header http.Header `json:"header"`
	Body   []byte      `json:"body,omitempty"`
}

// workspaceOf returns the workspace a request acts on, when it is one the
// owner must serve: every route under /v1/workspaces/{id}, but the event
// stream, which any node serves from the bus.
func workspaceOf(r *http.Request) (string, bool) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/v1/workspaces/")
	if !ok || r.Method == http.MethodOptions {
		return "", false
	}
	id, tail, _ := strings.Cut(rest, "/")
	if _, err := uuid.Parse(id); err != nil {
		return "", false
	}
	if tail == "events" && r.Method == http.MethodGet {
		return "", false
	}
	return id, true
}

func (n *Node) authorized(r *http.Request) bool {
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && subtle.ConstantTimeCompare([]byte(got), []byte(n.cfg.Token)) == 1
}

// Handler routes the requests next would serve: those acting on a
// workspace another node owns go to that node, and while nobody can own it
// they get 503 workspace_unavailable. The rest, and everything this node
// owns, go to next.
func (n *Node) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/workspaces" && r.Method == http.MethodPost && r.Header.Get(forwardedHeader) == "" && n.authorized(r) {
			n.open(w, r, next)
			return
		}
		if (r.URL.Path == "/v1/workspaces" || r.URL.Path == "/v1/workspaces/") && r.Method == http.MethodGet && n.authorized(r) {
			n.list(w, r, next) // the owners' view (views.go)
			return
		}
		id, ok := workspaceOf(r)
		if !ok || r.Header.Get(forwardedHeader) != "" || !n.authorized(r) {
			next.ServeHTTP(w, r)
			return
		}
		owner, err := n.route(r.Context(), id)
		switch {
		case errors.Is(err, store.ErrNotFound):
			next.ServeHTTP(w, r) // the API's 404
			return
		case err != nil:
			n.log.Warn("route request", "workspace_id", id, "err", err)
			unavailable(w, id)
			return
		case owner == n.cfg.NodeID:
			next.ServeHTTP(w, r)
			return
		}
		n.forward(w, r, id, owner)
	})
}

// open serves POST /v1/workspaces here, then makes sure the workspace has
// an owner and holds it open there too: the create grace is a claim of
// the cluster, not of the node that got the request.
func (n *Node) open(w http.ResponseWriter, r *http.Request, next http.Handler) {
	rec := &recorder{header: http.Header{}}
	next.ServeHTTP(rec, r)
	var ws proto.Workspace
	if (rec.status == http.StatusOK || rec.status == http.StatusCreated) && json.Unmarshal(rec.body.Bytes(), &ws) == nil {
		n.hold(r.Context(), ws.ID, ws.Path)
	}
	for k, vs := range rec.header {
		w.Header()[k] = vs
	}
	w.WriteHeader(rec.status)
	_, _ = w.Write(rec.body.Bytes())
}

// hold opens the workspace on its owner (taking it when nobody owns it)
// for the create grace, as POST /v1/workspaces does on one server.
func (n *Node) hold(ctx context.Context, workspaceID, path string) {
	owner, err := n.route(ctx, workspaceID)
	if err != nil || owner == n.cfg.NodeID {
		return // taken here: the takeover held it open
	}
	body, _ := json.Marshal(proto.CreateWorkspaceRequest{Path: path})
	hdr := http.Header{}
	hdr.Set("Authorization", "Bearer "+n.cfg.Token)
	hdr.Set("Content-Type", "application/json")
	hdr.Set(forwardedHeader, n.cfg.NodeID)
	req, _ := json.Marshal(forwarded{Method: http.MethodPost, URL: "/v1/workspaces", Header: hdr, Body: body})
	ctx, cancel := context.WithTimeout(ctx, n.cfg.Tick*5)
	defer cancel()
	if _, err := n.cfg.NATS.RequestWithContext(ctx, subject(owner), req); err != nil {
		n.forget(workspaceID)
		n.log.Debug("hold workspace open on its owner", "workspace_id", workspaceID, "owner", owner, "err", err)
	}
}

func unavailable(w http.ResponseWriter, workspaceID string) {
	writeError(w, http.StatusServiceUnavailable, proto.CodeWorkspaceUnavailable,
		"workspace "+workspaceID+" has no owner right now (its owner is being replaced); try again in a few seconds")
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(proto.ErrorBody{Error: proto.ErrorDetail{Code: code, Message: msg}})
}

// forward sends r to the owner and writes its answer.
func (n *Node) forward(w http.ResponseWriter, r *http.Request, workspaceID, owner string) {
	limit := n.cfg.NATS.MaxPayload() - 64<<10 // room for the envelope
	body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		writeError(w, http.StatusBadRequest, proto.CodeInvalidArgument, "reading the request body: "+err.Error())
		return
	}
	if int64(len(body)) > limit {
		writeError(w, http.StatusRequestEntityTooLarge, proto.CodeBodyTooLarge,
			"this node forwards bodies of at most the bus's message size; send large prompts to the workspace's owner")
		return
	}
	hdr := r.Header.Clone()
	// Checked here; the owner's own origin is another.
	hdr.Del("Origin")
	hdr.Set(forwardedHeader, n.cfg.NodeID)
	req, _ := json.Marshal(forwarded{Method: r.Method, URL: r.URL.RequestURI(), Header: hdr, Body: body})
	ctx, cancel := context.WithTimeout(r.Context(), n.cfg.ForwardTimeout)
	defer cancel()
	msg, err := n.cfg.NATS.RequestWithContext(ctx, subject(owner), req)
	if err != nil {
		// No responders: the owner died or left; its lease runs out soon.
		n.forget(workspaceID)
		n.log.Warn("forward request", "workspace_id", workspaceID, "owner", owner, "err", err)
		unavailable(w, workspaceID)
		return
	}
	var resp forwarded
	if err := json.Unmarshal(msg.Data, &resp); err != nil || resp.Status == 0 {
		unavailable(w, workspaceID)
		return
	}
	if resp.Status == http.StatusServiceUnavailable {
		n.forget(workspaceID) // it may have lost the workspace: ask again next time
	}
	for k, vs := range resp.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.WriteHeader(resp.Status)
	_, _ = w.Write(resp.Body)
}

// serveForwarded answers a request another node forwarded here.
func (n *Node) serveForwarded(m *nats.Msg) {
	select {
	case n.serving <- struct{}{}:
	default:
		n.replyBusy(m)
		return
	}
	if !n.spawn(func() { n.answer(m) }) {
		<-n.serving
		n.replyBusy(m)
	}
}

// replyBusy answers a request this node cannot take now (too many at
// once, or stopping): the client tries again.
func (n *Node) replyBusy(m *nats.Msg) {
	rec := &recorder{header: http.Header{}}
	writeError(rec, http.StatusServiceUnavailable, proto.CodeWorkspaceUnavailable,
		"the workspace's owner cannot take the request now; try again")
	n.replyRecorded(m, rec)
}

// answer serves a forwarded request with the local handler.
func (n *Node) answer(m *nats.Msg) {
	defer func() { <-n.serving }()
	var f forwarded
	if err := json.Unmarshal(m.Data, &f); err != nil {
		n.replyBad(m)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), n.cfg.ForwardTimeout)
	defer cancel()
	r, err := http.NewRequestWithContext(ctx, f.Method, f.URL, bytes.NewReader(f.Body))
	if err != nil {
		n.replyBad(m)
		return
	}
	r.Header = f.Header
	r.RemoteAddr = "forwarded"
	if id, ok := workspaceOf(r); ok && !n.owns(id) {
		// Lost (or never had) it since the sender looked.
		rec := &recorder{header: http.Header{}}
		unavailable(rec, id)
		n.replyRecorded(m, rec)
		return
	}
	rec := &recorder{header: http.Header{}}
	n.local.ServeHTTP(rec, r)
	n.replyRecorded(m, rec)
}

// replyBad answers a forwarded message that is not a request.
func (n *Node) replyBad(m *nats.Msg) {
	rec := &recorder{header: http.Header{}}
	writeError(rec, http.StatusBadRequest, proto.CodeInvalidArgument, "malformed forwarded request")
	n.replyRecorded(m, rec)
}

func (n *Node) replyRecorded(m *nats.Msg, rec *recorder) {
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	data, _ := json.Marshal(forwarded{Status: rec.status, Header: rec.header, Body: rec.body.Bytes()})
	if err := m.Respond(data); err != nil {
		n.log.Warn("answer forwarded request", "err", err)
	}
}

// recorder is the response of a forwarded request, kept whole.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }
func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
}
func (r *recorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.body.Write(p)
}
