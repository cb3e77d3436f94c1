package main

import (
	"github.com/tandem-dev/tandem/internal/event"

	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"time"

	"github.com/r3labs/sse/v2"

	ssehttp "github.com/tandem-dev/tandem/internal/httpapi/sse"
	"github.com/tandem-dev/tandem/internal/hub"
)

// server is one of the two SSE servers under test, listening on loopback.
type server interface {
	// addr and path are where a subscriber sends its GET.
	addr() string
	path() string
	publish(seq int64, payload []byte)
	// subscribers is the number of registered streams, or -1 if unknown.
	subscribers() int
	close()
}

const (
	serverHub    = "hub"
	serverR3labs = "r3labs"
)

// startServer starts a server of kind. sndbuf > 0 fixes the kernel send
// buffer of every accepted connection (which turns off its autotuning):
// loopback autotunes it to 4 MiB, which hides a stalled reader for ~15,000
// events and would make the stall section measure the kernel, not the server.
func startServer(kind string, sndbuf int) server {
	srv := httptest.NewUnstartedServer(nil)
	if sndbuf > 0 {
		srv.Listener = sndbufListener{srv.Listener, sndbuf}
	}
	switch kind {
	case serverHub:
		return startHub(srv)
	case serverR3labs:
		return startR3labs(srv)
	}
	panic("unknown server " + kind)
}

type sndbufListener struct {
	net.Listener
	size int
}

func (l sndbufListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(l.size)
	}
	return c, err
}

// hubServer is our hub behind a handler that does what the workspace layer
// does for a stream, minus auth and claims.
type hubServer struct {
	h     *hub.Hub
	topic *hub.Topic
	srv   *httptest.Server
}

func startHub(srv *httptest.Server) *hubServer {
	h := hub.New(hub.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	s := &hubServer{h: h, topic: h.Topic("ws", 0, nil), srv: srv}
	srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = s.topic.Serve(r.Context(), ssehttp.NewWriter(w), &hub.ServeOptions{
			ClientID:    r.URL.Query().Get("client_id"),
			WorkspaceID: "ws",
		})
	})
	srv.Start()
	return s
}

func (s *hubServer) addr() string { return s.srv.Listener.Addr().String() }
func (s *hubServer) path() string { return "/events?client_id=bench" }
func (s *hubServer) publish(seq int64, payload []byte) {
	// message.delta: ephemeral, like most of a run's events by count.
	s.topic.Publish(event.Event{Seq: seq, Type: "message.delta", Data: payload})
}
func (s *hubServer) subscribers() int { return s.topic.ForTest().Subscribers() }
func (s *hubServer) close() {
	closeWithin(s.srv, 10*time.Second)
	s.h.Close()
}

// r3labsServer is r3labs/sse/v2's server with one stream.
type r3labsServer struct {
	s   *sse.Server
	srv *httptest.Server
}

func startR3labs(srv *httptest.Server) *r3labsServer {
	s := sse.New()
	// AutoReplay would keep every event forever and replay all of them to
	// each new subscriber; our hub keeps a bounded ring and replays only on
	// resume, which this workload never asks for.
	s.AutoReplay = false
	s.CreateStream("ws")
	srv.Config.Handler = s
	srv.Start()
	return &r3labsServer{s: s, srv: srv}
}

func (s *r3labsServer) addr() string { return s.srv.Listener.Addr().String() }
func (s *r3labsServer) path() string { return "/events?stream=ws" }
func (s *r3labsServer) publish(seq int64, payload []byte) {
	s.s.Publish("ws", &sse.Event{ID: strconv.AppendInt(nil, seq, 10), Event: []byte("message.delta"), Data: payload})
}
func (s *r3labsServer) subscribers() int { return -1 }
func (s *r3labsServer) close() {
	// Handlers first: r3labs' per-subscriber cleanup goroutine needs the
	// stream's loop, which Server.Close stops.
	closeWithin(s.srv, 10*time.Second)
	s.s.Close()
}

func closeWithin(srv *httptest.Server, d time.Duration) {
	done := make(chan struct{})
	go func() {
		srv.CloseClientConnections()
		srv.Close()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(d):
		fmt.Printf("warning: server did not shut down within %v\n", d)
	}
}
