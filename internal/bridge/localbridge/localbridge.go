// Package localbridge implements bridge.Backend over the domain of a
// server in this process (domain.Services), with no loopback HTTP: a
// protocol bridge started beside the server it started (tandem acp and
// tandem copilot when no server runs) calls the domain directly, and reads
// the session's stream from the hub as any HTTP stream does.
//
// It acts as the server's owner, the only person a process that started
// its own server can be: a member reaches a server over HTTP
// (package httpbridge), where the server checks the role of every request.
// Its audited calls are written to the audit log as the HTTP API writes
// them, so the log names the owner for a prompt made here.
package localbridge

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tandem-dev/tandem/internal/apierr"
	"github.com/tandem-dev/tandem/internal/auth"
	"github.com/tandem-dev/tandem/internal/bridge"
	"github.com/tandem-dev/tandem/internal/domain"
	"github.com/tandem-dev/tandem/internal/store"
	"github.com/tandem-dev/tandem/proto"
)

// historyPage is how many events one history call asks for.
const historyPage = 1000

// Auditor keeps the audit log (auth.Service does).
type Auditor interface {
	Record(ctx context.Context, e store.AuditEntry)
}

// Config is what the Backends of one server share.
type Config struct {
	// Services is the server's domain.
	Services domain.Services
	// Audit keeps the audit log; nil keeps none.
	Audit Auditor
}

// Connect returns a function that makes a Backend per client of a
// protocol, acting as the server's owner through that client.
func Connect(cfg Config) bridge.Connect {
	return func(clientID string) (bridge.Backend, error) {
		if clientID == "" {
			return nil, errors.New("localbridge: a client id is needed")
		}
		id := auth.Identity{TokenID: auth.OwnerTokenID, Name: proto.OwnerTokenName, Role: auth.Owner}
		return &Backend{cfg: cfg, id: id, clientID: clientID}, nil
	}
}

// Backend is a bridge.Backend for one client of a protocol.
type Backend struct {
	cfg      Config
	id       auth.Identity
	clientID string
}

// ctx is a call's context: the owner, through the Backend's client.
func (b *Backend) ctx(ctx context.Context) context.Context {
	return auth.WithIdentity(auth.WithClient(ctx, b.clientID), b.id)
}

// audit records an audited call that succeeded, as the HTTP API does.
func (b *Backend) audit(ctx context.Context, err error, a auth.Action, e store.AuditEntry) {
	if err != nil || b.cfg.Audit == nil {
		return
	}
	e.TokenID, e.Name, e.Action, e.ClientID = b.id.TokenID, b.id.Name, string(a), b.clientID
	b.cfg.Audit.Record(ctx, e)
}

// wrap gives the domain's errors the contract's terms (bridge.Error).
func wrap(err error) error {
	if err == nil {
		return nil
	}
	return bridge.Wrap(err, apierr.ErrorCode(err), apierr.ErrorMessage(err))
}

func (b *Backend) Me(context.Context) (proto.Me, error) {
	return proto.Me{TokenID: b.id.TokenID, Name: b.id.Name, Role: b.id.Role.String()}, nil
}

func (b *Backend) OpenWorkspace(ctx context.Context, path string) (proto.Workspace, error) {
	ws, _, err := b.cfg.Services.Workspaces.Open(b.ctx(ctx), proto.CreateWorkspaceRequest{Path: path})
	b.audit(ctx, err, auth.WorkspaceOpen, store.AuditEntry{WorkspaceID: ws.ID, Detail: path})
	return ws, wrap(err)
}

func (b *Backend) Workspaces(ctx context.Context) ([]proto.Workspace, error) {
	list, err := b.cfg.Services.Workspaces.List(b.ctx(ctx))
	return list, wrap(err)
}

func (b *Backend) CreateSession(ctx context.Context, wsID string, req proto.CreateSessionRequest) (proto.Session, error) {
	if req.ClientID == "" {
		req.ClientID = b.clientID
	}
	s, err := b.cfg.Services.Sessions.Create(b.ctx(ctx), wsID, req)
	b.audit(ctx, err, auth.SessionCreate, store.AuditEntry{WorkspaceID: wsID, SessionID: s.ID})
	return s, wrap(err)
}

func (b *Backend) Sessions(ctx context.Context, wsID string) ([]proto.Session, error) {
	list, err := b.cfg.Services.Sessions.List(b.ctx(ctx), wsID)
	return list, wrap(err)
}

func (b *Backend) Session(ctx context.Context, wsID, sessionID string) (proto.Session, error) {
	s, err := b.cfg.Services.Sessions.Get(b.ctx(ctx), wsID, sessionID)
	return s, wrap(err)
}

func (b *Backend) UpdateSession(ctx context.Context, wsID, sessionID string, req proto.UpdateSessionRequest) (proto.Session, error) {
	s, err := b.cfg.Services.Sessions.Update(b.ctx(ctx), wsID, sessionID, req)
	b.audit(ctx, err, auth.SessionUpdate, store.AuditEntry{WorkspaceID: wsID, SessionID: sessionID})
	return s, wrap(err)
}

func (b *Backend) DeleteSession(ctx context.Context, wsID, sessionID string) error {
	err := b.cfg.Services.Sessions.Delete(b.ctx(ctx), wsID, sessionID)
	b.audit(ctx, err, auth.SessionDelete, store.AuditEntry{WorkspaceID: wsID, SessionID: sessionID})
	return wrap(err)
}

func (b *Backend) Resume(ctx context.Context, wsID, sessionID string, req proto.ResumeRequest) (proto.ResumeResponse, error) {
	if req.ClientID == "" {
		req.ClientID = b.clientID
	}
	r, err := b.cfg.Services.Runs.Resume(b.ctx(ctx), wsID, sessionID, req)
	return r, wrap(err)
}

func (b *Backend) SetModel(ctx context.Context, wsID, sessionID string, req proto.SetModelRequest) (proto.Session, error) {
	s, err := b.cfg.Services.Sessions.SetModel(b.ctx(ctx), wsID, sessionID, req)
	return s, wrap(err)
}

func (b *Backend) Log(ctx context.Context, wsID, sessionID string, req proto.LogRequest) (int64, error) {
	seq, err := b.cfg.Services.Sessions.Log(b.ctx(ctx), wsID, sessionID, req)
	return seq, wrap(err)
}

func (b *Backend) History(ctx context.Context, wsID, sessionID string, after int64) ([]proto.Event, error) {
	var all []proto.Event
	for {
		page, err := b.cfg.Services.Sessions.Events(b.ctx(ctx), wsID, sessionID, after, historyPage)
		if err != nil {
			return nil, wrap(err)
		}
		all = append(all, page...)
		if len(page) < historyPage {
			return all, nil
		}
		after = page[len(page)-1].Seq
	}
}

func (b *Backend) Prompt(ctx context.Context, wsID string, req proto.PromptRequest) (proto.PromptAccepted, error) {
	if req.ClientID == "" {
		req.ClientID = b.clientID
	}
	acc, err := b.cfg.Services.Runs.Prompt(b.ctx(ctx), wsID, req)
	action := auth.Prompt
	if req.Delivery == proto.DeliverySteer {
		action = auth.Steer
	}
	b.audit(ctx, err, action, store.AuditEntry{WorkspaceID: wsID, SessionID: req.SessionID, RunID: acc.RunID})
	return acc, wrap(err)
}

func (b *Backend) Cancel(ctx context.Context, wsID, sessionID string) error {
	_, err := b.cfg.Services.Runs.Cancel(b.ctx(ctx), wsID, sessionID)
	b.audit(ctx, err, auth.Cancel, store.AuditEntry{WorkspaceID: wsID, SessionID: sessionID})
	return wrap(err)
}

func (b *Backend) Pending(ctx context.Context, wsID, sessionID string) (proto.PendingWork, error) {
	pw, err := b.cfg.Services.Pending.Pending(b.ctx(ctx), wsID, sessionID)
	return pw, wrap(err)
}

func (b *Backend) AnswerPermission(ctx context.Context, wsID, requestID string, a proto.PermissionAnswer) (proto.PermissionAnswered, error) {
	if a.ClientID == "" {
		a.ClientID = b.clientID
	}
	result, err := b.cfg.Services.Pending.AnswerPermission(b.ctx(ctx), wsID, requestID, a)
	b.audit(ctx, err, auth.PermissionAnswer, store.AuditEntry{WorkspaceID: wsID, Detail: "request " + requestID + ", " + a.Decision})
	if apierr.ErrorCode(err) == proto.CodeAlreadyResolved {
		return proto.PermissionAnswered{Resolved: false}, nil
	}
	if err != nil {
		return proto.PermissionAnswered{}, wrap(err)
	}
	return proto.PermissionAnswered{Resolved: true, Result: result}, nil
}

func (b *Backend) AnswerToolCall(ctx context.Context, wsID, requestID string, a proto.ToolCallAnswer) (proto.ToolCallAnswered, error) {
	if a.ClientID == "" {
		a.ClientID = b.clientID
	}
	err := b.cfg.Services.Pending.AnswerToolCall(b.ctx(ctx), wsID, requestID, a)
	b.audit(ctx, err, auth.ToolAnswer, store.AuditEntry{WorkspaceID: wsID, Detail: "request " + requestID})
	if apierr.ErrorCode(err) == proto.CodeAlreadyResolved {
		return proto.ToolCallAnswered{Resolved: false}, nil
	}
	if err != nil {
		return proto.ToolCallAnswered{}, wrap(err)
	}
	return proto.ToolCallAnswered{Resolved: true}, nil
}

// Close has nothing to release: each stream is closed by its reader, and
// its end detaches the client as an HTTP stream's does.
func (b *Backend) Close() {}

// Subscribe serves the session's stream into a pipe and reads its frames
// back: the hub writes the same bytes it writes to an HTTP stream, bounded
// by its queue. A reader that falls behind is evicted as a slow HTTP
// client is, and the stream resumes after the last event it passed on, as
// the HTTP client's does.
func (b *Backend) Subscribe(ctx context.Context, wsID, sessionID string, after int64) (bridge.Stream, error) {
	s := &stream{b: b, wsID: wsID, sessionID: sessionID, last: after, done: make(chan struct{})}
	sctx, cancel := context.WithCancel(ctx)
	s.ctx, s.cancel = sctx, cancel
	cn, err := s.open(ctx)
	if err != nil {
		cancel()
		return nil, err
	}
	s.cn = cn
	// The stream ends with ctx, as an HTTP stream ends with its request.
	go func() {
		<-sctx.Done()
		s.mu.Lock()
		cn := s.cn
		s.mu.Unlock()
		if cn != nil {
			cn.close()
		}
		close(s.done)
	}()
	return s, nil
}

// open serves one connection of the stream, from the last event passed on.
func (s *stream) open(ctx context.Context) (*pipeConn, error) {
	cctx := s.b.ctx(s.ctx)
	st, err := s.b.cfg.Services.Streams.Subscribe(cctx, s.wsID, domain.StreamRequest{
		ClientID: s.b.clientID, SessionID: s.sessionID, LastEventID: s.last, Resume: s.last > 0, Name: s.b.id.Name,
	})
	if err != nil {
		return nil, wrap(err)
	}
	pr, pw := io.Pipe()
	scctx, cancel := context.WithCancel(cctx)
	cn := &pipeConn{r: bufio.NewReader(pr), pr: pr, cancel: cancel, done: make(chan struct{})}
	opened := make(chan error, 1)
	go func() {
		defer close(cn.done)
		err := st.Serve(scctx, &sink{w: pw, opened: opened})
		if err == nil {
			err = io.EOF
		}
		select {
		case opened <- err: // refused before it opened
		default:
		}
		pw.CloseWithError(err)
	}()
	// Serve either opens the sink or refuses the claim first: wait for
	// which, so a refusal is Subscribe's error as over HTTP.
	select {
	case err := <-opened:
		if err != nil {
			cn.close()
			return nil, wrap(err)
		}
	case <-ctx.Done():
		cn.close()
		return nil, ctx.Err()
	}
	return cn, nil
}

// sink is a stream's end in this process: a pipe.
type sink struct {
	w      *io.PipeWriter
	opened chan error
	once   sync.Once
}

func (k *sink) Open() error {
	k.once.Do(func() { k.opened <- nil })
	return nil
}
func (k *sink) Write(p []byte) (int, error)      { return k.w.Write(p) }
func (k *sink) Flush() error                     { return nil }
func (k *sink) SetWriteDeadline(time.Time) error { return nil }

// pipeConn is one connection of a stream: the frames one Serve wrote.
type pipeConn struct {
	r      *bufio.Reader
	pr     *io.PipeReader
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

// close ends the connection and waits for its server to let go.
func (c *pipeConn) close() {
	c.once.Do(func() {
		c.cancel()
		c.pr.CloseWithError(context.Canceled)
		<-c.done
	})
}

// stream is a session's stream, over as many connections as evictions
// make it need; one reader goroutine calls Next.
type stream struct {
	b         *Backend
	wsID      string
	sessionID string
	ctx       context.Context
	cancel    context.CancelFunc
	done      chan struct{}
	// last is the seq of the last event passed on.
	last int64

	mu sync.Mutex
	cn *pipeConn
}

// errReset ends a stream whose resume point the server could not serve.
var errReset = errors.New("localbridge: stream reset (history no longer available)")

// Next returns the next event of the session; control frames and
// heartbeats are the stream's own business.
func (s *stream) Next(ctx context.Context) (proto.Event, error) {
	for {
		if err := ctx.Err(); err != nil {
			return proto.Event{}, err
		}
		if err := s.ctx.Err(); err != nil {
			return proto.Event{}, err
		}
		s.mu.Lock()
		cn := s.cn
		s.mu.Unlock()
		typ, data, err := frame(cn.r)
		if err != nil {
			if ctx.Err() != nil {
				return proto.Event{}, ctx.Err()
			}
			if s.ctx.Err() != nil {
				return proto.Event{}, s.ctx.Err()
			}
			return proto.Event{}, err
		}
		switch typ {
		case "", proto.EventStreamOpened:
			continue
		case proto.EventStreamReset:
			return proto.Event{}, errReset
		case proto.EventStreamEvicted:
			// Too slow for the hub's queue: resume where it left off.
			cn.close()
			next, err := s.open(ctx)
			if err != nil {
				return proto.Event{}, err
			}
			s.mu.Lock()
			s.cn = next
			s.mu.Unlock()
			if s.ctx.Err() != nil {
				next.close()
			}
			continue
		}
		var ev proto.Event
		if err := json.Unmarshal(data, &ev); err != nil {
			return proto.Event{}, fmt.Errorf("localbridge: event %s: %w", typ, err)
		}
		if ev.Seq > 0 && !ev.Ephemeral {
			s.last = ev.Seq
		}
		return ev, nil
	}
}

// frame reads one SSE frame: its event type and data ("" for a comment).
func frame(r *bufio.Reader) (typ string, data []byte, err error) {
	var lines []string
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return "", nil, err
		}
		line = strings.TrimRight(line, "\r\n")
		if line == "" {
			break
		}
		lines = append(lines, line)
	}
	for _, l := range lines {
		switch {
		case strings.HasPrefix(l, "event: "):
			typ = l[len("event: "):]
		case strings.HasPrefix(l, "data: "):
			data = append(data, l[len("data: "):]...)
		case strings.HasPrefix(l, "id: "):
			if _, err := strconv.ParseInt(l[len("id: "):], 10, 64); err != nil {
				return "", nil, fmt.Errorf("localbridge: bad frame id %q", l)
			}
		}
	}
	return typ, data, nil
}

// Close ends the stream and waits for its server to let go.
func (s *stream) Close() error {
	s.cancel()
	<-s.done
	return nil
}
