package main

import (
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// --debug-addr serves the runtime's profiles and traces on a listener of
// its own, on loopback only, and the API's listener never serves them.
func TestDebugAddrServesProfilesOnItsOwnLoopbackListener(t *testing.T) {
	p := startServe(t, []string{"TANDEM_TOKEN=t", "TANDEM_DATA_DIR=" + t.TempDir(), "TANDEM_DEBUG_ADDR=127.0.0.1:0"})
	m := regexp.MustCompile(`msg="serving runtime profiles" addr=(127\.0\.0\.1:\d+)`).FindStringSubmatch(p.stderr.String())
	require.NotNil(t, m, "the debug listener logs its address; stderr: %s", p.stderr)
	get := func(url string) (int, string) {
		resp, err := http.Get(url)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(body)
	}
	code, body := get("http://" + m[1] + "/debug/pprof/")
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, "mutex")
	// Mutex and block profiling are on while the listener is.
	code, body = get("http://" + m[1] + "/debug/pprof/mutex?debug=1")
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, "sampling period=10")
	// The command line may hold a secret: it is not served.
	code, _ = get("http://" + m[1] + "/debug/pprof/cmdline")
	assert.NotEqual(t, http.StatusOK, code, "the debug listener serves the command line")
	code, _ = get(p.url + "/debug/pprof/")
	assert.NotEqual(t, http.StatusOK, code, "the API's listener serves no profiles")
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, <-p.done)
}

func TestDebugAddrRefusesNonLoopback(t *testing.T) {
	cmd := exec.Command(binary, "serve", "--addr", "127.0.0.1:0", "--data-dir", t.TempDir(), "--debug-addr", "0.0.0.0:0")
	cmd.Env = append(os.Environ(), "TANDEM_TOKEN=t")
	out, err := cmd.CombinedOutput()
	require.Error(t, err)
	assert.Contains(t, string(out), "only on loopback")
	assert.NotContains(t, string(out), "listening")
}
