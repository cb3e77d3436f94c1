package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/proto"
)

func withBodyTimeout(d time.Duration) option { return func(c *serverConfig) { c.BodyTimeout = d } }

// dialRaw opens a TCP connection to the env's server and writes what to it.
func (e *env) dialRaw(what string) net.Conn {
	e.t.Helper()
	c, err := net.DialTimeout("tcp", e.ts.Listener.Addr().String(), wait)
	require.NoError(e.t, err)
	e.t.Cleanup(func() { c.Close() })
	if what != "" {
		_, err = io.WriteString(c, what)
		require.NoError(e.t, err)
	}
	return c
}

// A body that trickles in, even with a valid token, is cut when the body
// timeout runs out: the client gets a 400 and its connection is closed.
func TestSlowBodyIsCutAfterTheBodyTimeout(t *testing.T) {
	const timeout = time.Second
	e := startEnv(t, withBodyTimeout(timeout))
	c := e.dialRaw(fmt.Sprintf("POST /v1/workspaces HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{", e.ts.Listener.Addr(), testToken))
	start := time.Now()
	stop := make(chan struct{})
	trickled := make(chan struct{})
	go func() {
		defer close(trickled)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if _, err := c.Write([]byte(" ")); err != nil {
					return
				}
			}
		}
	}()
	defer func() { close(stop); <-trickled }()

	require.NoError(t, c.SetReadDeadline(time.Now().Add(wait)))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err)
	took := time.Since(start)
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	assert.True(t, resp.Close, "the connection closes after the answer")
	var body proto.ErrorBody
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
	assert.Equal(t, proto.CodeInvalidJSON, body.Error.Code)
	assert.Contains(t, body.Error.Message, "did not arrive within 1s")
	assert.GreaterOrEqual(t, took, timeout-100*time.Millisecond)
	_, err = io.Copy(io.Discard, resp.Body)
	require.NoError(t, err)
	assertClosed(t, c)
}

// assertClosed checks that the server closed c: a read ends in EOF, or in a
// reset when the client was still sending, not in the client's own timeout.
func assertClosed(t *testing.T, c net.Conn) {
	t.Helper()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(wait)))
	_, err := c.Read(make([]byte, 1))
	require.Error(t, err)
	var ne net.Error
	assert.False(t, errors.As(err, &ne) && ne.Timeout(), "the server closed the connection: %v", err)
}

// The body timeout is a read deadline on the connection while a body is on
// its way; it must not stay behind for what the connection carries next,
// such as a stream, nor cut a stream that runs longer than it.
func TestStreamOnAConnectionThatCarriedABodyOutlivesTheBodyTimeout(t *testing.T) {
	const timeout = 500 * time.Millisecond
	e := startEnv(t, withBodyTimeout(timeout), withHeartbeat(50*time.Millisecond))
	ws := e.createWorkspace()
	sess := e.createSession(ws.ID, nil)

	tr := &http.Transport{MaxConnsPerHost: 1}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	var reused []bool
	trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) { reused = append(reused, info.Reused) }}
	ctx, cancel := context.WithCancel(httptrace.WithClientTrace(context.Background(), trace))
	defer cancel()

	body := `{"level": "info", "message": "before the stream"}`
	req, err := http.NewRequestWithContext(ctx, "POST", fmt.Sprintf("%s/v1/workspaces/%s/sessions/%s/log", e.ts.URL, ws.ID, sess.ID), strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := hc.Do(req)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	req, err = http.NewRequestWithContext(ctx, "GET", fmt.Sprintf("%s/v1/workspaces/%s/events?client_id=%s", e.ts.URL, ws.ID, newClientID()), nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+testToken)
	start := time.Now()
	resp, err = hc.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, []bool{false, true}, reused, "the stream runs on the connection that carried the body")

	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	pings := 0
	deadline := time.After(wait)
	for time.Since(start) < 4*timeout {
		select {
		case line, ok := <-lines:
			require.True(t, ok, "the stream ended after %s (%d pings)", time.Since(start), pings)
			if line == ": ping" {
				pings++
			}
		case <-deadline:
			t.Fatal("no pings")
		}
	}
	assert.Greater(t, pings, 4)
	cancel()
	for range lines {
	}
}
