package goroutine

import (
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// Wait returns only once every goroutine the group ran has returned, and
// a stopped group runs nothing more, even when asked from one of its own
// goroutines while Wait waits.
func TestStopAndWait(t *testing.T) {
	var g Group
	var ran, refused atomic.Int64
	release := make(chan struct{})
	for range 8 {
		require.True(t, g.Go(func() {
			<-release
			if !g.Go(func() { ran.Add(1) }) {
				refused.Add(1)
			}
			ran.Add(1)
		}))
	}
	g.Stop()
	close(release)
	g.Wait()
	require.EqualValues(t, 8, ran.Load())
	require.EqualValues(t, 8, refused.Load())
	require.False(t, g.Go(func() { t.Error("ran after Stop") }))
}
