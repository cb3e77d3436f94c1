// Package agent executes one run: it records the prompt, streams model steps
// into assistant messages, calls tools between steps, and always ends the run
// with a finish part and exactly one run.completed, whatever happens.
//
// The run's lifecycle (accepting, queueing, canceling) is the coordinator's;
// this package only does the work of a run once it has started.
package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/tandem-dev/tandem/internal/compute"
	"github.com/tandem-dev/tandem/internal/models"
	"github.com/tandem-dev/tandem/internal/provider"
	"github.com/tandem-dev/tandem/internal/store"
	"github.com/tandem-dev/tandem/internal/workspace"
	"github.com/tandem-dev/tandem/proto"
)

// Tools is what the loop needs from the tool layer.
type Tools interface {
	// Offer returns the tools the model may call in the run's next step, and
	// notes the model should read (tools that went away, for instance).
	Offer(ctx context.Context, run *Run) (tools []provider.Tool, notes []string)
	// Call runs one tool call, asking permissions or clients as needed, and
	// returns what goes back to the model. It honours ctx.
	Call(ctx context.Context, run *Run, call provider.ToolCall) ToolResult
	// Interrupt resolves the open requests of a suspended run as interrupted.
	Interrupt(ctx context.Context, run *Run) error
}

// ToolResult is a tool's answer for the model.
type ToolResult struct {
	Content string
	IsError bool
	// Suspended reports that the call still waits on a client while the
	// run's context ended for a reason other than a cancel: the run is kept.
	Suspended bool
	// Permission is set when a permission rule decided the call
	// (proto.ToolFinished.Permission).
	Permission string
	// Sandbox is the sandbox setting a command ran under
	// (proto.ToolFinished.Sandbox).
	Sandbox string
}

// Revival modes of a suspended run.
const (
	// ReviveContinue answers what was answered, waits for the rest, and goes on.
	ReviveContinue = "continue"
	// ReviveInterrupt ends the run as interrupted without calling the model.
	ReviveInterrupt = "interrupt"
	// ReviveCancel ends the run as canceled without calling the model: a
	// cancel met it suspended (invariant 4).
	ReviveCancel = "cancel"
)

// Attachment is a prepared prompt attachment.
type Attachment struct {
	Part  proto.Part      // what the user message shows
	Text  string          // file content sent to the model as text, if any
	Image *provider.Image // image input, if any
}

// Run is one run's inputs.
type Run struct {
	ID          string
	SessionID   string
	ClientID    string
	Workspace   *workspace.Workspace
	Prompt      string
	Author      *proto.Author // who prompted (section 9); nil when unknown
	Attachments []Attachment
	// History is the session's conversation, shared by its runs; nil
	// rereads it from the store at every model step.
	History *History

	// Model is the session's model string, recorded on assistant messages;
	// ModelName is what the provider is asked for.
	Model           string
	ModelName       string
	ReasoningEffort string
	// System builds the system prompt for a request offering these tools.
	System   func(tools []string) string
	Provider provider.Provider
	// Catalog prices the run's requests and knows its model's context
	// window; nil is the built-in table alone.
	Catalog *models.Catalog
	// Compaction is the session's compaction settings (see compact.go).
	Compaction proto.Compaction
	// Compact makes the run a compaction run (POST .../compact): it has
	// no prompt and no user message, summarizes the whole conversation,
	// and ends end_turn.
	Compact bool
	// Steers takes the prompts that joined the run (delivery steer) since
	// the last call; with final, a call that finds none closes the run to
	// steering (later steers queue as runs of their own), so none can
	// join once the run has decided to end. nil: none join.
	Steers func(final bool) []Steer
	// Refresh, when set, re-reads the session's settings into the run before
	// each model step, so a model switch applies to the next request.
	Refresh func(run *Run)

	AvailableTools []string
	ExcludedTools  []string
	PermissionMode string

	// Canceled reports an explicit cancel (as opposed to the workspace closing).
	Canceled func() bool
	// Commit is called when the run decides to end with an outcome other
	// than canceled, or to suspend. It returns false when a cancel got
	// there first: the run then ends canceled. Once it returned true, a
	// cancel no longer counts the run among those it stops, so a run that
	// canceled_runs lists always ends canceled (invariant 2). Nil commits.
	Commit func() bool

	// Revive is empty for a new run, else how a suspended run comes back.
	Revive string
	// Announce re-announces the requests a revived run still waits on.
	Announce bool

	// UserMessageID is set, as the run records its prompt, to its user
	// message's id, for the hooks of its tools.
	UserMessageID string
	// Ending, when set, is called as the run ends, before its run.completed
	// is queued (not when it is suspended).
	Ending func()
}

// Steer is a prompt that joined a run (delivery steer). Its user message,
// whose id was decided when it was accepted, enters the run's history
// before the run's next model request.
type Steer struct {
	MessageID   string
	Prompt      string
	ClientID    string
	Author      *proto.Author // who steered (section 9); nil when unknown
	Attachments []Attachment
}

// Result is how a run ended.
type Result struct {
	Outcome   string
	Error     *proto.ErrorDetail
	MessageID string
	// Suspended reports a run parked on clients when its workspace closed:
	// it has not ended and has emitted no run.completed.
	Suspended bool
}

// Runner executes runs.
type Runner struct {
	Store store.Store
	Tools Tools
	// MaxSteps bounds model calls per run; 0 means 50.
	MaxSteps int
	// Retries bounds retries of a failed model call (429, 5xx); 0 means 3, -1 none.
	Retries int
	// Backoff is the wait before retry n (from 0) when the API did not ask
	// for one; nil means 1s, 2s, 4s... each jittered by ±50%. A longer wait
	// the API asked for (provider.Error.RetryAfter, from Retry-After) wins,
	// jittered up by at most a tenth; no wait exceeds
	// provider.MaxRetryAfter. Tests shorten waits with it.
	Backoff func(n int) time.Duration
	// Slots bounds the runs computing at once (see package compute): a
	// model step holds a slot while it builds its request and while its
	// model bursts, not while it waits for the model, nor while it
	// publishes what a model that made it wait sent. Nil bounds nothing.
	Slots  *compute.Slots
	Logger *slog.Logger
}

// Execute runs the run (or revives it, see Run.Revive) until it ends or is
// suspended. Unless suspended, it has emitted run.completed when it returns.
func (r *Runner) Execute(ctx context.Context, run *Run) Result {
	x := &execution{r: r, run: run, ctx: ctx, log: r.logger().With("run_id", run.ID, "session_id", run.SessionID)}
	var res Result
	if run.Revive != "" {
		res = x.revive()
	} else {
		res = x.execute()
	}
	if res.Suspended {
		x.settle()
		x.log.Info("run suspended")
		return res
	}
	if run.Ending != nil {
		run.Ending()
	}
	usage := x.usage
	// The run's usage reaches the session's totals with run.completed, in
	// its transaction: counted once, with the run's end.
	x.queue(workspace.Draft{
		Type: proto.EventRunCompleted,
		Data: proto.RunCompleted{
			RunID: run.ID, Outcome: res.Outcome, Error: res.Error, MessageID: res.MessageID, Usage: &usage,
		},
		Usage: &store.SessionUsage{Add: usage, ContextTokens: x.contextTokens()},
	})
	x.settle()
	return res
}

func (r *Runner) logger() *slog.Logger {
	if r.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return r.Logger
}

// execution is the state of one Execute call.
type execution struct {
	r   *Runner
	run *Run
	ctx context.Context
	log *slog.Logger
	// userID is this run's user message, whose attachments are sent in full;
	// earlier runs' attachments are only named. steered holds the
	// attachments of the run's steered prompts, by message id: sent in
	// full too.
	userID  string
	steered map[string][]Attachment

	// pending are the run's events not yet emitted (see flush); tool calls
	// add to it side by side. linger, when set, flushes them soon (see
	// eventLinger); draining is set while a goroutine flushes them at
	// once (see now). background counts the linger's callback and the
	// draining goroutine until they have returned.
	mu         sync.Mutex
	pending    []workspace.Draft
	linger     *time.Timer
	draining   bool
	background sync.WaitGroup
	// flushing keeps flushes whole, so events are numbered in the order
	// the run queued them even when tool calls flush side by side.
	flushing sync.Mutex
	// failed is the error of the first flush the store would not take;
	// its events wait in pending for the next flush, and the run ends
	// even if that one succeeds. stopModel ends the model request in
	// flight, if any. Both are guarded by mu.
	failed    error
	stopModel context.CancelFunc

	// usage is what the run's model requests consumed so far, and size
	// what the conversation weighs for the model; only the run's own
	// goroutine (not its tool calls) touches them.
	usage proto.Usage
	size  contextSize
}

// eventLinger is how long a run's progress (its prompt, the opening of an
// assistant message) may wait before a model call to share one commit with
// what follows it. A delta to a watched workspace never waits for it: see
// execution.now.
const eventLinger = 5 * time.Millisecond

// stopped reports whether the run must end as canceled.
func (x *execution) stopped() bool {
	return x.ctx.Err() != nil || (x.run.Canceled != nil && x.run.Canceled())
}

// storeFailed returns the error of the store when it would not take the
// run's events at one of its flushes.
func (x *execution) storeFailed() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.failed
}

// halt ends the run early when it must: canceled, or unable to write its
// events. A run whose events the store refuses goes no further (no model
// request, no tool runs unrecorded); its end is written when the store
// takes writes again (see settle).
func (x *execution) halt(asst *proto.Message) (Result, bool) {
	if err := x.storeFailed(); err != nil {
		return x.finish(asst, proto.OutcomeError, &proto.ErrorDetail{
			Code:    proto.CodeStorageUnavailable,
			Message: "the run stopped: the store refused its events (disk full or database locked)",
		}), true
	}
	if x.stopped() {
		return x.finish(asst, proto.OutcomeCanceled, nil), true
	}
	return Result{}, false
}

func (x *execution) execute() Result {
	x.emit(proto.EventRunStarted, proto.RunStarted{RunID: x.run.ID}, false)
	if x.run.Compact {
		return x.compactRun()
	}
	x.recordPrompt()
	return x.loop()
}

// compactRun summarizes the whole conversation, then ends the run with an
// assistant message holding its finish part.
func (x *execution) compactRun() Result {
	var err error
	if !x.stopped() && x.storeFailed() == nil {
		var tokens int64
		if _, tokens, err = x.request(); err == nil {
			err = x.compact(tokens, keepNone, "")
		}
	}
	asst := x.newMessage(proto.RoleAssistant)
	asst.Model = x.run.Model
	x.save(&asst, proto.EventMessageCreated)
	if res, ok := x.halt(&asst); ok {
		return res
	}
	if err != nil {
		return x.finish(&asst, proto.OutcomeError, compactionError(err))
	}
	return x.finish(&asst, proto.OutcomeEndTurn, nil)
}

// recordPrompt queues the run's user message.
func (x *execution) recordPrompt() {
	user := x.newMessage(proto.RoleUser)
	user.ClientID = x.run.ClientID
	user.Author = x.run.Author
	user.Parts = append(user.Parts, proto.Part{Type: proto.PartText, Text: x.run.Prompt})
	for _, a := range x.run.Attachments {
		user.Parts = append(user.Parts, a.Part)
	}
	x.userID = user.ID
	x.run.UserMessageID = user.ID
	x.save(&user, proto.EventMessageCreated)
}

// EndUnstarted ends new runs that were canceled before they started, each
// exactly as Execute would (run.started, its user message, an assistant
// message ending in finish canceled, run.completed), but all in one commit.
// The runs share a session and workspace.
func (r *Runner) EndUnstarted(ctx context.Context, runs []*Run) {
	if len(runs) == 0 {
		return
	}
	var ds []workspace.Draft
	for _, run := range runs {
		x := &execution{r: r, run: run, ctx: ctx, log: r.logger().With("run_id", run.ID, "session_id", run.SessionID)}
		x.emit(proto.EventRunStarted, proto.RunStarted{RunID: run.ID}, false)
		if !run.Compact {
			x.recordPrompt()
		}
		asst := x.newMessage(proto.RoleAssistant)
		asst.Model = run.Model
		x.save(&asst, proto.EventMessageCreated)
		res := x.finish(&asst, proto.OutcomeCanceled, nil)
		x.emit(proto.EventRunCompleted, proto.RunCompleted{RunID: run.ID, Outcome: res.Outcome, MessageID: res.MessageID, Usage: &proto.Usage{}}, false)
		ds = append(ds, x.pending...)
	}
	x := &execution{r: r, run: runs[0], ctx: ctx, log: r.logger().With("session_id", runs[0].SessionID, "runs", len(runs)), pending: ds}
	x.settle()
}

// loop runs model steps and their tool calls until the turn ends.
func (x *execution) loop() Result {
	maxSteps := x.r.MaxSteps
	if maxSteps == 0 {
		maxSteps = 50
	}
	for step := 0; ; step++ {
		// Prompts steered into the run since its last request go in now.
		x.takeSteers(false)
		// The request is built before the step's message, so that a
		// compaction it needs is recorded ahead of the step it makes room for.
		var (
			req    provider.Request
			tokens int64
			err    error
		)
		if step < maxSteps && !x.stopped() && x.storeFailed() == nil {
			req, tokens, err = x.request()
			if err == nil && x.overLimit(tokens) {
				switch cerr := x.compact(tokens, keepAuto, ""); {
				case errors.Is(cerr, errNothingToCompact):
					// All of it is this turn's (or the system prompt's):
					// the request goes as it is, and the provider says
					// whether it fits.
					x.log.Debug("over the compaction threshold with nothing to compact", "tokens", tokens)
				case cerr != nil:
					return x.compactionFailed(cerr)
				default:
					req, tokens, err = x.request()
				}
			}
		}
		asst := x.newMessage(proto.RoleAssistant)
		asst.Model = x.run.Model
		x.save(&asst, proto.EventMessageCreated)
		if res, ok := x.halt(&asst); ok {
			return res
		}
		if step == maxSteps {
			return x.finish(&asst, proto.OutcomeError, &proto.ErrorDetail{
				Code: "step_limit", Message: fmt.Sprintf("the run stopped after %d model steps", maxSteps),
			})
		}
		if err != nil {
			return x.finish(&asst, proto.OutcomeError, modelError(err))
		}
		resp, err := x.callModel(&asst, &req)
		if res, ok := x.halt(&asst); ok {
			return res
		}
		if pe, ok := provider.AsError(err); ok && pe.Code == provider.CodeContextExceeded && x.run.Compaction.Auto {
			// Over the window after all (its size unknown, or the
			// estimate low): compact, and try once more.
			switch cerr := x.compact(max(tokens, x.requestTokens(req)), keepAfterRefusal, asst.ID); {
			case errors.Is(cerr, errNothingToCompact):
				// Nothing to make room with: the provider's error stands.
			case cerr != nil:
				if res, ok := x.halt(&asst); ok {
					return res
				}
				return x.finish(&asst, proto.OutcomeError, compactionError(cerr))
			default:
				resp, err = x.callModel(&asst, nil)
				if res, ok := x.halt(&asst); ok {
					return res
				}
			}
		}
		if err != nil {
			return x.finish(&asst, proto.OutcomeError, modelError(err))
		}
		if len(resp.ToolCalls) == 0 {
			if x.takeSteers(true) {
				// Steered as the model answered: it answers them too.
				asst.Parts = append(asst.Parts, proto.Part{Type: proto.PartFinish, Reason: proto.FinishEndTurn})
				x.save(&asst, proto.EventMessageUpdated)
				continue
			}
			return x.finish(&asst, proto.OutcomeEndTurn, nil)
		}
		for _, c := range resp.ToolCalls {
			asst.Parts = append(asst.Parts, proto.Part{Type: proto.PartToolCall, ID: c.ID, Name: c.Name, Arguments: objectOrEmpty(c.Arguments)})
		}
		asst.Parts = append(asst.Parts, proto.Part{Type: proto.PartFinish, Reason: proto.FinishToolUse})
		x.save(&asst, proto.EventMessageUpdated)
		if x.runTools(resp.ToolCalls, false) {
			return x.suspend()
		}
	}
}

// suspend parks the run (see Result.Suspended). Prompts that joined it go
// into its history now, after its pending calls (the model reads them
// after the calls' results when the run goes on); later ones queue.
func (x *execution) suspend() Result {
	x.takeSteers(true)
	return Result{Suspended: true}
}

// compactionFailed ends the run whose compaction before a step failed: as
// canceled or on the store's error when that is why, else with
// compaction_failed. The history has no summary: nothing the model reads
// changed.
func (x *execution) compactionFailed(err error) Result {
	asst := x.newMessage(proto.RoleAssistant)
	asst.Model = x.run.Model
	x.save(&asst, proto.EventMessageCreated)
	if res, ok := x.halt(&asst); ok {
		return res
	}
	return x.finish(&asst, proto.OutcomeError, compactionError(err))
}

// runTools runs the step's tool calls side by side, so several may wait on
// clients at once. Every call that does not wait gets a result in the
// history, even one a cancel kept from running, so the next request is
// well-formed for every provider. It reports whether any call was suspended.
func (x *execution) runTools(calls []provider.ToolCall, revived bool) (suspended bool) {
	x.flush()
	var wg sync.WaitGroup
	results := make([]bool, len(calls))
	for i, c := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = x.runTool(c, revived)
		}()
	}
	wg.Wait()
	return slices.Contains(results, true)
}

func (x *execution) runTool(c provider.ToolCall, revived bool) (suspended bool) {
	var res ToolResult
	if x.stopped() && !revived {
		res = ToolResult{Content: "canceled before it ran", IsError: true}
	} else {
		args := objectOrEmpty(c.Arguments)
		if !revived {
			x.emit(proto.EventToolStarted, proto.ToolStarted{ToolCallID: c.ID, Name: c.Name, Arguments: args}, false)
			x.flush()
		}
		if x.storeFailed() != nil {
			// Nothing runs that the store could not record.
			res = ToolResult{Content: "not run: the store refused to record the call", IsError: true}
		} else {
			res = x.r.Tools.Call(x.ctx, x.run, provider.ToolCall{ID: c.ID, Name: c.Name, Arguments: args})
		}
		if res.Suspended {
			return true
		}
		res.Content = CutToolResult(res.Content)
		x.emit(proto.EventToolFinished, proto.ToolFinished{ToolCallID: c.ID, Name: c.Name, IsError: res.IsError, Content: res.Content, Permission: res.Permission, Sandbox: res.Sandbox}, false)
	}
	x.toolMessage(c, res)
	x.flush()
	return false
}

func (x *execution) toolMessage(c provider.ToolCall, res ToolResult) {
	msg := x.newMessage(proto.RoleTool)
	msg.Parts = []proto.Part{{Type: proto.PartToolResult, ToolCallID: c.ID, Name: c.Name, Content: res.Content, IsError: res.IsError}}
	x.save(&msg, proto.EventMessageCreated)
}

// revive brings a suspended run back: the tool calls of its last step that
// have no result yet are run again (their requests found answered, or waited
// on anew), or interrupted; then the run goes on or ends.
func (x *execution) revive() Result {
	msgs, err := x.run.History.Messages(x.ctx, x.r.Store, x.run.SessionID)
	if err != nil {
		x.log.Error("read history of suspended run", "err", err)
	}
	var calls []provider.ToolCall
	done := map[string]bool{}
	for _, m := range msgs {
		if m.RunID != x.run.ID {
			continue
		}
		if m.Usage != nil {
			// Requests made before the run was suspended count in its usage.
			x.usage = x.usage.Add(*m.Usage)
		}
		switch m.Role {
		case proto.RoleUser:
			if x.userID == "" { // steered prompts come later
				x.userID = m.ID
			}
		case proto.RoleAssistant:
			calls = calls[:0]
			for _, p := range m.Parts {
				if p.Type == proto.PartToolCall {
					calls = append(calls, provider.ToolCall{ID: p.ID, Name: p.Name, Arguments: objectOrEmpty(p.Arguments)})
				}
			}
		case proto.RoleTool:
			for _, p := range m.Parts {
				done[p.ToolCallID] = true
			}
		}
	}
	missing := slices.DeleteFunc(calls, func(c provider.ToolCall) bool { return done[c.ID] })
	if x.userID == "" && x.run.Prompt != "" {
		// A run the server lost before it started (a crash with it queued)
		// still gets its user message.
		user := x.newMessage(proto.RoleUser)
		user.Parts = append(user.Parts, proto.Part{Type: proto.PartText, Text: x.run.Prompt})
		for _, a := range x.run.Attachments {
			user.Parts = append(user.Parts, a.Part)
		}
		x.userID = user.ID
		x.save(&user, proto.EventMessageCreated)
	}

	if x.run.Revive == ReviveInterrupt || x.run.Revive == ReviveCancel {
		x.flush()
		outcome, content := proto.OutcomeInterrupted, "interrupted: the run was not continued"
		if x.run.Revive == ReviveCancel {
			outcome, content = proto.OutcomeCanceled, "canceled"
		} else if err := x.r.Tools.Interrupt(x.ctx, x.run); err != nil {
			// A cancel resolved the requests itself, before it answered.
			x.log.Error("interrupt pending requests", "err", err)
		}
		for _, c := range missing {
			res := ToolResult{Content: content, IsError: true}
			x.emit(proto.EventToolFinished, proto.ToolFinished{ToolCallID: c.ID, Name: c.Name, IsError: true, Content: res.Content}, false)
			x.toolMessage(c, res)
		}
		asst := x.newMessage(proto.RoleAssistant)
		asst.Model = x.run.Model
		x.save(&asst, proto.EventMessageCreated)
		return x.finish(&asst, outcome, nil)
	}
	if x.runTools(missing, true) {
		return x.suspend()
	}
	return x.loop()
}

// finish ends the assistant message with the outcome's finish part. Any
// outcome but canceled is first committed to: a cancel that came first wins.
//
// Prompts that joined the run and were not yet in its history enter it
// now, and the run's end answers them: its finish goes on asst and on an
// assistant message of its own after them, the run's last.
func (x *execution) finish(asst *proto.Message, outcome string, e *proto.ErrorDetail) Result {
	steered := x.takeSteers(true)
	if outcome != proto.OutcomeCanceled && x.run.Commit != nil && !x.run.Commit() {
		outcome, e = proto.OutcomeCanceled, nil
	}
	part := proto.Part{Type: proto.PartFinish, Reason: outcome}
	if e != nil {
		part.Message = e.Message
	}
	asst.Parts = append(asst.Parts, part)
	x.save(asst, proto.EventMessageUpdated)
	if steered {
		last := x.newMessage(proto.RoleAssistant)
		last.Model = x.run.Model
		last.Parts = append(last.Parts, part)
		x.save(&last, proto.EventMessageCreated)
		asst = &last
	}
	return Result{Outcome: outcome, Error: e, MessageID: asst.ID}
}

// takeSteers records the prompts that joined the run since the last call,
// and reports whether there were any (see Run.Steers for final). One
// already in the history (a run revived after a crash) is not recorded
// again.
func (x *execution) takeSteers(final bool) bool {
	if x.run.Steers == nil {
		return false
	}
	steers := x.run.Steers(final)
	if len(steers) == 0 {
		return false
	}
	known := map[string]bool{}
	_ = x.run.History.Read(context.WithoutCancel(x.ctx), x.r.Store, x.run.SessionID, func(msgs []proto.Message) {
		for _, st := range steers {
			for i := len(msgs) - 1; i >= 0; i-- {
				if msgs[i].ID == st.MessageID {
					known[st.MessageID] = true
					break
				}
			}
		}
	})
	for _, st := range steers {
		if known[st.MessageID] {
			continue
		}
		m := x.newMessage(proto.RoleUser)
		m.ID = st.MessageID
		m.ClientID = st.ClientID
		m.Author = st.Author
		m.Parts = append(m.Parts, proto.Part{Type: proto.PartText, Text: st.Prompt})
		for _, a := range st.Attachments {
			m.Parts = append(m.Parts, a.Part)
		}
		if len(st.Attachments) > 0 {
			if x.steered == nil {
				x.steered = make(map[string][]Attachment)
			}
			x.steered[m.ID] = st.Attachments
		}
		x.save(&m, proto.EventMessageCreated)
	}
	x.log.Info("steered prompts joined the run", "count", len(steers))
	return true
}

// callModel streams one model step into asst: req (nil: built now), and
// for a retry a request built anew. Its usage, summed over the attempts,
// goes on asst.
func (x *execution) callModel(asst *proto.Message, req *provider.Request) (provider.Response, error) {
	// open tracks the part the deltas of each kind go to; a new kind starts a new part.
	open := -1
	build := func(attempt int) (provider.Request, error) {
		if attempt == 0 && req != nil {
			return *req, nil
		}
		r, _, err := x.request()
		return r, err
	}
	resp, sent, used, requested, err := x.send(build, func(d provider.Delta) {
		if open < 0 || asst.Parts[open].Type != d.Kind {
			asst.Parts = append(asst.Parts, proto.Part{Type: d.Kind})
			open = len(asst.Parts) - 1
		}
		asst.Parts[open].Text += d.Text
		x.emit(proto.EventMessageDelta, proto.MessageDelta{MessageID: asst.ID, PartIndex: open, Kind: d.Kind, Text: d.Text}, true)
	})
	if requested {
		u := x.run.Catalog.Usage(x.run.Model, used)
		x.usage = x.usage.Add(u)
		if asst.Usage != nil {
			// The step's request again, after a compaction.
			u = asst.Usage.Add(u)
		}
		asst.Usage = &u
	}
	if err == nil {
		if open < 0 && resp.Text != "" {
			asst.Parts = append(asst.Parts, proto.Part{Type: proto.PartText, Text: resp.Text})
		}
		x.answered(sent, resp)
	}
	return resp, err
}

// send makes one model request with the run's retries: build makes the
// request of each attempt (from 0). Failures worth retrying are retried
// (each retry a session.log warning), unless onDelta already passed on
// some of the answer; onDelta nil keeps the answer to the caller, so any
// such failure may be retried. used sums what every attempt was billed: a
// retried request costs each time the provider counted it; requested
// reports whether any attempt reached the provider.
func (x *execution) send(build func(attempt int) (provider.Request, error), onDelta func(provider.Delta)) (resp provider.Response, req provider.Request, used provider.Usage, requested bool, err error) {
	retries := x.r.Retries
	switch {
	case retries == 0:
		retries = 3
	case retries < 0:
		retries = 0
	}
	for attempt := 0; ; attempt++ {
		// The run's progress so far goes out while the model thinks.
		x.soon()
		slot, sctx, err := x.r.Slots.Hold(x.ctx)
		if err != nil {
			return provider.Response{}, req, used, requested, fmt.Errorf("waiting to compute: %w", err)
		}
		req, err = build(attempt)
		if err != nil {
			slot.Done()
			return provider.Response{}, req, used, requested, err
		}
		requested = true
		streamed := false
		// A flush the store refuses ends the request: the run stops there.
		mctx, stop := context.WithCancel(sctx)
		x.mu.Lock()
		x.stopModel = stop
		failed := x.failed
		x.mu.Unlock()
		if failed != nil {
			stop()
		}
		resp, err = x.run.Provider.Stream(mctx, req, func(d provider.Delta) {
			if onDelta != nil {
				streamed = true
				onDelta(d)
			}
		})
		slot.Done()
		x.mu.Lock()
		x.stopModel = nil
		x.mu.Unlock()
		stop()
		used = used.Add(resp.Usage)
		if err == nil {
			return resp, req, used, requested, nil
		}
		var pe *provider.Error
		if x.stopped() || x.storeFailed() != nil || streamed || attempt >= retries || !errors.As(err, &pe) || !pe.Retryable {
			return resp, req, used, requested, err
		}
		wait := x.backoff(attempt, pe.RetryAfter)
		asked := ""
		if pe.RetryAfter > 0 {
			asked = fmt.Sprintf(", as the model asked to wait %v", pe.RetryAfter)
		}
		x.emit(proto.EventSessionLog, proto.SessionLog{
			Level: "warning",
			Message: fmt.Sprintf("model request failed (%s: %s); retry %d of %d in %v%s",
				pe.Code, cut(pe.Message, maxErrorMessage), attempt+1, retries, wait.Round(time.Millisecond), asked),
		}, false)
		x.flush()
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-x.ctx.Done():
			t.Stop()
			return resp, req, used, requested, x.ctx.Err()
		}
	}
}

// backoff is the wait before retry n (see Runner.Backoff); asked is the
// wait the API asked for, if any.
func (x *execution) backoff(n int, asked time.Duration) time.Duration {
	var base time.Duration
	if x.r.Backoff != nil {
		base = x.r.Backoff(n)
	} else {
		base = jitter(time.Second<<min(n, 6), 0.5)
	}
	return retryWait(base, asked)
}

// retryWait combines the backoff and the wait the API asked for: the
// longer of the two, the asked one jittered up so that the clients one
// limit stopped do not all come back at the same instant, and never more
// than provider.MaxRetryAfter.
func retryWait(base, asked time.Duration) time.Duration {
	wait := base
	if asked > 0 {
		wait = max(wait, asked+time.Duration(rand.Int64N(int64(asked/10)+1)))
	}
	return min(max(wait, 0), provider.MaxRetryAfter)
}

// jitter spreads d uniformly over d±spread·d.
func jitter(d time.Duration, spread float64) time.Duration {
	w := int64(float64(d) * spread)
	if w <= 0 {
		return d
	}
	return d - time.Duration(w) + time.Duration(rand.Int64N(2*w+1))
}

// request builds the provider request from the session's history, and
// tells how many tokens it carries: estimated, or, when the run's last
// request reported its usage, that plus an estimate of the messages since
// (see contextSize).
func (x *execution) request() (req provider.Request, tokens int64, err error) {
	var history []provider.Message
	if err := x.run.History.Read(x.ctx, x.r.Store, x.run.SessionID, func(msgs []proto.Message) {
		history = x.history(msgs)
		if x.size.known {
			tokens = x.size.of(msgs)
		}
	}); err != nil {
		return provider.Request{}, 0, fmt.Errorf("read history: %w", err)
	}
	if x.run.Refresh != nil {
		x.run.Refresh(x.run)
	}
	tools, notes := x.r.Tools.Offer(x.ctx, x.run)
	names := make([]string, len(tools))
	for i, t := range tools {
		names[i] = t.Name
	}
	var system string
	if x.run.System != nil {
		system = x.run.System(names)
	}
	if len(notes) > 0 && len(history) > 0 {
		// Notes ride on the newest message so the model reads them now.
		last := &history[len(history)-1]
		for _, n := range notes {
			last.Text += "\n\n[notice] " + n
		}
	}
	req = provider.Request{
		Model:           x.run.ModelName,
		ReasoningEffort: x.run.ReasoningEffort,
		System:          system,
		Messages:        history,
		Tools:           tools,
	}
	if tokens == 0 {
		tokens = provider.EstimateTokens(req)
	}
	return req, tokens, nil
}

// requestTokens estimates req's tokens.
func (x *execution) requestTokens(req provider.Request) int64 { return provider.EstimateTokens(req) }

// history converts stored messages into the provider's conversation: the
// last compaction's summary in place of the messages it covers, then every
// message after those. Each tool call is followed by its result (a call
// left without one, by a "canceled" result), whatever was recorded in
// between: a user message recorded while calls waited on their results (a
// steered prompt) comes after the results.
func (x *execution) history(msgs []proto.Message) []provider.Message {
	start, summary := compactedView(msgs)
	out := make([]provider.Message, 0, len(msgs)-start+1)
	if summary != nil {
		out = append(out, summaryMessage(summary.Text))
	}
	// pending are tool calls of the last assistant message still owed a
	// result; deferred, the user messages that came while they were.
	var pending []provider.ToolCall
	var deferred []*proto.Message
	flushDeferred := func() {
		for _, m := range deferred {
			out = append(out, x.userMessage(m))
		}
		deferred = nil
	}
	settle := func() {
		for _, c := range pending {
			out = append(out, provider.Message{Role: provider.RoleTool, ToolCallID: c.ID, ToolName: c.Name, Text: "canceled", IsError: true})
		}
		pending = nil
		flushDeferred()
	}
	// By index: a message is a large struct, and a history is read at
	// every step of every run.
	for i := start; i < len(msgs); i++ {
		m := &msgs[i]
		if isSummary(m) {
			continue // the latest is in front; older ones are in it
		}
		switch m.Role {
		case proto.RoleUser:
			if len(pending) > 0 {
				deferred = append(deferred, m)
				continue
			}
			out = append(out, x.userMessage(m))
		case proto.RoleAssistant:
			settle()
			pm := provider.Message{Role: provider.RoleAssistant}
			for _, p := range m.Parts {
				switch p.Type {
				case proto.PartText:
					pm.Text += p.Text
				case proto.PartToolCall:
					pm.ToolCalls = append(pm.ToolCalls, provider.ToolCall{ID: p.ID, Name: p.Name, Arguments: objectOrEmpty(p.Arguments)})
				}
			}
			if pm.Text == "" && len(pm.ToolCalls) == 0 {
				continue // an empty step (canceled, failed) says nothing to the model
			}
			out = append(out, pm)
			// A copy: answering a call removes it from pending in place, which
			// must not touch the calls the request sends.
			pending = slices.Clone(pm.ToolCalls)
		case proto.RoleTool:
			for _, p := range m.Parts {
				if p.Type != proto.PartToolResult {
					continue
				}
				for i, c := range pending {
					if c.ID == p.ToolCallID {
						pending = append(pending[:i], pending[i+1:]...)
						out = append(out, provider.Message{Role: provider.RoleTool, ToolCallID: p.ToolCallID, ToolName: p.Name, Text: p.Content, IsError: p.IsError})
						break
					}
				}
			}
			if len(pending) == 0 {
				flushDeferred()
			}
		}
	}
	settle()
	return out
}

// userMessage is a user message as the model sees it: its text, then, for
// the run's own prompt, the text of its attachments (and its images), or,
// for an earlier prompt, a note for each attachment it had. The text is
// built once at its final size: a prompt may carry 20 MiB of attachments,
// and joining them one by one would copy what came before at each step.
func (x *execution) userMessage(m *proto.Message) provider.Message {
	const earlier = "\n\n[attachment %q was shown in an earlier turn]"
	pm := provider.Message{Role: provider.RoleUser}
	atts, current := x.run.Attachments, m.ID == x.userID
	if s, ok := x.steered[m.ID]; ok {
		atts, current = s, true
	}
	if len(m.Parts) == 1 && m.Parts[0].Type == proto.PartText && (!current || len(atts) == 0) {
		// The common message, text only: its text as stored, not a copy,
		// so that every step of the session sends the same string (and
		// the encode cache compares it with what it kept at a glance).
		pm.Text = m.Parts[0].Text
		return pm
	}
	size := 0
	for _, p := range m.Parts {
		switch {
		case p.Type == proto.PartText:
			size += len(p.Text)
		case p.Type == proto.PartAttachment && !current:
			size += len(earlier) + len(p.DisplayName) + 8 // quoting may escape a few bytes
		}
	}
	if current {
		for _, a := range atts {
			if a.Text != "" {
				size += 2 + len(a.Text)
			}
		}
	}
	var b strings.Builder
	b.Grow(size)
	for _, p := range m.Parts {
		if p.Type == proto.PartText {
			b.WriteString(p.Text)
		}
	}
	if current {
		for _, a := range atts {
			if a.Text != "" {
				b.WriteString("\n\n")
				b.WriteString(a.Text)
			}
			if a.Image != nil {
				pm.Images = append(pm.Images, *a.Image)
			}
		}
	} else {
		for _, p := range m.Parts {
			if p.Type == proto.PartAttachment {
				fmt.Fprintf(&b, earlier, p.DisplayName)
			}
		}
	}
	pm.Text = b.String()
	return pm
}

// newMessage starts a message of the run. Its id is a version 7 UUID: ids
// made later sort later, so the store's index of message ids grows at its
// end instead of splitting pages all over it in every run's commit.
func (x *execution) newMessage(role string) proto.Message {
	now := proto.Now()
	return proto.Message{
		ID:        uuid.Must(uuid.NewV7()).String(),
		SessionID: x.run.SessionID,
		RunID:     x.run.ID,
		Role:      role,
		Parts:     []proto.Part{},
		CreatedAt: now,
		UpdatedAt: now,
	}
}

// save records m in the session's history and queues its event with it:
// the message and the event are written in one transaction when the run next
// flushes.
func (x *execution) save(m *proto.Message, typ string) {
	m.UpdatedAt = proto.Now()
	_ = x.run.History.Record(*m, func(m proto.Message) error {
		d := workspace.Draft{Type: typ, Message: &m}
		// The session moves up the list when a prompt is accepted (the
		// coordinator's commit) and when the run ends; touching it on every
		// intermediate write would be waste.
		if endsRun(&m) {
			d.Touch = m.UpdatedAt.Time
		}
		x.queue(d)
		return nil
	})
}

// emit queues an event of the run; an ephemeral one (a delta) goes out at
// once (see now) with whatever was queued before it, when a client watches
// the workspace. When none does, the delta would reach nobody: it waits
// like the run's progress does (see soon), so that a run nobody watches
// does not pay a commit for its first delta.
func (x *execution) emit(typ string, data any, ephemeral bool) {
	x.queue(workspace.Draft{Type: typ, Data: data, Ephemeral: ephemeral})
	switch {
	case !ephemeral:
	case x.run.Workspace.Watched():
		x.now()
	default:
		x.soon()
	}
}

// soon flushes the queued events within eventLinger, unless a delta sends
// them first: the progress a run makes before a model call shares a
// commit with what follows it, and a tool-call step without text costs one
// commit.
func (x *execution) soon() {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.linger != nil || x.draining {
		return
	}
	x.background.Add(1)
	x.linger = time.AfterFunc(eventLinger, func() {
		defer x.background.Done()
		x.mu.Lock()
		x.linger = nil
		x.mu.Unlock()
		x.flush()
	})
}

// now sends the queued events without waiting: the first delta of a quiet
// stream leaves at once. While a flush is in flight (a commit of kept
// events, or the hand-over to the streams), the deltas that arrive queue up
// and leave together in the flush that follows it at once: a fast model's
// burst costs a few flushes, not one per delta, and no delta waits for a
// timer. The flushing runs on its own goroutine so the model's stream is
// never held up by a commit.
func (x *execution) now() {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.linger != nil && x.linger.Stop() {
		x.linger = nil
		x.background.Done() // its callback will not run
	}
	if x.draining {
		return
	}
	x.draining = true
	x.background.Add(1)
	go x.drain()
}

// drain flushes until nothing is queued, or until the store refuses the
// run's events (the run then halts; settle retries).
func (x *execution) drain() {
	defer x.background.Done()
	for {
		err := x.flush()
		x.mu.Lock()
		if err != nil || len(x.pending) == 0 {
			x.draining = false
			x.mu.Unlock()
			return
		}
		x.mu.Unlock()
	}
}

// settle ends the run's writing: no flush is left waiting, and everything
// queued is emitted. While the store refuses writes (a full disk, a lock
// held too long) it tries again, up to once a second, so the run's end is
// written as soon as the store takes writes again: every run gets its
// run.completed, once. It gives up only on an error that will not pass
// (the store closed at shutdown): the next start then ends the run as
// interrupted.
func (x *execution) settle() {
	x.mu.Lock()
	if x.linger != nil && x.linger.Stop() {
		x.background.Done() // its callback will not run
	}
	x.linger = nil
	x.mu.Unlock()
	x.background.Wait()
	for wait, waited := settleFirstWait, false; ; wait = min(2*wait, settleMaxWait) {
		err := x.flush()
		if err == nil {
			if waited {
				x.log.Info("run's events written: the store takes writes again")
			}
			return
		}
		if !errors.Is(err, store.ErrUnavailable) {
			x.log.Error("run's last events lost", "err", err)
			return
		}
		if !waited {
			waited = true
			x.log.Warn("run waits for the store to take its events", "err", err)
		}
		time.Sleep(wait)
	}
}

// How often settle tries again while the store refuses writes.
const (
	settleFirstWait = 50 * time.Millisecond
	settleMaxWait   = time.Second
)

func (x *execution) queue(d workspace.Draft) {
	d.SessionID, d.RunID = x.run.SessionID, x.run.ID
	x.mu.Lock()
	defer x.mu.Unlock()
	x.pending = append(x.pending, d)
}

// flush emits the queued events in one transaction and returns once they
// are published. A run flushes whenever clients must see where it is before
// it goes on: before it calls a tool, before it waits, and when it ends;
// while the model streams, each delta is sent at once or with the flush
// that follows the one in flight (see now). Between those points its writes
// share one commit instead of taking one each.
//
// A store that refuses them for a while (storage unavailable: a database
// restarting, an owner renewing a lease that lapsed meanwhile) is waited
// for, storeWait at most, the run paused: it goes on once the store takes
// them. Past that, or on another error, the events that are kept (all but
// deltas) go back to the head of the queue for the next flush, the run is
// marked failed (see halt) and its model request, if one is in flight,
// ends.
func (x *execution) flush() error {
	x.flushing.Lock()
	defer x.flushing.Unlock()
	x.mu.Lock()
	ds := x.pending
	x.pending = nil
	x.mu.Unlock()
	if len(ds) == 0 {
		return nil
	}
	_, err := x.run.Workspace.EmitAll(x.ctx, ds)
	if err == nil {
		return nil
	}
	if ds, err = x.awaitStore(ds, err); err == nil {
		return nil
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.failed == nil {
		x.log.Error("emit events", "type", ds[0].Type, "count", len(ds), "err", err)
		x.failed = err
	}
	kept := slices.DeleteFunc(ds, func(d workspace.Draft) bool { return d.Ephemeral })
	x.pending = append(kept, x.pending...)
	if x.stopModel != nil {
		x.stopModel()
	}
	return err
}

// storeWait bounds how long a flush waits for a store that is unavailable
// before the run fails: longer than a database restart an owner outlives
// (cluster.Node keeps a lapsed lease half a lease past its end).
const storeWait = 10 * time.Second

// awaitStore emits ds again, after err, while the store is unavailable,
// for storeWait at most, unless the run stops meanwhile. Deltas are not
// worth the wait: only the kept events are emitted again. It returns the
// events still to emit and the last error, nil once they are emitted.
func (x *execution) awaitStore(ds []workspace.Draft, err error) ([]workspace.Draft, error) {
	deadline := time.Now().Add(storeWait)
	for wait := settleFirstWait; errors.Is(err, store.ErrUnavailable) && time.Now().Before(deadline) && !x.stopped(); wait = min(2*wait, settleMaxWait) {
		ds = slices.DeleteFunc(ds, func(d workspace.Draft) bool { return d.Ephemeral })
		if len(ds) == 0 {
			return nil, nil
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-x.ctx.Done():
			t.Stop()
			return ds, err
		}
		if _, err = x.run.Workspace.EmitAll(x.ctx, ds); err == nil {
			x.log.Info("run's events written: the store takes writes again")
			return nil, nil
		}
	}
	return ds, err
}

// endsRun reports whether m is a run's last assistant message.
func endsRun(m *proto.Message) bool {
	n := len(m.Parts)
	return m.Role == proto.RoleAssistant && n > 0 && m.Parts[n-1].Type == proto.PartFinish && m.Parts[n-1].Reason != proto.FinishToolUse
}

// modelError maps a provider failure to run.completed's error. Its message
// is what the provider's API said, which can be a whole HTML page or
// megabytes of junk: it is cut, as it goes in the finish part too.
func modelError(err error) *proto.ErrorDetail {
	var pe *provider.Error
	if errors.As(err, &pe) {
		return &proto.ErrorDetail{Code: pe.Code, Message: cut(pe.Message, maxErrorMessage)}
	}
	return &proto.ErrorDetail{Code: "model_error", Message: cut(err.Error(), maxErrorMessage)}
}

const (
	// MaxToolResult bounds a tool result as the model gets it, the line
	// saying what was cut included (contract section 7).
	MaxToolResult = 64 << 10
	// maxErrorMessage bounds a model error's message.
	maxErrorMessage = 4 << 10
)

// CutToolResult cuts a tool's output longer than MaxToolResult, at a line
// end when there is one near, and says how much was cut and how to read
// the rest. Every tool result goes through it before the model, the
// history and tool.finished see it.
func CutToolResult(content string) string {
	if len(content) <= MaxToolResult {
		return content
	}
	note := func(cut int) string {
		return fmt.Sprintf("\n\n[%d bytes of this output were cut (%d in all). To read the rest, write the output to a file in the workspace and read it with view, using offset to page through it, or narrow the call.]", cut, len(content))
	}
	// The note is longest for the most bytes cut.
	keep := runeStart(content, MaxToolResult-len(note(len(content))))
	if nl := strings.LastIndexByte(content[:keep], '\n'); nl >= keep-keep/8 {
		keep = nl + 1
	}
	return content[:keep] + note(len(content)-keep)
}

// cut shortens s to at most max bytes, saying how many were cut.
func cut(s string, max int) string {
	if len(s) <= max {
		return s
	}
	keep := runeStart(s, max-32)
	return s[:keep] + fmt.Sprintf("… [%d bytes cut]", len(s)-keep)
}

// runeStart moves i back to the start of the rune it falls in.
func runeStart(s string, i int) int {
	for i > 0 && i < len(s) && !utf8.RuneStart(s[i]) {
		i--
	}
	return i
}

func objectOrEmpty(args json.RawMessage) json.RawMessage {
	if len(args) == 0 || string(args) == "null" {
		return json.RawMessage(`{}`)
	}
	return args
}
