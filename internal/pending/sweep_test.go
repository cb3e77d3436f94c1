package pending

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/internal/store"
)

// The approvals of a session no request asked about between two sweeps are
// forgotten, and read from the store again when one does; those asked
// about stay.
func TestSweepForgetsApprovalsOfQuietSessions(t *testing.T) {
	ctx := context.Background()
	b, ws, db := newBroker(t)
	quiet, asking := uuid.NewString(), uuid.NewString()
	for _, sid := range []string{quiet, asking} {
		require.NoError(t, db.CreateSession(ctx, store.Session{ID: sid, WorkspaceID: ws.ID, Title: "t", Model: "echo"}))
		require.NoError(t, db.ApproveForSession(ctx, sid, "bash"))
		require.True(t, b.ApprovedForSession(ctx, sid, "bash"))
	}
	b.SweepIdle()
	require.True(t, b.ApprovedForSession(ctx, asking, "bash"))
	b.SweepIdle()
	b.mu.Lock()
	_, quietKept := b.approvals[quiet]
	_, askingKept := b.approvals[asking]
	b.mu.Unlock()
	assert.False(t, quietKept, "no request asked about it across two sweeps")
	assert.True(t, askingKept)
	assert.True(t, b.ApprovedForSession(ctx, quiet, "bash"), "read from the store again")

	b.SweepIdle()
	b.SweepIdle()
	b.mu.Lock()
	defer b.mu.Unlock()
	assert.Empty(t, b.approvals)
}
