package coordinator

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/internal/checkpoint"
	"github.com/tandem-dev/tandem/internal/hub"
	"github.com/tandem-dev/tandem/internal/provider"
	"github.com/tandem-dev/tandem/internal/session"
	"github.com/tandem-dev/tandem/internal/store"
	"github.com/tandem-dev/tandem/internal/workspace"
	"github.com/tandem-dev/tandem/proto"
)

// harness is a Coordinator over an in-memory store, a real workspace
// manager and session service, and fake runner, broker and tools. It can
// restart, as a server does: what the store and the broker keep stays.
type harness struct {
	t      testing.TB
	dir    string
	db     *memStore
	hub    *hub.Hub
	rec    *records
	gates  *gates
	broker *fakeBroker
	tools  *fakeTools
	// newProvider builds providers; nil builds echo ones.
	newProvider func(provider.Config) (provider.Provider, error)
	// checkpoints, when set, keeps checkpoints (the store then needs the
	// Rewinds role: memStore has it).
	checkpoints    *checkpoint.Manager
	checkpointsDir string

	epoch    int
	m        *workspace.Manager
	ws       *workspace.Workspace
	sessions *session.Service
	hooks    *Hooks
	runner   *fakeRunner
	c        *Coordinator
}

func newHarness(t testing.TB) *harness {
	h := &harness{t: t, dir: t.TempDir(), db: newMemStore(), hub: hub.New(hub.Config{}), rec: newRecords(), gates: &gates{}, broker: newFakeBroker(), tools: &fakeTools{}}
	h.broker.hooks = func() *Hooks { return h.hooks }
	h.broker.ws = func() *workspace.Workspace { return h.ws }
	h.start()
	t.Cleanup(func() {
		h.stop()
		h.hub.Close()
	})
	return h
}

// start makes a server's worth of components over what the store keeps,
// wired as internal/server wires them.
func (h *harness) start() {
	h.epoch++
	h.hooks = &Hooks{}
	h.m = workspace.NewManager(workspace.Config{
		Store: h.db, Hub: h.hub, CreateGrace: time.Hour, DetachGrace: time.Hour,
		Hooks: workspace.Hooks{Closed: h.hooks.WorkspaceClosed},
	})
	ws, _, err := h.m.Open(context.Background(), h.dir)
	require.NoError(h.t, err)
	h.ws = ws
	h.sessions = session.NewService(session.Config{Store: h.db, Workspaces: h.m, Tools: h.tools, Runtime: h.hooks})
	h.runner = &fakeRunner{rec: h.rec, gates: h.gates, broker: h.broker, epoch: h.epoch}
	h.c = New(Config{
		Store: h.db, Workspaces: h.m, Sessions: h.sessions, Runner: h.runner, Broker: h.broker, Tools: h.tools,
		NewProvider: func(pc provider.Config) (provider.Provider, error) {
			if h.newProvider != nil {
				return h.newProvider(pc)
			}
			return echoProvider{}, nil
		},
		Getenv:      func(string) string { return "" },
		Hooks:       h.hooks,
		Checkpoints: h.checkpoints,
	})
}

// stop shuts down as a server does: its workspaces close, so their runs
// end, and it waits for them.
func (h *harness) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	h.m.Shutdown(ctx)
	require.NoError(h.t, h.c.Wait(ctx))
}

// crash stops the server as a killed process stops: it writes nothing
// more from the moment it is told to stop.
func (h *harness) crash() {
	h.runner.dead.Store(true)
	h.stop()
	h.broker.crashed()
}

// restart stops the server and starts another over the same store; with
// crash, the first writes nothing more from the moment it is told to
// stop, as a killed process would, and the second recovers what it left.
func (h *harness) restart(crash bool) {
	if crash {
		h.runner.dead.Store(true)
	}
	h.stop()
	if crash {
		h.broker.crashed()
	}
	h.start()
	require.NoError(h.t, h.c.Recover(context.Background()))
}

// quickSession creates a titled session (no run names it) straight in the
// store: the interleavings make thousands.
func (h *harness) quickSession() string {
	id := uuid.NewString()
	now := time.Now()
	require.NoError(h.t, h.db.CreateSession(context.Background(), store.Session{ID: id, WorkspaceID: h.ws.ID, Title: "played", Model: "echo", CreatedAt: now, UpdatedAt: now}))
	return id
}

// session creates a session.
func (h *harness) session() string {
	s, err := h.sessions.Create(context.Background(), h.ws.ID, proto.CreateSessionRequest{})
	require.NoError(h.t, err)
	return s.ID
}

func (h *harness) prompt(sessionID, text string) (proto.PromptAccepted, error) {
	return h.c.Prompt(context.Background(), h.ws.ID, proto.PromptRequest{SessionID: sessionID, Prompt: text})
}

// accept prompts the session and fails the test unless the prompt is
// accepted.
func (h *harness) accept(sessionID, text string) proto.PromptAccepted {
	h.t.Helper()
	acc, err := h.prompt(sessionID, text)
	require.NoError(h.t, err, "prompt %q", text)
	return acc
}

// requireIdle fails the test unless Status shows the session with no
// active and no queued run.
func (h *harness) requireIdle(sessionID string) {
	h.t.Helper()
	st, err := h.c.Status(context.Background(), h.ws.ID, sessionID)
	require.NoError(h.t, err)
	assert.False(h.t, st.Busy, "busy")
	assert.Empty(h.t, st.Queued, "queued")
}

func (h *harness) steer(sessionID, text string) (proto.PromptAccepted, error) {
	return h.c.Prompt(context.Background(), h.ws.ID, proto.PromptRequest{SessionID: sessionID, Prompt: text, Delivery: proto.DeliverySteer})
}

// settle lets every run of the session end: its gate opens, and every
// request its runs wait on is answered, as they park. It fails the test if
// they have not ended within a deadline.
func (h *harness) settle(sessionID string) error {
	h.gates.open(sessionID)
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for {
		for h.broker.answer(sessionID) {
		}
		var idle chan struct{}
		if sr := h.c.existing(sessionID); sr != nil {
			sr.mu.Lock()
			idle = sr.idle
			sr.mu.Unlock()
		}
		if idle == nil && h.broker.waiting(sessionID) == 0 {
			return nil
		}
		select {
		case <-idle:
		case <-h.broker.parks:
		case <-deadline.C:
			busy, queued := h.c.State("", sessionID)
			return fmt.Errorf("session %s still has runs after 10 s (busy %v, queued %d, waiting %d)", sessionID, busy, queued, h.broker.waiting(sessionID))
		}
	}
}

// began waits until the run began executing.
func (h *harness) began(runID string) {
	h.t.Helper()
	timeout := time.NewTimer(10 * time.Second)
	defer timeout.Stop()
	for {
		if _, ok := h.rec.run(runID); ok {
			return
		}
		select {
		case <-h.rec.began:
		case <-timeout.C:
			h.t.Fatalf("run %s did not begin within 10 s", runID)
		}
	}
}
