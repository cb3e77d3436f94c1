// Package workspacetest opens a workspace for the tests of the packages
// above package workspace.
package workspacetest

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/internal/hub"
	"github.com/tandem-dev/tandem/internal/store"
	"github.com/tandem-dev/tandem/internal/store/sqlite"
	"github.com/tandem-dev/tandem/internal/workspace"
)

// Open returns an open workspace of a new Manager over a new SQLite store
// in a temporary directory, with its Manager and store; the test's cleanup
// shuts them down. Its graces are an hour, so that nothing closes under a
// test.
func Open(tb testing.TB) (*workspace.Workspace, *workspace.Manager, store.Store) {
	tb.Helper()
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(tb.TempDir(), "tandem.db"))
	require.NoError(tb, err)
	h := hub.New(hub.Config{})
	m := workspace.NewManager(workspace.Config{Store: db, Hub: h, CreateGrace: time.Hour, DetachGrace: time.Hour})
	ws, _, err := m.Open(ctx, tb.TempDir())
	require.NoError(tb, err)
	tb.Cleanup(func() {
		m.Shutdown(ctx)
		h.Close()
		require.NoError(tb, db.Close())
	})
	return ws, m, db
}
