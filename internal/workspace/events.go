package workspace

import (
	"github.com/tandem-dev/tandem/internal/event"

	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/tandem-dev/tandem/internal/auth"
	"github.com/tandem-dev/tandem/internal/bus"
	"github.com/tandem-dev/tandem/internal/store"
	"github.com/tandem-dev/tandem/proto"
)

// seqBlock is how many seqs are reserved on disk at a time. Reserving ahead
// keeps ephemeral events (deltas) off the disk while still guaranteeing that
// seqs handed out before a crash are never handed out again.
//
// The next block is reserved in the background once half of the current one
// is handed out (see reserveAhead): an emitter that found the block used up
// waited for that commit before its own, and so did every other emitter of
// the workspace meanwhile, a prompt's 202 among them, several times a second
// on a busy server.
const seqBlock = 1024

// Draft is an event before it has a seq.
type Draft struct {
	Type      string
	SessionID string
	RunID     string
	Data      any
	// Ephemeral asks for the event not to be kept even if its type usually is.
	Ephemeral bool
	// Actor names who caused the event; nil takes the actor of the
	// context it is emitted under (auth.ActorFrom).
	Actor *proto.Actor
	// NodeOnly, in a cluster, sends the event to this node's streams only,
	// not to the other nodes': a node stopping tells its own clients.
	NodeOnly bool
	// Message, when set, is the message the event announces: it is the
	// event's data (Data is ignored) and is stored with the event in one
	// transaction (see store.Event).
	Message *proto.Message
	// Touch, when set, moves the session's UpdatedAt up to it with the event.
	Touch time.Time
	// Session, when set, is the changed session record the event announces,
	// stored with it in one transaction (see store.Event).
	Session *store.Session
	// Usage, when set, is added to the session's usage with the event, in
	// one transaction (see store.Event).
	Usage *store.SessionUsage
	// Attachments, when set, are kept for the run with the event, in one
	// transaction (see store.Event); only a kept event carries them.
	Attachments *store.Attachments
	// PromptKey, when set, is the idempotency key of the prompt the event
	// accepts, kept with it in one transaction (see store.Event); only a
	// kept event carries it.
	PromptKey *store.PromptKey
}

// eventLog numbers, persists and publishes a workspace's events.
//
// Seqs are handed out under mu, then each event is persisted outside it, so
// concurrent emitters share the store's group commits instead of queueing for
// one commit each. A small reorder buffer then hands events to the bus
// strictly in seq order and only once they, and every event before them, are
// on disk: subscribers see increasing seqs and never an event the database
// does not have.
type eventLog struct {
	ws *Workspace

	// reserving serializes reservations of seq blocks; it is taken before mu.
	reserving sync.Mutex

	mu       sync.Mutex
	seq      int64 // last seq handed out
	reserved int64 // seqs up to here are reserved on disk
	// ahead is set while a reservation of the next block runs in the
	// background, and after one failed until a reservation succeeds.
	ahead bool
	// published is the last seq given to the bus (or skipped after a failed
	// write); waiting holds the numbered events not yet published.
	published int64
	waiting   map[int64]*slot
	// local publishes to this node's streams of the workspace, on the
	// node's in-process bus, which the workspace's topic subscribes to.
	// Whoever feeds the streams calls it under mu: the log while this node
	// emits, the bus feed of a follower otherwise.
	local bus.Publisher
	// remote, while this node owns the workspace in a cluster, takes each
	// event after the local streams, for the other nodes' (but the node
	// only ones, Draft.NodeOnly). nil on a single node.
	remote bus.Publisher
}

// slot is one numbered event on its way to the bus.
type slot struct {
	written  bool         // persisted (or not to be persisted)
	ev       *event.Event // nil when persisting failed: the seq becomes a gap
	nodeOnly bool         // Draft.NodeOnly
	done     chan struct{}
}

func newEventLog(ws *Workspace, head int64, local bus.Publisher) eventLog {
	return eventLog{ws: ws, seq: head, reserved: head, published: head, waiting: make(map[int64]*slot), local: local}
}

// flushLocked publishes, in seq order, every event whose predecessors are all
// written.
func (l *eventLog) flushLocked() {
	for {
		next := l.published + 1
		sl := l.waiting[next]
		if sl == nil || !sl.written {
			return
		}
		if sl.ev != nil {
			l.local.Publish(*sl.ev)
			if l.remote != nil && !sl.nodeOnly {
				l.remote.Publish(*sl.ev)
			}
		}
		l.published = next
		delete(l.waiting, next)
		close(sl.done)
	}
}

// kept reports whether events of type t go to the workspace log.
func kept(t string) bool {
	switch t {
	case proto.EventSessionIdle, proto.EventMessageDelta,
		proto.EventClientAttached, proto.EventClientDetached,
		proto.EventWorkspaceClosing:
		return false
	}
	return true
}

// Emit assigns the next seq to d, persists it unless it is ephemeral, and
// publishes it to the workspace's streams. It returns once the event is
// published; the returned event is what clients see.
func (w *Workspace) Emit(ctx context.Context, d Draft) (proto.Event, error) {
	evs, err := w.EmitAll(ctx, []Draft{d})
	if err != nil {
		return proto.Event{}, err
	}
	return evs[0], nil
}

// EmitAll is Emit for several events at once: they get consecutive seqs
// unless another emitter slips in between, are persisted in one
// transaction (all or none), and are published in order. A run uses it to
// write the steps that follow one another without a wait (run.started, its
// user message, the assistant message) with one commit instead of one each.
func (w *Workspace) EmitAll(ctx context.Context, ds []Draft) ([]proto.Event, error) {
	return w.emit(ctx, ds, true)
}

// Record is Emit without the wait for the event's publication: it returns
// once the event has its seq and, unless ephemeral, is on disk; the streams
// get it, in seq order, once every event before it is written too. That
// wait is for other writers (other sessions' runs numbered just before),
// and on a busy server it was most of a 202's tail: a caller that needs
// only the order (seqs follow the calls) and the durability uses Record.
func (w *Workspace) Record(ctx context.Context, d Draft) (proto.Event, error) {
	evs, err := w.emit(ctx, []Draft{d}, false)
	if err != nil {
		return proto.Event{}, err
	}
	return evs[0], nil
}

func (w *Workspace) emit(ctx context.Context, ds []Draft, published bool) ([]proto.Event, error) {
	// Persisting must not fail because the caller's request or run just ended:
	// the events describe something that already happened.
	ctx = context.WithoutCancel(ctx)
	evs := make([]proto.Event, 0, len(ds))
	var (
		recs  []store.Event
		slots []*slot
		err   error
	)
	for _, d := range ds {
		ev, rec, sl, nerr := w.number(ctx, d)
		if nerr != nil {
			err = nerr
			break
		}
		evs = append(evs, ev)
		slots = append(slots, sl)
		if rec != nil {
			recs = append(recs, *rec)
		}
	}
	if err == nil {
		if err = w.m.cfg.Store.AppendEvents(ctx, recs); err != nil {
			err = fmt.Errorf("persist %s event: %w", ds[0].Type, err)
		}
	}
	// Slots already numbered are released even after a failure: their seqs
	// become gaps rather than holding back every later event.
	for _, sl := range slots {
		w.log.written(sl, err)
	}
	// Return once published, so callers can rely on their events having
	// gone out (workspace.closing before the streams are ended, for one).
	if n := len(slots); n > 0 && published {
		<-slots[n-1].done
	}
	if err != nil {
		return nil, err
	}
	return evs, nil
}

// number gives d the next seq and a slot in the reorder buffer, and returns
// the record to persist (nil for an ephemeral event).
func (w *Workspace) number(ctx context.Context, d Draft) (proto.Event, *store.Event, *slot, error) {
	payload := d.Data
	if d.Message != nil {
		payload = d.Message
	}
	data, err := json.Marshal(payload)
	if err != nil {
		return proto.Event{}, nil, nil, fmt.Errorf("encode %s event: %w", d.Type, err)
	}
	if len(data) > MaxEventData {
		// Stored as cut too (a message's event data is the message), so
		// what is replayed is what was streamed.
		w.m.log.Warn("event data cut to its bound", "workspace_id", w.ID, "type", d.Type, "bytes", len(data))
		data = fit(data, MaxEventData)
	}
	keep := kept(d.Type) && !d.Ephemeral
	if !w.emitting() {
		return proto.Event{}, nil, nil, w.errNotOwner()
	}
	l := &w.log
	l.mu.Lock()
	for l.seq >= l.reserved {
		// Never hold mu across a store call: the store's writer takes mu to
		// publish what it committed.
		l.mu.Unlock()
		if err := w.reserve(ctx); err != nil {
			return proto.Event{}, nil, nil, err
		}
		l.mu.Lock()
	}
	seq := l.seq + 1
	ev := proto.Event{
		Seq:         seq,
		Type:        d.Type,
		WorkspaceID: w.ID,
		SessionID:   d.SessionID,
		RunID:       d.RunID,
		Time:        proto.Now(), // under mu, so times follow seqs
		Ephemeral:   !keep,
		Actor:       d.Actor,
		Data:        data,
	}
	if ev.Actor == nil {
		ev.Actor = auth.ActorFrom(ctx)
	}
	// The seq is consumed even if persisting fails: a gap is harmless, a reuse is not.
	l.seq = seq
	sl := &slot{done: make(chan struct{}), ev: &event.Event{Seq: seq, Type: d.Type, SessionID: d.SessionID, Kept: keep}, nodeOnly: d.NodeOnly && !keep}
	l.waiting[seq] = sl
	ahead := !l.ahead && l.reserved-seq < seqBlock/2
	if ahead {
		l.ahead = true
	}
	l.mu.Unlock()
	if ahead {
		w.reserveAhead()
	}
	// Encoded outside mu, which every emitter of the workspace takes: the
	// slot is published only after the caller reports it written.
	env := encodeEnvelope(ev)
	sl.ev.Data = env
	if !keep {
		return ev, nil, sl, nil
	}
	return ev, &store.Event{
		Seq:         seq,
		WorkspaceID: w.ID,
		SessionID:   d.SessionID,
		RunID:       d.RunID,
		Type:        d.Type,
		InHistory:   d.SessionID != "" && proto.InSessionHistory(d.Type),
		Envelope:    env,
		Message:     d.Message,
		MessageJSON: data, // the event's data is the message (see Draft)
		Touch:       d.Touch,
		Session:     d.Session,
		Usage:       d.Usage,
		Attachments: d.Attachments,
		PromptKey:   d.PromptKey,
	}, sl, nil
}

// reserve puts the next block of seqs on disk, once however many emitters
// ran out at the same time.
func (w *Workspace) reserve(ctx context.Context) error {
	return w.reserveIf(ctx, func(l *eventLog) bool { return l.seq >= l.reserved })
}

// reserveAhead reserves the next block in the background, on a goroutine
// the Manager waits for at shutdown, while half of the current block is
// left: the emitters go on numbering meanwhile, and none waits for the
// reservation unless they hand out the whole half before it commits. After
// a failure, the next reservation is an emitter's own (reserve), as before.
func (w *Workspace) reserveAhead() {
	l := &w.log
	started := w.m.background(func() {
		err := w.reserveIf(context.Background(), func(l *eventLog) bool { return l.reserved-l.seq < seqBlock/2 })
		if err != nil {
			w.m.log.Warn("reserve seqs ahead", "workspace_id", w.ID, "err", err)
			return // ahead stays set: reserve clears it once it succeeds
		}
		l.mu.Lock()
		l.ahead = false
		l.mu.Unlock()
	})
	if !started {
		l.mu.Lock()
		l.ahead = false
		l.mu.Unlock()
	}
}

// reserveIf puts the next block of seqs on disk if need, checked once the
// reservations before it are done, still holds.
func (w *Workspace) reserveIf(ctx context.Context, need func(*eventLog) bool) error {
	l := &w.log
	l.reserving.Lock()
	defer l.reserving.Unlock()
	l.mu.Lock()
	needed, next := need(l), l.reserved+seqBlock
	l.mu.Unlock()
	if !needed {
		return nil // another emitter reserved while we waited
	}
	if err := w.m.cfg.Store.ReserveSeq(ctx, w.ID, next); err != nil {
		return fmt.Errorf("reserve seqs for workspace %s: %w", w.ID, err)
	}
	l.mu.Lock()
	l.reserved = next
	l.ahead = false
	l.mu.Unlock()
	return nil
}

// written records that sl's event is persisted (or failed to be: its seq
// becomes a gap) and publishes what is now in order.
func (l *eventLog) written(sl *slot, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	sl.written = true
	if err != nil {
		sl.ev = nil
	}
	l.flushLocked()
}

// backlog serves the hub the persisted events its ring no longer holds.
func (w *Workspace) backlog(ctx context.Context, after, upTo int64, limit int) ([]event.Event, error) {
	recs, err := w.m.cfg.Store.WorkspaceEvents(ctx, w.ID, after, upTo, limit)
	if err != nil {
		return nil, fmt.Errorf("read backlog of workspace %s: %w", w.ID, err)
	}
	out := make([]event.Event, len(recs))
	for i, r := range recs {
		out[i] = event.Event{Seq: r.Seq, Type: r.Type, SessionID: r.SessionID, Kept: true, Data: r.Envelope}
	}
	return out, nil
}
