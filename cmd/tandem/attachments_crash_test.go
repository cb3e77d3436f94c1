package main

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/proto"
)

// queuedWithAttachments is a prompt with a file attachment (whose file
// the test then removes: what was read at accept is what counts) and an
// image blob of size bytes.
func queuedWithAttachments(t *testing.T, dir, sessionID string, size int) proto.PromptRequest {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("kept-words-in-notes\n"), 0o600))
	img := make([]byte, size)
	_, _ = rand.Read(img)
	return proto.PromptRequest{SessionID: sessionID, Prompt: "waiting in line", Attachments: []proto.Attachment{
		{Type: "file", Path: "notes.txt"},
		{Type: "blob", MimeType: "image/png", Data: base64.StdEncoding.EncodeToString(img), DisplayName: "shot.png"},
	}}
}

// userParts returns the attachment parts of the run's user message.
func userParts(t *testing.T, url, wsID, sessionID, runID string) []proto.Part {
	t.Helper()
	var msgs proto.MessageList
	require.Equal(t, http.StatusOK, crashCall(t, url, "GET", fmt.Sprintf("/v1/workspaces/%s/sessions/%s/messages", wsID, sessionID), nil, &msgs))
	var out []proto.Part
	for _, m := range msgs.Messages {
		if m.RunID != runID || m.Role != proto.RoleUser {
			continue
		}
		for _, p := range m.Parts {
			if p.Type == proto.PartAttachment {
				out = append(out, p)
			}
		}
	}
	return out
}

// A server killed (SIGKILL) with a prompt with attachments queued ends
// that run interrupted when it comes back, as any run lost in a crash,
// and its user message still shows the attachments it was accepted with.
func TestQueuedRunKeepsItsAttachmentsAcrossACrash(t *testing.T) {
	env := []string{"TANDEM_TOKEN=crash-token", "TANDEM_DATA_DIR=" + t.TempDir()}
	dir := t.TempDir()
	p := startServe(t, env)
	var ws proto.Workspace
	require.Equal(t, http.StatusCreated, crashCall(t, p.url, "POST", "/v1/workspaces", map[string]string{"path": dir}, &ws))
	var sess proto.Session
	require.Equal(t, http.StatusCreated, crashCall(t, p.url, "POST", "/v1/workspaces/"+ws.ID+"/sessions", map[string]any{}, &sess))
	_, events := crashStream(t, p.url, ws.ID)

	var running, queued proto.PromptAccepted
	require.Equal(t, http.StatusAccepted, crashCall(t, p.url, "POST", "/v1/workspaces/"+ws.ID+"/agent", proto.PromptRequest{SessionID: sess.ID, Prompt: "/slow 100000 10"}, &running))
	require.Equal(t, http.StatusAccepted, crashCall(t, p.url, "POST", "/v1/workspaces/"+ws.ID+"/agent", queuedWithAttachments(t, dir, sess.ID, 3<<20), &queued))
	require.Equal(t, proto.RunQueued, queued.State)
	require.NoError(t, os.Remove(filepath.Join(dir, "notes.txt")))
	awaitEvent(t, events, proto.EventMessageDelta, running.RunID)
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGKILL))
	<-p.done

	p2 := startServe(t, env)
	assert.Equal(t, []string{proto.OutcomeInterrupted}, runOutcomes(t, p2.url, ws.ID, sess.ID)[queued.RunID])
	parts := userParts(t, p2.url, ws.ID, sess.ID, queued.RunID)
	require.Len(t, parts, 2, "the user message shows its attachments")
	assert.Equal(t, "notes.txt", parts[0].Path)
	assert.Equal(t, int64(len("kept-words-in-notes\n")), parts[0].Size)
	assert.Equal(t, "shot.png", parts[1].DisplayName)
	assert.Equal(t, int64(3<<20), parts[1].Size)
	require.NoError(t, p2.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, <-p2.done)
}

// kill -9 of a workspace's owner with a prompt with attachments queued:
// the run runs on the new owner with them, as they were read when the
// prompt was accepted (the file is gone by then), and the model sees
// them: echo repeats the file's text and counts the image.
func TestClusterQueuedRunRunsWithItsAttachmentsAfterTakeover(t *testing.T) {
	c := startCluster(t, 2)
	dir := t.TempDir()
	var ws proto.Workspace
	require.Equal(t, http.StatusCreated, crashCall(t, c.url(0), "POST", "/v1/workspaces", map[string]string{"path": dir}, &ws))
	var sess proto.Session
	require.Equal(t, http.StatusCreated, crashCall(t, c.url(0), "POST", "/v1/workspaces/"+ws.ID+"/sessions", map[string]any{}, &sess))
	s := openStream(t, c.url(1), ws.ID, -1)

	running := c.prompt(1, ws.ID, sess.ID, "/slow 100000 20")
	var queued proto.PromptAccepted
	// Sent to the node that does not own the workspace: forwarded.
	require.Equal(t, http.StatusAccepted, crashCall(t, c.url(1), "POST", "/v1/workspaces/"+ws.ID+"/agent", queuedWithAttachments(t, dir, sess.ID, 2<<20), &queued))
	require.Equal(t, proto.RunQueued, queued.State)
	require.NoError(t, os.Remove(filepath.Join(dir, "notes.txt")))
	s.until(t, proto.EventMessageDelta, running.RunID)

	require.NoError(t, c.nodes[0].cmd.Process.Signal(syscall.SIGKILL))
	<-c.nodes[0].done
	killed := time.Now()
	evs := s.until(t, proto.EventRunCompleted, queued.RunID)
	t.Logf("the queued run ended %v after the owner was killed", time.Since(killed))
	var rc proto.RunCompleted
	require.NoError(t, json.Unmarshal(evs[len(evs)-1].Data, &rc))
	assert.Equal(t, proto.OutcomeEndTurn, rc.Outcome)

	var msgs proto.MessageList
	require.Equal(t, http.StatusOK, crashCall(t, c.url(1), "GET", fmt.Sprintf("/v1/workspaces/%s/sessions/%s/messages", ws.ID, sess.ID), nil, &msgs))
	var answer string
	for _, m := range msgs.Messages {
		if m.RunID == queued.RunID && m.Role == proto.RoleAssistant {
			for _, p := range m.Parts {
				if p.Type == proto.PartText {
					answer += p.Text
				}
			}
		}
	}
	assert.True(t, strings.HasPrefix(answer, "echo: waiting in line"), answer)
	assert.Contains(t, answer, "kept-words-in-notes", "the model got the file as read at accept")
	assert.True(t, strings.HasSuffix(answer, "(1 image)"), "the model got the image: %q", answer)
	assert.Len(t, userParts(t, c.url(1), ws.ID, sess.ID, queued.RunID), 2)
}
