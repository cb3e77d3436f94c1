package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/client"
)

// ctxFor is a context that ends with the test or after d.
func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// serverJSON reads DATA_DIR/server.json.
func serverJSON(t *testing.T, dataDir string) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dataDir, "server.json"))
	require.NoError(t, err)
	var v map[string]any
	require.NoError(t, json.Unmarshal(raw, &v), "%s", raw)
	return v
}

// Two servers on one data dir would each recover the other's live runs and
// race for the same event seqs: the second exits at once, saying which
// server holds the dir, and so does a client command that would start one.
func TestSecondServerOnADataDirExitsAtOnce(t *testing.T) {
	dataDir := t.TempDir()
	env := []string{"TANDEM_TOKEN=", "TANDEM_DATA_DIR=" + dataDir}
	p := startServe(t, env)
	pid := p.cmd.Process.Pid

	want := fmt.Sprintf("data dir %s is in use by tandem pid %d at %s", dataDir, pid, p.url)

	second := exec.CommandContext(ctxFor(t, cliDeadline), binary, "serve", "--addr", "127.0.0.1:0")
	second.Env = append(os.Environ(), env...)
	start := time.Now()
	out, _ := second.CombinedOutput()
	assert.NotContains(t, string(out), "listening")
	assert.Equal(t, 1, second.ProcessState.ExitCode(), "output: %s", out)
	assert.Contains(t, string(out), want)
	assert.Less(t, time.Since(start), 10*time.Second, "at once (the binary is built with -race)")

	info := serverJSON(t, dataDir)
	assert.Equal(t, p.url, info["url"])
	assert.EqualValues(t, pid, info["pid"])
	if runtime.GOOS != "windows" {
		fi, err := os.Stat(filepath.Join(dataDir, "server.json"))
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	}

	// A client command pointed at a loopback URL where nothing listens would
	// start a server in-process on the data dir: it stops instead.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	nowhere := "http://" + ln.Addr().String()
	require.NoError(t, ln.Close())
	_, errOut, code := runCLI(t, t.TempDir(), cliEnvironment(t, "TANDEM_DATA_DIR="+dataDir), "run", "--url", nowhere, "hello")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, want)
	assert.NotContains(t, errOut, "running one in this process")

	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, <-p.done, "stderr: %s", p.stderr)
	_, err = os.Stat(filepath.Join(dataDir, "server.json"))
	assert.ErrorIs(t, err, os.ErrNotExist, "a clean exit removes server.json")
}

// A client command given no --url uses the server running on its data dir,
// found through server.json, instead of starting a second one on it.
func TestRunUsesTheServerOfItsDataDir(t *testing.T) {
	dataDir := t.TempDir()
	p := startServe(t, []string{"TANDEM_TOKEN=", "TANDEM_DATA_DIR=" + dataDir})
	dir := t.TempDir()

	out, errOut, code := runCLI(t, dir, cliEnvironment(t, "TANDEM_DATA_DIR="+dataDir), "run", "hello")
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "echo: hello\n", out)
	assert.NotContains(t, errOut, "running one in this process")

	raw, err := os.ReadFile(filepath.Join(dataDir, "token"))
	require.NoError(t, err)
	c := client.New(p.url, strings.TrimSpace(string(raw)))
	defer c.CloseIdleConnections()
	list, err := c.ListWorkspaces(context.Background())
	require.NoError(t, err)
	resolved, err := filepath.EvalSymlinks(dir)
	require.NoError(t, err)
	require.Len(t, list, 1, "the run went to the running server")
	assert.Equal(t, resolved, list[0].Path)

	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, <-p.done, "stderr: %s", p.stderr)
}

// A server killed with -9 leaves its server.json behind; its lock went with
// it, so neither a client command nor the next server believes the file.
func TestStaleServerJSONDoesNotMislead(t *testing.T) {
	dataDir := t.TempDir()
	env := []string{"TANDEM_TOKEN=", "TANDEM_DATA_DIR=" + dataDir}
	p := startServe(t, env)
	require.NoError(t, p.cmd.Process.Kill())
	<-p.done
	// Nothing answers at the stale URL any more; a client command must not
	// report it as the data dir's server.
	_, errOut, _ := runCLI(t, t.TempDir(), cliEnvironment(t, "TANDEM_DATA_DIR="+dataDir), "sessions")
	assert.NotContains(t, errOut, p.url)
	assert.NotContains(t, errOut, "in use")

	p = startServe(t, env)
	require.NoError(t, p.cmd.Process.Kill())
	<-p.done
	stale := serverJSON(t, dataDir)
	require.Equal(t, p.url, stale["url"], "kill -9 leaves server.json")
	_, errOut, _ = runCLI(t, t.TempDir(), cliEnvironment(t, "TANDEM_DATA_DIR="+dataDir), "sessions")
	assert.NotContains(t, errOut, p.url)
	assert.NotContains(t, errOut, "in use")

	p2 := startServe(t, env)
	assert.Equal(t, p2.url, serverJSON(t, dataDir)["url"])
	assert.EqualValues(t, p2.cmd.Process.Pid, serverJSON(t, dataDir)["pid"])
	require.NoError(t, p2.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, <-p2.done, "stderr: %s", p2.stderr)
}

// Every file of the data dir is the owner's only, the dir too, even when
// the dir existed before with a looser mode.
func TestDataDirIsPrivate(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("Windows has no Unix permission bits")
	}
	dataDir := filepath.Join(t.TempDir(), "data")
	require.NoError(t, os.Mkdir(dataDir, 0o755))
	require.NoError(t, os.Chmod(dataDir, 0o755))
	p := startServe(t, []string{"TANDEM_TOKEN=", "TANDEM_DATA_DIR=" + dataDir})
	raw, err := os.ReadFile(filepath.Join(dataDir, "token"))
	require.NoError(t, err)
	c := client.New(p.url, strings.TrimSpace(string(raw)))
	defer c.CloseIdleConnections()
	_, _, err = c.CreateWorkspace(context.Background(), t.TempDir())
	require.NoError(t, err)

	check := func(when string) {
		t.Helper()
		fi, err := os.Stat(dataDir)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm(), "%s: the data dir", when)
		entries, err := os.ReadDir(dataDir)
		require.NoError(t, err)
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
			fi, err := e.Info()
			require.NoError(t, err)
			assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "%s: %s", when, e.Name())
		}
		t.Logf("%s: %v", when, names)
	}
	check("running")
	assert.FileExists(t, filepath.Join(dataDir, "tandem.db-wal"))
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, <-p.done, "stderr: %s", p.stderr)
	check("stopped")
}
