//go:build linux

package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/tandem-dev/tandem/proto"
)

// swapDirs exchanges a and b (a directory and a symlink) atomically, over
// and over, until the test ends: the name always exists, and is a directory
// one moment and a link out of the workspace the next.
func swapDirs(t *testing.T, a, b string) *atomic.Int64 {
	t.Helper()
	var swaps atomic.Int64
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE); err != nil {
				t.Errorf("exchange: %v", err)
				return
			}
			swaps.Add(1)
		}
	}()
	t.Cleanup(func() { close(stop); <-done })
	return &swaps
}

// TestToolsStayInsideWhileADirectoryIsSwapped is defect 10 over the server:
// while another process swaps racedir between a directory and a symlink to
// outside the workspace, writes, reads and file attachments never land or
// read outside.
func TestToolsStayInsideWhileADirectoryIsSwapped(t *testing.T) {
	fake := newFakeModel(t, "openai", reply("ok"))
	e := startEnv(t)
	out := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(out, "secret.txt"), []byte("SECRET outside\n"), 0o600))
	require.NoError(t, os.Mkdir(filepath.Join(e.workDir, "racedir"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(e.workDir, "racedir", "secret.txt"), []byte("inside\n"), 0o600))
	rel, err := filepath.Rel(e.workDir, out)
	require.NoError(t, err)
	alt := filepath.Join(e.workDir, "racedir.alt")
	require.NoError(t, os.Symlink(rel, alt))

	ws := e.createWorkspace()
	s := e.openStream(ws.ID, newClientID(), "")
	echo := e.createSession(ws.ID, map[string]any{"permission_mode": "allow_all"})
	model := e.openAISession(ws.ID, fake, nil)
	swaps := swapDirs(t, filepath.Join(e.workDir, "racedir"), alt)

	runs := map[string]bool{}
	const writes = 240
	for i := range writes {
		acc := e.prompt(ws.ID, echo.ID, fmt.Sprintf(`/tool write {"path": "racedir/f%d.txt", "content": "x"}`, i))
		runs[acc.RunID] = true
		if i%4 == 0 {
			acc = e.prompt(ws.ID, echo.ID, `/tool view {"path": "racedir/secret.txt"}`)
			runs[acc.RunID] = true
		}
		if i%6 == 0 {
			var acc proto.PromptAccepted
			status, raw := e.do("POST", "/v1/workspaces/"+ws.ID+"/agent", proto.PromptRequest{
				SessionID: model.ID, Prompt: "look",
				Attachments: []proto.Attachment{{Type: "file", Path: "racedir/secret.txt"}},
			}, &acc)
			require.Contains(t, []int{http.StatusAccepted, http.StatusBadRequest}, status, "%s", raw)
			assert.NotContains(t, string(raw), "SECRET")
			if status == http.StatusAccepted {
				runs[acc.RunID] = true
			}
		}
	}

	deadline := time.After(2 * time.Minute)
	for len(runs) > 0 {
		select {
		case f, ok := <-s.frames:
			require.True(t, ok, "stream ended")
			require.NotContains(t, f.Data, "SECRET", "an event shows a file from outside the workspace")
			if f.Event != proto.EventRunCompleted {
				continue
			}
			var rc proto.RunCompleted
			require.NoError(t, json.Unmarshal(f.envelope(t).Data, &rc))
			delete(runs, rc.RunID)
		case <-deadline:
			t.Fatalf("%d runs did not complete", len(runs))
		}
	}
	assert.Greater(t, swaps.Load(), int64(writes), "the swapper ran alongside")

	ents, err := os.ReadDir(out)
	require.NoError(t, err)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	assert.Equal(t, []string{"secret.txt"}, names, "files landed outside the workspace")
	for _, r := range fake.Requests() {
		assert.False(t, strings.Contains(r.RawBody, "SECRET"), "the model was sent a file from outside the workspace")
	}
}
