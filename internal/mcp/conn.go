package mcp

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/tandem-dev/tandem/internal/goroutine"
)

// conn is one live connection to a server: its SDK session and, for stdio,
// its process. Every goroutine working for it is counted in wg and waited
// for by teardown.
type conn struct {
	s *server
	// ctx ends with the connection (teardown) or the Manager; calls and
	// starts are bound to it.
	ctx    context.Context
	cancel context.CancelFunc

	// changed wakes the run loop when the server's tool list changed.
	changed chan struct{}
	// ended is closed by end, the first time something sees the connection
	// break.
	ended   chan struct{}
	endOnce sync.Once
	// finished is closed once the server has dealt with the end: its tools
	// are gone from the offer and its state is reported.
	finished chan struct{}

	session *sdk.ClientSession
	proc    *process
	// httpCancel cuts an http server's requests.
	httpCancel context.CancelFunc

	mu     sync.Mutex
	reason string
	// goroutines runs what works for the connection; teardown stops it.
	goroutines goroutine.Group
}

func newConn(s *server) *conn {
	ctx, cancel := context.WithCancel(s.m.ctx)
	return &conn{s: s, ctx: ctx, cancel: cancel, changed: make(chan struct{}, 1), ended: make(chan struct{}), finished: make(chan struct{})}
}

// goTracked runs f on a goroutine teardown waits for, unless teardown has
// begun (then it runs nothing and reports false).
func (c *conn) goTracked(f func()) bool { return c.goroutines.Go(f) }

// end records why the connection broke; the first reason wins.
func (c *conn) end(reason string) {
	c.endOnce.Do(func() {
		c.mu.Lock()
		c.reason = reason
		c.mu.Unlock()
		close(c.ended)
	})
}

func (c *conn) reasonNow() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reason
}

// describe says why the connection broke: how a stdio server's process
// ended, when it did (waiting a little for it), else fallback.
func (c *conn) describe(fallback string) string {
	if c.proc == nil {
		return fallback
	}
	t := time.NewTimer(exitWait)
	defer t.Stop()
	select {
	case <-c.proc.exited:
		return c.proc.exitReason()
	case <-t.C:
		return fallback
	}
}

// startError says why a start failed at phase, ctx being the start's
// deadline.
func (c *conn) startError(phase string, ctx context.Context, err error) error {
	switch {
	case c.s.m.ctx.Err() != nil:
		return err
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		// Checked before the process: the SDK closes a failed session's
		// stdin, and a silent server may exit then.
		return fmt.Errorf("no answer to the MCP %s within %s", phase, c.s.m.opts.HandshakeTimeout)
	case c.proc != nil:
		if r := c.describe(""); r != "" {
			return fmt.Errorf("%s during the %s", r, phase)
		}
	}
	return fmt.Errorf("MCP %s failed: %v", phase, err)
}

// teardown ends the connection and waits for everything working for it:
// calls end (with an error), a stdio server's process group is stopped, an
// http server's session is deleted if it answers within httpCloseGrace.
func (c *conn) teardown() {
	c.goroutines.Stop()
	c.cancel()
	var cut *time.Timer
	if c.httpCancel != nil {
		cut = time.AfterFunc(httpCloseGrace, c.httpCancel)
	}
	if c.proc != nil {
		// First, so that the session's reads fail and its calls are
		// retired: closing a session waits for its calls.
		c.proc.stop()
	}
	if c.session != nil {
		_ = c.session.Close()
	}
	if cut != nil {
		cut.Stop()
		c.httpCancel()
	}
	c.goroutines.Wait()
}
