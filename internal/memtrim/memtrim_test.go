package memtrim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// decide plays allocations per tick through a watch (busy 100, quiet 10)
// and returns the ticks that trim.
func decide(steps ...uint64) []int {
	var w watch
	var now uint64
	w.reset(now)
	var trims []int
	for i, n := range steps {
		now += n
		if w.tick(now, 100, 10) {
			trims = append(trims, i)
			w.reset(now)
		}
	}
	return trims
}

func TestTrimsOnceWhenABurstEnds(t *testing.T) {
	require.Equal(t, []int{2}, decide(60, 60, 0, 1, 0, 1, 0))
}

func TestNoTrimWhileLoaded(t *testing.T) {
	require.Empty(t, decide(50, 50, 50, 50, 50, 50))
	require.Equal(t, []int{6}, decide(50, 50, 50, 50, 50, 50, 10), "the first quiet tick")
}

func TestATrickleTrimsOnceItAddsUp(t *testing.T) {
	steps := make([]uint64, 30)
	for i := range steps {
		steps[i] = 4
	}
	require.Equal(t, []int{24}, decide(steps...), "at 100 bytes, and not again before 100 more")
}

func TestEachBurstIsGivenBack(t *testing.T) {
	require.Equal(t, []int{2, 5}, decide(200, 200, 0, 0, 150, 0, 0))
}

// TestTrimmerTrimsAfterLoad runs the goroutine on fake ticks, handing it
// the allocation count each time it reads one: it trims after a burst,
// reads the count again after the trim, and stops when told.
func TestTrimmerTrimsAfterLoad(t *testing.T) {
	ticks := make(chan time.Time)
	counts := make(chan uint64)
	trims := make(chan uint64, 4)
	tr := Start(Config{
		Busy: 100, Quiet: 10, Ticks: ticks, Allocated: func() uint64 { return <-counts }, Trim: func() {},
		Trimmed: func(allocated uint64, _ time.Duration) { trims <- allocated },
	})
	counts <- 0 // at its start
	for _, n := range []uint64{500, 1000, 1000} {
		ticks <- time.Time{}
		counts <- n
	}
	counts <- 1200 // after the trim: the collection's own allocations
	require.EqualValues(t, 1000, <-trims)
	for _, n := range []uint64{1200, 1201} {
		ticks <- time.Time{}
		counts <- n
	}
	tr.Stop()
	require.Empty(t, trims, "nothing since the trim")
	tr.Stop()
}

func TestAllocatedCounts(t *testing.T) {
	before := allocated()
	sink := make([]byte, 1<<20)
	_ = sink
	require.Greater(t, allocated(), before)
}
