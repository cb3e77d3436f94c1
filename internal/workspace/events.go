package workspace

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/tandem-dev/tandem/internal/hub"
	"github.com/tandem-dev/tandem/internal/store"
	"github.com/tandem-dev/tandem/proto"
)

// seqBlock is how many seqs are reserved on disk at a time. Reserving ahead
// keeps ephemeral events (deltas) off the disk while still guaranteeing that
// seqs handed out before a crash are never handed out again.
const seqBlock = 1024

// Draft is an event before it has a seq.
type Draft struct {
	Type      string
	SessionID string
	RunID     string
	Data      any
	// Ephemeral asks for the event not to be kept even if its type usually is.
	Ephemeral bool
}

// eventLog numbers, persists and publishes a workspace's events.
//
// Seqs are handed out under mu, then each event is persisted outside it, so
// concurrent emitters share the store's group commits instead of queueing for
// one commit each. A small reorder buffer then hands events to the hub
// strictly in seq order and only once they, and every event before them, are
// on disk: subscribers see increasing seqs and never an event the database
// does not have.
type eventLog struct {
	ws *Workspace

	mu       sync.Mutex
	seq      int64 // last seq handed out
	reserved int64 // seqs up to here are reserved on disk
	// published is the last seq given to the hub (or skipped after a failed
	// write); waiting holds the numbered events not yet published.
	published int64
	waiting   map[int64]*slot
}

// slot is one numbered event on its way to the hub.
type slot struct {
	written bool       // persisted (or not to be persisted)
	ev      *hub.Event // nil when persisting failed: the seq becomes a gap
	done    chan struct{}
}

func newEventLog(ws *Workspace, head int64) eventLog {
	return eventLog{ws: ws, seq: head, reserved: head, published: head, waiting: make(map[int64]*slot)}
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
			l.ws.topic.Publish(*sl.ev)
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
// publishes it to the workspace's streams. The returned event is what clients see.
func (w *Workspace) Emit(ctx context.Context, d Draft) (proto.Event, error) {
	// Persisting must not fail because the caller's request or run just ended:
	// the event describes something that already happened.
	ctx = context.WithoutCancel(ctx)
	data, err := json.Marshal(d.Data)
	if err != nil {
		return proto.Event{}, fmt.Errorf("encode %s event: %w", d.Type, err)
	}
	keep := kept(d.Type) && !d.Ephemeral
	l := &w.log
	l.mu.Lock()
	seq := l.seq + 1
	if seq > l.reserved {
		next := l.reserved + seqBlock
		if err := w.m.cfg.Store.ReserveSeq(ctx, w.ID, next); err != nil {
			l.mu.Unlock()
			return proto.Event{}, fmt.Errorf("reserve seqs for workspace %s: %w", w.ID, err)
		}
		l.reserved = next
	}
	ev := proto.Event{
		Seq:         seq,
		Type:        d.Type,
		WorkspaceID: w.ID,
		SessionID:   d.SessionID,
		RunID:       d.RunID,
		Time:        proto.Now(),
		Ephemeral:   !keep,
		Data:        data,
	}
	env, err := json.Marshal(ev)
	if err != nil {
		l.mu.Unlock()
		return proto.Event{}, fmt.Errorf("encode %s envelope: %w", d.Type, err)
	}
	// The seq is consumed even if persisting fails: a gap is harmless, a reuse is not.
	l.seq = seq
	sl := &slot{done: make(chan struct{})}
	l.waiting[seq] = sl
	l.mu.Unlock()

	if keep {
		err = w.m.cfg.Store.AppendEvent(ctx, store.Event{
			Seq:         seq,
			WorkspaceID: w.ID,
			SessionID:   d.SessionID,
			RunID:       d.RunID,
			Type:        d.Type,
			InHistory:   d.SessionID != "" && proto.InSessionHistory(d.Type),
			Envelope:    env,
		})
	}
	l.mu.Lock()
	sl.written = true
	if err == nil {
		sl.ev = &hub.Event{Seq: seq, Type: d.Type, SessionID: d.SessionID, Kept: keep, Data: env}
	}
	l.flushLocked()
	l.mu.Unlock()
	// Return once published, so callers can rely on their event having gone
	// out (workspace.closing before the streams are ended, for one).
	<-sl.done
	if err != nil {
		return proto.Event{}, fmt.Errorf("persist %s event: %w", d.Type, err)
	}
	return ev, nil
}

// backlog serves the hub the persisted events its ring no longer holds.
func (w *Workspace) backlog(ctx context.Context, after, upTo int64, limit int) ([]hub.Event, error) {
	recs, err := w.m.cfg.Store.WorkspaceEvents(ctx, w.ID, after, upTo, limit)
	if err != nil {
		return nil, fmt.Errorf("read backlog of workspace %s: %w", w.ID, err)
	}
	out := make([]hub.Event, len(recs))
	for i, r := range recs {
		out[i] = hub.Event{Seq: r.Seq, Type: r.Type, SessionID: r.SessionID, Kept: true, Data: r.Envelope}
	}
	return out, nil
}
