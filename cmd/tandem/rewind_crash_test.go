package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/proto"
)

// Issue 31, item 6b: a server killed (SIGKILL) while a run's bash runs,
// after the run's checkpoint, records the run's end as it recovers, so a
// later hand edit is a rewind_conflict, not overwritten; the files the
// crash left are the run's, and a rewind without force takes them back.
func TestRewindAfterACrashKeepsAHandEdit(t *testing.T) {
	env := []string{"TANDEM_TOKEN=crash-token", "TANDEM_DATA_DIR=" + t.TempDir()}
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a.txt"), []byte("a\n"), 0o644))
	fifo := filepath.Join(t.TempDir(), "running")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	p := startServe(t, env)
	var ws proto.Workspace
	require.Equal(t, http.StatusCreated, crashCall(t, p.url, "POST", "/v1/workspaces", map[string]string{"path": dir}, &ws))
	var sess proto.Session
	require.Equal(t, http.StatusCreated, crashCall(t, p.url, "POST", "/v1/workspaces/"+ws.ID+"/sessions", map[string]any{"permission_mode": "allow_all", "sandbox": "off"}, &sess))
	var acc proto.PromptAccepted
	// Unconfined (the owner's "off"): the command signals through a fifo
	// outside the workspace, which the sandbox would refuse.
	command := fmt.Sprintf("echo A > a.txt; echo up > %s; sleep 30", fifo)
	require.Equal(t, http.StatusAccepted, crashCall(t, p.url, "POST", "/v1/workspaces/"+ws.ID+"/agent",
		proto.PromptRequest{SessionID: sess.ID, Prompt: `/tool bash {"command": "` + command + `"}`}, &acc))
	// The command is running (so the checkpoint was taken before it).
	f, err := os.Open(fifo)
	require.NoError(t, err)
	up, err := io.ReadAll(f)
	f.Close()
	require.NoError(t, err)
	require.Equal(t, "up\n", string(up))
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGKILL))
	<-p.done

	p2 := startServe(t, env)
	var cks proto.CheckpointList
	path := fmt.Sprintf("/v1/workspaces/%s/sessions/%s", ws.ID, sess.ID)
	require.Equal(t, http.StatusOK, crashCall(t, p2.url, "GET", path+"/checkpoints", nil, &cks))
	require.Len(t, cks.Checkpoints, 1)
	assert.Equal(t, acc.RunID, cks.Checkpoints[0].RunID)

	require.NoError(t, os.WriteFile(filepath.Join(dir, "a.txt"), []byte("a hand edit\n"), 0o644))
	var apiErr struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	body := map[string]any{"checkpoint_id": cks.Checkpoints[0].ID}
	require.Equal(t, http.StatusConflict, crashCall(t, p2.url, "POST", path+"/rewind", body, &apiErr))
	assert.Equal(t, proto.CodeRewindConflict, apiErr.Error.Code)
	assert.Contains(t, apiErr.Error.Message, "a.txt")
	assert.Contains(t, apiErr.Error.Message, "not by it", "the run's end was recorded: %s", apiErr.Error.Message)
	got, _ := os.ReadFile(filepath.Join(dir, "a.txt"))
	assert.Equal(t, "a hand edit\n", string(got))

	// As the crash left it: the run's own change, taken back unforced.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a.txt"), []byte("A\n"), 0o644))
	var res proto.RewindResult
	require.Equal(t, http.StatusOK, crashCall(t, p2.url, "POST", path+"/rewind", body, &res))
	got, _ = os.ReadFile(filepath.Join(dir, "a.txt"))
	assert.Equal(t, "a\n", string(got))
	assert.True(t, strings.Contains(fmt.Sprint(res.Files), "a.txt"))
	require.NoError(t, p2.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, <-p2.done)
}
