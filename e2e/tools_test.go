package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/proto"
)

// TestCancelStopsAPathologicalGlob is defect 5 over the server: on a
// 40-level tree, glob "**/a/" x 12 then "**/b" used to run for hours
// (exponential in the pattern) without looking at the cancel. Now it ends in
// about a millisecond, and a cancel ends its run within 2 s.
func TestCancelStopsAPathologicalGlob(t *testing.T) {
	e := startEnv(t)
	dir := e.workDir
	for range 40 {
		dir = filepath.Join(dir, "a")
		require.NoError(t, os.Mkdir(dir, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "c"), nil, 0o644))
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "b"), nil, 0o644))
	ws := e.createWorkspace()
	s := e.openStream(ws.ID, newClientID(), "")
	sess := e.createSession(ws.ID, nil)

	pattern := strings.Repeat("**/a/", 12) + "**/b"
	call := fmt.Sprintf(`/tool glob {"pattern": %q}`, pattern)

	// The glob finds its file promptly (before the fix it ran for hours).
	acc := e.prompt(ws.ID, sess.ID, call)
	f, _ := s.until(proto.EventToolFinished)
	var tf proto.ToolFinished
	require.NoError(t, json.Unmarshal(f.envelope(t).Data, &tf))
	assert.False(t, tf.IsError, tf.Content)
	assert.Equal(t, strings.TrimPrefix(strings.Repeat("/a", 40), "/")+"/b", tf.Content)
	rc, _ := s.completion(acc.RunID)
	assert.Equal(t, proto.OutcomeEndTurn, rc.Outcome)

	// Canceled as soon as it starts, the run ends canceled within 2 s.
	acc = e.prompt(ws.ID, sess.ID, call)
	s.until(proto.EventToolStarted)
	e.cancel(ws.ID, sess.ID)
	canceled := time.Now()
	rc, _ = s.completion(acc.RunID)
	latency := time.Since(canceled)
	t.Logf("cancel to run.completed: %v", latency)
	assert.Equal(t, proto.OutcomeCanceled, rc.Outcome)
	assert.Less(t, latency, 2*time.Second, "invariant 6: tools stop within 2 s of a cancel")
}
