package cluster

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

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
	// Download, in an answer, names the body the owner kept for the
	// forwarder to fetch in parts, Size bytes long (see transfer.go).
	Download string `json:"download,omitempty"`
	Size     int64  `json:"size,omitempty"`
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
	if n.cfg.Authorized != nil {
		return n.cfg.Authorized(r)
	}
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

// forward sends r to the owner and writes its answer. A request whose
// envelope fits one NATS message goes as one request/reply; a larger one
// is uploaded in parts (see transfer.go), bounded by the API's body limit
// as on the owner. An answer too large for one message is fetched in
// parts the same way.
func (n *Node) forward(w http.ResponseWriter, r *http.Request, workspaceID, owner string) {
	// The body is read whole before anything is sent, within the time the
	// API gives a body to arrive: the owner then keeps an upload only as
	// long as NATS takes to carry it, whatever the client's pace.
	rc := http.NewResponseController(w)
	if r.ContentLength != 0 && rc.SetReadDeadline(time.Now().Add(bodyTimeout)) == nil {
		defer func() { _ = rc.SetReadDeadline(time.Time{}) }()
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, n.cfg.MaxBody+1))
	switch {
	case err != nil:
		writeError(w, http.StatusBadRequest, proto.CodeInvalidArgument, "reading the request body: "+err.Error())
		return
	case int64(len(body)) > n.cfg.MaxBody:
		writeError(w, http.StatusRequestEntityTooLarge, proto.CodeBodyTooLarge, (&bodyTooLargeError{n.cfg.MaxBody}).Error())
		return
	}
	hdr := r.Header.Clone()
	// Checked here; the owner's own origin is another.
	hdr.Del("Origin")
	hdr.Set(forwardedHeader, n.cfg.NodeID)
	env := forwarded{Method: r.Method, URL: r.URL.RequestURI(), Header: hdr}
	ctx, cancel := context.WithTimeout(r.Context(), n.cfg.ForwardTimeout)
	defer cancel()
	var msg *nats.Msg
	if int64(len(body)) <= n.singleLimit() {
		env.Body = body
		req, _ := json.Marshal(env)
		msg, err = n.cfg.NATS.RequestWithContext(ctx, subject(owner), req)
	} else {
		msg, err = n.upload(ctx, owner, env, bytes.NewReader(body))
	}
	var tooLarge *bodyTooLargeError
	switch {
	case errors.As(err, &tooLarge):
		writeError(w, http.StatusRequestEntityTooLarge, proto.CodeBodyTooLarge, tooLarge.Error())
		return
	case errors.Is(err, errReadBody):
		writeError(w, http.StatusBadRequest, proto.CodeInvalidArgument, err.Error())
		return
	case err != nil:
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
	if resp.Download == "" {
		w.WriteHeader(resp.Status)
		_, _ = w.Write(resp.Body)
		return
	}
	w.Header().Set("Content-Length", strconv.FormatInt(resp.Size, 10))
	w.WriteHeader(resp.Status)
	if err := n.download(ctx, owner, resp.Download, resp.Size, w); err != nil {
		n.log.Warn("fetch forwarded answer", "workspace_id", workspaceID, "owner", owner, "err", err)
		// The status is sent: the client must see the answer is cut.
		panic(http.ErrAbortHandler)
	}
}

// bodyTimeout is how long a forwarded request's body may take to arrive,
// as on the node that serves it (contract section 1).
const bodyTimeout = 30 * time.Second

// singleLimit is the largest body sent as one message: the envelope
// carries it in base64, 4 bytes for 3.
func (n *Node) singleLimit() int64 {
	return (n.cfg.NATS.MaxPayload() - envelopeRoom) / 4 * 3
}

// partSize is the bytes of body one part carries.
func (n *Node) partSize() int { return int(n.cfg.NATS.MaxPayload() - partRoom) }

func uploadSubject(nodeID string) string {
	return "tandem.node." + hex.EncodeToString([]byte(nodeID)) + ".upload"
}

func downloadSubject(nodeID string) string {
	return "tandem.node." + hex.EncodeToString([]byte(nodeID)) + ".download"
}

var errReadBody = errors.New("reading the request body")

type bodyTooLargeError struct{ limit int64 }

func (e *bodyTooLargeError) Error() string {
	return fmt.Sprintf("body is larger than %d bytes", e.limit)
}

// upload sends env to the owner with its body, read from body, in parts.
// It returns the owner's answer: to the last part, or to the part it
// refused. Given up (ctx done, the body too large or unreadable), it
// tells the owner, which frees the upload at once rather than at its
// deadline.
func (n *Node) upload(ctx context.Context, owner string, env forwarded, body io.Reader) (_ *nats.Msg, err error) {
	id := uuid.NewString()
	subj := uploadSubject(owner)
	defer func() {
		if err != nil {
			cancel := nats.NewMsg(subj)
			cancel.Header.Set(hdrTransfer, id)
			cancel.Header.Set(hdrCancel, "1")
			_ = n.cfg.NATS.PublishMsg(cancel)
		}
	}()
	send := func(part int, data []byte, last bool) (*nats.Msg, error) {
		m := nats.NewMsg(subj)
		m.Header.Set(hdrTransfer, id)
		m.Header.Set(hdrPart, strconv.Itoa(part))
		if last {
			m.Header.Set(hdrLast, "1")
		}
		m.Data = data
		return n.cfg.NATS.RequestMsgWithContext(ctx, m)
	}
	head, _ := json.Marshal(env)
	reply, err := send(0, head, false)
	if err != nil || len(reply.Data) > 0 {
		return reply, err // refused (busy) or failed
	}
	size, total := n.partSize(), int64(0)
	var carry []byte
	for part := 1; ; part++ {
		// Read one byte past the part, to know whether it is the last.
		if len(carry) <= size {
			more := make([]byte, size+1-len(carry))
			k, rerr := io.ReadFull(body, more)
			carry = append(carry, more[:k]...)
			if rerr != nil && rerr != io.EOF && rerr != io.ErrUnexpectedEOF {
				return nil, fmt.Errorf("%w: %v", errReadBody, rerr)
			}
		}
		data, last := carry, len(carry) <= size
		if !last {
			data = carry[:size]
		}
		if total += int64(len(data)); total > n.cfg.MaxBody {
			return nil, &bodyTooLargeError{n.cfg.MaxBody}
		}
		reply, err := send(part, data, last)
		if err != nil || last || len(reply.Data) > 0 {
			return reply, err
		}
		carry = append([]byte(nil), carry[size:]...)
	}
}

// download fetches the body of an answer the owner kept, part by part,
// into w.
func (n *Node) download(ctx context.Context, owner, id string, size int64, w io.Writer) error {
	var offset int64
	for {
		m := nats.NewMsg(downloadSubject(owner))
		m.Header.Set(hdrTransfer, id)
		m.Header.Set(hdrOffset, strconv.FormatInt(offset, 10))
		reply, err := n.cfg.NATS.RequestMsgWithContext(ctx, m)
		if err != nil {
			return err
		}
		if e := reply.Header.Get(hdrError); e != "" {
			return errors.New(e)
		}
		if offset += int64(len(reply.Data)); offset > size {
			return fmt.Errorf("the answer is longer than the %d bytes announced", size)
		}
		if _, err := w.Write(reply.Data); err != nil {
			return err
		}
		if reply.Header.Get(hdrLast) != "" {
			if offset != size {
				return fmt.Errorf("the answer ended at %d of %d bytes", offset, size)
			}
			return nil
		}
		if len(reply.Data) == 0 {
			return errors.New("empty part before the answer's end")
		}
	}
}

// serveUpload takes a part of a request uploaded to this node (see
// upload). Parts are taken one at a time, on the subscription's
// goroutine: each is a copy into the upload's buffer.
func (n *Node) serveUpload(m *nats.Msg) {
	id := m.Header.Get(hdrTransfer)
	if id == "" {
		n.replyBad(m)
		return
	}
	if m.Header.Get(hdrCancel) != "" {
		n.uploads.drop(id)
		return
	}
	part, err := strconv.Atoi(m.Header.Get(hdrPart))
	if err != nil {
		n.uploads.drop(id)
		n.replyBad(m)
		return
	}
	if part == 0 {
		var env forwarded
		if err := json.Unmarshal(m.Data, &env); err != nil {
			n.replyBad(m)
			return
		}
		switch err := n.uploads.open(id, env); {
		case errors.Is(err, errTransferBusy):
			n.replyBusy(m)
		case err != nil:
			n.replyBad(m)
		default:
			n.ack(m)
		}
		return
	}
	t, err := n.uploads.append(id, part, m.Data, m.Header.Get(hdrLast) != "")
	switch {
	case errors.Is(err, errTransferTooLarge):
		rec := &recorder{header: http.Header{}}
		writeError(rec, http.StatusRequestEntityTooLarge, proto.CodeBodyTooLarge, (&bodyTooLargeError{n.cfg.MaxBody}).Error())
		n.replyRecorded(m, rec)
	case errors.Is(err, errTransferUnknown):
		rec := &recorder{header: http.Header{}}
		writeError(rec, http.StatusServiceUnavailable, proto.CodeWorkspaceUnavailable,
			"the forwarded request was not received whole within its deadline; try again")
		n.replyRecorded(m, rec)
	case err != nil:
		n.replyBad(m)
	case t == nil:
		n.ack(m)
	default:
		t.env.Body = t.body
		n.serveEnvelope(m, t.env)
	}
}

// ack answers a part that is not the last.
func (n *Node) ack(m *nats.Msg) {
	if err := m.Respond(nil); err != nil {
		n.log.Warn("acknowledge forwarded part", "err", err)
	}
}

// serveDownload answers a request for a part of a kept answer.
func (n *Node) serveDownload(m *nats.Msg) {
	reply := nats.NewMsg(m.Reply)
	offset, err := strconv.ParseInt(m.Header.Get(hdrOffset), 10, 64)
	if err != nil {
		reply.Header.Set(hdrError, "bad offset")
	} else {
		data, last, err := n.downloads.read(m.Header.Get(hdrTransfer), offset, n.partSize())
		switch {
		case err != nil:
			reply.Header.Set(hdrError, err.Error())
		case last:
			reply.Header.Set(hdrLast, "1")
			fallthrough
		default:
			reply.Data = data
		}
	}
	if err := m.RespondMsg(reply); err != nil {
		n.log.Warn("answer forwarded part", "err", err)
	}
}

// serveForwarded answers a request another node forwarded here.
func (n *Node) serveForwarded(m *nats.Msg) {
	var f forwarded
	if err := json.Unmarshal(m.Data, &f); err != nil {
		n.replyBad(m)
		return
	}
	n.serveEnvelope(m, f)
}

// serveEnvelope serves the forwarded request f off the subscription's
// goroutine, unless too many are being served.
func (n *Node) serveEnvelope(m *nats.Msg, f forwarded) {
	select {
	case n.serving <- struct{}{}:
	default:
		n.replyBusy(m)
		return
	}
	if !n.spawn(func() { n.answer(m, f) }) {
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
func (n *Node) answer(m *nats.Msg, f forwarded) {
	defer func() { <-n.serving }()
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

// replyRecorded answers with rec, in one message when it fits, else by
// keeping its body for the forwarder to fetch (see download).
func (n *Node) replyRecorded(m *nats.Msg, rec *recorder) {
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	resp := forwarded{Status: rec.status, Header: rec.header, Body: rec.body.Bytes()}
	data, _ := json.Marshal(resp)
	if int64(len(data)) > n.cfg.NATS.MaxPayload() {
		id := uuid.NewString()
		if err := n.downloads.keep(id, resp.Body); err != nil {
			n.log.Warn("keep a forwarded answer to fetch", "bytes", len(resp.Body), "err", err)
			busy := &recorder{header: http.Header{}}
			writeError(busy, http.StatusServiceUnavailable, proto.CodeWorkspaceUnavailable,
				"the workspace's owner cannot send so large an answer now; try again")
			data, _ = json.Marshal(forwarded{Status: http.StatusServiceUnavailable, Header: busy.header, Body: busy.body.Bytes()})
		} else {
			resp.Body, resp.Download, resp.Size = nil, id, int64(rec.body.Len())
			data, _ = json.Marshal(resp)
		}
	}
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
