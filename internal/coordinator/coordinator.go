// Package coordinator owns the lifecycle of agent runs: it accepts prompts,
// queues them per session, starts them one at a time on the workspace's
// context, and cancels them.
//
// Each session has one small state machine guarded by its own mutex: an
// active run and a queue of accepted runs. A run exists from the moment its
// 202 is decided, so a cancel can always find it; a cancel marks exactly the
// runs present at that moment, which is what makes invariants 2 to 4 hold.
//
// A session's state machine stays in the coordinator's map as long as its
// worker runs, deleted or not: a second state machine for the same session
// would start a second worker, and two runs of one session at once
// (invariant 7). Lock order: sessionRuns.mu before Coordinator.mu; nothing
// takes a sessionRuns.mu while holding Coordinator.mu.
package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/tandem-dev/tandem/internal/agent"
	"github.com/tandem-dev/tandem/internal/apierr"
	"github.com/tandem-dev/tandem/internal/auth"
	"github.com/tandem-dev/tandem/internal/checkpoint"
	"github.com/tandem-dev/tandem/internal/config"
	"github.com/tandem-dev/tandem/internal/mcp"
	"github.com/tandem-dev/tandem/internal/prompt"
	"github.com/tandem-dev/tandem/internal/provider"
	"github.com/tandem-dev/tandem/internal/rules"
	"github.com/tandem-dev/tandem/internal/sandbox"
	"github.com/tandem-dev/tandem/internal/session"
	"github.com/tandem-dev/tandem/internal/store"
	"github.com/tandem-dev/tandem/internal/toolset"
	"github.com/tandem-dev/tandem/internal/workspace"
	"github.com/tandem-dev/tandem/proto"
)

// Config wires a Coordinator.
type Config struct {
	Store      Store
	Workspaces Workspaces
	Sessions   Sessions
	Runner     Runner
	Broker     Broker
	Tools      Tools
	// Configs gives each workspace its configuration (providers, rules, MCP
	// servers), read again when its file changed; nil is the empty one.
	Configs Configs
	// MCP tunes the MCP servers of workspaces and sessions.
	MCP mcp.PoolOptions
	// NewProvider builds a model provider; registry.New in production.
	NewProvider func(provider.Config) (provider.Provider, error)
	// Checkpoints keeps the workspaces' checkpoints (section 11); nil, or
	// a store without store.Rewinds, takes none.
	Checkpoints *checkpoint.Manager
	// Sandbox starts the agent's commands confined (contract section 12);
	// nil confines none, so that every command but those under "off"
	// is refused.
	Sandbox *sandbox.Launcher
	// SandboxDir is where each session's $TMPDIR (tmp/SESSION_ID) and
	// each workspace's build cache (cache/WORKSPACE_ID) are: the data dir.
	SandboxDir string
	// Getenv reads provider settings (API keys, base URLs); os.Getenv in production.
	Getenv func(string) string
	// Hooks, when set, is bound to the Coordinator New makes: the
	// components made before it call back through it.
	Hooks  *Hooks
	Logger *slog.Logger
}

// Coordinator runs prompts.
type Coordinator struct {
	cfg Config
	log *slog.Logger

	mu       sync.Mutex
	sessions map[string]*sessionRuns
	hist     histories
	prompts  systemPrompts
	// mcp runs the MCP servers of workspaces and sessions.
	mcp *mcp.Pool
	// deletes counts the session deletes that have removed a session from
	// the store (see admitLocked).
	deletes atomic.Uint64

	// workers counts session worker goroutines so shutdown can wait for them.
	workers sync.WaitGroup
}

// New returns a Coordinator.
func New(cfg Config) *Coordinator {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Configs == nil {
		cfg.Configs, _ = config.NewLoader(nil) // an empty configuration merges
	}
	c := &Coordinator{cfg: cfg, log: cfg.Logger, sessions: make(map[string]*sessionRuns), mcp: mcp.NewPool(cfg.MCP, cfg.Logger)}
	if cfg.Hooks != nil {
		cfg.Hooks.bind(c)
	}
	return c
}

// sessionRuns is one session's run state machine.
type sessionRuns struct {
	id string
	ws *workspace.Workspace

	mu     sync.Mutex
	active *run
	queue  []*run
	// idle is closed when the session's worker exits; nil while none runs.
	idle chan struct{}
	// history is the conversation its runs share; nil until needed or
	// after it was dropped (see histories).
	history *agent.History

	// deleting counts the deletes of the session in progress, and deleted
	// is set once one of them removed it from the store. While either
	// holds, the session takes no new run: it is fenced (see admitLocked).
	deleting int
	deleted  bool
	// dropped is set when this state machine left the coordinator's map,
	// which happens only once it is deleted and its worker has exited;
	// whoever finds it dropped looks the session up again.
	dropped bool
}

// run is an accepted prompt.
type run struct {
	id          string
	prompt      string
	clientID    string
	actor       *proto.Actor // who prompted (section 9); nil for a run recovered after a restart
	attachments []agent.Attachment
	// encoded is attachments in their kept form (see keep.go), until the
	// accept has stored them with its run.accepted.
	encoded []byte
	// stored is set when the run's attachments are in the store only (a
	// run taken over from another owner, or revived): read as it starts.
	stored bool

	// revive and announce describe a suspended run brought back (agent.Run).
	revive   string
	announce bool

	// session is the session as read when the run was accepted, and changes
	// the count of settings changes before that read (session.Changes); nil
	// for a revived run.
	session *store.Session
	changes uint64
	// name asks the run to title its untitled session after the prompt; it
	// is done when the run starts, off the 202's path.
	name bool
	// config is the workspace's configuration as the prompt was accepted
	// with; nil for a revived run.
	config *config.Config
	// compact makes it a compaction run (POST .../compact): no prompt.
	compact bool
	// key is the prompt's idempotency key, "" for none.
	key string

	// steers are the prompts that joined the run (delivery steer) and
	// that it has not taken yet; closed is set when it took its last:
	// a steer then queues as a run of its own. Guarded by sessionRuns.mu.
	steers []agent.Steer
	closed bool

	// ending is set as the run ends, before its run.completed is written:
	// from then on its session's worker is only on its way out, and what
	// waits for the session to be idle waits for it (settledLocked).
	ending atomic.Bool

	// state is runLive until a cancel claims the run (runCanceled) or the
	// run commits to another end (runCommitted); it never changes again.
	// That one compare-and-swap is what keeps a cancel from listing a run
	// that then ends any other way.
	state atomic.Int32
	// cancel stops the run once started; guarded by sessionRuns.mu.
	cancel context.CancelFunc
}

// Run states (run.state).
const (
	runLive int32 = iota
	runCanceled
	runCommitted
)

// claimCancel marks the run canceled unless it committed to another end
// already, and reports whether it is (now or before) canceled.
func (r *run) claimCancel() bool {
	return r.state.CompareAndSwap(runLive, runCanceled) || r.state.Load() == runCanceled
}

// commit marks the run as ending some way other than canceled, unless it
// was canceled first; it reports whether the run may end that way.
func (r *run) commit() bool {
	return r.state.CompareAndSwap(runLive, runCommitted) || r.state.Load() == runCommitted
}

func (r *run) isCanceled() bool { return r.state.Load() == runCanceled }

// steerableLocked reports whether a prompt may join r: it will take it
// before its next model request, or record it with its end. A compaction
// run has no model step to answer it, a run being interrupted none either,
// and a canceled one would end it canceled: a prompt accepted after a
// cancel runs (invariant 4). Callers hold sessionRuns.mu.
func (r *run) steerableLocked() bool {
	return !r.compact && !r.closed && r.revive != agent.ReviveInterrupt && r.state.Load() == runLive
}

// takeSteers hands the run the prompts that joined it (agent.Run.Steers).
func (sr *sessionRuns) takeSteers(r *run, final bool) []agent.Steer {
	sr.mu.Lock()
	defer sr.mu.Unlock()
	out := r.steers
	r.steers = nil
	if final && len(out) == 0 {
		r.closed = true
	}
	return out
}

// current returns the active run and the ones waiting behind it. Between
// runs the worker has not yet picked up the head of the queue; that run
// starts next whatever happens (its 202 may have said "running"), so it
// counts as active from its accept on. Callers hold sr.mu.
func (sr *sessionRuns) current() (active *run, queued []*run) {
	if sr.active != nil || len(sr.queue) == 0 {
		return sr.active, sr.queue
	}
	return sr.queue[0], sr.queue[1:]
}

// hasLocked reports whether the run is active or queued.
func (sr *sessionRuns) hasLocked(runID string) bool {
	if sr.active != nil && sr.active.id == runID {
		return true
	}
	return slices.ContainsFunc(sr.queue, func(r *run) bool { return r.id == runID })
}

func (c *Coordinator) session(ws *workspace.Workspace, id string) *sessionRuns {
	c.mu.Lock()
	defer c.mu.Unlock()
	sr := c.sessions[id]
	if sr == nil {
		sr = &sessionRuns{id: id, ws: ws}
		c.sessions[id] = sr
	}
	return sr
}

// lockSession returns the session's state machine locked. It is the one in
// the coordinator's map: one dropped meanwhile is never returned.
func (c *Coordinator) lockSession(ws *workspace.Workspace, id string) *sessionRuns {
	for {
		sr := c.session(ws, id)
		sr.mu.Lock()
		if !sr.dropped {
			return sr
		}
		sr.mu.Unlock()
	}
}

// dropLocked removes a deleted session whose worker has exited from the
// map. Callers hold sr.mu.
func (c *Coordinator) dropLocked(sr *sessionRuns) {
	sr.dropped = true
	sr.history = nil
	c.mu.Lock()
	if c.sessions[sr.id] == sr {
		delete(c.sessions, sr.id)
	}
	c.mu.Unlock()
}

func (c *Coordinator) existing(id string) *sessionRuns {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sessions[id]
}

// admitted is what a new run of a session is accepted with.
type admitted struct {
	deletes uint64 // the delete count before the session was read: see admitLocked
	changes uint64 // the settings changes before the read (session.Changes)
	session store.Session
	config  *config.Config
}

// admission reads what a prompt or a compaction of a session needs before it
// is accepted: the session, in an open workspace, with a valid configuration.
func (c *Coordinator) admission(ctx context.Context, ws *workspace.Workspace, sessionID string) (admitted, error) {
	// Read before the session is looked up: see admitLocked.
	deletes := c.deletes.Load()
	// Counted before the read, so a change racing with it is seen as one.
	changes := c.cfg.Sessions.Changes()
	_, sess, err := c.cfg.Sessions.LookupSettings(ctx, ws.ID, sessionID)
	if err != nil {
		return admitted{}, err
	}
	if err := ws.CheckOpen(); err != nil {
		return admitted{}, err
	}
	// A stat of the workspace's file, unless it changed: then it is read.
	cfg, err := c.cfg.Configs.Workspace(ws.Path)
	if err != nil {
		return admitted{}, session.InvalidConfig(err)
	}
	return admitted{deletes: deletes, changes: changes, session: sess, config: cfg}, nil
}

// Prompt accepts a prompt: validated, recorded as run.accepted, queued, and
// answered before the model is called.
func (c *Coordinator) Prompt(ctx context.Context, wsID string, req proto.PromptRequest) (proto.PromptAccepted, error) {
	ws, err := c.cfg.Workspaces.Get(ctx, wsID)
	if err != nil {
		return proto.PromptAccepted{}, err
	}
	if err := validatePrompt(req); err != nil {
		return proto.PromptAccepted{}, err
	}
	ad, err := c.admission(ctx, ws, req.SessionID)
	if err != nil {
		return proto.PromptAccepted{}, err
	}
	deletes, changes, sess, cfg := ad.deletes, ad.changes, ad.session, ad.config
	atts, err := prepareAttachments(ws.Path, req.Attachments)
	if err != nil {
		return proto.PromptAccepted{}, err
	}
	r := &run{
		id: uuid.NewString(), prompt: req.Prompt, clientID: req.ClientID, attachments: atts,
		session: &sess, changes: changes, name: sess.Title == session.DefaultTitle, config: cfg,
		actor: auth.ActorFrom(ctx), key: req.IdempotencyKey,
	}
	if len(atts) > 0 {
		// Encoded before any lock is taken: it copies up to 20 MiB.
		r.encoded = encodeAttachments(atts)
	}
	var state string
	var position int
	if req.Delivery == proto.DeliverySteer {
		state, position, err = c.steer(ctx, ws, sess.ID, r, deletes)
	} else {
		state, position, err = c.accept(ctx, ws, sess.ID, r, deletes)
	}
	if err != nil {
		return proto.PromptAccepted{}, err
	}
	if req.ClientID != "" {
		c.cfg.Sessions.Join(ws, sess.ID, req.ClientID)
	}
	return proto.PromptAccepted{RunID: r.id, SessionID: sess.ID, State: state, Position: position}, nil
}

// steer joins r's prompt to the session's active run when it may take it
// (see steerableLocked), else accepts r as a run of its own. The joined
// run's id comes back in r.id. A steer is announced as run.accepted with
// state steered, on disk before the 202 like any accept: other clients
// see the prompt arrive, and a crash cannot lose it (Recover records it).
func (c *Coordinator) steer(ctx context.Context, ws *workspace.Workspace, sessionID string, r *run, deletes uint64) (state string, position int, err error) {
	sr := c.lockSession(ws, sessionID)
	if err := c.admitLocked(ctx, sr, deletes); err != nil {
		sr.mu.Unlock()
		return "", 0, err
	}
	if id, state, position, found, err := c.priorLocked(ctx, sr, r); err != nil || found {
		sr.mu.Unlock()
		r.id = id
		return state, position, err
	}
	active, _ := sr.current()
	if active == nil || !active.steerableLocked() {
		sr.mu.Unlock()
		return c.accept(ctx, ws, sessionID, r, deletes)
	}
	defer sr.mu.Unlock()
	st := agent.Steer{MessageID: uuid.Must(uuid.NewV7()).String(), Prompt: r.prompt, ClientID: r.clientID, Attachments: r.attachments, Author: auth.Author(ctx)}
	if _, err := ws.Emit(ctx, workspace.Draft{
		Type: proto.EventRunAccepted, SessionID: sessionID, RunID: active.id,
		Data:  proto.RunAccepted{RunID: active.id, State: proto.RunSteered, ClientID: r.clientID, Prompt: r.prompt, MessageID: st.MessageID},
		Touch: time.Now(), // a steer is activity in the session, as a prompt is
		// Kept until the run ends: if it ends on another owner, or after
		// a crash, the steered prompt still has them.
		Attachments: keep(st.MessageID, r.encoded),
		PromptKey:   promptKey(r),
	}); err != nil {
		return "", 0, fmt.Errorf("accept steered prompt: %w", err)
	}
	active.steers = append(active.steers, st)
	r.id = active.id
	return proto.RunSteered, 0, nil
}

// Compact queues a compaction run for the session (POST .../compact),
// accepted like a prompt: its run.accepted is on disk before the 202.
func (c *Coordinator) Compact(ctx context.Context, wsID, sessionID string) (proto.PromptAccepted, error) {
	ws, err := c.cfg.Workspaces.Get(ctx, wsID)
	if err != nil {
		return proto.PromptAccepted{}, err
	}
	ad, err := c.admission(ctx, ws, sessionID)
	if err != nil {
		return proto.PromptAccepted{}, err
	}
	deletes, changes, sess, cfg := ad.deletes, ad.changes, ad.session, ad.config
	r := &run{id: uuid.NewString(), session: &sess, changes: changes, config: cfg, compact: true, actor: auth.ActorFrom(ctx)}
	state, position, err := c.accept(ctx, ws, sess.ID, r, deletes)
	if err != nil {
		return proto.PromptAccepted{}, err
	}
	return proto.PromptAccepted{RunID: r.id, SessionID: sess.ID, State: state, Position: position}, nil
}

// accept records run.accepted and queues r. The event is on disk before the
// 202 and before the run can start, and emitted under the session lock so
// accepted events come in queue order. The same commit moves the session to
// the top of the list: that is all the 202 waits for. deletes is the count
// of deletes read before the session was looked up.
func (c *Coordinator) accept(ctx context.Context, ws *workspace.Workspace, sessionID string, r *run, deletes uint64) (state string, position int, err error) {
	sr := c.lockSession(ws, sessionID)
	defer sr.mu.Unlock()
	if err := c.admitLocked(ctx, sr, deletes); err != nil {
		return "", 0, err
	}
	if id, state, position, found, err := c.priorLocked(ctx, sr, r); err != nil || found {
		r.id = id
		return state, position, err
	}
	state, position = proto.RunRunning, 0
	// Counted as Status counts: the head of the queue the worker has not
	// picked up yet is the active run, not a queued one.
	if active, waiting := sr.current(); active != nil {
		state, position = proto.RunQueued, len(waiting)+1
	}
	// On disk before the 202; numbered under the lock, so published
	// before the run's own events, without waiting for that here.
	if _, err := ws.Record(ctx, workspace.Draft{
		Type: proto.EventRunAccepted, SessionID: sessionID, RunID: r.id,
		Data:  proto.RunAccepted{RunID: r.id, State: state, Position: position, ClientID: r.clientID, Prompt: r.prompt, Compaction: r.compact},
		Touch: time.Now(),
		// With the event, in its transaction: a run queued when this
		// server dies runs with them on the next owner.
		Attachments: keep("", r.encoded),
		PromptKey:   promptKey(r),
	}); err != nil {
		return "", 0, fmt.Errorf("accept run: %w", err)
	}
	r.encoded = nil
	c.enqueueLocked(sr, r)
	return state, position, nil
}

// admitLocked refuses a run for a session that is being or has been
// deleted. The prompt looked the session up before it got here, and a delete
// may have run in between: when any delete removed a session since the
// lookup began (deletes moved), or this one was deleted, the store says
// whether the session exists (again: its id may have been reused). That read
// is rare; the count is what keeps it off the 202's usual path.
// Callers hold sr.mu.
func (c *Coordinator) admitLocked(ctx context.Context, sr *sessionRuns, deletes uint64) error {
	if sr.deleting > 0 {
		return apierr.Errorf(proto.CodeSessionNotFound, "session %s not found: it is being deleted", sr.id)
	}
	if !sr.deleted && c.deletes.Load() == deletes {
		return nil
	}
	if _, err := c.cfg.Store.GetSession(ctx, sr.ws.ID, sr.id); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return apierr.Errorf(proto.CodeSessionNotFound, "session %s not found", sr.id)
		}
		return fmt.Errorf("check session %s: %w", sr.id, err)
	}
	// Created again under the same id: its runs queue behind whatever the
	// deleted one still has running.
	sr.deleted = false
	return nil
}

// Limits of the strings of a prompt that go into events (run.accepted, the
// user message): each event's data is at most 1 MiB (contract section 1).
// Longer texts go as attachments.
const (
	// MaxPrompt bounds a prompt's text.
	MaxPrompt         = 256 << 10
	maxAttachmentName = 1 << 10
	maxAttachmentPath = 4 << 10
	maxMimeType       = 255
)

func validatePrompt(req proto.PromptRequest) error {
	switch req.Delivery {
	case "", proto.DeliveryQueue, proto.DeliverySteer:
	default:
		return apierr.Invalid("delivery must be %s or %s, got %q", proto.DeliveryQueue, proto.DeliverySteer, req.Delivery)
	}
	if req.SessionID == "" {
		return apierr.Invalid("session_id is required")
	}
	if _, err := uuid.Parse(req.SessionID); err != nil {
		return apierr.Invalid("session_id must be a UUID, got %q", req.SessionID)
	}
	if strings.TrimSpace(req.Prompt) == "" {
		return apierr.Invalid("prompt must not be empty")
	}
	if err := apierr.CheckLen("prompt", req.Prompt, MaxPrompt); err != nil {
		return err
	}
	for i, a := range req.Attachments {
		// What the user message shows of an attachment is an event too.
		if err := apierr.CheckLen(fmt.Sprintf("attachments[%d].display_name", i), a.DisplayName, maxAttachmentName); err != nil {
			return err
		}
		if err := apierr.CheckLen(fmt.Sprintf("attachments[%d].path", i), a.Path, maxAttachmentPath); err != nil {
			return err
		}
		if err := apierr.CheckLen(fmt.Sprintf("attachments[%d].mime_type", i), a.MimeType, maxMimeType); err != nil {
			return err
		}
	}
	if req.ClientID != "" {
		if _, err := uuid.Parse(req.ClientID); err != nil {
			return apierr.Invalid("client_id must be a UUID, got %q", req.ClientID)
		}
	}
	return checkIdempotencyKey(req.IdempotencyKey)
}

// enqueueLocked queues r and starts the session's worker if none runs.
func (c *Coordinator) enqueueLocked(sr *sessionRuns, r *run) {
	sr.queue = append(sr.queue, r)
	if sr.idle == nil {
		sr.idle = make(chan struct{})
		c.workers.Add(1)
		go c.drain(sr, sr.idle)
	}
}

// Revive queues a suspended run so it comes back into memory; mode is
// agent.ReviveContinue or agent.ReviveInterrupt. A run already in memory is
// left alone: its parked calls get their answers directly.
func (c *Coordinator) Revive(ws *workspace.Workspace, sessionID, runID, mode string, announce bool) {
	sr := c.lockSession(ws, sessionID)
	defer sr.mu.Unlock()
	if sr.hasLocked(runID) || sr.deleting > 0 || sr.deleted {
		return
	}
	// An answer can race with the session's delete, which this state
	// machine (new, then) would not know of: revivals are rare enough to
	// ask the store whether the session is still there.
	if _, err := c.cfg.Store.GetSession(context.Background(), ws.ID, sessionID); err != nil {
		c.log.Warn("not reviving a run of a missing session", "run_id", runID, "session_id", sessionID, "err", err)
		return
	}
	c.log.Info("reviving run", "run_id", runID, "session_id", sessionID, "mode", mode)
	// A run that goes on shows the model its attachments again, as before
	// it was suspended.
	c.enqueueLocked(sr, &run{id: runID, revive: mode, announce: announce, stored: mode == agent.ReviveContinue})
}

// drain is the session's worker: it runs queued runs one at a time and exits
// when the queue is empty.
func (c *Coordinator) drain(sr *sessionRuns, idle chan struct{}) {
	defer c.workers.Done()
	defer close(idle)
	for {
		sr.mu.Lock()
		if len(sr.queue) == 0 {
			sr.active = nil
			sr.idle = nil
			// Emitted under the lock so a prompt accepted right now cannot
			// slip its run.started in before this idle.
			// Numbered, not published, under it: waiting for the
			// publication would hold the lock (and the session's next
			// 202) behind the writes of every other run in flight.
			if _, err := sr.ws.Record(context.Background(), workspace.Draft{Type: proto.EventSessionIdle, SessionID: sr.id, Data: proto.Empty{}}); err != nil {
				c.log.Error("emit session.idle", "session_id", sr.id, "err", err)
			}
			// A deleted session leaves the map with its worker, not before.
			drop := sr.deleted && sr.deleting == 0
			if drop {
				c.dropLocked(sr)
			}
			sr.mu.Unlock()
			if drop {
				c.hist.forget(sr)
			} else {
				c.hist.went(sr)
			}
			return
		}
		if batch := sr.canceledHeadLocked(); len(batch) > 0 {
			sr.dropHeadLocked(len(batch))
			sr.active = batch[0]
			for _, r := range batch {
				r.ending.Store(true)
			}
			history := sr.historyLocked()
			sr.mu.Unlock()
			c.endUnstarted(sr, batch, history)
			continue
		}
		r := sr.queue[0]
		sr.dropHeadLocked(1)
		sr.active = r
		ctx, cancel := context.WithCancel(sr.ws.Context())
		r.cancel = cancel
		if r.isCanceled() {
			cancel()
		}
		history := sr.historyLocked()
		sr.mu.Unlock()

		c.execute(auth.WithRunActor(ctx, r.actor), sr, r, history)
		cancel()
	}
}

// dropHeadLocked takes the first n runs off the queue. Their slots are
// cleared and an emptied queue lets go of its array: a slice resliced to
// nothing still holds its array, so each idle session kept its last run
// (prompt, attachments, session record) for as long as it lived.
func (sr *sessionRuns) dropHeadLocked(n int) {
	clear(sr.queue[:n])
	sr.queue = sr.queue[n:]
	if len(sr.queue) == 0 {
		sr.queue = nil
	}
}

// maxUnstartedBatch bounds how many canceled runs end in one commit.
const maxUnstartedBatch = 128

// canceledHeadLocked returns the runs at the head of the queue that were
// canceled before they started (revived runs aside: they have requests to
// settle). Callers hold sr.mu.
func (sr *sessionRuns) canceledHeadLocked() []*run {
	n := 0
	for n < len(sr.queue) && n < maxUnstartedBatch {
		r := sr.queue[n]
		if r.revive != "" || !r.isCanceled() {
			break
		}
		n++
	}
	return slices.Clone(sr.queue[:n])
}

// endUnstarted ends runs canceled before they started, all in one commit:
// a cancel or a delete with many prompts queued ends them at once, not one
// commit (and one model-free step) after the other.
func (c *Coordinator) endUnstarted(sr *sessionRuns, batch []*run, history *agent.History) {
	ctx := context.Background()
	ars := make([]*agent.Run, len(batch))
	named := false
	for i, r := range batch {
		if r.name && !named {
			named = true
			if err := c.cfg.Sessions.NameFromPrompt(ctx, sr.ws.ID, sr.id, r.prompt); err != nil {
				c.log.Warn("name session", "session_id", sr.id, "err", err)
			}
		}
		ars[i] = &agent.Run{
			History: history, ID: r.id, SessionID: sr.id, ClientID: r.clientID,
			Workspace: sr.ws, Prompt: r.prompt, Attachments: r.attachments, Compact: r.compact,
			Steers: func(final bool) []agent.Steer { return sr.takeSteers(r, final) },
		}
		if r.session != nil {
			ars[i].Model = r.session.Model
		}
	}
	c.cfg.Runner.EndUnstarted(ctx, ars)
	c.log.Info("runs canceled before they started", "session_id", sr.id, "count", len(batch))
}

// execute prepares the run's settings from the session and runs it.
func (c *Coordinator) execute(ctx context.Context, sr *sessionRuns, r *run, history *agent.History) {
	ar := &agent.Run{
		History:     history,
		ID:          r.id,
		SessionID:   sr.id,
		ClientID:    r.clientID,
		Workspace:   sr.ws,
		Prompt:      r.prompt,
		Author:      auth.Author(ctx),
		Attachments: r.attachments,
		Canceled:    r.isCanceled,
		Commit:      r.commit,
		Revive:      r.revive,
		Announce:    r.announce,
		Compact:     r.compact,
		Steers:      func(final bool) []agent.Steer { return sr.takeSteers(r, final) },
	}
	if r.name {
		if err := c.cfg.Sessions.NameFromPrompt(context.WithoutCancel(ctx), sr.ws.ID, sr.id, r.prompt); err != nil {
			c.log.Warn("name session", "session_id", sr.id, "err", err)
		}
	}
	cfg := r.config
	if cfg == nil {
		cfg = c.revivedConfig(sr.ws)
	}
	// The session as accepted is current unless some session's settings
	// changed since: then, and only then, it is read again.
	changes := r.changes
	read := func() (store.Session, error) {
		changes = c.cfg.Sessions.Changes()
		return c.cfg.Store.GetSession(context.WithoutCancel(ctx), sr.ws.ID, sr.id)
	}
	var (
		sess store.Session
		err  error
		rc   toolset.RunConfig
	)
	if r.session != nil && changes == c.cfg.Sessions.Changes() {
		sess = *r.session
	} else {
		sess, err = read()
	}
	if err != nil {
		// Deleted under us: the run still ends properly, as canceled.
		c.log.Warn("run of a missing session", "session_id", sr.id, "err", err)
		r.claimCancel()
		ar.Provider = failing{err}
	} else {
		c.configure(ar, sess, cfg)
		settings := c.settings(sess)
		mgrs, release := c.runMCP(ctx, sr.ws, sr.id, settings, cfg)
		defer release()
		box := c.cfg.Sandbox.Box(c.sandboxSpec(sr.ws, sr.id, settings, cfg), cfg.KeyVariables())
		rc = toolset.RunConfig{Rules: c.sessionRules(sess.ID, settings.Permissions).Then(cfg.Rules()), MCP: mgrs, Sandbox: box}
		ar.Refresh = func(ar *agent.Run) {
			if changes == c.cfg.Sessions.Changes() {
				return
			}
			if sess, err := read(); err == nil {
				c.configure(ar, sess, cfg)
				// A narrowed (or widened) sandbox holds from the next command on.
				box.Set(c.sandboxSpec(sr.ws, sr.id, c.settings(sess), cfg))
			}
		}
	}
	if r.stored {
		if err := c.loadAttachments(ctx, sr, r, ar); err != nil {
			c.log.Error("read the kept attachments of a run", "run_id", r.id, "session_id", sr.id, "err", err)
			if r.revive == "" {
				// Not run without them: the model would answer another prompt.
				ar.Provider = failing{fmt.Errorf("the prompt's attachments could not be read: %w", err)}
			}
		}
	}
	if cp := c.checkpointer(sr.ws, sr.id, ar); cp != nil {
		rc.BeforeChange, ar.Ending = cp.before, cp.end
	}
	end := ar.Ending
	ar.Ending = func() {
		if end != nil {
			end()
		}
		r.ending.Store(true)
	}
	unbind := c.cfg.Tools.Bind(r.id, rc)
	defer unbind()
	res := c.cfg.Runner.Execute(ctx, ar)
	if !res.Suspended {
		c.log.Info("run completed", "run_id", r.id, "session_id", sr.id, "outcome", res.Outcome)
	}
}

// loadAttachments gives a run whose attachments are in the store only
// what it kept of them: its own prompt's, and its steered prompts' that it
// has not taken yet.
func (c *Coordinator) loadAttachments(ctx context.Context, sr *sessionRuns, r *run, ar *agent.Run) error {
	own, steered, err := c.keptAttachments(context.WithoutCancel(ctx), r.id)
	if err != nil {
		return err
	}
	ar.Attachments = own
	if len(steered) > 0 {
		sr.mu.Lock()
		for i, st := range r.steers {
			if st.Attachments == nil {
				r.steers[i].Attachments = steered[st.MessageID]
			}
		}
		sr.mu.Unlock()
	}
	return nil
}

// revivedConfig is the configuration a revived run goes on with: its
// workspace's, or, when the workspace's file is invalid now, the server's
// alone (a revived run has no prompt to refuse).
func (c *Coordinator) revivedConfig(ws *workspace.Workspace) *config.Config {
	cfg, err := c.cfg.Configs.Workspace(ws.Path)
	if err != nil {
		c.log.Warn("workspace configuration invalid; a revived run goes on with the server's", "workspace_id", ws.ID, "err", err)
		return c.cfg.Configs.Server()
	}
	return cfg
}

// settings decodes the session's settings.
func (c *Coordinator) settings(sess store.Session) session.Settings {
	var settings session.Settings
	if len(sess.Config) > 0 {
		if err := json.Unmarshal(sess.Config, &settings); err != nil {
			c.log.Error("decode session settings", "session_id", sess.ID, "err", err)
		}
	}
	return settings
}

// sessionRules are the session's own permission rules, which decide before
// the configuration's (checked when the session was made). Rules that no
// longer compile (a store written by another version) fail closed: the
// session's rules only ask or deny, so dropping them would let calls run
// that they stopped; every call asks a person instead.
func (c *Coordinator) sessionRules(sessionID string, rs []rules.Rule) *rules.Set {
	if len(rs) == 0 {
		return nil
	}
	set, err := rules.Compile(rs)
	if err != nil {
		c.log.Error("compile session rules: every tool call asks", "session_id", sessionID, "err", err)
		set, _ = rules.Compile([]rules.Rule{{Tool: "*", Decision: rules.Ask}})
	}
	return set
}

// configure fills the run's model, provider, system prompt and tool settings
// from the session and the workspace's configuration.
func (c *Coordinator) configure(ar *agent.Run, sess store.Session, cfg *config.Config) {
	settings := c.settings(sess)
	ar.Model = sess.Model
	ar.ReasoningEffort = sess.ReasoningEffort
	ar.AvailableTools = settings.AvailableTools
	ar.ExcludedTools = settings.ExcludedTools
	ar.PermissionMode = settings.PermissionMode
	ar.Catalog = cfg.Catalog()
	ar.Compaction = settings.CompactionOrDefault()
	// The project's instructions are read once as the run starts (and
	// again when a change of the session's settings reconfigures it).
	instructions, err := prompt.ReadInstructions(ar.Workspace.Path)
	if err != nil {
		c.log.Warn("project instructions left out", "workspace_id", ar.Workspace.ID, "session_id", sess.ID, "err", err)
	}
	ar.System = func(tools []string) string {
		env := prompt.Env{
			WorkspacePath:       ar.Workspace.Path,
			OS:                  runtime.GOOS,
			Date:                time.Now(),
			Tools:               tools,
			ProjectInstructions: instructions,
		}
		// The settings decide the rest of the prompt; their JSON stands for them.
		key := append([]string{string(sess.Config), env.WorkspacePath, env.Date.Format(time.DateOnly), instructions.File, instructions.Text}, tools...)
		return c.prompts.get(key, func() string { return prompt.Build(settings.SystemMessage, env) })
	}
	p, name, err := c.provider(sess, settings, cfg)
	if err != nil {
		ar.Provider = failing{err}
		return
	}
	ar.Provider, ar.ModelName = p, name
}

// provider builds the session's model provider: its own provider settings if
// it has them (its API key from memory), else the configuration's for the
// model's PROVIDER (a providers entry, or a built-in type and the
// environment's settings for it).
func (c *Coordinator) provider(sess store.Session, settings session.Settings, cfg *config.Config) (provider.Provider, string, error) {
	getenv := c.cfg.Getenv
	var pc provider.Config
	var name string
	if sp := settings.Provider; sp != nil {
		if err := cfg.CheckModel(sess.Model); err != nil {
			return nil, "", &provider.Error{Code: "model_bad_request", Message: err.Error()}
		}
		_, name, _ = strings.Cut(strings.TrimSpace(sess.Model), "/")
		pc = provider.Config{Type: sp.Type, BaseURL: sp.BaseURL, APIKey: c.cfg.Sessions.APIKey(sess.ID)}
		if sp.Azure != nil {
			pc.AzureAPIVersion = sp.Azure.APIVersion
		}
		if pc.APIKey == "" {
			pc.APIKey = provider.FromEnv(sp.Type, getenv).APIKey
		}
	} else {
		var err error
		if pc, name, err = cfg.ResolveModel(sess.Model, getenv); err != nil {
			return nil, "", &provider.Error{Code: "model_bad_request", Message: err.Error()}
		}
	}
	p, err := c.cfg.NewProvider(pc)
	if err != nil {
		return nil, "", &provider.Error{Code: "model_bad_request", Message: err.Error()}
	}
	return p, name, nil
}

// failing is a provider that only fails: a run whose provider cannot be built
// still goes through the loop and ends with outcome error.
type failing struct{ err error }

func (f failing) Stream(context.Context, provider.Request, func(provider.Delta)) (provider.Response, error) {
	return provider.Response{}, f.err
}

// Cancel cancels the session's active run and every run accepted before now.
func (c *Coordinator) Cancel(ctx context.Context, wsID, sessionID string) ([]string, error) {
	// From the cache when it can: a cancel is on the path whose tail counts.
	ws, _, err := c.cfg.Sessions.LookupSettings(ctx, wsID, sessionID)
	if err != nil {
		return nil, err
	}
	ids := c.cancelAll(sessionID)
	// A run suspended on a permission or a client's tool (on disk, not in
	// memory) was accepted before this cancel too: its requests resolve
	// canceled now, before the answer, and it comes back only to end
	// canceled (invariant 4).
	runs, err := c.cfg.Broker.UnfinishedRuns(ctx, ws.ID, sessionID)
	if err != nil {
		return ids, fmt.Errorf("list suspended runs: %w", err)
	}
	for _, runID := range runs {
		if slices.Contains(ids, runID) || c.inMemoryRun(ws, sessionID, runID) {
			continue // parked in memory: the cancel above ended it
		}
		if err := c.cfg.Broker.CancelRun(ctx, ws, runID); err != nil {
			return ids, fmt.Errorf("cancel suspended run %s: %w", runID, err)
		}
		c.Revive(ws, sessionID, runID, agent.ReviveCancel, true)
		ids = append(ids, runID)
	}
	return ids, nil
}

// settleLocked waits, for at most a few seconds, for a session whose last
// run has ended (its run.completed may be out already) to go idle: a
// client that saw the run end must find the session idle. It returns the
// session locked again, as it may have been replaced meanwhile. Callers
// hold sr.mu.
func (c *Coordinator) settleLocked(ws *workspace.Workspace, sr *sessionRuns) *sessionRuns {
	idle := sr.idle
	if idle == nil || len(sr.queue) > 0 || sr.active == nil || !sr.active.ending.Load() {
		return sr
	}
	sr.mu.Unlock()
	t := time.NewTimer(settleWait)
	defer t.Stop()
	select {
	case <-idle:
	case <-t.C:
	}
	return c.lockSession(ws, sr.id)
}

// settleWait bounds settleLocked's wait: a worker on its way out only
// writes its session.idle.
const settleWait = 2 * time.Second

// inMemoryRun reports whether the run is active or queued in memory.
func (c *Coordinator) inMemoryRun(ws *workspace.Workspace, sessionID, runID string) bool {
	sr := c.existing(sessionID)
	if sr == nil {
		return false
	}
	sr.mu.Lock()
	defer sr.mu.Unlock()
	return sr.hasLocked(runID)
}

func (c *Coordinator) cancelAll(sessionID string) []string {
	sr := c.existing(sessionID)
	if sr == nil {
		return []string{}
	}
	sr.mu.Lock()
	defer sr.mu.Unlock()
	return sr.cancelLocked()
}

// cancelLocked cancels the active run and the queued ones, and lists them;
// an active run that has committed to another end is neither canceled nor
// listed. Callers hold sr.mu.
func (sr *sessionRuns) cancelLocked() []string {
	ids := []string{}
	if r := sr.active; r != nil && r.claimCancel() {
		if r.cancel != nil {
			r.cancel()
		}
		ids = append(ids, r.id)
	}
	for _, r := range sr.queue {
		if r.claimCancel() {
			ids = append(ids, r.id)
		}
	}
	return ids
}

// Status reports the session's runs.
func (c *Coordinator) Status(ctx context.Context, wsID, sessionID string) (proto.AgentStatus, error) {
	if _, _, err := c.cfg.Sessions.LookupSettings(ctx, wsID, sessionID); err != nil {
		return proto.AgentStatus{}, err
	}
	st := proto.AgentStatus{Queued: []proto.QueuedRun{}}
	sr := c.existing(sessionID)
	if sr == nil {
		return st, nil
	}
	sr.mu.Lock()
	defer sr.mu.Unlock()
	active, queued := sr.current()
	if active != nil {
		st.Busy = true
		st.ActiveRunID = &active.id
	}
	for _, r := range queued {
		st.Queued = append(st.Queued, proto.QueuedRun{RunID: r.id, Prompt: r.prompt})
	}
	return st, nil
}

// State implements session.Runtime.
func (c *Coordinator) State(_, sessionID string) (busy bool, queued int) {
	sr := c.existing(sessionID)
	if sr == nil {
		return false, 0
	}
	sr.mu.Lock()
	defer sr.mu.Unlock()
	active, waiting := sr.current()
	return active != nil, len(waiting)
}

// forgetWait bounds how long a delete waits for the session's runs to end,
// so DELETE answers within the contract's 5 s whatever its clients do. A
// canceled run ends well within it: tools stop within 2 s of a cancel,
// and runs that had not started end together in one commit.
const forgetWait = 3 * time.Second

// Forget implements session.Runtime. From its call on, the session takes
// no new run; its runs are canceled, and it waits for them to end, up to
// forgetWait. The session's state machine stays until done reports the
// session deleted and its worker has exited, so a late run can never start
// beside one still ending.
func (c *Coordinator) Forget(ctx context.Context, ws *workspace.Workspace, sessionID string) (done func(deleted bool)) {
	sr := c.lockSession(ws, sessionID)
	sr.deleting++
	sr.cancelLocked()
	idle := sr.idle
	sr.mu.Unlock()
	if idle != nil {
		t := time.NewTimer(forgetWait)
		select {
		case <-idle:
		case <-t.C:
			c.log.Warn("deleting a session whose runs are still ending", "session_id", sessionID)
		}
		t.Stop()
	}
	// Suspended runs are not in memory; their requests are settled here.
	c.cfg.Broker.CancelSession(ctx, ws, sessionID)
	return func(deleted bool) {
		if deleted {
			c.removeSessionTmp(sessionID)
			// Counted before the state machine can be dropped: see admitLocked.
			c.deletes.Add(1)
			c.cfg.Tools.ForgetSession(sessionID)
			c.mcp.CloseSession(sessionID)
		}
		sr.mu.Lock()
		sr.deleting--
		if deleted {
			sr.deleted = true
			// Runs still queued after the wait never start: the session
			// they belonged to is gone, and session.deleted ends them for
			// its clients.
			if n := len(sr.queue); n > 0 {
				c.log.Warn("session deleted with runs still queued", "session_id", sessionID, "runs", n)
				sr.queue = nil
			}
		}
		drop := sr.deleted && sr.deleting == 0 && sr.idle == nil
		if drop {
			c.dropLocked(sr)
		}
		sr.mu.Unlock()
		if deleted {
			// Its checkpoints went with it: so do the files only they held.
			c.collect(context.WithoutCancel(ctx), ws.ID)
		}
		if drop {
			c.hist.forget(sr)
		}
	}
}

func (c *Coordinator) waitIdle(ctx context.Context, sessionID string) {
	sr := c.existing(sessionID)
	if sr == nil {
		return
	}
	sr.mu.Lock()
	idle := sr.idle
	sr.mu.Unlock()
	if idle == nil {
		return
	}
	select {
	case <-idle:
	case <-ctx.Done():
	}
}

// WorkspaceClosed waits until the runs of a closed workspace have ended (its
// context is canceled, so they end promptly as canceled), then stops its MCP
// servers and its sessions', every stdio server's process group included.
func (c *Coordinator) WorkspaceClosed(ws *workspace.Workspace) {
	defer c.mcp.CloseWorkspace(ws.ID)
	c.mu.Lock()
	var ids []string
	for id, sr := range c.sessions {
		if sr.ws.ID == ws.ID {
			ids = append(ids, id)
		}
	}
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, id := range ids {
		c.waitIdle(ctx, id)
	}
}

// SweepIdle forgets what the coordinator keeps for sessions that were idle
// at the previous sweep and have not run since (their histories) and the
// system prompts no step asked for meanwhile. Its caller calls it every few
// minutes, so that memory comes back once the load is gone; the caches'
// bounds hold it down under load.
func (c *Coordinator) SweepIdle() {
	c.hist.sweep()
	c.prompts.sweep()
	// A session with nothing in memory any more leaves the map too, or the
	// map would keep every session ever prompted; its next prompt makes its
	// state machine again.
	c.mu.Lock()
	srs := make([]*sessionRuns, 0, len(c.sessions))
	for _, sr := range c.sessions {
		srs = append(srs, sr)
	}
	c.mu.Unlock()
	var dropped []*sessionRuns
	for _, sr := range srs {
		sr.mu.Lock()
		if sr.idle == nil && sr.active == nil && len(sr.queue) == 0 && sr.history == nil &&
			sr.deleting == 0 && !sr.deleted && !sr.dropped {
			c.dropLocked(sr)
			dropped = append(dropped, sr)
		}
		sr.mu.Unlock()
	}
	for _, sr := range dropped {
		c.hist.forget(sr)
	}
	if len(dropped) > 0 {
		// A new map: one that only had keys deleted keeps its size.
		c.mu.Lock()
		sessions := make(map[string]*sessionRuns, len(c.sessions))
		for id, sr := range c.sessions {
			sessions[id] = sr
		}
		c.sessions = sessions
		c.mu.Unlock()
	}
}

// Wait waits for every session worker to exit, and for the MCP servers
// retired meanwhile to stop.
func (c *Coordinator) Wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		c.workers.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		return errors.New("runs still running at shutdown deadline")
	}
	if err := c.mcp.Wait(ctx); err != nil {
		return errors.New("MCP servers still stopping at shutdown deadline")
	}
	return nil
}
