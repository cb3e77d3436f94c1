package sse_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/internal/httpapi/sse"
)

// A stream takes its connection over: its handler returns (net/http lets
// go of the request and its buffers, the connection is hijacked), the
// client still gets the 200 with the headers set before, then what is
// written after; the client closing the connection ends the stream.
func TestConnTakesTheConnectionOver(t *testing.T) {
	states := make(chan http.ConnState, 16)
	handled := make(chan struct{})
	streams := make(chan *sse.Conn, 1)
	gone := make(chan struct{})
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(handled)
		w.Header().Set("Access-Control-Allow-Origin", "http://app.example")
		ctx, cancel := context.WithCancel(context.Background())
		go func() { <-ctx.Done(); close(gone) }()
		s := sse.NewConn(w, cancel)
		require.NoError(t, s.Open())
		streams <- s
	}))
	ts.Config.ConnState = func(_ net.Conn, st http.ConnState) { states <- st }
	ts.Start()
	defer ts.Close()

	resp, err := http.Get(ts.URL)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	assert.Equal(t, "http://app.example", resp.Header.Get("Access-Control-Allow-Origin"))
	<-handled
	s := <-streams
	assert.True(t, s.TakenOver())
	hijacked := false
	for len(states) > 0 {
		hijacked = hijacked || <-states == http.StateHijacked
	}
	assert.True(t, hijacked, "net/http let go of the connection")

	// Written after the handler returned.
	_, err = s.Write([]byte("data: one\n\n"))
	require.NoError(t, err)
	require.NoError(t, s.Flush())
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	require.NoError(t, err)
	assert.Equal(t, "data: one\n", line)

	_ = resp.Body.Close()
	select {
	case <-gone:
	case <-time.After(10 * time.Second):
		t.Fatal("the client left and the stream did not notice")
	}
	require.NoError(t, s.Close())
}

// Where the connection cannot be taken over, the stream is written
// through the response.
func TestConnWritesThroughAResponseItCannotTakeOver(t *testing.T) {
	rec := httptest.NewRecorder()
	s := sse.NewConn(rec, func() {})
	require.NoError(t, s.Open())
	<-s.Opened()
	assert.False(t, s.TakenOver())
	_, err := io.WriteString(s, "data: x\n\n")
	require.NoError(t, err)
	require.NoError(t, s.Flush())
	require.NoError(t, s.Close())
	assert.Equal(t, http.StatusOK, rec.Code)
	assert.True(t, strings.HasPrefix(rec.Body.String(), "data: x"))
	assert.Equal(t, "text/event-stream", rec.Header().Get("Content-Type"))
}

// A client that sends anything on its stream's connection (which none has
// a reason to) ends its stream: the server does not read on for it.
func TestConnEndsAStreamWhoseClientSends(t *testing.T) {
	streams := make(chan *sse.Conn, 1)
	gone := make(chan struct{})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithCancel(context.Background())
		go func() { <-ctx.Done(); close(gone) }()
		s := sse.NewConn(w, cancel)
		require.NoError(t, s.Open())
		streams <- s
	}))
	defer ts.Close()
	c, err := net.Dial("tcp", ts.Listener.Addr().String())
	require.NoError(t, err)
	defer func() { _ = c.Close() }()
	_, err = io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	require.NoError(t, err)
	s := <-streams
	defer func() { _ = s.Close() }()
	_, err = io.WriteString(c, strings.Repeat("x", 1<<16))
	require.NoError(t, err)
	select {
	case <-gone:
	case <-time.After(10 * time.Second):
		t.Fatal("the client sent data and the stream went on")
	}
}
