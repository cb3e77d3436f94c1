package main

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/proto"
)

// In a cluster, a run's checkpoint is taken where the workspace's files
// are, its owner; the checkpoints are listed and the rewind is sent on
// another node, which forwards it to the owner like a prompt; every node's
// streams see session.rewound.
func TestClusterRewindGoesToTheOwner(t *testing.T) {
	c := startCluster(t, 2)
	ws, sess := c.workspace(0)
	require.Equal(t, http.StatusOK, crashCall(t, c.url(1), "PATCH", "/v1/workspaces/"+ws.ID+"/sessions/"+sess.ID,
		map[string]any{"permission_mode": "allow_all"}, nil))
	streams := []*clusterStream{openStream(t, c.url(0), ws.ID, -1), openStream(t, c.url(1), ws.ID, -1)}
	acc := c.prompt(1, ws.ID, sess.ID, `/tool bash {"command": "echo made > made.txt"}`)
	streams[1].until(t, proto.EventRunCompleted, acc.RunID)
	require.FileExists(t, filepath.Join(ws.Path, "made.txt"))

	var cks proto.CheckpointList
	require.Equal(t, http.StatusOK, crashCall(t, c.url(1), "GET", "/v1/workspaces/"+ws.ID+"/sessions/"+sess.ID+"/checkpoints", nil, &cks))
	require.Len(t, cks.Checkpoints, 1)
	assert.Equal(t, acc.RunID, cks.Checkpoints[0].RunID)
	// The run's end is recorded before run.completed, the idle that
	// follows it only just after: a rewind waits for the session to be idle.
	var res proto.RewindResult
	require.Eventually(t, func() bool {
		return crashCall(t, c.url(1), "POST", "/v1/workspaces/"+ws.ID+"/sessions/"+sess.ID+"/rewind",
			map[string]any{"checkpoint_id": cks.Checkpoints[0].ID}, &res) == http.StatusOK
	}, 10*time.Second, 20*time.Millisecond)
	assert.Equal(t, []proto.FileChange{{Path: "made.txt", Change: proto.ChangeAdded}}, res.Files)
	_, err := os.Stat(filepath.Join(ws.Path, "made.txt"))
	assert.True(t, os.IsNotExist(err), "the owner put the files back")
	for _, s := range streams {
		s.until(t, proto.EventSessionRewound, "")
	}
}
