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

	"github.com/tandem-dev/tandem/internal/auth"
	"github.com/tandem-dev/tandem/internal/store"
	"github.com/tandem-dev/tandem/internal/sweep"
	"github.com/tandem-dev/tandem/internal/tandem"
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
	Resolved   bool                     `json:"resolved,omitempty"`
	// Applied is set once the answer reached the run; a run with unapplied
	// rows is parked or suspended.
	Applied bool   `json:"applied,omitempty"`
	Answer  Answer `json:"answer"`
}

type row struct {
	store.Pending
	rec record
}

// Reviver brings a suspended run back into memory so it can use an answer.
type Reviver func(ws *workspace.Workspace, sessionID, runID string)

// Broker holds pending requests.
type Broker struct {
	store store.Store
	log   *slog.Logger

	// mu serializes every find-register-resolve sequence, so an answer and a
	// waiter can never miss each other.
	mu        sync.Mutex
	waiters   map[string]chan Answer
	approvals map[string]map[string]bool // session -> kinds it approved, as read from the store (see approvalsLocked)
	// used are the sessions of approvals asked about since the last sweep.
	used   sweep.Marks[string]
	revive Reviver
}

// New returns a Broker over st; revive brings back the runs it suspended
// (nil: they stay suspended).
func New(st store.Store, revive Reviver, log *slog.Logger) *Broker {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Broker{store: st, log: log, waiters: make(map[string]chan Answer), approvals: make(map[string]map[string]bool), revive: revive}
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
	defer b.mu.Unlock()
	kinds, err := b.approvalsLocked(ctx, sessionID)
	if err != nil {
		b.log.Error("read session approvals", "session_id", sessionID, "err", err)
		return false
	}
	return kinds[kind]
}

// approvalsLocked returns the session's approved kinds, reading them from
// the store the first time.
func (b *Broker) approvalsLocked(ctx context.Context, sessionID string) (map[string]bool, error) {
	if kinds, ok := b.approvals[sessionID]; ok {
		b.used.Use(sessionID)
		return kinds, nil
	}
	list, err := b.store.SessionApprovals(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	kinds := make(map[string]bool, len(list))
	for _, k := range list {
		kinds[k] = true
	}
	b.approvals[sessionID] = kinds
	b.used.Use(sessionID)
	return kinds, nil
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
	b.mu.Lock()
	r, err := b.find(bg, ws.ID, ref.RunID, ref.ToolCallID, kind)
	switch {
	case err != nil:
		b.mu.Unlock()
		b.log.Error("find pending request", "run_id", ref.RunID, "err", err)
		return failed(kind, err), false
	case r != nil && r.rec.Resolved:
		// Answered while the run was suspended: use the recorded answer.
		r.rec.Applied = true
		b.saveLocked(bg, r)
		b.mu.Unlock()
		auth.Handover(ctx, r.rec.Answer.Actor)
		return r.rec.Answer, false
	case r != nil:
		if ref.Announce {
			b.announce(bg, ws, r)
		}
	default:
		r = &row{Pending: store.Pending{
			RequestID: uuid.NewString(), WorkspaceID: ws.ID, SessionID: ref.SessionID, RunID: ref.RunID,
			Kind: kind, CreatedAt: time.Now().UTC(),
		}}
		r.rec = build(r.RequestID)
		// On disk before anyone hears of it.
		if err := b.saveLocked(bg, r); err != nil {
			b.mu.Unlock()
			return failed(kind, err), false
		}
		b.announce(bg, ws, r)
	}
	ch := make(chan Answer, 1)
	b.waiters[r.RequestID] = ch
	b.mu.Unlock()

	select {
	case ans := <-ch:
		b.markApplied(bg, r.RequestID)
		auth.Handover(ctx, ans.Actor)
		return ans, false
	case <-ctx.Done():
	}

	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.waiters, r.RequestID)
	select {
	case ans := <-ch:
		// Answered in the same instant: keep the answer, it is recorded.
		auth.Handover(ctx, ans.Actor)
		return ans, false
	default:
	}
	if ref.Suspend != nil && !ref.Suspend() {
		ans := canceledAnswer(kind)
		if _, err := b.resolveLocked(bg, ws, r, ans); err != nil {
			b.log.Error("resolve canceled request", "request_id", r.RequestID, "err", err)
		}
		r.rec.Applied = true
		b.saveLocked(bg, r)
		return ans, false
	}
	return Answer{}, true
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

// resolveLocked records ans on r, announces the resolution and hands the
// answer to the parked run, or returns false when no run waits for it.
// An answer the store does not take is neither announced nor handed on:
// the request stays open, and answering it again may work later.
func (b *Broker) resolveLocked(ctx context.Context, ws *workspace.Workspace, r *row, ans Answer) (delivered bool, err error) {
	r.rec.Resolved = true
	r.rec.Answer = ans
	if err := b.saveLocked(ctx, r); err != nil {
		r.rec.Resolved, r.rec.Answer = false, Answer{}
		return false, fmt.Errorf("resolve %s: %w", r.RequestID, err)
	}
	typ, data := proto.EventPermissionResolved, any(proto.PermissionResolved{
		RequestID: r.RequestID, Result: ans.Result, Feedback: ans.Feedback, ResolvedBy: ans.ResolvedBy, ResolvedByName: ans.ResolvedByName,
	})
	if r.Kind == KindToolCall {
		typ, data = proto.EventToolResolved, proto.ToolResolved{RequestID: r.RequestID, IsError: ans.IsError, ResolvedBy: ans.ResolvedBy, ResolvedByName: ans.ResolvedByName}
	}
	if _, err := ws.Emit(ctx, workspace.Draft{Type: typ, SessionID: r.SessionID, RunID: r.RunID, Data: data}); err != nil {
		b.log.Error("announce resolution", "request_id", r.RequestID, "err", err)
	}
	if ch := b.waiters[r.RequestID]; ch != nil {
		delete(b.waiters, r.RequestID)
		ch <- ans
		return true, nil
	}
	return false, nil
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
		return "", tandem.Invalid("decision must be approve_once, approve_session, reject or user_not_available, got %q", a.Decision)
	}
	if len(a.Feedback) > MaxFeedback {
		// It goes into permission.resolved and to the model.
		return "", tandem.Errorf(proto.CodeBodyTooLarge, "feedback is %d bytes; at most %d are allowed", len(a.Feedback), MaxFeedback)
	}
	ans.Feedback, ans.ResolvedBy = a.Feedback, a.ClientID
	if id, ok := auth.FromContext(ctx); ok {
		ans.ResolvedByName, ans.Actor = id.Name, auth.ActorFrom(ctx)
	}

	b.mu.Lock()
	r, err := b.claimLocked(ctx, ws, requestID, KindPermission)
	if err != nil {
		b.mu.Unlock()
		return "", err
	}
	if ans.Result == proto.ResultApprovedForSession {
		// On disk before anyone hears of the answer, like the answer itself.
		if err := b.approveLocked(ctx, r.SessionID, r.rec.Permission.Kind); err != nil {
			b.mu.Unlock()
			return "", err
		}
	}
	revive := [][2]string{}
	delivered, err := b.resolveLocked(ctx, ws, r, ans)
	if err != nil {
		b.mu.Unlock()
		return "", err
	}
	if !delivered {
		revive = append(revive, [2]string{r.SessionID, r.RunID})
	}
	if ans.Result == proto.ResultApprovedForSession {
		kind := r.rec.Permission.Kind
		// Requests of that kind already waiting in the session are answered too.
		others, err := b.rowsLocked(ctx, ws.ID, func(o *row) bool {
			return o.SessionID == r.SessionID && o.Kind == KindPermission && !o.rec.Resolved && o.rec.Permission.Kind == kind
		})
		if err != nil {
			b.log.Error("list pending requests", "err", err)
		}
		for _, o := range others {
			delivered, err := b.resolveLocked(ctx, ws, o, ans)
			if err != nil {
				// Asked again later; the kind is approved for the session.
				b.log.Error("resolve request approved for the session", "request_id", o.RequestID, "err", err)
				continue
			}
			if !delivered {
				revive = append(revive, [2]string{o.SessionID, o.RunID})
			}
		}
	}
	reviver := b.revive
	b.mu.Unlock()
	b.reviveAll(ws, reviver, revive)
	return ans.Result, nil
}

// approveLocked records the kind as approved for the session, on disk
// first.
func (b *Broker) approveLocked(ctx context.Context, sessionID, kind string) error {
	kinds, err := b.approvalsLocked(ctx, sessionID)
	if err != nil {
		return fmt.Errorf("approve %s for session %s: %w", kind, sessionID, err)
	}
	if err := b.store.ApproveForSession(ctx, sessionID, kind); err != nil {
		return err
	}
	kinds[kind] = true
	return nil
}

// AnswerToolCall resolves a client tool call with a client's result or error.
func (b *Broker) AnswerToolCall(ctx context.Context, ws *workspace.Workspace, requestID string, a proto.ToolCallAnswer) error {
	if err := checkClient(a.ClientID); err != nil {
		return err
	}
	if (a.Result == nil) == (a.Error == nil) {
		return tandem.Invalid("give exactly one of result and error")
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
	b.mu.Lock()
	r, err := b.claimLocked(ctx, ws, requestID, KindToolCall)
	if err != nil {
		b.mu.Unlock()
		return err
	}
	var revive [][2]string
	delivered, err := b.resolveLocked(ctx, ws, r, ans)
	if err != nil {
		b.mu.Unlock()
		return err
	}
	if !delivered {
		revive = append(revive, [2]string{r.SessionID, r.RunID})
	}
	reviver := b.revive
	b.mu.Unlock()
	b.reviveAll(ws, reviver, revive)
	return nil
}

func (b *Broker) reviveAll(ws *workspace.Workspace, reviver Reviver, runs [][2]string) {
	if reviver == nil {
		return
	}
	for _, r := range runs {
		reviver(ws, r[0], r[1])
	}
}

func checkClient(id string) error {
	if id == "" {
		return tandem.Invalid("client_id is required")
	}
	if _, err := uuid.Parse(id); err != nil {
		return tandem.Invalid("client_id must be a UUID, got %q", id)
	}
	return nil
}

// claimLocked finds an open request of the workspace that an answer may resolve.
func (b *Broker) claimLocked(ctx context.Context, ws *workspace.Workspace, requestID, kind string) (*row, error) {
	notFound := tandem.Errorf(proto.CodeRequestNotFound, "no pending %s %s", kindName(kind), requestID)
	if _, err := uuid.Parse(requestID); err != nil {
		return nil, notFound
	}
	p, err := b.store.GetPending(ctx, requestID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, notFound
	}
	if err != nil {
		return nil, fmt.Errorf("get pending %s: %w", requestID, err)
	}
	r, err := decode(p)
	if err != nil {
		return nil, err
	}
	if r.WorkspaceID != ws.ID || r.Kind != kind {
		return nil, notFound
	}
	if r.rec.Resolved {
		return nil, tandem.Errorf(proto.CodeAlreadyResolved, "%s %s was already resolved", kindName(kind), requestID)
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
	b.mu.Lock()
	rows, err := b.rowsLocked(ctx, wsID, func(r *row) bool {
		return !r.rec.Resolved && (sessionID == "" || r.SessionID == sessionID)
	})
	b.mu.Unlock()
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
	b.mu.Lock()
	defer b.mu.Unlock()
	rows, err := b.rowsLocked(ctx, wsID, func(r *row) bool { return r.SessionID == sessionID && !r.rec.Applied })
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
	b.mu.Lock()
	defer b.mu.Unlock()
	rows, err := b.rowsLocked(ctx, ws.ID, func(r *row) bool { return r.RunID == runID && !r.rec.Applied })
	if err != nil {
		return err
	}
	for _, r := range rows {
		if !r.rec.Resolved {
			ans := Answer{Result: proto.ResultCanceled}
			if r.Kind == KindToolCall {
				ans = Answer{Content: "interrupted", IsError: true}
			}
			if _, err := b.resolveLocked(ctx, ws, r, ans); err != nil {
				return err
			}
		}
		r.rec.Applied = true
		if err := b.saveLocked(ctx, r); err != nil {
			return err
		}
	}
	return nil
}

// CancelSession resolves the session's open requests as canceled; its
// session is going away.
func (b *Broker) CancelSession(ctx context.Context, ws *workspace.Workspace, sessionID string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.approvals, sessionID)
	b.used.Forget(sessionID)
	rows, err := b.rowsLocked(ctx, ws.ID, func(r *row) bool { return r.SessionID == sessionID && !r.rec.Resolved })
	if err != nil {
		b.log.Error("list pending requests", "session_id", sessionID, "err", err)
		return
	}
	for _, r := range rows {
		if _, err := b.resolveLocked(ctx, ws, r, canceledAnswer(r.Kind)); err != nil {
			b.log.Error("cancel request of a deleted session", "request_id", r.RequestID, "err", err)
		}
	}
}

func (b *Broker) markApplied(ctx context.Context, requestID string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	p, err := b.store.GetPending(ctx, requestID)
	if err != nil {
		b.log.Error("get pending request", "request_id", requestID, "err", err)
		return
	}
	r, err := decode(p)
	if err != nil {
		b.log.Error("decode pending request", "request_id", requestID, "err", err)
		return
	}
	r.rec.Applied = true
	b.saveLocked(ctx, r)
}

// AskedToolCall reports whether the run already made a client tool call
// request for the tool call. A revived run that finds one knows the call
// got past its permission step, whatever the tool's spec (which left with
// its client) said.
func (b *Broker) AskedToolCall(ctx context.Context, wsID, runID, toolCallID string) (bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	r, err := b.find(ctx, wsID, runID, toolCallID, KindToolCall)
	return r != nil, err
}

// AskedPermission reports whether the run already asked a permission for
// the tool call. A revived run that finds one goes on with that request
// (and its answer), whatever permission rules say now.
func (b *Broker) AskedPermission(ctx context.Context, wsID, runID, toolCallID string) (bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
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

// rowsLocked returns the workspace's unsettled requests that keep accepts;
// settled ones are never work again.
func (b *Broker) rowsLocked(ctx context.Context, wsID string, keep func(*row) bool) ([]*row, error) {
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

func (b *Broker) saveLocked(ctx context.Context, r *row) error {
	data, err := json.Marshal(r.rec)
	if err != nil {
		return fmt.Errorf("encode pending %s: %w", r.RequestID, err)
	}
	r.Data = data
	// Applied is the last state a request reaches: its answer is in the
	// run, or the run is over.
	r.Settled = r.rec.Applied
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
	return r, nil
}
