package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/internal/sandbox"
	"github.com/tandem-dev/tandem/internal/store/postgres/pgtest"
	"github.com/tandem-dev/tandem/proto"
)

// binary is the tandem command built once for the tests that run it as a process.
var binary string

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == sandbox.HelperCommand {
		// The servers these tests run in this process start their
		// commands' sandbox helper from this binary, as tandem's main does.
		os.Exit(sandbox.Main(os.Args[2:], os.Stderr))
	}
	dir, err := os.MkdirTemp("", "tandem-bin")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "tandem")
	if out, err := exec.Command("go", "build", "-race", "-o", binary, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build tandem: %v\n%s", err, out)
		os.Exit(1)
	}
	// pgtest stops the PostgreSQL server the cluster tests started.
	code := pgtest.Main(m)
	os.RemoveAll(dir)
	os.Exit(code)
}

// proc is a running tandem serve.
type proc struct {
	cmd    *exec.Cmd
	url    string
	stderr *syncBuffer
	done   chan error
}

// syncBuffer is a strings.Builder safe to read while the process writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func startServe(t testing.TB, env []string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"serve", "--addr", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	p := startServeCmd(t, cmd)
	require.True(t, strings.HasPrefix(p.url, "http://127.0.0.1:"), p.url)
	return p
}

// startServeCmd starts a tandem serve command and waits for its listening
// line.
func startServeCmd(t testing.TB, cmd *exec.Cmd) *proc {
	t.Helper()
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	p := &proc{cmd: cmd, stderr: &syncBuffer{}, done: make(chan error, 1)}
	cmd.Stderr = p.stderr
	require.NoError(t, cmd.Start())
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		p.done <- cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
	})
	select {
	case line, ok := <-lines:
		require.True(t, ok, "server exited: %s", p.stderr)
		url, found := strings.CutPrefix(line, "tandem listening on ")
		require.True(t, found, "first stdout line is the listening line, got %q", line)
		require.False(t, strings.HasSuffix(url, ":0"), "port 0 picks a real port: %s", url)
		p.url = url
	case <-time.After(30 * time.Second):
		t.Fatalf("no listening line; stderr: %s", p.stderr)
	}
	return p
}

func TestServeGeneratesTokenFileAndStopsCleanlyOnSIGTERM(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "data")
	p := startServe(t, []string{"TANDEM_TOKEN=", "TANDEM_DATA_DIR=" + dataDir})

	tokenPath := filepath.Join(dataDir, "token")
	fi, err := os.Stat(tokenPath)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	raw, err := os.ReadFile(tokenPath)
	require.NoError(t, err)
	token := strings.TrimSpace(string(raw))
	require.Len(t, token, 64)
	assert.Contains(t, p.stderr.String(), tokenPath, "the token's path is printed to stderr")
	assert.NotContains(t, p.stderr.String(), token, "the token itself never reaches the log")

	resp, err := http.Get(p.url + "/v1/workspaces")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)

	// Open a stream so shutdown has somebody to tell.
	do := func(method, path, body string) *http.Response {
		req, err := http.NewRequest(method, p.url+path, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		return resp
	}
	resp = do("POST", "/v1/workspaces", fmt.Sprintf(`{"path": %q}`, t.TempDir()))
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	var ws proto.Workspace
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&ws))
	resp.Body.Close()
	stream := do("GET", "/v1/workspaces/"+ws.ID+"/events?client_id="+uuid.NewString(), "")
	require.Equal(t, http.StatusOK, stream.StatusCode)
	defer stream.Body.Close()
	events := make(chan string, 100)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(stream.Body)
		for sc.Scan() {
			if ev, ok := strings.CutPrefix(sc.Text(), "event: "); ok {
				events <- ev
			}
		}
	}()
	require.Equal(t, proto.EventStreamOpened, <-events)

	start := time.Now()
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	var seen []string
	for ev := range events {
		seen = append(seen, ev)
	}
	assert.Contains(t, seen, proto.EventWorkspaceClosing)
	select {
	case err := <-p.done:
		require.NoError(t, err, "exit code 0; stderr: %s", p.stderr)
	case <-time.After(10 * time.Second):
		t.Fatal("server did not exit after SIGTERM")
	}
	assert.Less(t, time.Since(start), 5*time.Second)

	// A restart reuses the token file.
	p2 := startServe(t, []string{"TANDEM_TOKEN=", "TANDEM_DATA_DIR=" + dataDir})
	raw2, err := os.ReadFile(tokenPath)
	require.NoError(t, err)
	assert.Equal(t, string(raw), string(raw2))
	require.NoError(t, p2.cmd.Process.Signal(syscall.SIGINT))
	require.NoError(t, <-p2.done)
}

func TestServeRefusesNonLoopbackWithoutToken(t *testing.T) {
	cmd := exec.Command(binary, "serve", "--addr", "0.0.0.0:0", "--data-dir", t.TempDir())
	cmd.Env = append(os.Environ(), "TANDEM_TOKEN=")
	out, err := cmd.CombinedOutput()
	require.Error(t, err)
	assert.Contains(t, string(out), "non-loopback")
	assert.NotContains(t, string(out), "listening")
}

func TestFlagWinsOverEnvironment(t *testing.T) {
	dataDir := t.TempDir()
	p := startServe(t, []string{"TANDEM_TOKEN=from-env", "TANDEM_MODEL=echo/env", "TANDEM_DATA_DIR=" + dataDir}, "--token", "from-flag")
	get := func(token string) int {
		req, _ := http.NewRequest("GET", p.url+"/v1/workspaces", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	assert.Equal(t, http.StatusOK, get("from-flag"))
	assert.Equal(t, http.StatusUnauthorized, get("from-env"))
	resp, err := http.Get(p.url + "/v1/health")
	require.NoError(t, err)
	defer resp.Body.Close()
	var h proto.Health
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&h))
	assert.Equal(t, "echo/env", h.DefaultModel, "the variable applies when no flag is given")
	_, err = os.Stat(filepath.Join(dataDir, "token"))
	assert.ErrorIs(t, err, os.ErrNotExist, "no token file when a token was given")
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, <-p.done)
}

func TestParseServeDefaults(t *testing.T) {
	env := map[string]string{"HOME": "/home/u"}
	o, err := parseServe(nil, func(k string) string { return env[k] }, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:7433", o.addr)
	assert.Equal(t, "/home/u/.local/share/tandem", o.dataDir)
	assert.Equal(t, 30*time.Second, o.createGrace)
	assert.Equal(t, 10*time.Second, o.detachGrace)
	assert.Equal(t, 15*time.Second, o.heartbeat)
	assert.Empty(t, o.debugAddr, "no profiles are served unless asked for")
	env["XDG_DATA_HOME"] = "/xdg"
	env["TANDEM_DETACH_GRACE"] = "3s"
	o, err = parseServe([]string{"--heartbeat", "1s"}, func(k string) string { return env[k] }, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "/xdg/tandem", o.dataDir)
	assert.Equal(t, 3*time.Second, o.detachGrace)
	assert.Equal(t, time.Second, o.heartbeat)
	env["TANDEM_HEARTBEAT"] = "soon"
	_, err = parseServe(nil, func(k string) string { return env[k] }, io.Discard)
	assert.ErrorContains(t, err, "TANDEM_HEARTBEAT")
}

// --store and --bus (or TANDEM_STORE and TANDEM_BUS) make a cluster node
// together; one without the other is a usage error, not a silent single
// node.
func TestParseServeCluster(t *testing.T) {
	env := map[string]string{"HOME": "/home/u", "TANDEM_STORE": "postgres://db/tandem"}
	getenv := func(k string) string { return env[k] }
	_, err := parseServe(nil, getenv, io.Discard)
	assert.ErrorContains(t, err, "--bus")
	o, err := parseServe([]string{"--bus", "nats://n:4222", "--node-id", "a"}, getenv, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "postgres://db/tandem", o.storeURL)
	assert.Equal(t, "nats://n:4222", o.busURL)
	assert.Equal(t, "a", o.nodeID)
	assert.Equal(t, 5*time.Second, o.leaseTTL)
	env["TANDEM_BUS"] = "nats://env:4222"
	env["TANDEM_NODE_ID"] = "b"
	o, err = parseServe(nil, getenv, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "nats://env:4222", o.busURL)
	assert.Equal(t, "b", o.nodeID)
}
