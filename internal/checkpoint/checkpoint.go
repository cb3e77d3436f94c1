// Package checkpoint records a workspace's files and puts them back
// (contract section 11). Each workspace has a shadow git repository in
// the data dir, never in the workspace: a checkpoint is a commit of the
// files a .gitignore-aware walk sees (what glob sees), so unchanged files
// are shared between checkpoints by their content's hash. An index kept
// on disk beside it (index.go), as git's is, spares reading the files that
// did not change since the previous snapshot, and writing the trees of the
// directories where nothing changed.
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
	"slices"
	"sort"
	"strconv"
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

// saveEvery is how often at most a snapshot writes the index to its
// file: a file made per object already costs most of a snapshot where
// little changed, and an older index is as true, only less complete.
const saveEvery = 2 * time.Second

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
	objs, err := openObjects(dir)
	if err != nil {
		return nil, fmt.Errorf("checkpoint repository: %w", err)
	}
	r := &Repo{dir: dir, env: tools.Env{Root: path}, st: st, objs: objs, stats: make(map[string]stat), known: make(map[plumbing.Hash]bool), fresh: make(map[plumbing.Hash]time.Time)}
	m.repos[workspaceID] = r
	return r, nil
}

// Repo is one workspace's shadow repository. Its methods are safe for
// concurrent use; they take turns.
type Repo struct {
	dir string
	env tools.Env
	// st reads the repository's objects; objs writes them.
	st   *filesystem.Storage
	objs *objectWriter

	mu sync.Mutex
	// loaded is set once the index was read from its file (or found
	// missing or unusable): before the first snapshot, not at start.
	loaded bool
	// stats is the stat cache: what each file was when last hashed.
	stats map[string]stat
	// last are the files the last snapshot recorded, lastTree their
	// tree, and trees the tree of each of their directories ("" the
	// root); nil when not known (none since start, or collected).
	last     map[string]entry
	trees    map[string]plumbing.Hash
	lastTree plumbing.Hash
	// lastCommit is the last snapshot's commit, of that tree and dark
	// entries' blob (not kept on disk: a commit is cheap once).
	lastCommit struct{ hash, tree, dark plumbing.Hash }
	// dirty is set when the index changed since it was last written, at
	// saved.
	dirty bool
	saved time.Time
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
	listed := make(map[string][]fs.DirEntry)
	files, err := r.scan(ctx, true, also, listed)
	if err != nil {
		return "", err
	}
	tree, err := r.writeTree(files)
	if err != nil {
		return "", err
	}
	dark, err := r.dark(files, listed)
	if err != nil {
		return "", err
	}
	darkHash, err := r.write(plumbing.BlobObject, []byte(strings.Join(dark, "\x00")))
	if err != nil {
		return "", err
	}
	h, err := r.commit(tree, darkHash)
	if err != nil {
		return "", err
	}
	r.fresh[h] = time.Now()
	if len(r.fresh) > 256 {
		r.forgetStale()
	}
	if r.dirty && time.Since(r.saved) >= saveEvery {
		// Not written, the index on disk is an older one, still true:
		// only Collect removes objects, and it writes the index first.
		// A snapshot after a restart hashes again what changed since.
		if err := r.saveIndex(); err == nil {
			r.dirty, r.saved = false, time.Now()
		}
	}
	return h.String(), nil
}

// commit stores the commit of a snapshot's tree and dark entries. The
// last one's is named again when they are the same (nothing changed,
// as before a run that follows another): two checkpoints of the same
// files are one commit, and the snapshot writes nothing.
func (r *Repo) commit(tree, darkHash plumbing.Hash) (plumbing.Hash, error) {
	if r.lastCommit.tree == tree && r.lastCommit.dark == darkHash && r.known[r.lastCommit.hash] {
		return r.lastCommit.hash, nil
	}
	msg := "checkpoint\n\n" + darkKey + darkHash.String() + "\n"
	c := &object.Commit{
		Author:    object.Signature{Name: "tandem", Email: "tandem@localhost", When: time.Now()},
		Message:   msg,
		TreeHash:  tree,
		Committer: object.Signature{Name: "tandem", Email: "tandem@localhost", When: time.Now()},
	}
	var obj plumbing.MemoryObject
	if err := c.Encode(&obj); err != nil {
		return plumbing.ZeroHash, err
	}
	rd, err := obj.Reader()
	if err != nil {
		return plumbing.ZeroHash, err
	}
	data, err := io.ReadAll(rd)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	h, err := r.write(plumbing.CommitObject, data)
	if err != nil {
		return h, fmt.Errorf("write checkpoint: %w", err)
	}
	r.lastCommit.hash, r.lastCommit.tree, r.lastCommit.dark = h, tree, darkHash
	return h, nil
}

// scan looks at the workspace's files: what the walk sees, and the files
// of the commits in also it does not see. With write it stores their
// contents and keeps the stat cache; without, it only hashes them, and
// writes nothing (a look at a diff is a read). When listed is not nil, it
// gets the entries of each directory the walk read, by path.
func (r *Repo) scan(ctx context.Context, write bool, also []string, listed map[string][]fs.DirEntry) (map[string]entry, error) {
	r.loadIndex()
	files := make(map[string]entry, len(r.last))
	if listed == nil {
		listed = make(map[string][]fs.DirEntry)
	}
	truncated, err := r.env.WalkFilesListed(ctx, func(f tools.File) error {
		// The listing stat the entries of a directory opened in a root
		// (os.ReadDir does, to type them there): that is the file's
		// stat, with no other call.
		var fi fs.FileInfo
		ents := listed[parentDir(f.Rel)]
		if i, ok := slices.BinarySearchFunc(ents, f.Name, func(e fs.DirEntry, name string) int {
			return strings.Compare(e.Name(), name)
		}); ok {
			fi, _ = ents[i].Info()
		}
		e, ok, err := r.file(f, fi, write)
		if err != nil {
			return err
		}
		if ok {
			files[f.Rel] = e
		}
		return nil
	}, func(dir string, ents []fs.DirEntry) { listed[dir] = ents })
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
				r.dirty = true
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
		then, err := r.filesOf(c)
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
		e, ok, err := r.file(tools.File{Rel: p, Name: name, Dir: d}, nil, write)
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
func (r *Repo) dark(files map[string]entry, listed map[string][]fs.DirEntry) ([]string, error) {
	lit := map[string]bool{"": true}
	for p := range files {
		for d := parentDir(p); !lit[d]; d = parentDir(d) {
			lit[d] = true
		}
	}
	var root *os.Root
	defer func() {
		if root != nil {
			root.Close()
		}
	}()
	var out []string
	var rel []byte
	for dir := range lit {
		var names []string
		if ents, ok := listed[dir]; ok {
			names = make([]string, len(ents))
			for i, e := range ents {
				names[i] = e.Name()
			}
		} else {
			// A directory the walk did not read (ignored, holding a file
			// only an older checkpoint's recorded): read now.
			if root == nil {
				var err error
				if root, err = r.env.OpenRoot(); err != nil {
					return nil, fmt.Errorf("snapshot %s: %w", r.env.Root, err)
				}
			}
			names = readNames(root, dir)
		}
		for _, n := range names {
			rel = rel[:0]
			if dir != "" {
				rel = append(append(rel, dir...), '/')
			}
			rel = append(rel, n...)
			if _, ok := files[string(rel)]; !ok && !lit[string(rel)] {
				out = append(out, string(rel))
			}
		}
	}
	sort.Strings(out)
	return out, nil
}

// readNames lists the directory at the slash-separated dir below root,
// nothing when it is not one (see openDir) or cannot be read.
func readNames(root *os.Root, dir string) []string {
	d := root
	if dir != "" {
		if d = openDir(root, dir); d == nil {
			return nil
		}
		defer d.Close()
	}
	f, err := d.Open(".")
	if err != nil {
		return nil
	}
	defer f.Close()
	names, _ := f.Readdirnames(-1)
	return names
}

// baseName is the last element of the slash path p.
func baseName(p string) string { return p[strings.LastIndexByte(p, '/')+1:] }

// parentDir is the slash path of the directory holding p, "" for the
// root.
func parentDir(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[:i]
	}
	return ""
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

// file hashes one file, from the stat cache when it can vouch for its
// stat fi (nil: it is looked up);
// ok is false for a file left out (gone, not a file any more). Without
// write it stores nothing, and leaves the stat cache alone: the cache
// vouches only for hashes whose objects are stored.
func (r *Repo) file(f tools.File, fi fs.FileInfo, write bool) (entry, bool, error) {
	if fi == nil {
		var err error
		if fi, err = f.Dir.Lstat(f.Name); err != nil {
			return entry{}, false, nil
		}
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
	r.dirty = true
	return entry{mode: mode, hash: h}, true, nil
}

// dirNode is a directory whose tree a snapshot writes.
type dirNode struct {
	files []object.TreeEntry
	dirs  []string // paths of its subdirectories
}

// writeTree stores the tree of files and returns its hash. Only the trees
// of the directories on the path of a change since the last snapshot (of
// all of them, when that is not known) are built and written again; the
// other directories' are those of the index.
func (r *Repo) writeTree(files map[string]entry) (plumbing.Hash, error) {
	dirty := make(map[string]bool)
	mark := func(p string) {
		for d := p; ; {
			d = parentDir(d)
			if dirty[d] {
				return
			}
			dirty[d] = true
			if d == "" {
				return
			}
		}
	}
	if r.trees == nil || r.last == nil {
		r.trees = make(map[string]plumbing.Hash)
		dirty[""] = true
		for p := range files {
			mark(p)
		}
	} else {
		for p, e := range files {
			if was, ok := r.last[p]; !ok || was != e {
				mark(p)
			}
		}
		for p := range r.last {
			if _, ok := files[p]; !ok {
				mark(p)
			}
		}
		if len(dirty) == 0 {
			r.last = files
			return r.lastTree, nil
		}
	}
	nodes := make(map[string]*dirNode, len(dirty))
	for d := range dirty {
		nodes[d] = &dirNode{}
	}
	for p, e := range files {
		if n := nodes[parentDir(p)]; n != nil {
			n.files = append(n.files, object.TreeEntry{Name: baseName(p), Mode: e.mode, Hash: e.hash})
		}
	}
	addSub := func(d string) {
		if d == "" {
			return
		}
		if n := nodes[parentDir(d)]; n != nil {
			n.dirs = append(n.dirs, d)
		}
	}
	for d := range r.trees {
		addSub(d)
	}
	for d := range dirty {
		if _, ok := r.trees[d]; !ok {
			addSub(d)
		}
	}
	var buf bytes.Buffer
	var num [24]byte
	var build func(d string) (plumbing.Hash, bool, error)
	build = func(d string) (plumbing.Hash, bool, error) {
		n := nodes[d]
		if n == nil {
			h, ok := r.trees[d]
			return h, ok, nil
		}
		entries := n.files
		for _, sub := range n.dirs {
			h, ok, err := build(sub)
			if err != nil {
				return h, false, err
			}
			if ok {
				entries = append(entries, object.TreeEntry{Name: baseName(sub), Mode: filemode.Dir, Hash: h})
			}
		}
		if len(entries) == 0 && d != "" {
			delete(r.trees, d)
			return plumbing.ZeroHash, false, nil
		}
		sort.Sort(object.TreeEntrySorter(entries))
		buf.Reset()
		for _, e := range entries {
			buf.Write(strconv.AppendUint(num[:0], uint64(e.Mode), 8))
			buf.WriteByte(' ')
			buf.WriteString(e.Name)
			buf.WriteByte(0)
			buf.Write(e.Hash[:])
		}
		h, err := r.write(plumbing.TreeObject, buf.Bytes())
		if err != nil {
			// What was written stays right; what was not is unknown.
			r.trees, r.last, r.lastTree = nil, nil, plumbing.ZeroHash
			return h, false, err
		}
		r.trees[d] = h
		return h, true, nil
	}
	h, _, err := build("")
	if err != nil {
		return h, err
	}
	r.last, r.lastTree, r.dirty = files, h, true
	return h, nil
}

// filesOf is files, from the index when the commit's tree is the last
// snapshot's (a run's end names its start, most often taken just before).
func (r *Repo) filesOf(commit string) (map[string]entry, error) {
	if r.last != nil {
		if c, err := object.GetCommit(r.st, plumbing.NewHash(commit)); err == nil && c.TreeHash == r.lastTree {
			return r.last, nil
		}
	}
	return r.files(commit)
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
	cur, err := r.scan(ctx, false, []string{from}, nil)
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
