package checkpoint

import (
	"context"
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/tandem-dev/tandem/proto"
)

// exists reports whether the workspace has something at rel.
func exists(ws, rel string) bool {
	_, err := os.Lstat(filepath.Join(ws, filepath.FromSlash(rel)))
	return err == nil
}

// Files the checkpoint's walk did not look at (ignored then) are not
// taken for files added since once a .gitignore changed: the rewind leaves
// them, naming them, and removes only what was created after it. (Issue
// 31, item 5.)
func TestRestoreLeavesFilesTheCheckpointDidNotSee(t *testing.T) {
	ctx := context.Background()
	ws := t.TempDir()
	writeFile(t, ws, ".gitignore", ".env\nnode_modules/\n")
	writeFile(t, ws, ".env", "SECRET=1\n")
	writeFile(t, ws, "node_modules/lib/index.js", "module.exports = 1\n")
	writeFile(t, ws, "src/a.txt", "a\n")
	r := newRepo(t, ws)
	before := snapshot(t, r)
	writeFile(t, ws, ".gitignore", "dist/\n")
	writeFile(t, ws, "src/new.txt", "made by the run\n")
	writeFile(t, ws, "newdir/x.txt", "made by the run\n")
	now := snapshot(t, r)
	changes, err := r.Restore(ctx, before, now)
	if err != nil {
		t.Fatal(err)
	}
	for _, keep := range []string{".env", "node_modules/lib/index.js", "src/a.txt"} {
		if !exists(ws, keep) {
			t.Errorf("%s was removed; the checkpoint never recorded it", keep)
		}
	}
	for _, gone := range []string{"src/new.txt", "newdir/x.txt", "newdir"} {
		if exists(ws, gone) {
			t.Errorf("%s is still there; it was made after the checkpoint", gone)
		}
	}
	if got, _ := os.ReadFile(filepath.Join(ws, ".gitignore")); string(got) != ".env\nnode_modules/\n" {
		t.Errorf(".gitignore = %q, want it back", got)
	}
	for _, c := range changes {
		if c.Path == ".env" || c.Path == "node_modules/lib/index.js" {
			t.Errorf("the changes name %s, which the rewind left", c.Path)
		}
	}
	p, err := r.Plan(before, now)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{".env", "node_modules/lib/index.js"}; !slices.Equal(p.Kept, want) {
		t.Errorf("kept = %v, want %v", p.Kept, want)
	}
}

// thenRules follow git's: nested .gitignore files, negations, a
// .gitignore the checkpoint did not record (its rules unknown), a file
// where a directory is now.
func TestPlanKnowsWhatTheCheckpointLookedAt(t *testing.T) {
	ws := t.TempDir()
	writeFile(t, ws, ".gitignore", "*.log\n!keep.log\nsecret/\n")
	writeFile(t, ws, "sub/.gitignore", "tmp/\n.gitignore\n")
	writeFile(t, ws, "deep/.gitignore", "*\n")
	writeFile(t, ws, "f", "a file\n")
	writeFile(t, ws, "secret/s", "s\n")
	writeFile(t, ws, "empty/.keep", "")
	if err := os.Remove(filepath.Join(ws, "empty/.keep")); err != nil {
		t.Fatal(err)
	}
	r := newRepo(t, ws)
	commit := snapshot(t, r)
	then, err := r.files(commit)
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]bool{
		"x.txt": true, "a.log": false, "keep.log": true, "secret/x": false,
		"sub/x": true, "sub/tmp/x": false, "sub/a.log": false, ".git/HEAD": false,
		"f/inside": true, "deep/x": false, "deep/more/y": false, "other/z": true,
		"empty/x": false,
	}
	// Recorded as they were: a.log and .git were not there; sub held only
	// its .gitignore, which ignores itself, so what was in it is unknown.
	dark := maps.Clone(cases)
	dark["a.log"], dark[".git/HEAD"], dark["sub/x"] = true, true, false
	for p, want := range dark {
		if got := r.lookerOf(commit, then).looked(p); got != want {
			t.Errorf("looked(%q) = %v, want %v", p, got, want)
		}
	}
	// A checkpoint made before the dark entries were recorded goes by
	// the .gitignore files it recorded; those that ignore themselves (and
	// empty directories) it cannot know of.
	rules := &thenRules{r: r, then: then, dirs: map[string]*dirRules{}}
	delete(cases, "sub/tmp/x")
	delete(cases, "deep/x")
	delete(cases, "deep/more/y")
	delete(cases, "empty/x")
	for p, want := range cases {
		if got := rules.looked(p); got != want {
			t.Errorf("by the rules: looked(%q) = %v, want %v", p, got, want)
		}
	}
}

// A file the walk no longer sees (ignored since) is still recorded by a
// snapshot that is asked for the files of an earlier one: its hand edit
// shows, and it is not taken for deleted. (Item 6a's part here.)
func TestSnapshotKeepsRecordingFilesIgnoredSince(t *testing.T) {
	ws := t.TempDir()
	writeFile(t, ws, "app.env", "A=1\n")
	r := newRepo(t, ws)
	before := snapshot(t, r)
	writeFile(t, ws, ".gitignore", "*.env\n")
	end, err := r.Snapshot(context.Background(), before)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, ws, "app.env", "A=2\n")
	now, err := r.Snapshot(context.Background(), before, end)
	if err != nil {
		t.Fatal(err)
	}
	edited, err := r.Changes(end, now)
	if err != nil {
		t.Fatal(err)
	}
	if want := []proto.FileChange{{Path: "app.env", Change: proto.ChangeModified}}; !slices.Equal(edited, want) {
		t.Fatalf("changes since the end = %v, want %v", edited, want)
	}
	p, err := r.Plan(before, now)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(p.Changes, proto.FileChange{Path: "app.env", Change: proto.ChangeModified}) {
		t.Errorf("plan = %v, want app.env modified, not deleted", p.Changes)
	}
}

// A same-size edit whose modification time is set back (cp -p, touch -r)
// is seen: the stat cache does not vouch by size and mtime alone. (Item
// 6c.)
func TestSnapshotSeesASameSizeEditWithItsTimeSetBack(t *testing.T) {
	ws := t.TempDir()
	writeFile(t, ws, "f", "aaaa")
	old := time.Now().Add(-time.Hour)
	p := filepath.Join(ws, "f")
	if err := os.Chtimes(p, old, old); err != nil {
		t.Fatal(err)
	}
	r := newRepo(t, ws)
	a := snapshot(t, r)
	snapshot(t, r) // the cache vouches for f from here on
	writeFile(t, ws, "f", "bbbb")
	if err := os.Chtimes(p, old, old); err != nil {
		t.Fatal(err)
	}
	b := snapshot(t, r)
	if c, _ := r.Changes(a, b); len(c) != 1 {
		t.Fatalf("changes = %v, want f modified", c)
	}
}

// A rewind that would have to go through a symlink (an ignored directory
// replaced by a link to elsewhere) changes nothing at all and says why.
// (Item 7.)
func TestRestoreIsAllOrNothing(t *testing.T) {
	ctx := context.Background()
	ws, outside := t.TempDir(), t.TempDir()
	writeFile(t, ws, "a.txt", "a\n")
	writeFile(t, ws, "build/out.txt", "out\n")
	writeFile(t, ws, "z.txt", "z\n")
	r := newRepo(t, ws)
	before := snapshot(t, r)
	writeFile(t, ws, ".gitignore", "build\n")
	if err := os.RemoveAll(filepath.Join(ws, "build")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(ws, "build")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, ws, "a.txt", "A\n")
	writeFile(t, ws, "new.txt", "new\n")
	writeFile(t, ws, "z.txt", "Z\n")
	now, err := r.Snapshot(ctx, before)
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.Restore(ctx, before, now)
	if !errors.Is(err, ErrBlocked) {
		t.Fatalf("restore: err = %v, want ErrBlocked", err)
	}
	for rel, want := range map[string]string{"a.txt": "A\n", "z.txt": "Z\n", "new.txt": "new\n", ".gitignore": "build\n"} {
		if got, err := os.ReadFile(filepath.Join(ws, rel)); err != nil || string(got) != want {
			t.Errorf("%s = %q, %v; want it untouched (%q)", rel, got, err, want)
		}
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Errorf("written outside: %v", ents)
	}
}

// failAfter is a context whose Err turns Canceled after n calls: a
// failure part way through a rewind, at a step chosen by the test.
type failAfter struct {
	context.Context
	n int
}

func (f *failAfter) Err() error {
	if f.n--; f.n < 0 {
		return context.Canceled
	}
	return nil
}

// A rewind that fails part way puts back what it had changed. (Item 7.)
func TestApplyFailingPartWayPutsBackWhatItChanged(t *testing.T) {
	ctx := context.Background()
	ws := t.TempDir()
	writeFile(t, ws, "a.txt", "a\n")
	writeFile(t, ws, "gone/b.txt", "b\n")
	writeFile(t, ws, "z.txt", "z\n")
	r := newRepo(t, ws)
	before := snapshot(t, r)
	writeFile(t, ws, "a.txt", "A\n")
	writeFile(t, ws, "new/deep/n.txt", "n\n")
	if err := os.RemoveAll(filepath.Join(ws, "gone")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, ws, "z.txt", "Z\n")
	now := snapshot(t, r)
	p, err := r.Plan(before, now)
	if err != nil {
		t.Fatal(err)
	}
	for n := range 6 {
		err := r.Apply(&failAfter{Context: ctx, n: n}, p)
		if !errors.Is(err, ErrUndone) {
			t.Fatalf("failing after %d steps: err = %v, want ErrUndone", n, err)
		}
		for rel, want := range map[string]string{"a.txt": "A\n", "z.txt": "Z\n", "new/deep/n.txt": "n\n"} {
			if got, err := os.ReadFile(filepath.Join(ws, rel)); err != nil || string(got) != want {
				t.Errorf("failing after %d steps: %s = %q, %v; want %q back", n, rel, got, err, want)
			}
		}
		if exists(ws, "gone") {
			t.Errorf("failing after %d steps: gone/ is back", n)
		}
		if c, err := r.Changes(now, snapshot(t, r)); err != nil || len(c) != 0 {
			t.Fatalf("failing after %d steps: the files differ from before the rewind: %v, %v", n, c, err)
		}
	}
	if err := r.Apply(ctx, p); err != nil {
		t.Fatal(err)
	}
	if c, err := r.Changes(before, snapshot(t, r)); err != nil || len(c) != 0 {
		t.Fatalf("after the rewind: %v, %v; want the checkpoint's files", c, err)
	}
}

// objects counts the repository's loose objects.
func objects(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(filepath.Join(dir, "objects"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && len(d.Name()) == 38 {
			n++
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// A look at a diff writes nothing; what no live checkpoint reaches is
// collected; the store's modes are the data dir's. (Item 8.)
func TestStoreIsReadWithoutWritesCollectedAndPrivate(t *testing.T) {
	ctx := context.Background()
	ws := t.TempDir()
	writeFile(t, ws, "log.txt", "line 0\n")
	writeFile(t, ws, "same.txt", "same\n")
	r := newRepo(t, ws)
	first := snapshot(t, r)
	base := objects(t, r.dir)
	for i := range 5 {
		writeFile(t, ws, "log.txt", "line "+string(rune('1'+i))+"\n")
		p, diff, err := r.DiffNow(ctx, first)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Changes) != 1 || diff == "" {
			t.Fatalf("diff = %v %q", p.Changes, diff)
		}
	}
	if n := objects(t, r.dir); n != base {
		t.Fatalf("five diffs wrote %d objects", n-base)
	}
	second := snapshot(t, r)
	writeFile(t, ws, "log.txt", "line 9\n")
	snapshot(t, r)
	err := filepath.WalkDir(r.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		want := fs.FileMode(0o600)
		if d.IsDir() {
			want = 0o700
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s has mode %v, want %v", p, fi.Mode().Perm(), want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	clear(r.fresh) // as after a restart
	removed, err := r.Collect([]string{first, second})
	if err != nil {
		t.Fatal(err)
	}
	if removed != 3 { // the third's commit, tree and log blob
		t.Errorf("collected %d objects, want 3", removed)
	}
	for _, c := range []string{first, second} {
		if _, err := r.files(c); err != nil {
			t.Fatalf("a live checkpoint lost its files: %v", err)
		}
	}
	if _, err := r.Restore(ctx, first, snapshot(t, r)); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(ws, "log.txt")); string(got) != "line 0\n" {
		t.Errorf("log.txt = %q after a rewind past a collection", got)
	}
}

// A repository made before the store kept the data dir's modes (go-git's
// 0755 directories and 0444 objects) gets them at its first collection.
func TestCollectGivesAnOldRepositoryPrivateModes(t *testing.T) {
	ws := t.TempDir()
	writeFile(t, ws, "a.txt", "a\n")
	dir := t.TempDir()
	r, err := NewManager(dir).Repo("ws", ws)
	if err != nil {
		t.Fatal(err)
	}
	c := snapshot(t, r)
	err = filepath.WalkDir(r.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.Chmod(p, 0o755)
		}
		return os.Chmod(p, 0o444)
	})
	if err != nil {
		t.Fatal(err)
	}
	r, err = NewManager(dir).Repo("ws", ws) // as after a restart
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Collect([]string{c}); err != nil {
		t.Fatal(err)
	}
	err = filepath.WalkDir(r.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if want := map[bool]fs.FileMode{true: 0o700, false: 0o600}[d.IsDir()]; fi.Mode().Perm() != want {
			t.Errorf("%s has mode %v, want %v", p, fi.Mode().Perm(), want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.files(c); err != nil {
		t.Fatal(err)
	}
}
