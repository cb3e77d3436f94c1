package sweep

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A sweep keeps the entries used since the sweep before, and only those;
// an entry used before that is gone after the next sweep.
func TestKeepHoldsWhatWasUsedSinceTheLastSweep(t *testing.T) {
	var m Marks[string]
	cache := map[string]int{"a": 1, "b": 2, "c": 3}
	m.Use("a")
	m.Use("c")
	m.Use("gone") // used, then dropped from the cache
	m.Forget("c")
	sum := 0
	cache = Keep(&m, cache, func(_ string, v int) { sum += v })
	require.Equal(t, map[string]int{"a": 1}, cache)
	require.Equal(t, 1, sum)
	// Nothing used in the next period: everything goes.
	require.Empty(t, Keep(&m, cache, nil))
}
