package main

import (
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// status sends a request with the given Host and headers and returns the status.
func status(t *testing.T, method, url, host string, headers map[string]string) (int, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	require.NoError(t, err)
	if host != "" {
		req.Host = host
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode, resp.Header
}

func TestServeAllowedOriginsAndHostCheck(t *testing.T) {
	p := startServe(t, []string{"TANDEM_TOKEN=t", "TANDEM_DATA_DIR=" + t.TempDir(),
		"TANDEM_ALLOWED_ORIGINS=http://a.example, https://b.example:8443"})
	preflight := func(origin string) (int, http.Header) {
		return status(t, "OPTIONS", p.url+"/v1/workspaces", "", map[string]string{"Origin": origin, "Access-Control-Request-Method": "POST"})
	}
	code, h := preflight("http://a.example")
	assert.Equal(t, http.StatusNoContent, code)
	assert.Equal(t, "http://a.example", h.Get("Access-Control-Allow-Origin"))
	code, h = preflight("https://b.example:8443")
	assert.Equal(t, http.StatusNoContent, code)
	assert.Equal(t, "https://b.example:8443", h.Get("Access-Control-Allow-Origin"))
	code, _ = preflight("http://c.example")
	assert.Equal(t, http.StatusForbidden, code)

	code, _ = status(t, "GET", p.url+"/v1/health", "rebound.example:7433", nil)
	assert.Equal(t, http.StatusForbidden, code, "a loopback server refuses a non-loopback Host")
	code, h = status(t, "GET", p.url+"/v1/health", "localhost", nil)
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "nosniff", h.Get("X-Content-Type-Options"))
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, <-p.done)

	// "*" is not an origin: a server never answers every origin.
	cmd := exec.Command(binary, "serve", "--addr", "127.0.0.1:0", "--data-dir", t.TempDir(), "--allowed-origins", "http://a.example,*")
	cmd.Env = append(os.Environ(), "TANDEM_TOKEN=t")
	out, err := cmd.CombinedOutput()
	require.Error(t, err)
	assert.Equal(t, 2, cmd.ProcessState.ExitCode())
	assert.Contains(t, string(out), "--allowed-origins")
	assert.NotContains(t, string(out), "listening")
}

// The host check guards servers that listen on loopback; a server listening
// on every interface is reached under whatever names the network gives it
// (and needs an explicit token for it), even over a loopback connection.
func TestHostCheckFollowsTheListenAddress(t *testing.T) {
	cmd := exec.Command(binary, "serve", "--addr", "0.0.0.0:0", "--data-dir", t.TempDir(), "--token", "t")
	p := startServeCmd(t, cmd)
	port := p.url[strings.LastIndex(p.url, ":"):]
	code, _ := status(t, "GET", "http://127.0.0.1"+port+"/v1/health", "build-box.lan"+port, nil)
	assert.Equal(t, http.StatusOK, code)
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, <-p.done)
}
