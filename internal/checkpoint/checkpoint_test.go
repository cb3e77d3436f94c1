package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tandem-dev/tandem/proto"
)

func writeFile(t testing.TB, root, rel, content string) {
	t.Helper()
	p := filepath.Join(root, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// snapshot is r.Snapshot, failing the test on an error.
func snapshot(t *testing.T, r *Repo) string {
	t.Helper()
	c, err := r.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func newRepo(t testing.TB, ws string) *Repo {
	t.Helper()
	r, err := NewManager(t.TempDir()).Repo("ws", ws)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// A restore undoes additions, deletions and changes, removes the
// directories it empties, and leaves ignored files alone.
func TestRestore(t *testing.T) {
	ctx := context.Background()
	ws := t.TempDir()
	writeFile(t, ws, ".gitignore", "build/\n*.log\n")
	writeFile(t, ws, "a.txt", "one\ntwo\n")
	writeFile(t, ws, "dir/b.txt", "bee\n")
	writeFile(t, ws, "gone/c.txt", "sea\n")
	writeFile(t, ws, "build/out.bin", "old build")
	r := newRepo(t, ws)
	before := snapshot(t, r)
	writeFile(t, ws, "a.txt", "one\nTWO\n")
	if err := os.RemoveAll(filepath.Join(ws, "gone")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, ws, "new/deep/d.txt", "dee\n")
	writeFile(t, ws, "build/out.bin", "new build")
	writeFile(t, ws, "x.log", "log")
	if err := os.Chmod(filepath.Join(ws, "dir/b.txt"), 0o755); err != nil {
		t.Fatal(err)
	}
	now := snapshot(t, r)
	files, diff, err := r.Diff(ctx, before, now)
	if err != nil {
		t.Fatal(err)
	}
	want := []proto.FileChange{
		{Path: "a.txt", Change: proto.ChangeModified},
		{Path: "dir/b.txt", Change: proto.ChangeModified},
		{Path: "gone/c.txt", Change: proto.ChangeDeleted},
		{Path: "new/deep/d.txt", Change: proto.ChangeAdded},
	}
	if fmt.Sprint(files) != fmt.Sprint(want) {
		t.Fatalf("changes = %v, want %v", files, want)
	}
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if _, _, err := r.Diff(canceled, before, now); !errors.Is(err, context.Canceled) {
		t.Errorf("diff with its context canceled: err = %v, want context.Canceled", err)
	}
	if !strings.Contains(diff, "-two") || !strings.Contains(diff, "+TWO") || !strings.Contains(diff, "+dee") {
		t.Fatalf("diff misses lines:\n%s", diff)
	}
	if _, err := r.Restore(ctx, before, now); err != nil {
		t.Fatal(err)
	}
	for rel, want := range map[string]string{"a.txt": "one\ntwo\n", "gone/c.txt": "sea\n", "build/out.bin": "new build", "x.log": "log"} {
		got, err := os.ReadFile(filepath.Join(ws, rel))
		if err != nil || string(got) != want {
			t.Errorf("%s = %q, %v; want %q", rel, got, err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(ws, "new")); !os.IsNotExist(err) {
		t.Errorf("directory made since the checkpoint is still there: %v", err)
	}
	if fi, err := os.Stat(filepath.Join(ws, "dir/b.txt")); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("dir/b.txt mode = %v, %v; want 0644", fi.Mode(), err)
	}
	after := snapshot(t, r)
	if left, err := r.Changes(before, after); err != nil || len(left) != 0 {
		t.Fatalf("after the restore %v differ (%v)", left, err)
	}
}

// A file changed in place with its size kept is seen, even right after a
// snapshot hashed it (the stat cache does not vouch for recent files).
func TestSameSizeChange(t *testing.T) {
	ws := t.TempDir()
	writeFile(t, ws, "f", "aaaa")
	r := newRepo(t, ws)
	a := snapshot(t, r)
	writeFile(t, ws, "f", "bbbb")
	b := snapshot(t, r)
	if c, _ := r.Changes(a, b); len(c) != 1 {
		t.Fatalf("changes = %v, want f modified", c)
	}
}

// BenchmarkSnapshot10k is a checkpoint of a workspace of 10,000 files in
// which 10 changed since the previous one. It fails past the contract's
// target (under 100 ms), and reports the shadow repository's size too.
func BenchmarkSnapshot10k(b *testing.B) {
	ms := benchSnapshot(b, func(ws string) {
		for i := range 10_000 {
			writeFile(b, ws, fmt.Sprintf("pkg%03d/file%04d.go", i/100, i), fmt.Sprintf("package p\n\n// file %d\nvar x = %d\n", i, i))
		}
	}, func(ws string, n int) {
		for j := range 10 {
			writeFile(b, ws, fmt.Sprintf("pkg%03d/file%04d.go", j*7, j*700), fmt.Sprintf("package p\n// change %d %d\n", n, j))
		}
	})
	if ms >= 100 {
		b.Errorf("a checkpoint of 10,000 files, 10 of them changed, took %.1f ms of CPU; the target is under 100 ms", ms)
	}
}

// benchSnapshot times the snapshots of a workspace made by setup, each
// after change(n) changed it, and returns the CPU milliseconds one took.
func benchSnapshot(b *testing.B, setup func(ws string), change func(ws string, n int)) float64 {
	ctx := context.Background()
	ws := b.TempDir()
	setup(ws)
	data := b.TempDir()
	r, err := NewManager(data).Repo("ws", ws)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := r.Snapshot(ctx); err != nil {
		b.Fatal(err)
	}
	// Past the racy window, so the cache vouches for what did not change.
	for p, s := range r.stats {
		s.hashed += int64(racyWindow) * 2
		r.stats[p] = s
	}
	var cpu time.Duration
	b.ResetTimer()
	for n := 0; b.Loop(); n++ {
		b.StopTimer()
		change(ws, n)
		b.StartTimer()
		start := cpuTime()
		if _, err := r.Snapshot(ctx); err != nil {
			b.Fatal(err)
		}
		cpu += cpuTime() - start
	}
	b.StopTimer()
	// On a machine shared with other work, the CPU a snapshot used says
	// more of its cost than the wall time it waited.
	ms := float64(cpu.Microseconds()) / 1000 / float64(b.N)
	b.ReportMetric(ms, "cpu-ms/op")
	b.ReportMetric(float64(dirSize(data))/(1<<20), "repo-MiB")
	return ms
}

// cpuTime is the CPU time the process used so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func dirSize(dir string) int64 {
	var n int64
	_ = filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			n += fi.Size()
		}
		return nil
	})
	return n
}

// A directory swapped for a symlink to elsewhere after the checkpoint is
// put back as a directory; nothing is written where the link pointed.
func TestRestoreConfinedAcrossASwappedDirectory(t *testing.T) {
	ctx := context.Background()
	ws, outside := t.TempDir(), t.TempDir()
	writeFile(t, ws, "dir/b.txt", "bee\n")
	writeFile(t, outside, "keep.txt", "outside\n")
	r := newRepo(t, ws)
	before := snapshot(t, r)
	if err := os.RemoveAll(filepath.Join(ws, "dir")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(ws, "dir")); err != nil {
		t.Fatal(err)
	}
	now := snapshot(t, r)
	if _, err := r.Restore(ctx, before, now); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(filepath.Join(ws, "dir"))
	if err != nil || !fi.IsDir() {
		t.Fatalf("dir is %v, %v; want a directory again", fi, err)
	}
	if got, _ := os.ReadFile(filepath.Join(ws, "dir/b.txt")); string(got) != "bee\n" {
		t.Errorf("dir/b.txt = %q", got)
	}
	ents, _ := os.ReadDir(outside)
	if len(ents) != 1 || ents[0].Name() != "keep.txt" {
		t.Errorf("the link's target was written: %v", ents)
	}
}

// BenchmarkSnapshot100MB is a checkpoint of a 100 MB workspace (100 files
// of 1 MiB) in which 10 files changed since the previous one.
func BenchmarkSnapshot100MB(b *testing.B) {
	block := make([]byte, 1<<20)
	for i := range block {
		block[i] = byte('a' + i%26)
	}
	benchSnapshot(b, func(ws string) {
		for i := range 100 {
			writeFile(b, ws, fmt.Sprintf("big%03d.dat", i), fmt.Sprintf("%d\n", i)+string(block))
		}
	}, func(ws string, n int) {
		for j := range 10 {
			writeFile(b, ws, fmt.Sprintf("big%03d.dat", j*10), fmt.Sprintf("change %d %d\n", n, j)+string(block))
		}
	})
}

// A workspace the walk sees only part of (here: deeper than the walk
// goes) is not recorded: a later walk may see another part, and a rewind
// would remove as added the files the checkpoint missed.
func TestSnapshotRefusesAPartialWalk(t *testing.T) {
	ws := t.TempDir()
	writeFile(t, ws, "a.txt", "a\n")
	writeFile(t, ws, strings.Repeat("d/", 300)+"deep.txt", "deep\n")
	if _, err := newRepo(t, ws).Snapshot(context.Background()); !errors.Is(err, ErrTooBig) {
		t.Fatalf("snapshot of a partial walk: err = %v, want ErrTooBig", err)
	}
}

// A directory swapped for a symlink to elsewhere between the snapshot of
// the files now and the restore (while the rewind runs) leads nowhere:
// the restore neither removes nor writes a file where the link points.
func TestRestoreConfinedWhenSwappedMidway(t *testing.T) {
	ctx := context.Background()
	ws, outside := t.TempDir(), t.TempDir()
	writeFile(t, ws, "dir/b.txt", "bee\n")
	writeFile(t, outside, "a_new.txt", "outside's own\n")
	r := newRepo(t, ws)
	before := snapshot(t, r)
	writeFile(t, ws, "dir/a_new.txt", "added\n")
	writeFile(t, ws, "dir/b.txt", "BEE\n")
	now := snapshot(t, r)
	if err := os.Rename(filepath.Join(ws, "dir"), filepath.Join(ws, "moved")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(ws, "dir")); err != nil {
		t.Fatal(err)
	}
	_, err := r.Restore(ctx, before, now)
	t.Logf("restore: %v", err)
	ents, _ := os.ReadDir(outside)
	if len(ents) != 1 || ents[0].Name() != "a_new.txt" {
		t.Errorf("the restore wrote or removed where the link points: %v", ents)
	}
	if got, _ := os.ReadFile(filepath.Join(outside, "a_new.txt")); string(got) != "outside's own\n" {
		t.Errorf("outside's file = %q", got)
	}
}

// A file too big to record is noted as there: once it shrinks, a rewind
// does not take it for one added since and remove it.
func TestRestoreKeepsAFileTooBigToRecord(t *testing.T) {
	ctx := context.Background()
	ws := t.TempDir()
	writeFile(t, ws, "big.dat", "")
	if err := os.Truncate(filepath.Join(ws, "big.dat"), MaxFileSize+1); err != nil {
		t.Fatal(err)
	}
	r := newRepo(t, ws)
	before := snapshot(t, r)
	writeFile(t, ws, "big.dat", "small now\n")
	writeFile(t, ws, "new.txt", "new\n")
	now := snapshot(t, r)
	changes, diff, err := r.Diff(ctx, before, now)
	if err != nil {
		t.Fatal(err)
	}
	if want := []proto.FileChange{{Path: "new.txt", Change: proto.ChangeAdded}}; fmt.Sprint(changes) != fmt.Sprint(want) {
		t.Fatalf("changes = %v, want %v (diff %q)", changes, want, diff)
	}
	if _, err := r.Restore(ctx, before, now); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(ws, "big.dat")); err != nil || string(got) != "small now\n" {
		t.Errorf("big.dat = %q, %v; want it left as it is", got, err)
	}
	if _, err := os.Stat(filepath.Join(ws, "new.txt")); !os.IsNotExist(err) {
		t.Errorf("new.txt is still there: %v", err)
	}
	// Recorded small, then grown too big: a change the diff cannot show,
	// and a rewind puts the small one back.
	small := snapshot(t, r)
	if err := os.Truncate(filepath.Join(ws, "big.dat"), MaxFileSize+1); err != nil {
		t.Fatal(err)
	}
	grown := snapshot(t, r)
	changes, diff, err = r.Diff(ctx, small, grown)
	if err != nil || fmt.Sprint(changes) != fmt.Sprint([]proto.FileChange{{Path: "big.dat", Change: proto.ChangeModified}}) || !strings.Contains(diff, "too big") {
		t.Fatalf("changes = %v, diff %q, %v; want big.dat modified, too big to show", changes, diff, err)
	}
	if _, err := r.Restore(ctx, small, grown); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(ws, "big.dat")); err != nil || string(got) != "small now\n" {
		t.Errorf("big.dat = %d bytes, %v; want the small one back", len(got), err)
	}
}

// A file that became a directory since is a file again: what was added
// inside it goes first, then the file comes back in its place.
func TestRestoreFileTurnedDirectory(t *testing.T) {
	ctx := context.Background()
	ws := t.TempDir()
	writeFile(t, ws, "x", "file\n")
	r := newRepo(t, ws)
	before := snapshot(t, r)
	if err := os.Remove(filepath.Join(ws, "x")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, ws, "x/y", "inside\n")
	now := snapshot(t, r)
	if _, err := r.Restore(ctx, before, now); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(ws, "x")); err != nil || string(got) != "file\n" {
		t.Errorf("x = %q, %v; want the file back", got, err)
	}
}
