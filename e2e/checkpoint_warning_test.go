package e2e

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/proto"
)

// A run that changes files when its checkpoint cannot be saved (a full
// data disk, a broken checkpoint store) still runs, and its session is
// told, once, that no rewind to before it will be possible: the loss is
// not in the server's log only.
func TestMissingCheckpointIsToldToTheSession(t *testing.T) {
	e := startEnv(t)
	ws := e.createWorkspace()
	s := e.openStream(ws.ID, newClientID(), "")
	sess := e.createSession(ws.ID, map[string]any{"permission_mode": "allow_all"})
	// The workspace's checkpoint repository cannot be made.
	repo := filepath.Join(e.cfg.DataDir, "checkpoints", ws.ID+".git")
	require.NoError(t, os.MkdirAll(filepath.Dir(repo), 0o700))
	require.NoError(t, os.WriteFile(repo, []byte("not a repository"), 0o600))

	acc := e.prompt(ws.ID, sess.ID, bashPrompt("echo one > a.txt && echo two > b.txt"))
	rc, frames := s.completion(acc.RunID)
	require.Equal(t, proto.OutcomeEndTurn, rc.Outcome)
	var warnings []proto.SessionLog
	for _, f := range frames {
		if f.Event != proto.EventSessionLog {
			continue
		}
		ev := f.envelope(t)
		var l proto.SessionLog
		require.NoError(t, json.Unmarshal(ev.Data, &l))
		if strings.Contains(l.Message, "checkpoint") {
			assert.Equal(t, sess.ID, ev.SessionID)
			warnings = append(warnings, l)
		}
	}
	require.Len(t, warnings, 1, "told once")
	assert.Equal(t, "warning", warnings[0].Level)
	assert.Contains(t, warnings[0].Message, acc.RunID)
	assert.Contains(t, warnings[0].Message, "rewind")
	assert.NotContains(t, warnings[0].Message, e.cfg.DataDir, "the server's paths stay in its log")
	assert.FileExists(t, filepath.Join(e.workDir, "b.txt"), "the run did its work")
	// The checkpoint list shows the gap, and it is no way back.
	cks := e.checkpoints(ws.ID, sess.ID)
	require.Len(t, cks, 1)
	assert.True(t, cks[0].Missing, "listed as missing")
	assert.Equal(t, acc.RunID, cks[0].RunID)
	status, raw := e.do("GET", e.sessionPath(ws.ID, sess.ID)+"/checkpoints/"+cks[0].ID+"/diff", nil, nil)
	assert.Equal(t, http.StatusNotFound, status, "%s", raw)
	status, raw = e.do("POST", e.sessionPath(ws.ID, sess.ID)+"/rewind", map[string]any{"checkpoint_id": cks[0].ID}, nil)
	assert.Equal(t, http.StatusNotFound, status, "%s", raw)
	assert.Equal(t, proto.CodeCheckpointNotFound, errorCode(t, raw))
	assert.FileExists(t, filepath.Join(e.workDir, "b.txt"), "a refused rewind changes nothing")
}
