package server

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// The server sweeps its caches at every tick of IdleSweeps, on a goroutine
// of its own that Shutdown stops and waits for.
func TestServerSweepsUntilShutdown(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ticks := make(chan time.Time)
	srv, err := New(context.Background(), Config{DataDir: t.TempDir(), Token: "secret", IdleSweeps: ticks})
	require.NoError(t, err)
	for range 3 {
		select {
		case ticks <- time.Now():
		case <-time.After(10 * time.Second):
			t.Fatal("no sweep took the tick")
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, srv.Shutdown(ctx))
}
