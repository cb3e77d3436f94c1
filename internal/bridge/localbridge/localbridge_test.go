package localbridge_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/internal/bridge"
	"github.com/tandem-dev/tandem/internal/bridge/localbridge"
	"github.com/tandem-dev/tandem/internal/server"
	"github.com/tandem-dev/tandem/proto"
)

func newBackend(t *testing.T, cfg server.Config) (*server.Server, bridge.Backend) {
	t.Helper()
	cfg.DataDir, cfg.Token, cfg.DefaultModel = t.TempDir(), "local-token", "echo"
	srv, err := server.New(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		assert.NoError(t, srv.Shutdown(ctx))
	})
	services, audit := srv.Local()
	be, err := localbridge.Connect(localbridge.Config{Services: services, Audit: audit})(uuid.NewString())
	require.NoError(t, err)
	t.Cleanup(be.Close)
	return srv, be
}

// A stream read too slowly for the hub's queue is evicted and resumes
// where it left off: every kept event of the session arrives once, in
// order, as the history has them.
func TestStreamResumesAfterEviction(t *testing.T) {
	_, be := newBackend(t, server.Config{StreamQueueBytes: 4 << 10})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ws, err := be.OpenWorkspace(ctx, t.TempDir())
	require.NoError(t, err)
	s, err := be.CreateSession(ctx, ws.ID, proto.CreateSessionRequest{})
	require.NoError(t, err)
	hist, err := be.History(ctx, ws.ID, s.ID, 0)
	require.NoError(t, err)
	st, err := be.Subscribe(ctx, ws.ID, s.ID, hist[len(hist)-1].Seq)
	require.NoError(t, err)
	defer st.Close()

	// Prompts whose events overflow the queue while nobody reads.
	var last string
	for range 5 {
		acc, err := be.Prompt(ctx, ws.ID, proto.PromptRequest{SessionID: s.ID, Prompt: "/slow 40 0"})
		require.NoError(t, err)
		last = acc.RunID
	}
	require.Eventually(t, func() bool {
		h, err := be.History(ctx, ws.ID, s.ID, 0)
		return err == nil && h[len(h)-1].Type == proto.EventRunCompleted && h[len(h)-1].RunID == last
	}, 20*time.Second, 20*time.Millisecond)

	var kept []int64
	for {
		ev, err := st.Next(ctx)
		require.NoError(t, err)
		// session.updated is the workspace log's, not the session's history.
		if !ev.Ephemeral && ev.Type != proto.EventSessionUpdated {
			kept = append(kept, ev.Seq)
		}
		if ev.Type == proto.EventRunCompleted && ev.RunID == last {
			break
		}
	}
	hist2, err := be.History(ctx, ws.ID, s.ID, hist[len(hist)-1].Seq)
	require.NoError(t, err)
	var want []int64
	for _, ev := range hist2 {
		want = append(want, ev.Seq)
	}
	assert.Equal(t, want, kept)
}

// The audit log names the owner for a prompt made through the bridge.
func TestPromptIsAudited(t *testing.T) {
	srv, be := newBackend(t, server.Config{})
	ctx := context.Background()
	ws, err := be.OpenWorkspace(ctx, t.TempDir())
	require.NoError(t, err)
	s, err := be.CreateSession(ctx, ws.ID, proto.CreateSessionRequest{})
	require.NoError(t, err)
	acc, err := be.Prompt(ctx, ws.ID, proto.PromptRequest{SessionID: s.ID, Prompt: "hi"})
	require.NoError(t, err)
	_, audit := srv.Local()
	entries, err := audit.Audit(ctx, 0, 100)
	require.NoError(t, err)
	var found bool
	for _, e := range entries {
		if e.Action == "prompt" && e.RunID == acc.RunID {
			found = true
			assert.Equal(t, proto.OwnerTokenName, e.Name)
			assert.Equal(t, s.ID, e.SessionID)
		}
	}
	assert.True(t, found, "the prompt is in the audit log")
	_, err = be.Session(ctx, ws.ID, uuid.NewString())
	assert.ErrorIs(t, err, bridge.ErrNotFound)
}
