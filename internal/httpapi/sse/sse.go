// Package sse carries a hub stream over HTTP as Server-Sent Events: the
// response's status and headers, its flushes and write deadlines. It
// imports nothing of Tandem, so any layer's tests can use it.
package sse

import (
	"errors"
	"net/http"
	"time"
)

// Writer is a hub.Sink on an HTTP response.
type Writer struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

// NewWriter returns the sink of w.
func NewWriter(w http.ResponseWriter) *Writer {
	return &Writer{w: w, rc: http.NewResponseController(w)}
}

// Open sends 200 with the event stream's headers (contract section 6).
func (s *Writer) Open() error {
	hdr := s.w.Header()
	hdr.Set("Content-Type", "text/event-stream")
	hdr.Set("Cache-Control", "no-cache")
	hdr.Set("X-Accel-Buffering", "no")
	hdr.Set("Connection", "keep-alive")
	s.w.WriteHeader(http.StatusOK)
	return nil
}

// Write writes to the response.
func (s *Writer) Write(p []byte) (int, error) { return s.w.Write(p) }

// Flush flushes the response; one that cannot (no http.Flusher) is
// written through anyway.
func (s *Writer) Flush() error {
	if err := s.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	return nil
}

// SetWriteDeadline sets the connection's write deadline when the response
// supports it.
func (s *Writer) SetWriteDeadline(t time.Time) error {
	if err := s.rc.SetWriteDeadline(t); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	return nil
}
