package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// runBinary runs the tandem binary with args to its end.
func runBinary(t *testing.T, env []string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.CommandContext(ctxFor(t, cliDeadline), binary, args...)
	cmd.Env = append(os.Environ(), env...)
	out, _ := cmd.CombinedOutput()
	return string(out), cmd.ProcessState.ExitCode()
}

// serve --model gpt-4 used to start and fail every run; it is refused at
// start, saying what to write instead.
func TestServeRefusesAModelWithoutProvider(t *testing.T) {
	out, code := runBinary(t, []string{"TANDEM_TOKEN=t"}, "serve", "--addr", "127.0.0.1:0", "--data-dir", t.TempDir(), "--model", "gpt-4")
	assert.Equal(t, 2, code, out)
	assert.Contains(t, out, "openai/gpt-4")
	assert.NotContains(t, out, "listening")

	out, code = runBinary(t, []string{"TANDEM_TOKEN=t", "TANDEM_MODEL=mistral/large"}, "serve", "--addr", "127.0.0.1:0", "--data-dir", t.TempDir())
	assert.Equal(t, 2, code, out)
	assert.Contains(t, out, "openai, azure, anthropic or echo")
	require.NotContains(t, out, "listening")
}

func TestVersionAndHelp(t *testing.T) {
	out, code := runBinary(t, nil, "--version")
	assert.Equal(t, 0, code)
	assert.Equal(t, "tandem 0.1.0\n", out)

	for _, cmd := range []string{"run", "attach", "tui", "sessions", "workspaces", "serve", "copilot"} {
		out, code = runBinary(t, nil, "help", cmd)
		assert.Equal(t, 0, code, cmd)
		assert.True(t, strings.HasPrefix(out, "usage: tandem "+cmd+" [flags]"), "help %s: %q", cmd, out)
		assert.Contains(t, out, "\nflags:\n", cmd)
		// -h says the same, in the same shape for every command.
		dash, code := runBinary(t, nil, cmd, "-h")
		assert.Equal(t, 0, code, cmd)
		assert.Equal(t, out, dash, cmd)
	}
	out, code = runBinary(t, nil, "help", "nosuch")
	assert.Equal(t, 2, code)
	assert.Contains(t, out, `unknown command "nosuch"`)
}

func TestNormalizeURL(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:7433":             "http://127.0.0.1:7433",
		"localhost:7433":             "http://localhost:7433",
		"http://127.0.0.1:7433":      "http://127.0.0.1:7433",
		"http://127.0.0.1:7433/":     "http://127.0.0.1:7433",
		"http://127.0.0.1:7433/v1":   "http://127.0.0.1:7433",
		"http://127.0.0.1:7433/v1/":  "http://127.0.0.1:7433",
		" https://tandem.example ":   "https://tandem.example",
		"https://proxy.example/t/v1": "https://proxy.example/t",
	} {
		got, err := normalizeURL(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for _, bad := range []string{"ftp://x", "http://", "http://h?x=1", "http://u:p@h"} {
		_, err := normalizeURL(bad)
		assert.Error(t, err, bad)
	}
}

// --url takes an address without scheme, and the API's base URL.
func TestURLWithoutSchemeOrWithTheAPIPath(t *testing.T) {
	srv := startCLIServer(t)
	host := strings.TrimPrefix(srv.url, "http://")
	for _, u := range []string{host, srv.url + "/v1", srv.url + "/v1/"} {
		_, errOut, code := runCLI(t, t.TempDir(), cliEnvironment(t, "TANDEM_TOKEN="+srv.token), "workspaces", "--url", u)
		assert.Equal(t, 0, code, "--url %s: %s", u, errOut)
	}
	_, errOut, code := runCLI(t, t.TempDir(), cliEnvironment(t, "TANDEM_TOKEN="+srv.token), "workspaces", "--url", "ftp://"+host)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "scheme must be http or https")
}

// A port in use says which process to look for.
func TestServeOnAPortInUseSaysWhoListens(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	out, code := runBinary(t, []string{"TANDEM_TOKEN=t"}, "serve", "--addr", ln.Addr().String(), "--data-dir", t.TempDir())
	assert.Equal(t, 1, code, out)
	assert.Contains(t, out, "address already in use")
	assert.Contains(t, out, "server.json")
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	assert.Contains(t, out, "lsof -i :"+port)

	// The port is taken by the tandem server of the default data dir.
	xdg := t.TempDir()
	first := startServe(t, []string{"TANDEM_TOKEN=t", "TANDEM_DATA_DIR=", "XDG_DATA_HOME=" + xdg})
	addr := strings.TrimPrefix(first.url, "http://")
	out, code = runBinary(t, []string{"TANDEM_TOKEN=t", "TANDEM_DATA_DIR=", "XDG_DATA_HOME=" + xdg}, "serve", "--addr", addr, "--data-dir", t.TempDir())
	assert.Equal(t, 1, code, out)
	assert.Contains(t, out, fmt.Sprintf("tandem pid %d (data dir %s) listens there", first.cmd.Process.Pid, filepath.Join(xdg, "tandem")))
	require.NoError(t, first.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, <-first.done)
}
