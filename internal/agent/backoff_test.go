package agent

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/internal/provider"
)

func TestRetryWaitHonoursRetryAfter(t *testing.T) {
	for range 1000 {
		w := retryWait(time.Millisecond, time.Second)
		require.GreaterOrEqual(t, w, time.Second, "the wait the API asked for is a floor")
		require.LessOrEqual(t, w, time.Second+time.Second/10)
	}
	require.Equal(t, 4*time.Second, retryWait(4*time.Second, time.Second), "a longer backoff wins")
	require.Equal(t, provider.MaxRetryAfter, retryWait(time.Millisecond, provider.MaxRetryAfter), "capped")
	require.Equal(t, provider.MaxRetryAfter, retryWait(10*time.Minute, 0), "capped")
	require.Equal(t, 3*time.Millisecond, retryWait(3*time.Millisecond, 0), "no Retry-After: the backoff as is")
}

func TestDefaultBackoffIsJittered(t *testing.T) {
	x := &execution{r: &Runner{}}
	for n, base := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second} {
		seen := map[time.Duration]bool{}
		for range 200 {
			w := x.backoff(n, 0)
			require.GreaterOrEqual(t, w, base/2)
			require.LessOrEqual(t, w, base*3/2)
			seen[w] = true
		}
		require.Greater(t, len(seen), 100, "retry %d: waits are spread, not all equal", n)
	}
	require.LessOrEqual(t, x.backoff(30, 0), provider.MaxRetryAfter, "no overflow, capped")
	require.GreaterOrEqual(t, x.backoff(0, 5*time.Second), 5*time.Second)

	x.r.Backoff = func(int) time.Duration { return time.Millisecond }
	require.Equal(t, time.Millisecond, x.backoff(2, 0), "the hook replaces the default")
	require.GreaterOrEqual(t, x.backoff(2, time.Second), time.Second, "and Retry-After still wins")
}
