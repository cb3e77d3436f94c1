package session

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/internal/workspace"
	"github.com/tandem-dev/tandem/internal/workspace/workspacetest"
)

// openSink is a stream's sink that says when the stream opened and
// discards what it is sent.
type openSink struct{ opened chan struct{} }

func (s openSink) Open() error                    { close(s.opened); return nil }
func (openSink) Write(p []byte) (int, error)      { return len(p), nil }
func (openSink) Flush() error                     { return nil }
func (openSink) SetWriteDeadline(time.Time) error { return nil }

// Every `tandem run` is a client of its own: a session prompted by run
// after run must not remember a client per run. The members past the bound
// are forgotten, never one with an open stream, which attached_clients
// counts.
func TestMembersAreBounded(t *testing.T) {
	ws, m, db := workspacetest.Open(t)
	sctx, stop := context.WithCancel(context.Background())
	served := make(chan struct{})
	t.Cleanup(func() { // before the workspace's own cleanup
		stop()
		<-served
	})
	s := NewService(Config{Store: db, Workspaces: m})

	attached := uuid.NewString()
	sink := openSink{opened: make(chan struct{})}
	go func() {
		defer close(served)
		_ = ws.Stream(sctx, sink, &workspace.StreamOptions{ClientID: attached})
	}()
	select {
	case <-sink.opened:
	case <-time.After(10 * time.Second):
		t.Fatal("the stream did not open")
	}
	require.True(t, ws.HasClient(attached))

	s.Join(ws, "s", attached)
	for range 10 * maxMembers {
		s.Join(ws, "s", uuid.NewString())
	}
	s.mu.Lock()
	n, kept := len(s.members["s"]), s.members["s"][attached] > 0
	s.mu.Unlock()
	assert.LessOrEqual(t, n, maxMembers)
	assert.True(t, kept, "the member with an open stream is kept")
	assert.True(t, s.OtherClientAttached(ws, "s", uuid.NewString()))
}
