package e2e

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/internal/server"
	"github.com/tandem-dev/tandem/proto"
)

// walkthrough returns the shell commands of the README's curl walkthrough.
func walkthrough(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	_, rest, ok := strings.Cut(string(raw), "<!-- walkthrough:start -->")
	require.True(t, ok, "README has a walkthrough start marker")
	block, _, ok := strings.Cut(rest, "<!-- walkthrough:end -->")
	require.True(t, ok, "README has a walkthrough end marker")
	block = strings.TrimSpace(block)
	block = strings.TrimPrefix(block, "```sh")
	block = strings.TrimSuffix(block, "```")
	return block
}

// The README's walkthrough runs, as written, against a live server whose
// data dir is the default one under a fresh XDG_DATA_HOME, and leaves nothing
// behind: not in the directory it runs in, not in its scratch project.
func TestReadmeWalkthrough(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s is needed to run the README walkthrough; .ci/run installs it", tool)
			}
			t.Skipf("%s is not installed; CI runs this test", tool)
		}
	}
	home := t.TempDir()
	xdg := filepath.Join(home, "xdg-data")
	dataDir := filepath.Join(xdg, "tandem")
	token, _, err := server.LoadOrCreateToken(dataDir)
	require.NoError(t, err)
	srv, err := server.New(context.Background(), server.Config{DataDir: dataDir, Token: token, SandboxHelper: sandboxHelper})
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		assert.NoError(t, srv.Shutdown(ctx))
		assert.NoError(t, <-served)
		http.DefaultClient.CloseIdleConnections()
	}()

	work, tmp := t.TempDir(), t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", walkthrough(t))
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "HOME="+home, "XDG_DATA_HOME="+xdg, "TMPDIR="+tmp, "TANDEM_URL=http://"+ln.Addr().String())
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "walkthrough failed:\n%s", out)

	text := string(out)
	assert.Contains(t, text, `"status":"ok"`)
	assert.Contains(t, text, `"state":"running"`, "the prompt's 202")
	assert.Contains(t, text, `echo: hello tandem`, "the answer is in the history")
	assert.Contains(t, text, `"canceled_runs":[`, "the cancel")
	assert.Contains(t, text, `"result":"approved"`, "the approval")
	assert.Contains(t, text, "\nhi\n", "the file the agent wrote")
	for _, typ := range []string{"stream.opened", "run.accepted", "message.delta", "run.completed", "permission.requested", "permission.resolved"} {
		assert.Regexp(t, `[0-9]+ event: `+regexp.QuoteMeta(typ)+`\n`, text, "the stream saw %s", typ)
	}
	assert.Regexp(t, `[0-9]+ "outcome":"canceled"`, text)
	// The scratch workspace was forgotten: the server lists nothing.
	req, err := http.NewRequest(http.MethodGet, "http://"+ln.Addr().String()+"/v1/workspaces", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	var listed proto.WorkspaceList
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&listed))
	resp.Body.Close()
	assert.Empty(t, listed.Workspaces, "the walkthrough's workspace is forgotten")
	for _, dir := range []string{work, tmp} {
		left, err := os.ReadDir(dir)
		require.NoError(t, err)
		assert.Empty(t, left, "the walkthrough leaves nothing in %s", dir)
	}
}
