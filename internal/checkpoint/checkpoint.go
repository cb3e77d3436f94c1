// Package checkpoint records a workspace's files and puts them back
// (contract section 11). Each workspace has a shadow git repository in
// the data dir, never in the workspace: a checkpoint is a commit of the
// files a .gitignore-aware walk sees (what glob sees), so unchanged files
// are shared between checkpoints by their content's hash. A stat cache
// (size, modification time, mode) spares reading the files that did not
// change since the previous snapshot, as git's index does.
package checkpoint

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/filesystem"

	"github.com/tandem-dev/tandem/internal/tools"
	"github.com/tandem-dev/tandem/proto"
)

// ErrNotHere is wrapped by the errors of a checkpoint whose files are not
// in this repository: in a cluster, a checkpoint another node took before
// it lost the workspace.
var ErrNotHere = errors.New("the checkpoint's files are not on this node")

// ErrTooBig is wrapped by the error of a snapshot of a workspace whose
// walk stopped at its bounds (too many entries, too deep): no checkpoint
// is taken of what would be only a part of it.
var ErrTooBig = errors.New("the workspace is too big to record whole (too many entries or too deep)")

// MaxFileSize bounds the files a checkpoint records; a bigger one is
// noted as there, unrecorded, and a rewind to it leaves it as it is.
const MaxFileSize = 64 << 20

// racyWindow is how recent a file's modification time may be for the
// stat cache not to vouch for it: a write in the same clock tick as the
// one hashed leaves the time as it was (git's "racy" files).
const racyWindow = 100 * time.Millisecond

// Manager keeps the shadow repositories of the workspaces, under dir.
type Manager struct {
	dir string

	mu    sync.Mutex
	repos map[string]*Repo
}

// NewManager returns a Manager keeping its repositories under dir (in the
// data dir).
func NewManager(dir string) *Manager {
	return &Manager{dir: dir, repos: make(map[string]*Repo)}
}

// Repo returns the shadow repository of the workspace with that id and
// path, creating it on first use.
func (m *Manager) Repo(workspaceID, path string) (*Repo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r := m.repos[workspaceID]; r != nil {
		return r, nil
	}
	dir := filepath.Join(m.dir, workspaceID+".git")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("checkpoint repository: %w", err)
	}
	st := filesystem.NewStorage(privateFS{osfs.New(dir, osfs.WithBoundOS())}, cache.NewObjectLRUDefault())
	if _, err := os.Stat(filepath.Join(dir, "HEAD")); errors.Is(err, fs.ErrNotExist) {
		if err := st.Init(); err != nil {
			return nil, fmt.Errorf("checkpoint repository: %w", err)
		}
	}
	r := &Repo{dir: dir, env: tools.Env{Root: path}, st: st, stats: make(map[string]stat), known: make(map[plumbing.Hash]bool), fresh: make(map[plumbing.Hash]time.Time)}
	m.repos[workspaceID] = r
	return r, nil
}

// Repo is one workspace's shadow repository. Its methods are safe for
// concurrent use; they take turns.
type Repo struct {
	dir string
	env tools.Env
	st  *filesystem.Storage

	mu sync.Mutex
	// stats is the stat cache: what each file was when last hashed.
	stats map[string]stat
	// known are objects known to be stored, so they are not asked for.
	known map[plumbing.Hash]bool
	// fresh are the commits this process made lately, by when: a commit
	// is written before the store records the checkpoint naming it, so a
	// collection meanwhile keeps them (see Collect).
	fresh map[plumbing.Hash]time.Time
	// private is set once Collect gave what the repository holds the data
	// dir's modes (a repository made before they were kept has go-git's).
	private bool
}

// stat is a file as last hashed. Size and modification time alone do not
// tell a change: `cp -p` or `touch -r` set the time back. The inode
// change time (ctime) cannot be set, so where the platform has it the
// cache trusts only an entry whose ctime and inode are unchanged too, as
// git's index does.
type stat struct {
	size   int64
	mtime  int64
	ctime  int64
	ino    uint64
	mode   filemode.FileMode
	hashed int64 // when it was hashed, unix nanoseconds
	hash   plumbing.Hash
}

// entry is a file of a snapshot.
type entry struct {
	mode filemode.FileMode
	hash plumbing.Hash
}

// Snapshot records the workspace's files as they are now and returns the
// commit that names them. Files the walk does not see (ignored now) but
// that one of the commits in also recorded are recorded too, as they are
// (or as gone): a .gitignore changed since must not make a file that is
// still there look deleted, nor hide a hand edit of it.
func (r *Repo) Snapshot(ctx context.Context, also ...string) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	files, err := r.scan(ctx, true, also)
	if err != nil {
		return "", err
	}
	tree, err := r.writeTree(files)
	if err != nil {
		return "", err
	}
	dark, err := r.dark(files)
	if err != nil {
		return "", err
	}
	darkHash, err := r.write(plumbing.BlobObject, []byte(strings.Join(dark, "\x00")))
	if err != nil {
		return "", err
	}
	msg := "checkpoint\n\n" + darkKey + darkHash.String() + "\n"
	c := &object.Commit{
		Author:    object.Signature{Name: "tandem", Email: "tandem@localhost", When: time.Now()},
		Message:   msg,
		TreeHash:  tree,
		Committer: object.Signature{Name: "tandem", Email: "tandem@localhost", When: time.Now()},
	}
	obj := r.st.NewEncodedObject()
	if err := c.Encode(obj); err != nil {
		return "", err
	}
	h, err := r.st.SetEncodedObject(obj)
	if err != nil {
		return "", fmt.Errorf("write checkpoint: %w", err)
	}
	r.fresh[h] = time.Now()
	if len(r.fresh) > 256 {
		r.forgetStale()
	}
	return h.String(), nil
}

// scan looks at the workspace's files: what the walk sees, and the files
// of the commits in also it does not see. With write it stores their
// contents and keeps the stat cache; without, it only hashes them, and
// writes nothing (a look at a diff is a read).
func (r *Repo) scan(ctx context.Context, write bool, also []string) (map[string]entry, error) {
	files := make(map[string]entry)
	truncated, err := r.env.WalkFiles(ctx, func(f tools.File) error {
		e, ok, err := r.file(f, write)
		if err != nil {
			return err
		}
		if ok {
			files[f.Rel] = e
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", r.env.Root, err)
	}
	if truncated {
		// A part of the tree would be missing, and which part can change
		// from one walk to the next: a rewind would then remove files that
		// were there all along as added since.
		return nil, fmt.Errorf("snapshot %s: %w", r.env.Root, ErrTooBig)
	}
	if len(also) > 0 {
		if err := r.scanHidden(ctx, write, also, files); err != nil {
			return nil, err
		}
	}
	if write {
		for p := range r.stats {
			if _, ok := files[p]; !ok {
				delete(r.stats, p)
			}
		}
	}
	return files, nil
}

// scanHidden adds to files those of the commits in also that the walk did
// not see and that are still there, each read through the open root of
// its directory (so confined to the workspace).
func (r *Repo) scanHidden(ctx context.Context, write bool, also []string, files map[string]entry) error {
	var hidden []string
	seen := make(map[string]bool)
	for _, c := range also {
		if c == "" {
			continue
		}
		then, err := r.files(c)
		if err != nil {
			return err
		}
		for p := range then {
			if _, ok := files[p]; !ok && !seen[p] {
				seen[p] = true
				hidden = append(hidden, p)
			}
		}
	}
	if len(hidden) == 0 {
		return nil
	}
	root, err := r.env.OpenRoot()
	if err != nil {
		return fmt.Errorf("snapshot %s: %w", r.env.Root, err)
	}
	defer root.Close()
	sort.Strings(hidden)
	dirs := make(map[string]*os.Root)
	defer func() {
		for _, d := range dirs {
			if d != nil && d != root {
				d.Close()
			}
		}
	}()
	for _, p := range hidden {
		if err := ctx.Err(); err != nil {
			return err
		}
		dir, name := path.Split(p)
		dir = strings.TrimSuffix(dir, "/")
		if underFile(files, dir) {
			continue // a file or symlink the walk saw is where its directory was
		}
		d, ok := dirs[dir]
		if !ok {
			d = root
			if dir != "" {
				d = openDir(root, dir) // nil when gone, or not a directory any more
			}
			dirs[dir] = d
		}
		if d == nil {
			continue
		}
		e, ok, err := r.file(tools.File{Rel: p, Name: name, Dir: d}, write)
		if err != nil {
			return err
		}
		if ok {
			files[p] = e
		}
	}
	return nil
}

// darkKey starts the line of a commit's message that names the blob of
// its dark entries (NUL-separated paths).
const darkKey = "dark "

// dark lists what the walk did not look into in the directories it
// recorded files of: ignored files and directories, .git, empty
// directories, what is not a file. A file the snapshot does not record is
// known not to have been there only at a path that is none of these, nor
// below one: a rewind removes a file as added since only then (Plan).
func (r *Repo) dark(files map[string]entry) ([]string, error) {
	lit := map[string]bool{"": true}
	for p := range files {
		for d := path.Dir(p); d != "." && !lit[d]; d = path.Dir(d) {
			lit[d] = true
		}
	}
	root, err := r.env.OpenRoot()
	if err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", r.env.Root, err)
	}
	defer root.Close()
	var out []string
	for dir := range lit {
		d := root
		if dir != "" {
			if d = openDir(root, dir); d == nil {
				continue
			}
		}
		f, err := d.Open(".")
		var names []string
		if err == nil {
			names, err = f.Readdirnames(-1)
			f.Close()
		}
		if d != root {
			d.Close()
		}
		if err != nil {
			continue
		}
		for _, n := range names {
			rel := n
			if dir != "" {
				rel = dir + "/" + n
			}
			if _, ok := files[rel]; !ok && !lit[rel] {
				out = append(out, rel)
			}
		}
	}
	sort.Strings(out)
	return out, nil
}

// darkOf returns the dark entries a commit recorded; ok is false for a
// commit made before they were.
func (r *Repo) darkOf(commit string) (map[string]bool, bool) {
	c, err := object.GetCommit(r.st, plumbing.NewHash(commit))
	if err != nil {
		return nil, false
	}
	h, ok := darkBlob(c)
	if !ok {
		return nil, false
	}
	data, err := r.blob(h)
	if err != nil {
		return nil, false
	}
	out := make(map[string]bool)
	for p := range strings.SplitSeq(string(data), "\x00") {
		if p != "" {
			out[p] = true
		}
	}
	return out, true
}

// darkBlob is the hash of the commit's dark entries' blob.
func darkBlob(c *object.Commit) (plumbing.Hash, bool) {
	for line := range strings.Lines(c.Message) {
		if h, ok := strings.CutPrefix(strings.TrimSpace(line), darkKey); ok && plumbing.IsHash(h) {
			return plumbing.NewHash(h), true
		}
	}
	return plumbing.Hash{}, false
}

// underFile reports whether dir or one of its parents is a file of files.
func underFile(files map[string]entry, dir string) bool {
	for d := dir; d != "" && d != "."; d = path.Dir(d) {
		if _, ok := files[d]; ok {
			return true
		}
	}
	return false
}

// openDir opens the directory at the slash-separated dir below root, nil
// when one of its parts is not a directory (gone, a file, a symlink: a
// link is not followed, even one that stays inside).
func openDir(root *os.Root, dir string) *os.Root {
	parts := strings.Split(dir, "/")
	for i := range parts {
		fi, err := root.Lstat(filepath.FromSlash(strings.Join(parts[:i+1], "/")))
		if err != nil || !fi.IsDir() {
			return nil
		}
	}
	d, err := root.OpenRoot(filepath.FromSlash(dir))
	if err != nil {
		return nil
	}
	return d
}

// unrecorded stands in a snapshot for a file that is there but whose
// content it does not hold (too big, unreadable): a gitlink, whose hash
// names nothing in the repository. A rewind leaves such a file as it
// finds it; were it left out instead, it would look added since, and be
// removed.
var unrecorded = entry{mode: filemode.Submodule}

// file hashes one file, from the stat cache when it can vouch for it;
// ok is false for a file left out (gone, not a file any more). Without
// write it stores nothing, and leaves the stat cache alone: the cache
// vouches only for hashes whose objects are stored.
func (r *Repo) file(f tools.File, write bool) (entry, bool, error) {
	fi, err := f.Dir.Lstat(f.Name)
	if err != nil {
		return entry{}, false, nil
	}
	var mode filemode.FileMode
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		mode = filemode.Symlink
	case fi.Mode().IsRegular() && fi.Mode()&0o111 != 0:
		mode = filemode.Executable
	case fi.Mode().IsRegular():
		mode = filemode.Regular
	default:
		return entry{}, false, nil
	}
	if fi.Size() > MaxFileSize {
		return unrecorded, true, nil
	}
	now := time.Now().UnixNano()
	mtime := fi.ModTime().UnixNano()
	ctime, ino := changeTime(fi)
	if s, ok := r.stats[f.Rel]; ok && s.size == fi.Size() && s.mtime == mtime && s.ctime == ctime && s.ino == ino &&
		s.mode == mode && s.hashed-max(mtime, ctime) > int64(racyWindow) {
		return entry{mode: mode, hash: s.hash}, true, nil
	}
	var data []byte
	if mode == filemode.Symlink {
		target, err := f.Dir.Readlink(f.Name)
		if err != nil {
			return entry{}, false, nil
		}
		data = []byte(target)
	} else {
		fh, err := f.Dir.OpenFile(f.Name, os.O_RDONLY|tools.OpenNonblock, 0)
		if errors.Is(err, fs.ErrNotExist) {
			return entry{}, false, nil
		}
		if err != nil {
			return unrecorded, true, nil
		}
		if st, err := fh.Stat(); err != nil || !st.Mode().IsRegular() {
			fh.Close()
			return entry{}, false, nil
		}
		data, err = io.ReadAll(io.LimitReader(fh, MaxFileSize+1))
		fh.Close()
		if err != nil || len(data) > MaxFileSize {
			return unrecorded, true, nil
		}
	}
	if !write {
		return entry{mode: mode, hash: plumbing.ComputeHash(plumbing.BlobObject, data)}, true, nil
	}
	h, err := r.write(plumbing.BlobObject, data)
	if err != nil {
		return entry{}, false, err
	}
	r.stats[f.Rel] = stat{size: fi.Size(), mtime: mtime, ctime: ctime, ino: ino, mode: mode, hashed: now, hash: h}
	return entry{mode: mode, hash: h}, true, nil
}

// write stores an object unless it is known to be there.
func (r *Repo) write(typ plumbing.ObjectType, data []byte) (plumbing.Hash, error) {
	h := plumbing.ComputeHash(typ, data)
	if r.known[h] {
		return h, nil
	}
	if r.st.HasEncodedObject(h) == nil {
		r.known[h] = true
		return h, nil
	}
	obj := r.st.NewEncodedObject()
	obj.SetType(typ)
	obj.SetSize(int64(len(data)))
	w, err := obj.Writer()
	if err != nil {
		return h, err
	}
	if _, err := w.Write(data); err != nil {
		return h, err
	}
	if err := w.Close(); err != nil {
		return h, err
	}
	if _, err := r.st.SetEncodedObject(obj); err != nil {
		return h, fmt.Errorf("write checkpoint object: %w", err)
	}
	r.known[h] = true
	return h, nil
}

// dirNode is a directory of a tree being built.
type dirNode struct {
	files []object.TreeEntry
	dirs  map[string]*dirNode
}

// writeTree stores the tree of files and returns its hash.
func (r *Repo) writeTree(files map[string]entry) (plumbing.Hash, error) {
	root := &dirNode{dirs: map[string]*dirNode{}}
	for p, e := range files {
		parts := strings.Split(p, "/")
		d := root
		for _, name := range parts[:len(parts)-1] {
			next := d.dirs[name]
			if next == nil {
				next = &dirNode{dirs: map[string]*dirNode{}}
				d.dirs[name] = next
			}
			d = next
		}
		d.files = append(d.files, object.TreeEntry{Name: parts[len(parts)-1], Mode: e.mode, Hash: e.hash})
	}
	return r.writeDir(root)
}

func (r *Repo) writeDir(d *dirNode) (plumbing.Hash, error) {
	entries := d.files
	for name, sub := range d.dirs {
		h, err := r.writeDir(sub)
		if err != nil {
			return h, err
		}
		entries = append(entries, object.TreeEntry{Name: name, Mode: filemode.Dir, Hash: h})
	}
	sort.Sort(object.TreeEntrySorter(entries))
	var buf bytes.Buffer
	for _, e := range entries {
		fmt.Fprintf(&buf, "%o %s", e.Mode, e.Name)
		buf.WriteByte(0)
		buf.Write(e.Hash[:])
	}
	return r.write(plumbing.TreeObject, buf.Bytes())
}

// files returns the files a commit recorded, by path.
func (r *Repo) files(commit string) (map[string]entry, error) {
	h := plumbing.NewHash(commit)
	c, err := object.GetCommit(r.st, h)
	if errors.Is(err, plumbing.ErrObjectNotFound) {
		return nil, fmt.Errorf("read checkpoint %s: %w", commit, ErrNotHere)
	}
	if err != nil {
		return nil, fmt.Errorf("read checkpoint %s: %w", commit, err)
	}
	out := make(map[string]entry)
	var walk func(h plumbing.Hash, prefix string) error
	walk = func(h plumbing.Hash, prefix string) error {
		t, err := object.GetTree(r.st, h)
		if err != nil {
			return err
		}
		for _, e := range t.Entries {
			if e.Mode == filemode.Dir {
				if err := walk(e.Hash, prefix+e.Name+"/"); err != nil {
					return err
				}
				continue
			}
			out[prefix+e.Name] = entry{mode: e.Mode, hash: e.Hash}
		}
		return nil
	}
	if err := walk(c.TreeHash, ""); err != nil {
		return nil, fmt.Errorf("read checkpoint %s: %w", commit, err)
	}
	return out, nil
}

// Changes lists the files that differ from commit from to commit to, by
// path, with change as seen going from from to to.
func (r *Repo) Changes(from, to string) ([]proto.FileChange, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, _, changes, err := r.changes(from, to)
	return changes, err
}

func (r *Repo) changes(from, to string) (a, b map[string]entry, out []proto.FileChange, err error) {
	if a, err = r.files(from); err != nil {
		return nil, nil, nil, err
	}
	if b, err = r.files(to); err != nil {
		return nil, nil, nil, err
	}
	return a, b, compare(a, b), nil
}

// compare lists the files that differ from a to b, by path.
func compare(a, b map[string]entry) []proto.FileChange {
	out := []proto.FileChange{}
	for p, ea := range a {
		eb, ok := b[p]
		switch {
		case ea == unrecorded:
			// Not known then: nothing to put back, nor to compare with.
		case !ok:
			out = append(out, proto.FileChange{Path: p, Change: proto.ChangeDeleted})
		case eb != ea:
			out = append(out, proto.FileChange{Path: p, Change: proto.ChangeModified})
		}
	}
	for p := range b {
		if _, ok := a[p]; !ok {
			out = append(out, proto.FileChange{Path: p, Change: proto.ChangeAdded})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// Diff is Changes with the unified diff of them, cut as event data is.
// It stops with ctx's error when ctx ends: each file's diff is bounded,
// but a diff of many changed files reads each of them.
func (r *Repo) Diff(ctx context.Context, from, to string) ([]proto.FileChange, string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	a, b, changes, err := r.changes(from, to)
	if err != nil {
		return nil, "", err
	}
	diff, err := r.unified(ctx, a, b, changes, r.content)
	if err != nil {
		return nil, "", err
	}
	return changes, diff, nil
}

// DiffNow is what a rewind to the checkpoint from would do to the files as
// they are now: the plan's changes, the files it would leave as they are
// (Plan.Kept), and the unified diff of the changes. It writes nothing:
// the files now are hashed, not stored, and read again to show them.
func (r *Repo) DiffNow(ctx context.Context, from string) (*Plan, string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	then, err := r.files(from)
	if err != nil {
		return nil, "", err
	}
	cur, err := r.scan(ctx, false, []string{from})
	if err != nil {
		return nil, "", err
	}
	p := r.plan(from, then, cur, compare(then, cur))
	root, err := r.env.OpenRoot()
	if err != nil {
		return nil, "", fmt.Errorf("diff: %w", err)
	}
	defer root.Close()
	fromDisk := func(files map[string]entry, p string) (string, error) {
		e, ok := files[p]
		if !ok || e == unrecorded {
			return "", nil
		}
		if r.st.HasEncodedObject(e.hash) == nil {
			return r.content(files, p)
		}
		rel := filepath.FromSlash(p)
		var data []byte
		if e.mode == filemode.Symlink {
			t, err := root.Readlink(rel)
			if err != nil {
				return "", nil // gone since: shown as empty
			}
			data = []byte(t)
		} else if data, err = readBounded(root, rel); err != nil {
			return "", nil
		}
		return string(data), nil
	}
	diff, err := r.unified(ctx, then, cur, p.Changes, fromDisk)
	if err != nil {
		return nil, "", err
	}
	return p, diff, nil
}

// readBounded reads a file of the workspace, at most MaxFileSize of it.
func readBounded(root *os.Root, rel string) ([]byte, error) {
	f, err := root.OpenFile(rel, os.O_RDONLY|tools.OpenNonblock, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", rel)
	}
	return io.ReadAll(io.LimitReader(f, MaxFileSize))
}

// unified renders the changes from a to b as one unified diff, the b side
// read by contentB.
func (r *Repo) unified(ctx context.Context, a, b map[string]entry, changes []proto.FileChange, contentB func(map[string]entry, string) (string, error)) (string, error) {
	var out strings.Builder
	for _, c := range changes {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		before, err := r.content(a, c.Path)
		if err != nil {
			return "", err
		}
		after, err := contentB(b, c.Path)
		if err != nil {
			return "", err
		}
		if a[c.Path] == unrecorded || b[c.Path] == unrecorded {
			fmt.Fprintf(&out, "--- a/%s\n+++ b/%s\n(too big or unreadable to show)\n", c.Path, c.Path)
			continue
		}
		if isBinary(before) || isBinary(after) {
			fmt.Fprintf(&out, "Binary files a/%s and b/%s differ\n", c.Path, c.Path)
			continue
		}
		if before == after {
			fmt.Fprintf(&out, "--- a/%s\n+++ b/%s\n(mode changed)\n", c.Path, c.Path)
			continue
		}
		out.WriteString(tools.UnifiedDiff(c.Path, before, after))
		out.WriteByte('\n')
		if out.Len() > maxDiff {
			break
		}
	}
	return tools.CapDiff(out.String()), nil
}

// maxDiff stops building a diff well past what CapDiff keeps.
const maxDiff = 2 << 20

func isBinary(s string) bool { return strings.IndexByte(s[:min(len(s), 8000)], 0) >= 0 }

// content is the content of the file at p in files, "" when absent.
func (r *Repo) content(files map[string]entry, p string) (string, error) {
	e, ok := files[p]
	if !ok || e == unrecorded {
		return "", nil
	}
	data, err := r.blob(e.hash)
	return string(data), err
}

func (r *Repo) blob(h plumbing.Hash) ([]byte, error) {
	b, err := object.GetBlob(r.st, h)
	if err != nil {
		return nil, fmt.Errorf("read checkpoint blob %s: %w", h, err)
	}
	rd, err := b.Reader()
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	return io.ReadAll(rd)
}
