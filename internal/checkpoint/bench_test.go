package checkpoint

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// benchWorkspace makes a workspace of n small files, 50 to a directory,
// with a .gitignore, as a checkpointed project looks.
func benchWorkspace(b *testing.B, n int) string { return benchWorkspaceT(b, n) }

func benchWorkspaceT(b testing.TB, n int) string {
	b.Helper()
	ws := b.TempDir()
	writeFile(b, ws, ".gitignore", "build/\n*.log\n")
	for i := range n {
		writeFile(b, ws, fmt.Sprintf("pkg%03d/sub%d/file%05d.go", i/500, (i/50)%10, i),
			fmt.Sprintf("package p\n\n// file %d\nfunc F%d() int { return %d }\n", i, i, i))
	}
	// Past the racy window, so that the stat cache can vouch for the
	// files from the first snapshot on, as it does for a workspace whose
	// files were not all written a moment ago.
	time.Sleep(2 * racyWindow)
	return ws
}

// BenchmarkSnapshot measures a checkpoint of a workspace where a run
// changed a few files since the last one: "warm" with the Repo that took
// the previous one, "restart" with a new Manager on the same directories
// (a server restarted between the two), "run" the two checkpoints of a
// run that changes files (before it, nothing changed since the last run's
// end; after it, with the first as also, as the coordinator takes them).
func BenchmarkSnapshot(b *testing.B) {
	ctx := context.Background()
	for _, n := range []int{1000, 10000} {
		for _, mode := range []string{"warm", "restart", "run"} {
			b.Run(fmt.Sprintf("files=%d/%s", n, mode), func(b *testing.B) {
				ws := benchWorkspace(b, n)
				data := b.TempDir()
				r, err := NewManager(data).Repo("ws", ws)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := r.Snapshot(ctx); err != nil {
					b.Fatal(err)
				}
				change := func(i int) {
					for k := range 3 {
						writeFile(b, ws, fmt.Sprintf("pkg000/sub%d/changed%d.go", k, k), fmt.Sprintf("package p // %d\n", i))
					}
				}
				i := 0
				for b.Loop() {
					i++
					if mode == "run" {
						start, err := r.Snapshot(ctx)
						if err != nil {
							b.Fatal(err)
						}
						change(i)
						if _, err := r.Snapshot(ctx, start); err != nil {
							b.Fatal(err)
						}
						continue
					}
					b.StopTimer()
					change(i)
					if mode == "restart" {
						if r, err = NewManager(data).Repo("ws", ws); err != nil {
							b.Fatal(err)
						}
					}
					b.StartTimer()
					if _, err := r.Snapshot(ctx); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
