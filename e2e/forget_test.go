package e2e

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/proto"
)

// A workspace whose directory was deleted is listed missing; its owner
// forgets it (a member may not), and then the server keeps nothing of it:
// not in the list, 404 for its id and its sessions, no checkpoint store,
// build cache or session $TMPDIR left in the data dir, also after a
// restart. Its open streams are told and end.
func TestForgetMissingWorkspace(t *testing.T) {
	e := startEnv(t)
	writeTree(t, e.workDir, map[string]string{"a.txt": "one\n"})
	ws := e.createWorkspace()
	s := e.openStream(ws.ID, newClientID(), "")
	sess := e.createSession(ws.ID, map[string]any{"permission_mode": "allow_all"})
	e.runToIdle(s, ws.ID, sess.ID, bashPrompt("echo two > a.txt"))
	require.Len(t, e.checkpoints(ws.ID, sess.ID), 1)
	leftovers := []string{
		filepath.Join(e.cfg.DataDir, "checkpoints", ws.ID+".git"),
		filepath.Join(e.cfg.DataDir, "tmp", sess.ID),
		filepath.Join(e.cfg.DataDir, "cache", ws.ID),
	}
	for _, dir := range leftovers {
		require.DirExists(t, dir, "the run left it")
	}

	require.NoError(t, os.RemoveAll(e.workDir))
	listed := func() (proto.Workspace, bool) {
		var list proto.WorkspaceList
		e.must(http.StatusOK, "GET", "/v1/workspaces", nil, &list)
		for _, w := range list.Workspaces {
			if w.ID == ws.ID {
				return w, true
			}
		}
		return proto.Workspace{}, false
	}
	got, ok := listed()
	require.True(t, ok)
	assert.True(t, got.Missing, "its directory is gone")

	forget := "/v1/workspaces/" + ws.ID + "/forget"
	_, member := e.person("max", "member")
	status, raw := e.as(member, "POST", forget, nil, nil)
	require.Equal(t, http.StatusForbidden, status, "%s", raw)
	_, ok = listed()
	require.True(t, ok, "a member's refused forget changes nothing")
	e.must(http.StatusOK, "GET", "/v1/workspaces/"+ws.ID, nil, nil)

	e.must(http.StatusNoContent, "POST", forget, nil, nil)
	closing, _ := s.until(proto.EventWorkspaceClosing)
	var why proto.WorkspaceClosing
	require.NoError(t, json.Unmarshal(closing.envelope(t).Data, &why))
	assert.Equal(t, "forgotten", why.Reason)
	s.ended()

	gone := func() {
		t.Helper()
		_, ok := listed()
		assert.False(t, ok, "no longer listed")
		for _, path := range []string{
			"/v1/workspaces/" + ws.ID,
			e.sessionPath(ws.ID, sess.ID),
			"/v1/workspaces/" + ws.ID + "/sessions",
		} {
			status, raw := e.do("GET", path, nil, nil)
			assert.Equal(t, http.StatusNotFound, status, "GET %s: %s", path, raw)
			assert.Contains(t, string(raw), proto.CodeWorkspaceNotFound, path)
		}
		status, raw := e.do("POST", forget, nil, nil)
		assert.Equal(t, http.StatusNotFound, status, "forgotten twice: %s", raw)
		for _, dir := range leftovers {
			assert.NoDirExists(t, dir)
		}
	}
	gone()
	e.restart()
	gone()
}
