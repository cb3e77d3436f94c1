package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// rawConn opens a TCP connection to the server of base and writes what to it.
func rawConn(t *testing.T, base, what string) net.Conn {
	t.Helper()
	u, err := url.Parse(base)
	require.NoError(t, err)
	c, err := net.DialTimeout("tcp", u.Host, cliDeadline)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	if what != "" {
		_, err = io.WriteString(c, what)
		require.NoError(t, err)
	}
	return c
}

// Browsers pre-connect, and clients may stall mid-request: none of that may
// keep SIGTERM from ending the server, with status 0, within a few seconds.
func TestSIGTERMWithIdleSlowAndHalfSentConnectionsExitsZero(t *testing.T) {
	const token = "shutdown-token"
	p := startServe(t, []string{"TANDEM_TOKEN=" + token, "TANDEM_DATA_DIR=" + t.TempDir()})
	host := strings.TrimPrefix(p.url, "http://")

	rawConn(t, p.url, "") // connected, nothing sent: a browser's pre-connect
	rawConn(t, p.url, "GET /v1/health HTTP/1.1\r\nHost: "+host+"\r\n")
	rawConn(t, p.url, fmt.Sprintf("POST /v1/workspaces HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{", host, token))
	rawConn(t, p.url, fmt.Sprintf("POST /v1/workspaces HTTP/1.1\r\nHost: %s\r\nContent-Length: 100\r\n\r\n{", host))
	// An idle keep-alive connection after a finished request.
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get(p.url + "/v1/health")
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	// The server accepts in order: it has accepted every connection above.

	start := time.Now()
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-p.done:
		assert.NoError(t, err, "exit status 0; stderr: %s", p.stderr)
	case <-time.After(cliDeadline):
		t.Fatalf("no exit after SIGTERM; stderr: %s", p.stderr)
	}
	assert.Less(t, time.Since(start), 4*time.Second, "stderr: %s", p.stderr)
	assert.NotContains(t, p.stderr.String(), "level=ERROR")
}
