package coordinator

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/proto"
)

// TestPromptRunsAndCompletes: a 202 yields exactly one run.completed, and
// the session ends idle (invariant 1).
func TestPromptRunsAndCompletes(t *testing.T) {
	h := newHarness(t)
	sid := h.session()
	acc, err := h.prompt(sid, "hello")
	require.NoError(t, err)
	assert.Equal(t, proto.RunRunning, acc.State)
	require.NoError(t, h.settle(sid))
	count, outcome := h.db.completions(acc.RunID)
	assert.Equal(t, 1, count)
	assert.Equal(t, proto.OutcomeEndTurn, outcome)
	assert.Empty(t, h.rec.broken)
}
