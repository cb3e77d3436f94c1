package keylock

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Callers of one key never overlap; the map forgets every key once its
// callers are gone.
func TestOneHolderPerKey(t *testing.T) {
	var (
		l      Map[int]
		wg     sync.WaitGroup
		inside [8]int
		mu     sync.Mutex
	)
	for i := range 400 {
		wg.Go(func() {
			key := i % len(inside)
			unlock := l.Lock(key)
			mu.Lock()
			inside[key]++
			n := inside[key]
			mu.Unlock()
			if n != 1 {
				t.Errorf("key %d held by %d callers at once", key, n)
			}
			mu.Lock()
			inside[key]--
			mu.Unlock()
			unlock()
		})
	}
	wg.Wait()
	require.Zero(t, l.held())
}

// A key held by one caller does not hold up a caller of another key.
func TestKeysAreIndependent(t *testing.T) {
	var l Map[string]
	unlockA := l.Lock("a")
	defer unlockA()
	done := make(chan struct{})
	go func() {
		l.Lock("b")()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("locking b waited for a")
	}
	require.Equal(t, 1, l.held(), "b is forgotten once unlocked")
}
