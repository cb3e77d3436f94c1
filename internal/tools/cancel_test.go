package tools

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestViewStopsOnCancelInAHugeLine: a file of one 16 GiB line (sparse, so
// it costs no disk) used to be read to its end by a canceled view. Every
// read now looks at the context.
func TestViewStopsOnCancelInAHugeLine(t *testing.T) {
	env := newEnv(t)
	f, err := os.Create(filepath.Join(env.Root, "huge.txt"))
	require.NoError(t, err)
	_, err = f.WriteString(strings.Repeat("a", sniffLen+1))
	require.NoError(t, err)
	require.NoError(t, f.Truncate(16<<30))
	require.NoError(t, f.Close())

	const deadline = 100 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	start := time.Now()
	done := make(chan Result, 1)
	go func() {
		done <- toolByName(t, "view").Run(ctx, env, mustJSON(t, map[string]any{"path": "huge.txt", "offset": 2}))
	}()
	select {
	case r := <-done:
		requireErr(t, r, "canceled")
	case <-time.After(deadline + 2*time.Second):
		t.Fatalf("view still reading 2 s after its deadline (invariant 6)")
	}
	require.Less(t, time.Since(start), deadline+2*time.Second)
}
