// Package workspace owns workspaces at run time: which are open, who holds a
// claim on them (create holds and streams), the grace timers that close them, and
// each workspace's event log (seq assignment, persistence, fan-out).
//
// Lock order: Manager.mu, then Workspace.mu, then Workspace.logMu. Nothing here
// calls out to other packages' locks while holding Manager.mu.
package workspace

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/tandem-dev/tandem/internal/apierr"
	"github.com/tandem-dev/tandem/internal/bus"
	"github.com/tandem-dev/tandem/internal/goroutine"
	"github.com/tandem-dev/tandem/internal/hub"
	"github.com/tandem-dev/tandem/internal/store"
	"github.com/tandem-dev/tandem/proto"
)

// Hooks let the packages built on workspaces react to their lifecycle without
// the workspace package knowing them. Hooks never run under a workspace lock.
type Hooks struct {
	// ClientGone is called when a client has had no open stream for the detach grace.
	ClientGone func(ws *Workspace, clientID string)
	// Closed is called after a workspace closed (its context is already canceled).
	Closed func(ws *Workspace)
	// StreamsChanged, in a cluster, is called when a stream of a workspace
	// this node does not own opens or ends here: the owner counts this
	// node's streams as claims (see StreamCounts), and a new one must
	// reach it at once.
	StreamsChanged func(ws *Workspace)
}

// Config configures a Manager.
type Config struct {
	Store store.Store
	Hub   *hub.Hub
	// Bus is this node's in-process bus: each workspace's event log
	// publishes there, after commit, and the workspace's topic in Hub (its
	// streams on this node) subscribes to it. nil means a bus of the
	// Manager's own.
	Bus *bus.Local
	// Follower, set in a cluster, feeds the streams of workspaces this node
	// does not own from the bus; nil on a single node.
	Follower    *bus.Follower
	CreateGrace time.Duration
	DetachGrace time.Duration
	// Hooks are called back as clients leave and workspaces close; they
	// reach the layers above this one, which exist before anything opens.
	Hooks  Hooks
	Logger *slog.Logger
}

// Manager keeps every known workspace and its claims.
type Manager struct {
	cfg Config
	log *slog.Logger
	bus *bus.Local

	mu       sync.Mutex
	loaded   map[string]*Workspace
	stopping bool

	// timers tracks the grace timers' callbacks in flight, so Shutdown can
	// wait for them: they are goroutines time.AfterFunc starts for us.
	timers sync.WaitGroup
	// spawned runs the work started with background.
	spawned goroutine.Group
}

// NewManager returns a Manager over cfg.Store.
func NewManager(cfg Config) *Manager {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	b := cfg.Bus
	if b == nil {
		b = bus.NewLocal()
	}
	return &Manager{cfg: cfg, log: cfg.Logger, bus: b, loaded: make(map[string]*Workspace)}
}

// Open registers the directory at path (or finds it, by its resolved path), opens
// it and holds it open for the create grace. created reports a new workspace.
func (m *Manager) Open(ctx context.Context, path string) (ws *Workspace, created bool, err error) {
	resolved, err := resolveDir(path)
	if err != nil {
		return nil, false, err
	}
	rec, created, err := m.cfg.Store.EnsureWorkspace(ctx, store.Workspace{
		ID:        uuid.NewString(),
		Path:      resolved,
		CreatedAt: time.Now().UTC(),
	})
	if err != nil {
		return nil, false, fmt.Errorf("open workspace %s: %w", resolved, err)
	}
	ws, err = m.load(ctx, rec)
	if err != nil {
		return nil, false, err
	}
	if err := ws.holdOpen(); err != nil {
		return nil, false, err
	}
	return ws, created, nil
}

// resolveDir checks that path is an absolute, existing directory and returns it
// with symlinks resolved, so two spellings of one directory are one workspace.
func resolveDir(path string) (string, error) {
	if path == "" {
		return "", apierr.Invalid("path is required")
	}
	if !filepath.IsAbs(path) {
		return "", apierr.Invalid("path %q is not absolute", path)
	}
	resolved, err := filepath.EvalSymlinks(filepath.Clean(path))
	if err != nil {
		return "", apierr.Invalid("path %q does not exist", path)
	}
	fi, err := os.Stat(resolved)
	if err != nil || !fi.IsDir() {
		return "", apierr.Invalid("path %q is not a directory", path)
	}
	return resolved, nil
}

// Get returns the workspace with that id, loading it from the store if needed.
func (m *Manager) Get(ctx context.Context, id string) (*Workspace, error) {
	if _, err := uuid.Parse(id); err != nil {
		return nil, apierr.Errorf(proto.CodeWorkspaceNotFound, "workspace %q not found", id)
	}
	m.mu.Lock()
	ws := m.loaded[id]
	m.mu.Unlock()
	if ws != nil {
		return ws, nil
	}
	rec, err := m.cfg.Store.GetWorkspace(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, apierr.Errorf(proto.CodeWorkspaceNotFound, "workspace %s not found", id)
	}
	if err != nil {
		return nil, fmt.Errorf("get workspace %s: %w", id, err)
	}
	return m.load(ctx, rec)
}

// List returns every known workspace, oldest first.
func (m *Manager) List(ctx context.Context) ([]proto.Workspace, error) {
	recs, err := m.cfg.Store.ListWorkspaces(ctx)
	if err != nil {
		return nil, fmt.Errorf("list workspaces: %w", err)
	}
	out := make([]proto.Workspace, 0, len(recs))
	for _, rec := range recs {
		m.mu.Lock()
		ws := m.loaded[rec.ID]
		m.mu.Unlock()
		info := proto.Workspace{ID: rec.ID, Path: rec.Path, CreatedAt: proto.Time{Time: rec.CreatedAt}, Attached: []proto.AttachedClient{}}
		if ws != nil {
			info = ws.Info()
		}
		info.Missing = dirMissing(rec.Path)
		out = append(out, info)
	}
	return out, nil
}

// ReasonForgotten is the reason of the workspace.closing of a workspace
// being forgotten (Forget): the other nodes of a cluster unload it then.
const ReasonForgotten = "forgotten"

// Forget closes ws (if open) and removes it from the store with
// everything it holds, and from memory: afterwards it is not listed and
// its id is not found. The caller fences its sessions first (see
// session.Service.ForgetWorkspace).
func (m *Manager) Forget(ctx context.Context, ws *Workspace) error {
	ws.Close(ReasonForgotten)
	err := m.cfg.Store.DeleteWorkspace(ctx, ws.ID)
	if errors.Is(err, store.ErrNotFound) {
		return apierr.Errorf(proto.CodeWorkspaceNotFound, "workspace %s not found", ws.ID)
	}
	if err != nil {
		return fmt.Errorf("forget workspace %s: %w", ws.ID, err)
	}
	m.unload(ws)
	ws.closeFollower()
	m.log.Info("workspace forgotten", "workspace_id", ws.ID, "path", ws.Path)
	return nil
}

// unload drops ws from memory: the next Get of its id asks the store.
func (m *Manager) unload(ws *Workspace) {
	m.mu.Lock()
	if m.loaded[ws.ID] == ws {
		delete(m.loaded, ws.ID)
	}
	m.mu.Unlock()
}

// dirMissing reports whether path is gone (or is no longer a directory), so
// that a list can tell a workspace deleted behind the server's back from a
// closed one. Other errors (permissions) say nothing.
func dirMissing(path string) bool {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return true
	}
	return err == nil && !fi.IsDir()
}

// Loaded returns the workspaces loaded in memory.
func (m *Manager) Loaded() []*Workspace {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*Workspace, 0, len(m.loaded))
	for _, ws := range m.loaded {
		out = append(out, ws)
	}
	return out
}

// load returns the in-memory Workspace for rec, creating it once.
func (m *Manager) load(ctx context.Context, rec store.Workspace) (*Workspace, error) {
	m.mu.Lock()
	if ws := m.loaded[rec.ID]; ws != nil {
		m.mu.Unlock()
		return ws, nil
	}
	m.mu.Unlock()

	// Numbering resumes above both what was reserved and what was persisted, so
	// seqs keep growing across restarts even for events never written to disk.
	maxSeq, err := m.cfg.Store.MaxSeq(ctx, rec.ID)
	if err != nil {
		return nil, fmt.Errorf("load workspace %s: %w", rec.ID, err)
	}
	head := max(maxSeq, rec.SeqReserved)
	if m.cfg.Follower != nil {
		// A follower's streams start from what is committed; the owner
		// numbers from its own head (Own).
		head = maxSeq
	}

	m.mu.Lock()
	defer m.mu.Unlock()
	if ws := m.loaded[rec.ID]; ws != nil {
		return ws, nil
	}
	ws, err := newWorkspace(m, rec, head)
	if err != nil {
		return nil, err
	}
	m.loaded[rec.ID] = ws
	return ws, nil
}

// after runs f once d has passed, unless the Manager is stopping by then;
// Shutdown waits for a callback already running.
func (m *Manager) after(d time.Duration, f func()) *time.Timer {
	return time.AfterFunc(d, func() {
		m.mu.Lock()
		if m.stopping {
			m.mu.Unlock()
			return
		}
		m.timers.Add(1)
		m.mu.Unlock()
		defer m.timers.Done()
		f()
	})
}

// background runs f on a goroutine of its own, unless the Manager is
// stopping (then it reports false and f does not run); Shutdown waits for it.
func (m *Manager) background(f func()) bool { return m.spawned.Go(f) }

func (m *Manager) currentHooks() Hooks { return m.cfg.Hooks }

// Shutdown closes every open workspace, telling its streams why, and waits for
// grace timer callbacks already running.
func (m *Manager) Shutdown(ctx context.Context) {
	m.mu.Lock()
	m.stopping = true
	m.spawned.Stop()
	all := make([]*Workspace, 0, len(m.loaded))
	for _, ws := range m.loaded {
		all = append(all, ws)
	}
	m.mu.Unlock()
	for _, ws := range all {
		ws.Close("shutdown")
		ws.closeFollower()
	}
	done := make(chan struct{})
	go func() {
		m.timers.Wait()
		m.spawned.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		m.log.Warn("workspace timers still running at shutdown deadline")
	}
}

func (m *Manager) isStopping() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.stopping
}
