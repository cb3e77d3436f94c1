package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A request without a valid token is answered 401 at once, whatever its
// body is doing, and its connection is closed: 500 clients trickling bodies
// one byte every 5 s held a connection each for as long as they liked, until
// the server ran out of file descriptors.
func TestUnauthorizedSlowBodiesAreAnsweredAndClosedAtOnce(t *testing.T) {
	const token = "slow-body-token"
	p := startServe(t, []string{"TANDEM_TOKEN=" + token, "TANDEM_DATA_DIR=" + t.TempDir()})
	host := strings.TrimPrefix(p.url, "http://")

	const n = 40
	var wg sync.WaitGroup
	for i := range n {
		auth := ""
		if i%2 == 1 {
			auth = "Authorization: Bearer wrong\r\n"
		}
		c := rawConn(t, p.url, fmt.Sprintf("POST /v1/workspaces HTTP/1.1\r\nHost: %s\r\n%sContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{", host, auth))
		// The client trickles its body, a byte every 500 ms, until the
		// server hangs up: the answer must not wait for it.
		stop := make(chan struct{})
		wg.Add(2)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(500 * time.Millisecond)
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
		go func() {
			defer wg.Done()
			defer close(stop)
			assert.NoError(t, c.SetReadDeadline(time.Now().Add(cliDeadline)))
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if !assert.NoError(t, err) {
				return
			}
			assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
			assert.True(t, resp.Close, "the answer says the connection closes")
			_, err = io.Copy(io.Discard, resp.Body)
			assert.NoError(t, err)
			// Then the server closes it, rather than drain a body that may never come.
			_, err = c.Read(make([]byte, 1))
			var ne net.Error
			assert.False(t, err == nil || errors.As(err, &ne) && ne.Timeout(), "connection %d closed by the server: %v", i, err)
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(cliDeadline + 5*time.Second):
		t.Fatal("answers did not come")
	}
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, <-p.done)
}
