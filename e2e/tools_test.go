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

	// Canceled as soon as it starts, the run ends within 2 s, canceled if
	// the cancel found it still going (the glob may well have finished).
	acc = e.prompt(ws.ID, sess.ID, call)
	s.until(proto.EventToolStarted)
	listed := e.cancel(ws.ID, sess.ID)
	canceled := time.Now()
	rc, _ = s.completion(acc.RunID)
	latency := time.Since(canceled)
	t.Logf("cancel to run.completed: %v (listed: %v)", latency, listed)
	if len(listed) > 0 {
		assert.Equal(t, []string{acc.RunID}, listed)
		assert.Equal(t, proto.OutcomeCanceled, rc.Outcome)
	} else {
		assert.Equal(t, proto.OutcomeEndTurn, rc.Outcome)
	}
	assert.Less(t, latency, 2*time.Second, "invariant 6: tools stop within 2 s of a cancel")
}

// toolResult runs one echo-model tool call and returns its tool.finished.
func (e *env) toolResult(s *stream, wsID, sid, call string) proto.ToolFinished {
	e.t.Helper()
	acc := e.prompt(wsID, sid, call)
	_, frames := s.completion(acc.RunID)
	for _, f := range frames {
		if f.Event == proto.EventToolFinished {
			var tf proto.ToolFinished
			require.NoError(e.t, json.Unmarshal(f.envelope(e.t).Data, &tf))
			return tf
		}
	}
	e.t.Fatalf("%s: no tool.finished", call)
	return proto.ToolFinished{}
}

// TestSearchesSkipGitignoredFiles: ls, glob and grep over the server skip
// what the workspace's .gitignore files (nested ones too) and .git hold,
// unless the call names the path.
func TestSearchesSkipGitignoredFiles(t *testing.T) {
	e := startEnv(t)
	files := map[string]string{
		".gitignore":          "vendor/\n*.tmp\n",
		"web/.gitignore":      "dist/\n",
		"main.go":             "needle\n",
		"scratch.tmp":         "needle\n",
		"vendor/lib/lib.go":   "needle\n",
		"web/app.ts":          "needle\n",
		"web/dist/app.js":     "needle\n",
		".git/HEAD":           "needle\n",
		"docs/notes.md":       "needle\n",
		"docs/draft.tmp":      "needle\n",
		"docs/sub/readme.txt": "needle\n",
	}
	for name, content := range files {
		p := filepath.Join(e.workDir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
	ws := e.createWorkspace()
	s := e.openStream(ws.ID, newClientID(), "")
	sess := e.createSession(ws.ID, nil)

	tf := e.toolResult(s, ws.ID, sess.ID, `/tool glob {"pattern": "**/*"}`)
	assert.Equal(t, ".gitignore\ndocs/notes.md\ndocs/sub/readme.txt\nmain.go\nweb/.gitignore\nweb/app.ts", tf.Content)
	tf = e.toolResult(s, ws.ID, sess.ID, `/tool grep {"pattern": "needle"}`)
	assert.Equal(t, "docs/notes.md:1:needle\ndocs/sub/readme.txt:1:needle\nmain.go:1:needle\nweb/app.ts:1:needle", tf.Content)
	tf = e.toolResult(s, ws.ID, sess.ID, `/tool ls {}`)
	assert.Equal(t, ".gitignore\ndocs/\nmain.go\nweb/\n[2 entries ignored by .gitignore not shown; give one as path to list it]", tf.Content)

	// Named, an ignored path is searched.
	tf = e.toolResult(s, ws.ID, sess.ID, `/tool grep {"pattern": "needle", "path": "vendor"}`)
	assert.Equal(t, "vendor/lib/lib.go:1:needle", tf.Content)
	tf = e.toolResult(s, ws.ID, sess.ID, `/tool glob {"pattern": "*.js", "path": "web/dist"}`)
	assert.Equal(t, "web/dist/app.js", tf.Content)
}

// TestPermissionDiffShowsEveryChange is defect 13 over the server: the
// permission request for a write that changes lines 3 and 28 of a 30-line
// file carries a diff with one hunk per change, three lines of context each.
func TestPermissionDiffShowsEveryChange(t *testing.T) {
	e := startEnv(t)
	lines := func(upper ...int) string {
		var b strings.Builder
		for i := 1; i <= 30; i++ {
			l := fmt.Sprintf("line %d", i)
			for _, u := range upper {
				if u == i {
					l = strings.ToUpper(l)
				}
			}
			b.WriteString(l + "\n")
		}
		return b.String()
	}
	require.NoError(t, os.WriteFile(filepath.Join(e.workDir, "f.txt"), []byte(lines()), 0o644))
	ws := e.createWorkspace()
	s := e.openStream(ws.ID, newClientID(), "")
	sess := e.createSession(ws.ID, nil)
	content, err := json.Marshal(lines(3, 28))
	require.NoError(t, err)
	acc := e.prompt(ws.ID, sess.ID, fmt.Sprintf(`/tool write {"path": "f.txt", "content": %s}`, content))
	pr := s.permissionRequested()
	assert.Equal(t, "--- a/f.txt\n+++ b/f.txt\n"+
		"@@ -1,6 +1,6 @@\n line 1\n line 2\n-line 3\n+LINE 3\n line 4\n line 5\n line 6\n"+
		"@@ -25,6 +25,6 @@\n line 25\n line 26\n line 27\n-line 28\n+LINE 28\n line 29\n line 30", pr.Details["diff"])
	e.approveToEnd(s, ws.ID, pr.RequestID, s.ClientID, acc.RunID)
	assertFile(t, filepath.Join(e.workDir, "f.txt"), lines(3, 28))
}
