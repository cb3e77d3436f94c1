package session

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/internal/store"
	"github.com/tandem-dev/tandem/internal/workspace/workspacetest"
	"github.com/tandem-dev/tandem/proto"
)

// holdingStore holds the UpdateSession of one session until released.
type holdingStore struct {
	store.Store
	held    string
	entered chan struct{}
	release chan struct{}
}

func (s *holdingStore) UpdateSession(ctx context.Context, rec store.Session) error {
	if rec.ID == s.held {
		close(s.entered)
		<-s.release
	}
	return s.Store.UpdateSession(ctx, rec)
}

// A session's update waits for no other session's: while one session's
// write is stuck in the store, another session's update goes through.
func TestUpdatesOfSessionsDoNotWaitForEachOther(t *testing.T) {
	ctx := context.Background()
	ws, m, db := workspacetest.Open(t)
	hs := &holdingStore{Store: db, entered: make(chan struct{}), release: make(chan struct{})}
	s := NewService(Config{Store: hs, Workspaces: m})
	slow, err := s.Create(ctx, ws.ID, proto.CreateSessionRequest{})
	require.NoError(t, err)
	fast, err := s.Create(ctx, ws.ID, proto.CreateSessionRequest{})
	require.NoError(t, err)
	hs.held = slow.ID

	slowDone := make(chan error, 1)
	go func() {
		slowDone <- s.SetProvider(ctx, ws.ID, slow.ID, &proto.Provider{Type: "openai", BaseURL: "http://slow"})
	}()
	select {
	case <-hs.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the slow session's write never started")
	}
	fastDone := make(chan error, 1)
	go func() {
		fastDone <- s.SetProvider(ctx, ws.ID, fast.ID, &proto.Provider{Type: "openai", BaseURL: "http://fast"})
	}()
	select {
	case err := <-fastDone:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("an update of one session waited for another session's write")
	}
	close(hs.release)
	require.NoError(t, <-slowDone)
	for id, url := range map[string]string{slow.ID: "http://slow", fast.ID: "http://fast"} {
		_, rec, err := s.Lookup(ctx, ws.ID, id)
		require.NoError(t, err)
		require.Equal(t, url, decodeSettings(rec).Provider.BaseURL)
	}
}

// Concurrent updates of one session's different settings never undo each
// other: each reads the record the one before it wrote.
func TestConcurrentUpdatesOfOneSessionAllLand(t *testing.T) {
	ctx := context.Background()
	ws, m, db := workspacetest.Open(t)
	s := NewService(Config{Store: db, Workspaces: m})
	for range 5 {
		sess, err := s.Create(ctx, ws.ID, proto.CreateSessionRequest{})
		require.NoError(t, err)
		title, mode, auto := "renamed", "allow_all", false
		tools := []string{"bash"}
		var wg sync.WaitGroup
		for _, f := range []func() error{
			func() error {
				_, err := s.Update(ctx, ws.ID, sess.ID, proto.UpdateSessionRequest{Title: &title})
				return err
			},
			func() error {
				_, err := s.Update(ctx, ws.ID, sess.ID, proto.UpdateSessionRequest{PermissionMode: &mode})
				return err
			},
			func() error {
				_, err := s.Update(ctx, ws.ID, sess.ID, proto.UpdateSessionRequest{ExcludedTools: &tools})
				return err
			},
			func() error {
				_, err := s.Update(ctx, ws.ID, sess.ID, proto.UpdateSessionRequest{Compaction: &proto.CompactionOptions{Auto: &auto}})
				return err
			},
			func() error {
				return s.SetProvider(ctx, ws.ID, sess.ID, &proto.Provider{Type: "anthropic"})
			},
		} {
			wg.Go(func() { require.NoError(t, f()) })
		}
		wg.Wait()
		_, rec, err := s.Lookup(ctx, ws.ID, sess.ID)
		require.NoError(t, err)
		st := decodeSettings(rec)
		require.Equal(t, title, rec.Title)
		require.Equal(t, mode, st.PermissionMode)
		require.Equal(t, tools, st.ExcludedTools)
		require.False(t, st.CompactionOrDefault().Auto)
		require.NotNil(t, st.Provider)
		require.Equal(t, "anthropic", st.Provider.Type)
	}
}
