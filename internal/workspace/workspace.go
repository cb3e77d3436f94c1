package workspace

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tandem-dev/tandem/internal/bus"

	"github.com/tandem-dev/tandem/internal/apierr"
	"github.com/tandem-dev/tandem/internal/hub"
	"github.com/tandem-dev/tandem/internal/store"
	"github.com/tandem-dev/tandem/proto"
)

// Workspace is one project directory at run time.
type Workspace struct {
	// ID, Path and CreatedAt never change.
	ID        string
	Path      string
	CreatedAt time.Time

	m     *Manager
	topic *hub.Topic

	mu      sync.Mutex
	open    bool
	closing bool // Close is running: new claims wait for it to finish
	ctx     context.Context
	cancel  context.CancelFunc
	// streams counts open streams per client; total is their sum.
	streams map[string]int
	total   int
	// attached is who each client with a stream open here is, and since
	// when (GET workspace's attached list).
	attached map[string]proto.AttachedClient
	// hold is the create grace timer; closer the detach grace timer of the
	// whole workspace; gone the detach grace timers of single clients.
	hold   *time.Timer
	closer *time.Timer
	gone   map[string]*time.Timer
	// gen changes on every open and close so a timer that fired just before
	// being stopped sees it is stale and does nothing.
	gen uint64

	log eventLog

	// owned is set while this node owns the workspace (cluster only).
	owned  atomic.Bool
	feedMu sync.Mutex
	feed   *bus.Feed // the bus feed of a follower's streams
}

// newWorkspace makes the run-time workspace of rec, whose events are
// numbered from head + 1 on. Its topic (this node's streams) subscribes to
// the node's in-process bus, where the workspace's events are published.
func newWorkspace(m *Manager, rec store.Workspace, head int64) (*Workspace, error) {
	local, err := m.bus.Publisher(rec.ID, head)
	if err != nil {
		return nil, fmt.Errorf("load workspace %s: %w", rec.ID, err)
	}
	w := &Workspace{
		ID:        rec.ID,
		Path:      rec.Path,
		CreatedAt: rec.CreatedAt,
		m:         m,
		streams:   make(map[string]int),
		attached:  make(map[string]proto.AttachedClient),
		gone:      make(map[string]*time.Timer),
	}
	w.topic = m.cfg.Hub.Topic(rec.ID, head, w.backlog)
	// Subscribed for the workspace's life: a loaded workspace stays loaded.
	// Local never refuses a subscriber.
	_, _ = m.bus.Subscribe(rec.ID, w.topic.Publish, nil)
	w.log = newEventLog(w, head, local)
	if w.clustered() {
		w.follow()
	}
	// A closed workspace still has a context, canceled, so callers never see nil.
	w.ctx, w.cancel = context.WithCancel(context.Background())
	w.cancel()
	return w, nil
}

// Info returns the workspace as the API shows it.
func (w *Workspace) Info() proto.Workspace {
	w.mu.Lock()
	defer w.mu.Unlock()
	attached := make([]proto.AttachedClient, 0, len(w.attached))
	for _, a := range w.attached {
		attached = append(attached, a)
	}
	slices.SortFunc(attached, func(a, b proto.AttachedClient) int {
		return cmp.Or(a.Since.Compare(b.Since.Time), strings.Compare(a.ClientID, b.ClientID))
	})
	return proto.Workspace{
		ID:        w.ID,
		Path:      w.Path,
		Open:      w.open,
		Clients:   w.total,
		CreatedAt: proto.Time{Time: w.CreatedAt},
		Attached:  attached,
	}
}

// Context is canceled when the workspace closes; work that belongs to the
// workspace (runs, tools) derives from it, never from an HTTP request.
func (w *Workspace) Context() context.Context {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ctx
}

// IsOpen reports whether the workspace is open.
func (w *Workspace) IsOpen() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.open
}

// CheckOpen returns the contract's error when the workspace cannot take work.
func (w *Workspace) CheckOpen() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.closing:
		return apierr.Errorf(proto.CodeWorkspaceClosing, "workspace %s is closing", w.ID)
	case !w.open:
		return apierr.Errorf(proto.CodeWorkspaceNotOpen, "workspace %s is not open; attach a stream or POST /v1/workspaces to open it", w.ID)
	}
	return nil
}

// Clients returns the ids of clients with at least one open stream.
func (w *Workspace) Clients() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	ids := make([]string, 0, len(w.streams))
	for id := range w.streams {
		ids = append(ids, id)
	}
	return ids
}

// HasClient reports whether the client has an open stream.
func (w *Workspace) HasClient(clientID string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.streams[clientID] > 0
}

// openLocked opens a closed workspace with a fresh context.
func (w *Workspace) openLocked() {
	if w.open {
		return
	}
	w.open = true
	w.gen++
	w.ctx, w.cancel = context.WithCancel(context.Background())
}

// hold is the claim of POST /v1/workspaces: open for the create grace.
func (w *Workspace) holdOpen() error {
	if w.m.isStopping() {
		return apierr.Errorf(proto.CodeShuttingDown, "server is shutting down")
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closing {
		return apierr.Errorf(proto.CodeWorkspaceClosing, "workspace %s is closing", w.ID)
	}
	w.openLocked()
	stopTimer(&w.closer)
	stopTimer(&w.hold)
	gen := w.gen
	w.hold = w.m.after(w.m.cfg.CreateGrace, func() { w.holdExpired(gen) })
	return nil
}

func (w *Workspace) holdExpired(gen uint64) {
	w.mu.Lock()
	if gen != w.gen || w.hold == nil {
		w.mu.Unlock()
		return
	}
	w.hold = nil
	unclaimed := w.total == 0
	w.mu.Unlock()
	if unclaimed {
		w.closeIf(gen, "create_grace_expired")
	}
}

// attach claims the workspace for one stream of clientID, reopening it if it
// was closed. first reports the client's first open stream.
func (w *Workspace) attach(clientID, name string) (first bool, err error) {
	if w.m.isStopping() {
		return false, apierr.Errorf(proto.CodeShuttingDown, "server is shutting down")
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closing {
		return false, apierr.Errorf(proto.CodeWorkspaceClosing, "workspace %s is closing", w.ID)
	}
	w.openLocked()
	stopTimer(&w.hold) // opening a stream ends the create hold
	stopTimer(&w.closer)
	w.streams[clientID]++
	w.total++
	first = w.streams[clientID] == 1
	if first {
		w.attached[clientID] = proto.AttachedClient{ClientID: clientID, Name: name, Since: proto.Now()}
		if t := w.gone[clientID]; t != nil {
			t.Stop()
			delete(w.gone, clientID)
		}
	}
	return first, nil
}

// detach releases one stream's claim. last reports the client's last stream.
func (w *Workspace) detach(clientID string) (last bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.streams[clientID]--
	w.total--
	if w.streams[clientID] > 0 {
		return false
	}
	delete(w.streams, clientID)
	delete(w.attached, clientID)
	if !w.open {
		return true
	}
	gen := w.gen
	grace := w.m.cfg.DetachGrace
	w.gone[clientID] = w.m.after(grace, func() { w.clientGone(gen, clientID) })
	if w.total == 0 && w.hold == nil {
		stopTimer(&w.closer)
		w.closer = w.m.after(grace, func() { w.closeIf(gen, "detached") })
	}
	return true
}

func (w *Workspace) clientGone(gen uint64, clientID string) {
	w.mu.Lock()
	if gen != w.gen || w.streams[clientID] > 0 || w.gone[clientID] == nil {
		w.mu.Unlock()
		return
	}
	delete(w.gone, clientID)
	w.mu.Unlock()
	if h := w.m.currentHooks().ClientGone; h != nil {
		h(w, clientID)
	}
}

// closeIf closes the workspace if nothing changed since generation gen and
// nobody holds a claim.
func (w *Workspace) closeIf(gen uint64, reason string) {
	w.mu.Lock()
	stale := gen != w.gen || w.total > 0 || w.hold != nil
	w.mu.Unlock()
	if !stale {
		w.close(reason, false)
	}
}

// Close closes the workspace now, whoever holds claims: its streams are told
// why and ended, its context is canceled. Used by DELETE and shutdown.
func (w *Workspace) Close(reason string) { w.close(reason, true) }

func (w *Workspace) close(reason string, endStreams bool) {
	w.mu.Lock()
	if !w.open || w.closing {
		w.mu.Unlock()
		return
	}
	w.closing = true
	stopTimer(&w.hold)
	stopTimer(&w.closer)
	gone := make([]string, 0, len(w.gone))
	for id, t := range w.gone {
		t.Stop()
		gone = append(gone, id)
	}
	clear(w.gone)
	cancel := w.cancel
	w.mu.Unlock()

	w.m.log.Info("workspace closing", "workspace_id", w.ID, "reason", reason)
	if !w.emitting() {
		// A follower announces nothing: the owner does.
	} else if _, err := w.Emit(context.Background(), Draft{
		Type: proto.EventWorkspaceClosing,
		Data: proto.WorkspaceClosing{Reason: reason},
		// In a cluster a stopping node hands the workspace over: the
		// other nodes' clients go on.
		NodeOnly: reason == "shutdown",
	}); err != nil {
		w.m.log.Error("announce workspace closing", "workspace_id", w.ID, "err", err)
	}
	cancel()
	hooks := w.m.currentHooks()
	// Clients waiting out their detach grace lose their tools now.
	if hooks.ClientGone != nil {
		for _, id := range gone {
			hooks.ClientGone(w, id)
		}
	}
	// Closed runs synchronously: the coordinator finishes canceled runs here,
	// so their last events still reach the streams we are about to end.
	if hooks.Closed != nil {
		hooks.Closed(w)
	}
	if endStreams {
		w.topic.Disconnect()
	}

	w.mu.Lock()
	w.open = false
	w.closing = false
	w.gen++
	w.mu.Unlock()
}

// Watched reports whether any stream of the workspace is open now.
func (w *Workspace) Watched() bool { return w.topic.Watched() }

// StreamOptions describe one SSE stream.
type StreamOptions struct {
	ClientID    string
	Name        string // the person whose token opened the stream
	SessionID   string
	LastEventID int64
	Resume      bool
}

// Stream claims the workspace for the stream's lifetime and serves it on sink
// until ctx ends or the stream is evicted or disconnected. A claim error is
// returned before anything is written.
func (w *Workspace) Stream(ctx context.Context, sink hub.Sink, opts *StreamOptions) error {
	// An idle stream waits in Serve for as long as its client stays: the
	// claim and its release are done in functions of their own so that
	// this frame, under the wait, stays small (see hub.Topic.Serve).
	so, err := w.claim(opts)
	if err != nil {
		return err
	}
	defer w.streamRelease(so.ClientID)
	w.streamsChanged()
	if opts.Resume {
		w.waitHead(ctx, opts.LastEventID)
	}
	return w.topic.Serve(ctx, sink, so)
}

// claim attaches a stream of opts.ClientID and returns how to serve it.
//
//go:noinline
func (w *Workspace) claim(opts *StreamOptions) (*hub.ServeOptions, error) {
	first, err := w.attach(opts.ClientID, opts.Name)
	if err != nil {
		return nil, err
	}
	clientID := opts.ClientID
	return &hub.ServeOptions{
		ClientID:    clientID,
		WorkspaceID: w.ID,
		SessionID:   opts.SessionID,
		LastEventID: opts.LastEventID,
		Resume:      opts.Resume,
		OnSubscribed: func() {
			if first {
				w.announcePresence(proto.EventClientAttached, clientID)
			}
		},
	}, nil
}

// release ends a stream's claim.
//
//go:noinline
func (w *Workspace) release(clientID string) {
	w.mu.Lock()
	name := w.attached[clientID].Name
	w.mu.Unlock()
	if w.detach(clientID) {
		w.announceNamed(proto.EventClientDetached, clientID, name)
	}
}

// streamRelease ends a stream's claim, and tells the cluster.
//
//go:noinline
func (w *Workspace) streamRelease(clientID string) {
	w.release(clientID)
	w.streamsChanged()
}

func (w *Workspace) announcePresence(typ, clientID string) {
	w.announceNamed(typ, clientID, "")
}

// announceNamed announces a client's arrival or departure with its
// person's name, and as its actor when the name is known.
func (w *Workspace) announceNamed(typ, clientID, name string) {
	if !w.emitting() {
		return // the owner announces its own streams only (claims are per node)
	}
	w.mu.Lock()
	n := w.total
	if name == "" {
		name = w.attached[clientID].Name
	}
	w.mu.Unlock()
	if _, err := w.Emit(context.Background(), Draft{
		Type: typ,
		Data: proto.ClientPresence{ClientID: clientID, Clients: n, Name: name},
	}); err != nil {
		w.m.log.Error("announce client", "workspace_id", w.ID, "type", typ, "err", err)
	}
}

func stopTimer(t **time.Timer) {
	if *t != nil {
		(*t).Stop()
		*t = nil
	}
}
