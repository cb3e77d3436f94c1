package coordinator

import (
	"context"
	"sync/atomic"

	"github.com/tandem-dev/tandem/internal/agent"
	"github.com/tandem-dev/tandem/internal/workspace"
)

// Hooks is the Coordinator as the components it drives call back into it:
// the workspace manager (a workspace closed), the session service (the
// runs of a session, and the fence of its delete: session.Runtime) and the
// pending broker (an answer for a suspended run). They are made before the
// Coordinator, which needs them, so each is given the Hooks at
// construction, and New binds the Hooks in its Config to the Coordinator it
// makes, once. None of them calls back before it serves, which is after
// New returned: a call before is a wiring bug, and panics.
type Hooks struct{ c atomic.Pointer[Coordinator] }

func (h *Hooks) bind(c *Coordinator) {
	if !h.c.CompareAndSwap(nil, c) {
		panic("coordinator: Hooks bound to a second Coordinator")
	}
}

func (h *Hooks) get() *Coordinator {
	c := h.c.Load()
	if c == nil {
		panic("coordinator: called back before the Coordinator was made")
	}
	return c
}

// State implements session.Runtime: see Coordinator.State.
func (h *Hooks) State(workspaceID, sessionID string) (busy bool, queued int) {
	return h.get().State(workspaceID, sessionID)
}

// Forget implements session.Runtime: see Coordinator.Forget.
func (h *Hooks) Forget(ctx context.Context, ws *workspace.Workspace, sessionID string) (done func(deleted bool)) {
	return h.get().Forget(ctx, ws, sessionID)
}

// WorkspaceClosed is workspace.Hooks.Closed: see Coordinator.WorkspaceClosed.
func (h *Hooks) WorkspaceClosed(ws *workspace.Workspace) { h.get().WorkspaceClosed(ws) }

// Answered is the pending broker's revive: a request of a suspended run
// was answered, and the run comes back to go on.
func (h *Hooks) Answered(ws *workspace.Workspace, sessionID, runID string) {
	h.get().Revive(ws, sessionID, runID, agent.ReviveContinue, false)
}
