// Package pending is the broker of work that waits on clients: permission
// requests and client tool calls. Every request is persisted before it is
// announced, any client may answer it, and the first answer wins.
//
// A run waiting on a request is parked: its goroutine waits here. When the
// workspace closes the goroutine leaves and the request stays on disk
// (suspended); an answer to a suspended request is recorded and the run is
// revived through the Reviver, which finds the recorded answer on its way.
package pending

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/tandem-dev/tandem/internal/apierr"
	"github.com/tandem-dev/tandem/internal/auth"
	"github.com/tandem-dev/tandem/internal/keylock"
	"github.com/tandem-dev/tandem/internal/store"
	"github.com/tandem-dev/tandem/internal/sweep"
	"github.com/tandem-dev/tandem/internal/workspace"
	"github.com/tandem-dev/tandem/proto"
)

// Kinds of pending rows.
const (
	KindPermission = "permission"
	KindToolCall   = "tool_call"
)

// MaxFeedback bounds the feedback of a permission answer.
const MaxFeedback = 64 << 10

// Answer is how a request was resolved.
type Answer struct {
	// Result is a permission result (proto.Result*); empty for tool calls.
	Result   string `json:"result,omitempty"`
	Feedback string `json:"feedback,omitempty"`
	// Content and IsError are a client tool's answer.
	Content    string `json:"content,omitempty"`
	IsError    bool   `json:"is_error,omitempty"`
	ResolvedBy string `json:"resolved_by,omitempty"`
	// ResolvedByName is the person who answered, Actor the actor of
	// their answer: the run goes on in their name (auth.Handover).
	ResolvedByName string       `json:"resolved_by_name,omitempty"`
	Actor          *proto.Actor `json:"actor,omitempty"`
}

// record is what a pending row holds (store.Pending.Data).
type record struct {
	Permission *proto.PermissionRequest `json:"permission,omitempty"`
	ToolCall   *proto.ToolCallRequest   `json:"tool_call,omitempty"`
	// Resolved and Applied are the row's columns (store.Pending.Resolved
	// and Settled), where the store decides them: an answer is recorded
	// once, by a conditional update, and applied once it reached the run.
	// A run with unapplied rows is parked or suspended.
	Resolved bool   `json:"-"`
	Applied  bool   `json:"-"`
	Answer   Answer `json:"answer"`
}

type row struct {
	store.Pending
	rec record
}

// Reviver brings a suspended run back into memory so it can use an answer.
type Reviver func(ws *workspace.Workspace, sessionID, runID string)

// Broker holds pending requests.
//
// Which answer of a request wins is decided by the store (a conditional
// update, the same on every node), not by a lock. What must still happen
// in one piece is kept per request: its creation with its announcement,
// and an answer's record with its announcement and its hand-over to the
// parked run, so that clients hear of a request before its resolution and
// the run goes on only once its resolution is announced. Requests never
// wait for each other.
type Broker struct {
	store  store.Store
	log    *slog.Logger
	revive Reviver

	// requests is the lock of each request (see Broker).
	requests keylock.Map[string]

	// mu guards the maps below. It is never held across I/O.
	mu      sync.Mutex
	waiters map[string]waiter
	// approvals are the kinds each session approved, as far as this
	// process knows (see ApprovedForSession).
	approvals map[string]*approvals
	// used are the sessions of approvals asked about since the last sweep.
	used sweep.Marks[string]
}

// approvals are the kinds a session approved. Approvals only ever grow
// (until the session goes), so what a read of the store finds is merged
// into what an answer added meanwhile, never put in its place.
type approvals struct {
	kinds map[string]bool
	// loaded is set once kinds holds everything the store had.
	loaded bool
}

// New returns a Broker over st; revive brings back the runs it suspended
// (nil: they stay suspended).
func New(st store.Store, revive Reviver, log *slog.Logger) *Broker {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Broker{store: st, log: log, waiters: make(map[string]waiter), approvals: make(map[string]*approvals), revive: revive}
}

// Ref names the run and tool call a request is about.
type Ref struct {
	Workspace  *workspace.Workspace
	SessionID  string
	RunID      string
	ToolCallID string
	ToolName   string
	// Suspend is asked when the wait ends (its context done) with the
	// request unanswered. True keeps the request and suspends the run (the
	// workspace closed); false means an explicit cancel got there first,
	// and the request is resolved as canceled. It decides once and for all
	// (see agent.Run.Commit), so a cancel never lists a run that then
	// suspends. Nil suspends.
	Suspend func() bool
	// Announce re-announces a request that already exists (cold resume).
	Announce bool
}

// ApprovedForSession reports whether the kind was approved for the session.
// A session's approvals are read from the store once, then kept in memory.
// When they cannot be read the answer is no: the clients are asked.
func (b *Broker) ApprovedForSession(ctx context.Context, sessionID, kind string) bool {
	b.mu.Lock()
	if a := b.approvals[sessionID]; a != nil && a.loaded {
		b.used.Use(sessionID)
		ok := a.kinds[kind]
		b.mu.Unlock()
		return ok
	}
	b.mu.Unlock()
	list, err := b.store.SessionApprovals(ctx, sessionID)
	if err != nil {
		b.log.Error("read session approvals", "session_id", sessionID, "err", err)
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	a := b.approvalsLocked(sessionID)
	for _, k := range list {
		a.kinds[k] = true
	}
	a.loaded = true
	b.used.Use(sessionID)
	return a.kinds[kind]
}

// approvalsLocked returns the session's entry, made empty (not loaded)
// when there is none.
func (b *Broker) approvalsLocked(sessionID string) *approvals {
	a := b.approvals[sessionID]
	if a == nil {
		a = &approvals{kinds: make(map[string]bool)}
		b.approvals[sessionID] = a
	}
	return a
}

// SweepIdle forgets the approvals of the sessions no permission request
// asked about since the previous sweep; they are read from the store again
// when one does. Without it every session that ever asked for a permission
// kept its entry for as long as the server lived. Its caller calls it every
// few minutes.
func (b *Broker) SweepIdle() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.approvals = sweep.Keep(&b.used, b.approvals, nil)
}

// AskPermission parks until the permission request for ref's tool call is
// answered. suspended reports that the wait ended with the request still open.
func (b *Broker) AskPermission(ctx context.Context, ref Ref, kind, summary string, details map[string]any) (ans Answer, suspended bool) {
	if details == nil {
		details = map[string]any{}
	}
	return b.ask(ctx, ref, KindPermission, func(id string) record {
		return record{Permission: &proto.PermissionRequest{
			RequestID: id, SessionID: ref.SessionID, RunID: ref.RunID, ToolCallID: ref.ToolCallID,
			ToolName: ref.ToolName, Kind: kind, Summary: summary, Details: details,
		}}
	})
}

// CallClientTool parks until a client answers the tool call.
func (b *Broker) CallClientTool(ctx context.Context, ref Ref, args json.RawMessage, owners []string) (ans Answer, suspended bool) {
	if owners == nil {
		owners = []string{}
	}
	return b.ask(ctx, ref, KindToolCall, func(id string) record {
		return record{ToolCall: &proto.ToolCallRequest{
			RequestID: id, SessionID: ref.SessionID, RunID: ref.RunID, ToolCallID: ref.ToolCallID,
			ToolName: ref.ToolName, Arguments: args, OwnerClientIDs: owners,
		}}
	})
}

func (b *Broker) ask(ctx context.Context, ref Ref, kind string, build func(id string) record) (Answer, bool) {
	ws := ref.Workspace
	// The request must outlive the run's context: it is what a suspended run
	// comes back to.
	bg := context.WithoutCancel(ctx)
	r, err := b.find(bg, ws.ID, ref.RunID, ref.ToolCallID, kind)
	if err != nil {
		b.log.Error("find pending request", "run_id", ref.RunID, "err", err)
		return failed(kind, err), false
	}
	var ch chan Answer
	if r == nil {
		r = &row{Pending: store.Pending{
			RequestID: uuid.NewString(), WorkspaceID: ws.ID, SessionID: ref.SessionID, RunID: ref.RunID,
			Kind: kind, CreatedAt: time.Now().UTC(),
		}}
		r.rec = build(r.RequestID)
		unlock := b.requests.Lock(r.RequestID)
		// Waiting before the request exists: no answer can miss the run.
		ch = b.wait(r)
		// On disk before anyone hears of it.
		if err := b.create(bg, r); err != nil {
			b.unwait(r.RequestID)
			unlock()
			return failed(kind, err), false
		}
		b.announce(bg, ws, r)
		unlock()
	} else {
		unlock := b.requests.Lock(r.RequestID)
		// Read again under the request's lock: an answer recorded since
		// find is now announced too, and a later one finds the waiter.
		if r, err = b.get(bg, r.RequestID); err != nil {
			unlock()
			b.log.Error("read pending request", "run_id", ref.RunID, "err", err)
			return failed(kind, err), false
		}
		if r.rec.Resolved {
			unlock()
			// Answered while the run was suspended: use the recorded answer.
			b.settle(bg, r)
			auth.Handover(ctx, r.rec.Answer.Actor)
			return r.rec.Answer, false
		}
		ch = b.wait(r)
		if ref.Announce {
			b.announce(bg, ws, r)
		}
		unlock()
	}

	select {
	case ans := <-ch:
		b.settle(bg, r)
		auth.Handover(ctx, ans.Actor)
		return ans, false
	case <-ctx.Done():
	}

	unlock := b.requests.Lock(r.RequestID)
	defer unlock()
	b.unwait(r.RequestID)
	select {
	case ans := <-ch:
		// Answered in the same instant: keep the answer, it is recorded.
		b.settle(bg, r)
		auth.Handover(ctx, ans.Actor)
		return ans, false
	default:
	}
	if ref.Suspend != nil && !ref.Suspend() {
		ans := canceledAnswer(kind)
		won, _, err := b.resolve(bg, ws, r, ans)
		switch {
		case err != nil:
			b.log.Error("resolve canceled request", "request_id", r.RequestID, "err", err)
		case !won:
			// Answered elsewhere (another node) just before: that answer
			// is the one recorded, so it is the one the run uses.
			if got, err := b.get(bg, r.RequestID); err == nil && got.rec.Resolved {
				ans = got.rec.Answer
			}
		}
		b.settle(bg, r)
		return ans, false
	}
	return Answer{}, true
}

// waiter is a run parked on a request.
type waiter struct {
	ch chan Answer
	// r is the request as the run made or found it (open), so that an
	// answer need not read it again; the store still decides whether the
	// answer wins.
	r row
}

// wait registers the run parked on r; the answer that wins is sent on the
// channel. The caller holds r's request lock.
func (b *Broker) wait(r *row) chan Answer {
	w := waiter{ch: make(chan Answer, 1), r: *r}
	b.mu.Lock()
	b.waiters[r.RequestID] = w
	b.mu.Unlock()
	return w.ch
}

// parked returns the open request a run is parked on, nil when none is.
// The caller holds the request's lock.
func (b *Broker) parked(requestID string) *row {
	b.mu.Lock()
	w, ok := b.waiters[requestID]
	b.mu.Unlock()
	if !ok {
		return nil
	}
	return &w.r
}

// unwait forgets the run parked on the request.
func (b *Broker) unwait(requestID string) {
	b.mu.Lock()
	delete(b.waiters, requestID)
	b.mu.Unlock()
}

func failed(kind string, err error) Answer {
	msg := fmt.Sprintf("could not record the request: %v", err)
	if kind == KindPermission {
		return Answer{Result: proto.ResultCanceled, Feedback: msg}
	}
	return Answer{Content: msg, IsError: true}
}

func canceledAnswer(kind string) Answer {
	if kind == KindPermission {
		return Answer{Result: proto.ResultCanceled}
	}
	return Answer{Content: "canceled", IsError: true}
}

func (b *Broker) announce(ctx context.Context, ws *workspace.Workspace, r *row) {
	typ, data := proto.EventPermissionRequested, any(r.rec.Permission)
	if r.Kind == KindToolCall {
		typ, data = proto.EventToolRequested, r.rec.ToolCall
	}
	if _, err := ws.Emit(ctx, workspace.Draft{Type: typ, SessionID: r.SessionID, RunID: r.RunID, Data: data}); err != nil {
		b.log.Error("announce pending request", "request_id", r.RequestID, "err", err)
	}
}

// resolve records ans as r's answer unless another answer was recorded
// first (won false: nothing changed), then announces the resolution and
// hands the answer to the run parked on r; delivered is false when no run
// waits for it. The caller holds r's request lock (see Broker), so the run
// goes on only once the resolution is announced. An answer the store does
// not take is neither announced nor handed on: the request stays open, and
// answering it again may work later.
func (b *Broker) resolve(ctx context.Context, ws *workspace.Workspace, r *row, ans Answer) (won, delivered bool, err error) {
	rec := r.rec
	rec.Answer = ans
	data, err := json.Marshal(rec)
	if err != nil {
		return false, false, fmt.Errorf("encode pending %s: %w", r.RequestID, err)
	}
	won, err = b.store.ResolvePending(ctx, r.WorkspaceID, r.RequestID, data)
	if err != nil {
		b.log.Error("resolve pending request", "request_id", r.RequestID, "err", err)
		return false, false, fmt.Errorf("resolve %s: %w", r.RequestID, err)
	}
	if !won {
		return false, false, nil
	}
	r.rec.Resolved, r.rec.Answer, r.Resolved, r.Data = true, ans, true, data
	typ, payload := proto.EventPermissionResolved, any(proto.PermissionResolved{
		RequestID: r.RequestID, Result: ans.Result, Feedback: ans.Feedback, ResolvedBy: ans.ResolvedBy, ResolvedByName: ans.ResolvedByName,
	})
	if r.Kind == KindToolCall {
		typ, payload = proto.EventToolResolved, proto.ToolResolved{RequestID: r.RequestID, IsError: ans.IsError, ResolvedBy: ans.ResolvedBy, ResolvedByName: ans.ResolvedByName}
	}
	if _, err := ws.Emit(ctx, workspace.Draft{Type: typ, SessionID: r.SessionID, RunID: r.RunID, Data: payload}); err != nil {
		b.log.Error("announce resolution", "request_id", r.RequestID, "err", err)
	}
	b.mu.Lock()
	w, ok := b.waiters[r.RequestID]
	delete(b.waiters, r.RequestID)
	b.mu.Unlock()
	if !ok {
		return true, false, nil
	}
	w.ch <- ans // buffered, and only the one winner sends
	return true, true, nil
}

// answer resolves the workspace's open request with ans, the first answer
// winning, and returns the request; approve, when set, is recorded first
// (an answer is on disk, whatever it implies, before anyone hears of it).
// A run no longer in memory is revived to use the answer.
func (b *Broker) answer(ctx context.Context, ws *workspace.Workspace, requestID, kind string, ans Answer, approve func(*row) error) (*row, error) {
	if err := checkRequestID(requestID, kind); err != nil {
		return nil, err
	}
	unlock := b.requests.Lock(requestID)
	r, err := b.claim(ctx, ws, b.parked(requestID), requestID, kind)
	if err == nil && approve != nil {
		err = approve(r)
	}
	var won, delivered bool
	if err == nil {
		won, delivered, err = b.resolve(ctx, ws, r, ans)
	}
	unlock()
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, notFound(requestID, kind) // deleted with its session meanwhile
	case err != nil:
		return nil, err
	case !won:
		return nil, alreadyResolved(requestID, kind)
	}
	if !delivered {
		b.reviveAll(ws, [][2]string{{r.SessionID, r.RunID}})
	}
	return r, nil
}

// AnswerPermission resolves a permission request with a client's decision.
func (b *Broker) AnswerPermission(ctx context.Context, ws *workspace.Workspace, requestID string, a proto.PermissionAnswer) (string, error) {
	if err := checkClient(a.ClientID); err != nil {
		return "", err
	}
	var ans Answer
	switch a.Decision {
	case proto.DecisionApproveOnce:
		ans.Result = proto.ResultApproved
	case proto.DecisionApproveSession:
		ans.Result = proto.ResultApprovedForSession
	case proto.DecisionReject:
		ans.Result = proto.ResultDeniedByUser
	case proto.DecisionUserNotAvailable:
		ans.Result = proto.ResultDeniedNoClient
	default:
		return "", apierr.Invalid("decision must be approve_once, approve_session, reject or user_not_available, got %q", a.Decision)
	}
	if len(a.Feedback) > MaxFeedback {
		// It goes into permission.resolved and to the model.
		return "", apierr.Errorf(proto.CodeBodyTooLarge, "feedback is %d bytes; at most %d are allowed", len(a.Feedback), MaxFeedback)
	}
	ans.Feedback, ans.ResolvedBy = a.Feedback, a.ClientID
	if id, ok := auth.FromContext(ctx); ok {
		ans.ResolvedByName, ans.Actor = id.Name, auth.ActorFrom(ctx)
	}

	var approve func(*row) error
	if ans.Result == proto.ResultApprovedForSession {
		approve = func(r *row) error { return b.approve(ctx, r.SessionID, r.rec.Permission.Kind) }
	}
	r, err := b.answer(ctx, ws, requestID, KindPermission, ans, approve)
	if err != nil {
		return "", err
	}
	if approve != nil {
		b.answerSiblings(ctx, ws, r, ans)
	}
	return ans.Result, nil
}

// answerSiblings answers with ans, approved for the session, the requests
// of r's kind already waiting in r's session.
func (b *Broker) answerSiblings(ctx context.Context, ws *workspace.Workspace, r *row, ans Answer) {
	kind := r.rec.Permission.Kind
	others, err := b.rows(ctx, ws.ID, func(o *row) bool {
		return o.SessionID == r.SessionID && o.Kind == KindPermission && !o.rec.Resolved && o.rec.Permission.Kind == kind
	})
	if err != nil {
		b.log.Error("list pending requests", "err", err)
	}
	var revive [][2]string
	for _, o := range others {
		unlock := b.requests.Lock(o.RequestID)
		won, delivered, err := b.resolve(ctx, ws, o, ans)
		unlock()
		if err != nil {
			// Asked again later; the kind is approved for the session.
			b.log.Error("resolve request approved for the session", "request_id", o.RequestID, "err", err)
			continue
		}
		if won && !delivered {
			revive = append(revive, [2]string{o.SessionID, o.RunID})
		}
	}
	b.reviveAll(ws, revive)
}

// approve records the kind as approved for the session, on disk first.
func (b *Broker) approve(ctx context.Context, sessionID, kind string) error {
	if err := b.store.ApproveForSession(ctx, sessionID, kind); err != nil {
		return fmt.Errorf("approve %s for session %s: %w", kind, sessionID, err)
	}
	b.mu.Lock()
	b.approvalsLocked(sessionID).kinds[kind] = true
	b.mu.Unlock()
	return nil
}

// AnswerToolCall resolves a client tool call with a client's result or error.
func (b *Broker) AnswerToolCall(ctx context.Context, ws *workspace.Workspace, requestID string, a proto.ToolCallAnswer) error {
	if err := checkClient(a.ClientID); err != nil {
		return err
	}
	if (a.Result == nil) == (a.Error == nil) {
		return apierr.Invalid("give exactly one of result and error")
	}
	ans := Answer{ResolvedBy: a.ClientID}
	if id, ok := auth.FromContext(ctx); ok {
		ans.ResolvedByName, ans.Actor = id.Name, auth.ActorFrom(ctx)
	}
	if a.Error != nil {
		ans.Content, ans.IsError = *a.Error, true
	} else {
		ans.Content = *a.Result
	}
	_, err := b.answer(ctx, ws, requestID, KindToolCall, ans, nil)
	return err
}

func (b *Broker) reviveAll(ws *workspace.Workspace, runs [][2]string) {
	if b.revive == nil {
		return
	}
	for _, r := range runs {
		b.revive(ws, r[0], r[1])
	}
}

func checkClient(id string) error {
	if id == "" {
		return apierr.Invalid("client_id is required")
	}
	if _, err := uuid.Parse(id); err != nil {
		return apierr.Invalid("client_id must be a UUID, got %q", id)
	}
	return nil
}

func notFound(requestID, kind string) error {
	return apierr.Errorf(proto.CodeRequestNotFound, "no pending %s %s", kindName(kind), requestID)
}

func alreadyResolved(requestID, kind string) error {
	return apierr.Errorf(proto.CodeAlreadyResolved, "%s %s was already resolved", kindName(kind), requestID)
}

func checkRequestID(requestID, kind string) error {
	if _, err := uuid.Parse(requestID); err != nil {
		return notFound(requestID, kind)
	}
	return nil
}

// claim finds an open request of the workspace that an answer may
// resolve: parked, when a run here waits on it, else as the store has it.
func (b *Broker) claim(ctx context.Context, ws *workspace.Workspace, parked *row, requestID, kind string) (*row, error) {
	r := parked
	if r == nil {
		var err error
		r, err = b.get(ctx, requestID)
		if errors.Is(err, store.ErrNotFound) {
			return nil, notFound(requestID, kind)
		}
		if err != nil {
			return nil, err
		}
	}
	if r.WorkspaceID != ws.ID || r.Kind != kind {
		return nil, notFound(requestID, kind)
	}
	if r.rec.Resolved {
		return nil, alreadyResolved(requestID, kind)
	}
	if err := ws.CheckOpen(); err != nil {
		return nil, err
	}
	return r, nil
}

func kindName(kind string) string {
	if kind == KindToolCall {
		return "tool call"
	}
	return "permission request"
}

// Pending lists the open requests of a workspace, or of one session when
// sessionID is set, oldest first.
func (b *Broker) Pending(ctx context.Context, wsID, sessionID string) (proto.PendingWork, error) {
	out := proto.PendingWork{Permissions: []proto.PermissionRequest{}, ToolCalls: []proto.ToolCallRequest{}}
	rows, err := b.rows(ctx, wsID, func(r *row) bool {
		return !r.rec.Resolved && (sessionID == "" || r.SessionID == sessionID)
	})
	if err != nil {
		return out, err
	}
	for _, r := range rows {
		if r.rec.Permission != nil {
			out.Permissions = append(out.Permissions, *r.rec.Permission)
		}
		if r.rec.ToolCall != nil {
			out.ToolCalls = append(out.ToolCalls, *r.rec.ToolCall)
		}
	}
	return out, nil
}

// UnfinishedRuns returns the runs of the session that wait on requests whose
// answers have not reached them: parked or suspended runs.
func (b *Broker) UnfinishedRuns(ctx context.Context, wsID, sessionID string) ([]string, error) {
	rows, err := b.rows(ctx, wsID, func(r *row) bool { return r.SessionID == sessionID && !r.rec.Applied })
	if err != nil {
		return nil, err
	}
	var runs []string
	for _, r := range rows {
		if !slices.Contains(runs, r.RunID) {
			runs = append(runs, r.RunID)
		}
	}
	return runs, nil
}

// Interrupt resolves every open request of a suspended run as interrupted
// (permissions canceled, tool calls failed), so later answers get 409.
func (b *Broker) Interrupt(ctx context.Context, ws *workspace.Workspace, runID string) error {
	return b.endRun(ctx, ws, runID, func(kind string) Answer {
		if kind == KindToolCall {
			return Answer{Content: "interrupted", IsError: true}
		}
		return Answer{Result: proto.ResultCanceled}
	})
}

// CancelRun resolves every open request of a suspended run as canceled, a
// cancel having met it (invariant 4), so later answers get 409.
func (b *Broker) CancelRun(ctx context.Context, ws *workspace.Workspace, runID string) error {
	return b.endRun(ctx, ws, runID, canceledAnswer)
}

// endRun resolves the open requests of a run that will not go on with the
// answer of their kind, and settles them all.
func (b *Broker) endRun(ctx context.Context, ws *workspace.Workspace, runID string, answer func(kind string) Answer) error {
	rows, err := b.rows(ctx, ws.ID, func(r *row) bool { return r.RunID == runID && !r.rec.Applied })
	if err != nil {
		return err
	}
	for _, r := range rows {
		if !r.rec.Resolved {
			ans := answer(r.Kind)
			unlock := b.requests.Lock(r.RequestID)
			// Lost to an answer just recorded: the run is done with it all
			// the same.
			_, _, err := b.resolve(ctx, ws, r, ans)
			unlock()
			if err != nil {
				return err
			}
		}
		if err := b.store.SettlePending(ctx, r.WorkspaceID, r.RequestID); err != nil {
			return fmt.Errorf("settle pending %s: %w", r.RequestID, err)
		}
	}
	return nil
}

// CancelSession resolves the session's open requests as canceled; its
// session is going away.
func (b *Broker) CancelSession(ctx context.Context, ws *workspace.Workspace, sessionID string) {
	b.mu.Lock()
	delete(b.approvals, sessionID)
	b.used.Forget(sessionID)
	b.mu.Unlock()
	rows, err := b.rows(ctx, ws.ID, func(r *row) bool { return r.SessionID == sessionID && !r.rec.Resolved })
	if err != nil {
		b.log.Error("list pending requests", "session_id", sessionID, "err", err)
		return
	}
	for _, r := range rows {
		unlock := b.requests.Lock(r.RequestID)
		_, _, err := b.resolve(ctx, ws, r, canceledAnswer(r.Kind))
		unlock()
		if err != nil {
			b.log.Error("cancel request of a deleted session", "request_id", r.RequestID, "err", err)
		}
	}
}

// settle records that r's answer reached its run (or that the run gave it
// up): it is no longer pending work.
func (b *Broker) settle(ctx context.Context, r *row) {
	if r.rec.Applied {
		return // a revived run finding its settled request again
	}
	if err := b.store.SettlePending(ctx, r.WorkspaceID, r.RequestID); err != nil {
		b.log.Error("settle pending request", "request_id", r.RequestID, "err", err)
		return
	}
	r.rec.Applied, r.Settled = true, true
}

// AskedToolCall reports whether the run already made a client tool call
// request for the tool call. A revived run that finds one knows the call
// got past its permission step, whatever the tool's spec (which left with
// its client) said.
func (b *Broker) AskedToolCall(ctx context.Context, wsID, runID, toolCallID string) (bool, error) {
	r, err := b.find(ctx, wsID, runID, toolCallID, KindToolCall)
	return r != nil, err
}

// AskedPermission reports whether the run already asked a permission for
// the tool call. A revived run that finds one goes on with that request
// (and its answer), whatever permission rules say now.
func (b *Broker) AskedPermission(ctx context.Context, wsID, runID, toolCallID string) (bool, error) {
	r, err := b.find(ctx, wsID, runID, toolCallID, KindPermission)
	return r != nil, err
}

// find returns the run's latest request for the tool call, settled or not:
// a revived run that asks again for a call it asked before gets that
// request (and its answer) back instead of a new one.
func (b *Broker) find(ctx context.Context, wsID, runID, toolCallID, kind string) (*row, error) {
	ps, err := b.store.RunPending(ctx, runID)
	if err != nil {
		return nil, fmt.Errorf("list pending of run %s: %w", runID, err)
	}
	rows := b.decodeAll(ps, func(r *row) bool {
		if r.WorkspaceID != wsID || r.Kind != kind {
			return false
		}
		if r.rec.Permission != nil {
			return r.rec.Permission.ToolCallID == toolCallID
		}
		return r.rec.ToolCall != nil && r.rec.ToolCall.ToolCallID == toolCallID
	})
	if len(rows) == 0 {
		return nil, nil
	}
	return rows[len(rows)-1], nil
}

// get reads one request.
func (b *Broker) get(ctx context.Context, requestID string) (*row, error) {
	p, err := b.store.GetPending(ctx, requestID)
	if err != nil {
		return nil, fmt.Errorf("get pending %s: %w", requestID, err)
	}
	return decode(p)
}

// rows returns the workspace's unsettled requests that keep accepts;
// settled ones are never work again.
func (b *Broker) rows(ctx context.Context, wsID string, keep func(*row) bool) ([]*row, error) {
	ps, err := b.store.ListPending(ctx, wsID)
	if err != nil {
		return nil, fmt.Errorf("list pending of %s: %w", wsID, err)
	}
	return b.decodeAll(ps, keep), nil
}

func (b *Broker) decodeAll(ps []store.Pending, keep func(*row) bool) []*row {
	var out []*row
	for _, p := range ps {
		r, err := decode(p)
		if err != nil {
			b.log.Error("decode pending request", "request_id", p.RequestID, "err", err)
			continue
		}
		if keep(r) {
			out = append(out, r)
		}
	}
	return out
}

// create writes a new request, open.
func (b *Broker) create(ctx context.Context, r *row) error {
	data, err := json.Marshal(r.rec)
	if err != nil {
		return fmt.Errorf("encode pending %s: %w", r.RequestID, err)
	}
	r.Data = data
	if err := b.store.PutPending(ctx, r.Pending); err != nil {
		b.log.Error("persist pending request", "request_id", r.RequestID, "err", err)
		return fmt.Errorf("persist pending %s: %w", r.RequestID, err)
	}
	return nil
}

func decode(p store.Pending) (*row, error) {
	r := &row{Pending: p}
	if err := json.Unmarshal(p.Data, &r.rec); err != nil {
		return nil, fmt.Errorf("decode pending %s: %w", p.RequestID, err)
	}
	r.rec.Resolved, r.rec.Applied = p.Resolved, p.Settled
	return r, nil
}
