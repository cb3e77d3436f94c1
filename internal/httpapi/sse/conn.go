package sse

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"time"
)

// Conn is a hub.Sink that takes its connection over from net/http when the
// stream opens, so that the handler can return and an idle stream holds
// only what it needs: the connection, and a small goroutine that notices
// the client going. Served by its handler, an idle stream also kept
// net/http's buffers (4 KiB to read, 4 KiB to write, 2 KiB before
// chunking), its request, the goroutine that watches the connection and
// the handler's own, whose stack the routing had grown.
//
// The response is an HTTP/1.1 200 whose body ends with the connection
// (Connection: close), which every Server-Sent Events client reads. Where
// the connection cannot be taken over (HTTP/2, a test's recorder), Conn
// writes through the response as Writer does, and its handler must stay
// until the stream ends.
type Conn struct {
	w http.ResponseWriter
	// gone ends the stream: called when the client closes the connection.
	gone context.CancelFunc

	// opened is closed once Open is done; conn is then the connection,
	// or nil when the stream is written through w.
	opened chan struct{}
	conn   net.Conn
	resp   *Writer
	read   sync.WaitGroup // the goroutine reading conn
}

// NewConn returns the sink of w; gone is called when a stream that took
// its connection over sees the client leave.
func NewConn(w http.ResponseWriter, gone context.CancelFunc) *Conn {
	return &Conn{w: w, gone: gone, opened: make(chan struct{})}
}

// Opened is closed once the stream opened (see TakenOver).
func (s *Conn) Opened() <-chan struct{} { return s.opened }

// TakenOver reports whether the stream owns its connection; it is only
// meaningful once Opened is closed. A handler whose stream took its
// connection over returns at once.
func (s *Conn) TakenOver() bool { return s.conn != nil }

// Open takes the connection over and sends 200 with the event stream's
// headers (contract section 6), with those the response had already
// (CORS, security headers); or, where it cannot, sends them through the
// response.
func (s *Conn) Open() error {
	defer close(s.opened)
	conn, rw, err := http.NewResponseController(s.w).Hijack()
	if err != nil {
		s.resp = NewWriter(s.w)
		return s.resp.Open()
	}
	// What net/http buffered from the client (nothing, or a pipelined
	// request it will never answer) goes with its buffers.
	_ = rw
	hdr := s.w.Header().Clone()
	hdr.Set("Content-Type", "text/event-stream")
	hdr.Set("Cache-Control", "no-cache")
	hdr.Set("X-Accel-Buffering", "no")
	hdr.Set("Connection", "close")
	hdr.Set("Date", time.Now().UTC().Format(http.TimeFormat))
	var b bytes.Buffer
	b.WriteString("HTTP/1.1 200 OK\r\n")
	if err := hdr.Write(&b); err != nil {
		_ = conn.Close()
		return err
	}
	b.WriteString("\r\n")
	if _, err := conn.Write(b.Bytes()); err != nil {
		_ = conn.Close()
		return err
	}
	s.conn = conn
	// The response, and through it net/http's connection and buffers,
	// must not stay reachable from a stream that no longer needs them.
	s.w = nil
	s.read.Add(1)
	go s.watch()
	return nil
}

// watch waits for the client to go. A client of an event stream sends
// nothing after its request, so the first read to return, with an error
// (the client closed, or Close) or with bytes, ends the stream: reading on
// whatever a client sends would let it keep the server busy reading.
func (s *Conn) watch() {
	defer s.read.Done()
	var buf [1]byte
	_, _ = s.conn.Read(buf[:])
	s.gone()
}

// Write writes to the connection (the hub writes whole batches of frames).
func (s *Conn) Write(p []byte) (int, error) {
	if s.conn == nil {
		if s.resp == nil {
			return 0, errors.New("sse: write before open")
		}
		return s.resp.Write(p)
	}
	return s.conn.Write(p)
}

// Flush flushes the response; a connection taken over is unbuffered.
func (s *Conn) Flush() error {
	if s.conn == nil && s.resp != nil {
		return s.resp.Flush()
	}
	return nil
}

// SetWriteDeadline bounds the writes that follow.
func (s *Conn) SetWriteDeadline(t time.Time) error {
	if s.conn == nil {
		if s.resp == nil {
			return nil
		}
		return s.resp.SetWriteDeadline(t)
	}
	return s.conn.SetWriteDeadline(t)
}

// Close closes a connection the stream took over and waits for its
// watcher; a stream written through the response ends with its handler.
func (s *Conn) Close() error {
	if s.conn == nil {
		return nil
	}
	err := s.conn.Close()
	s.read.Wait()
	return err
}
