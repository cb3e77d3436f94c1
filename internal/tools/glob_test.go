package tools

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// deepTree makes the tree of defect 5: a/a/.../a, depth levels deep, with a
// file c at every level and b at the bottom.
func deepTree(t testing.TB, root string, depth int) string {
	t.Helper()
	dir := root
	for range depth {
		dir = filepath.Join(dir, "a")
		require.NoError(t, os.Mkdir(dir, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "c"), nil, 0o644))
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "b"), nil, 0o644))
	return strings.TrimPrefix(strings.Repeat("/a", depth), "/") + "/b"
}

// pathological is the pattern of defect 5: "**/a/" k times, then "**/b".
func pathological(k int) string { return strings.Repeat("**/a/", k) + "**/b" }

// TestGlobPathologicalPatternStopsOnCancel is defect 5: matching one path
// against "**/a/**/a/..." took exponential time and never looked at the
// context, so a cancel went unnoticed for minutes.
func TestGlobPathologicalPatternStopsOnCancel(t *testing.T) {
	env := newEnv(t)
	deepTree(t, env.Root, 40)
	// The deadline passes in the middle of the walk (or after the end).
	const deadline = 100 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	start := time.Now()
	done := make(chan Result, 1)
	go func() {
		done <- toolByName(t, "glob").Run(ctx, env, mustJSON(t, map[string]any{"pattern": pathological(12)}))
	}()
	select {
	case r := <-done:
		// Either it finished before its deadline, or it stopped for it.
		if r.IsError {
			require.Contains(t, r.Content, "canceled")
		}
	case <-time.After(deadline + 2*time.Second):
		t.Fatalf("glob still running 2 s after its deadline (invariant 6)")
	}
	require.Less(t, time.Since(start), deadline+2*time.Second)
}

// TestGlobPathologicalPatternFinishes checks the same pattern completes, and
// finds the one file it matches, in time proportional to the tree rather than
// exponential in the pattern (the deadline only keeps a regression from
// hanging the suite; BenchmarkGlobPathological measures).
func TestGlobPathologicalPatternFinishes(t *testing.T) {
	env := newEnv(t)
	want := deepTree(t, env.Root, 40)
	for _, k := range []int{4, 10, 39, 40} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		r := toolByName(t, "glob").Run(ctx, env, mustJSON(t, map[string]any{"pattern": pathological(k)}))
		cancel()
		requireOK(t, r)
		require.Equal(t, want, r.Content, "k=%d", k)
	}
	r := run(t, env, "glob", map[string]any{"pattern": pathological(41)})
	requireOK(t, r)
	require.Equal(t, "No files matched.", r.Content)
}

// BenchmarkGlobPathological measures the worst case of defect 5 (before the
// fix: 83 ms at k=4, 2.5 s at k=6, 33 s at k=8 on this tree).
func BenchmarkGlobPathological(b *testing.B) {
	root, err := filepath.EvalSymlinks(b.TempDir())
	require.NoError(b, err)
	env := Env{Root: root}
	deepTree(b, root, 40)
	for _, k := range []int{4, 8, 10, 20} {
		b.Run(fmt.Sprintf("k=%d", k), func(b *testing.B) {
			args := []byte(fmt.Sprintf(`{"pattern": %q}`, pathological(k)))
			for b.Loop() {
				if r := (globTool{}).Run(context.Background(), env, args); r.IsError {
					b.Fatal(r.Content)
				}
			}
		})
	}
}
