package checkpoint

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// pastRacyWindow waits until the files written so far are older than the
// stat cache's racy window: before, it vouches for none of them.
func pastRacyWindow() { time.Sleep(2 * racyWindow) }

// treeOf is the tree hash of a commit of r.
func treeOf(t *testing.T, r *Repo, commit string) plumbing.Hash {
	t.Helper()
	c, err := object.GetCommit(r.st, plumbing.NewHash(commit))
	if err != nil {
		t.Fatal(err)
	}
	return c.TreeHash
}

// restart is the workspace's repository as a server restarted on the
// same data dir finds it.
func restart(t *testing.T, dataDir, ws string) *Repo {
	t.Helper()
	r, err := NewManager(dataDir).Repo("ws", ws)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// A server restarted between two snapshots hashes only the files that
// changed: the index of the one before is kept on disk, private.
func TestIndexSurvivesARestart(t *testing.T) {
	ws, data := t.TempDir(), t.TempDir()
	writeFile(t, ws, "a.txt", "a\n")
	writeFile(t, ws, "dir/b.txt", "b\n")
	writeFile(t, ws, "dir/sub/c.txt", "c\n")
	pastRacyWindow()
	r := restart(t, data, ws)
	snapshot(t, r)
	before := r.stats["dir/sub/c.txt"]
	fi, err := os.Stat(filepath.Join(r.dir, indexName))
	if err != nil {
		t.Fatalf("no index on disk: %v", err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("index has mode %v, want 0600", fi.Mode().Perm())
	}

	writeFile(t, ws, "a.txt", "changed\n")
	r = restart(t, data, ws)
	c := snapshot(t, r)
	if got := r.stats["dir/sub/c.txt"]; got.hashed != before.hashed {
		t.Errorf("an unchanged file was hashed again after a restart (at %d, first at %d)", got.hashed, before.hashed)
	}
	fresh := restart(t, t.TempDir(), ws)
	if got, want := treeOf(t, r, c), treeOf(t, fresh, snapshot(t, fresh)); got != want {
		t.Errorf("tree after a restart %s, a fresh snapshot's %s", got, want)
	}
}

// An index cut short, changed, or written for another workspace is not
// trusted: the snapshot hashes every file again and records them right.
func TestIndexNotTrustedWhenCorruptOrForeign(t *testing.T) {
	for name, spoil := range map[string]func(t *testing.T, index string){
		"cut": func(t *testing.T, index string) {
			data, _ := os.ReadFile(index)
			os.WriteFile(index, data[:len(data)/2], 0o600)
		},
		"flipped": func(t *testing.T, index string) {
			data, _ := os.ReadFile(index)
			data[len(data)/2] ^= 0x40
			os.WriteFile(index, data, 0o600)
		},
		"foreign": func(t *testing.T, index string) {
			other := t.TempDir()
			writeFile(t, other, "a.txt", "other\n")
			o := restart(t, t.TempDir(), other)
			snapshot(t, o)
			data, err := os.ReadFile(filepath.Join(o.dir, indexName))
			if err != nil {
				t.Fatal(err)
			}
			os.WriteFile(index, data, 0o600)
		},
	} {
		t.Run(name, func(t *testing.T) {
			ws, data := t.TempDir(), t.TempDir()
			writeFile(t, ws, "a.txt", "a\n")
			writeFile(t, ws, "dir/b.txt", "b\n")
			pastRacyWindow()
			r := restart(t, data, ws)
			snapshot(t, r)
			before := r.stats["dir/b.txt"]
			spoil(t, filepath.Join(r.dir, indexName))
			r = restart(t, data, ws)
			c := snapshot(t, r)
			if r.stats["dir/b.txt"].hashed == before.hashed {
				t.Error("a spoilt index vouched for a file")
			}
			files, err := r.files(c)
			if err != nil {
				t.Fatal(err)
			}
			if len(files) != 2 {
				t.Errorf("recorded %v", files)
			}
			if got, err := r.content(files, "a.txt"); err != nil || got != "a\n" {
				t.Errorf("a.txt recorded as %q, %v", got, err)
			}
		})
	}
}

// The trees a snapshot writes again only where something changed are the
// trees a snapshot of the same files with no index writes.
func TestIncrementalTreesMatchAFullSnapshot(t *testing.T) {
	ws := t.TempDir()
	r := newRepo(t, ws)
	steps := []func(){
		func() {
			writeFile(t, ws, "a.txt", "a\n")
			writeFile(t, ws, "d1/x.txt", "x\n")
			writeFile(t, ws, "d1/d2/y.txt", "y\n")
			writeFile(t, ws, "d3/z.txt", "z\n")
		},
		func() { writeFile(t, ws, "d1/d2/y.txt", "y2\n") },
		func() { writeFile(t, ws, "d1/d2/d4/new.txt", "new\n") },
		func() { os.RemoveAll(filepath.Join(ws, "d1", "d2")) },
		func() { os.Chmod(filepath.Join(ws, "a.txt"), 0o755) },
		func() { os.Symlink("a.txt", filepath.Join(ws, "d3", "link")) },
		func() { os.RemoveAll(filepath.Join(ws, "d3")); writeFile(t, ws, "d3", "now a file\n") },
		func() { writeFile(t, ws, ".gitignore", "d1/\n") },
		func() { os.Remove(filepath.Join(ws, ".gitignore")) },
		func() { os.RemoveAll(filepath.Join(ws, "d1")); os.Remove(filepath.Join(ws, "d3")) },
		func() {},
	}
	for i, step := range steps {
		step()
		got := treeOf(t, r, snapshot(t, r))
		fresh := newRepo(t, ws)
		if want := treeOf(t, fresh, snapshot(t, fresh)); got != want {
			t.Fatalf("step %d: tree %s, a snapshot with no index %s", i, got, want)
		}
	}
}

// After a collection removed what the index named (the last snapshot is
// no live checkpoint's), a restarted server's snapshot does not name the
// removed objects: the index on disk was written without them.
func TestCollectedObjectsLeaveTheIndex(t *testing.T) {
	ctx := context.Background()
	ws, data := t.TempDir(), t.TempDir()
	writeFile(t, ws, "keep.txt", "keep\n")
	writeFile(t, ws, "log.txt", "line 0\n")
	r := restart(t, data, ws)
	first := snapshot(t, r)
	writeFile(t, ws, "log.txt", "line 1\n")
	pastRacyWindow()
	r = restart(t, data, ws)
	snapshot(t, r) // its index, on disk, vouches for log.txt's line 1
	clear(r.fresh) // as after a restart
	if n, err := r.Collect([]string{first}); err != nil || n == 0 {
		t.Fatalf("collected %d, %v", n, err)
	}
	r = restart(t, data, ws)
	now := snapshot(t, r)
	files, err := r.files(now)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := r.content(files, "log.txt"); err != nil || got != "line 1\n" {
		t.Fatalf("log.txt recorded as %q, %v", got, err)
	}
	if _, err := r.Restore(ctx, first, now); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(ws, "log.txt")); string(got) != "line 0\n" {
		t.Errorf("log.txt = %q after a rewind", got)
	}
}

// A snapshot of files that did not change since the last one (before a
// run that follows another) writes nothing: it names the same commit.
func TestUnchangedSnapshotWritesNothing(t *testing.T) {
	ws := t.TempDir()
	writeFile(t, ws, "a.txt", "a\n")
	writeFile(t, ws, "dir/b.txt", "b\n")
	pastRacyWindow()
	r := newRepo(t, ws)
	first := snapshot(t, r)
	n := objects(t, r.dir)
	if again := snapshot(t, r); again != first {
		t.Errorf("unchanged files recorded as %s, then %s", first, again)
	}
	if got := objects(t, r.dir); got != n {
		t.Errorf("a snapshot of unchanged files wrote %d objects", got-n)
	}
	writeFile(t, ws, "dir/b.txt", "changed\n")
	if snapshot(t, r) == first {
		t.Error("a change recorded as the commit before it")
	}
}
