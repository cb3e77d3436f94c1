package groupcommit

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Units from many writers commit once each, in groups no larger than max,
// each writer's in the order it queued them; Close commits what was queued
// and refuses what comes after.
func TestGroupsKeepOrderAndBounds(t *testing.T) {
	var mu sync.Mutex
	var got [][2]int
	largest := 0
	release := make(chan struct{})
	first := true
	q := New(4, func(group [][2]int) {
		if first {
			first = false
			<-release // let the queue fill behind the first group
		}
		mu.Lock()
		defer mu.Unlock()
		largest = max(largest, len(group))
		got = append(got, group...)
	})
	ctx := context.Background()
	require.NoError(t, q.Submit(ctx, [2]int{-1, 0}))
	var wg sync.WaitGroup
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				require.NoError(t, q.Submit(ctx, [2]int{w, i}))
			}
		}()
	}
	// The writers fill the queue while the first group commits.
	require.Eventually(t, func() bool { return len(q.queue) == cap(q.queue) }, 10*time.Second, time.Millisecond)
	close(release)
	wg.Wait()
	q.Close()
	require.ErrorIs(t, q.Submit(ctx, [2]int{9, 9}), ErrClosed)
	require.True(t, q.Closed())

	require.Len(t, got, 151)
	require.LessOrEqual(t, largest, 4)
	require.Greater(t, largest, 1, "queued units are committed together")
	next := map[int]int{}
	for _, u := range got[1:] {
		require.Equal(t, next[u[0]], u[1], "writer %d out of order", u[0])
		next[u[0]]++
	}
}

func TestSubmitWithAnEndedContextQueuesNothing(t *testing.T) {
	n := 0
	q := New(4, func(group []int) { n += len(group) })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, q.Submit(ctx, 1), context.Canceled)
	q.Close()
	require.Zero(t, n)
}
