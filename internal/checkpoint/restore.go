package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/gitignore"

	"github.com/tandem-dev/tandem/proto"
)

// ErrBlocked is wrapped by the error of a rewind whose plan cannot be
// carried out safely as the files are now (a directory on the way is a
// symlink now, a file is a directory): nothing was changed.
var ErrBlocked = errors.New("the files cannot be put back as they are now")

// ErrUndone is wrapped by the error of a rewind that failed part way: what
// it had changed was put back as it was.
var ErrUndone = errors.New("the rewind failed part way; what it had changed was put back")

// Plan is what a rewind to a checkpoint will do to the files, decided
// before any of it is done.
type Plan struct {
	then, cur map[string]entry
	// Changes are the changes the rewind undoes, as going from the
	// checkpoint to the files now: added ones are removed, the others get
	// their content at the checkpoint back.
	Changes []proto.FileChange
	// Kept are files there now that the checkpoint does not show, because
	// its walk did not look at them (ignored then): whether they were
	// there then is unknown, so the rewind leaves them as they are.
	Kept []string
}

// Plan decides what a rewind from the files now (a commit) to the
// checkpoint to would do.
func (r *Repo) Plan(to, now string) (*Plan, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	then, cur, changes, err := r.changes(to, now)
	if err != nil {
		return nil, err
	}
	return r.plan(to, then, cur, changes), nil
}

// looker tells whether a checkpoint's walk would have recorded a file at
// a path, had there been one.
type looker interface{ looked(p string) bool }

func (r *Repo) plan(to string, then, cur map[string]entry, changes []proto.FileChange) *Plan {
	p := &Plan{then: then, cur: cur, Changes: []proto.FileChange{}, Kept: []string{}}
	seen := r.lookerOf(to, then)
	for _, c := range changes {
		if c.Change == proto.ChangeAdded && !seen.looked(c.Path) {
			p.Kept = append(p.Kept, c.Path)
			continue
		}
		p.Changes = append(p.Changes, c)
	}
	return p
}

// lookerOf tells what the checkpoint to (whose files are then) looked at:
// by its dark entries, or, for a checkpoint made before they were
// recorded, by the .gitignore files it recorded.
func (r *Repo) lookerOf(to string, then map[string]entry) looker {
	if dark, ok := r.darkOf(to); ok {
		return darkEntries{then: then, dark: dark}
	}
	return &thenRules{r: r, then: then, dirs: make(map[string]*dirRules)}
}

// darkEntries are what a checkpoint's walk did not look into, as it
// recorded them: a path at or below one of them is unknown; a path below
// a file it recorded, or below no directory it saw, was not there.
type darkEntries struct {
	then map[string]entry
	dark map[string]bool
}

func (d darkEntries) looked(p string) bool {
	for i := 0; i <= len(p); i++ {
		if i < len(p) && p[i] != '/' {
			continue
		}
		q := p[:i]
		if _, ok := d.then[q]; ok {
			return true
		}
		if d.dark[q] {
			return false
		}
	}
	return true
}

// thenRules tell whether a checkpoint's walk looked at a path (for a
// checkpoint made before the dark entries were recorded): what its
// .gitignore files (as the checkpoint recorded them) ignored, and .git,
// it did not. A file it did not record at a path it looked at was not
// there; at a path it did not look at, it may have been.
type thenRules struct {
	r    *Repo
	then map[string]entry
	dirs map[string]*dirRules
}

// dirRules are what is known of one directory at the checkpoint.
type dirRules struct {
	unseen   bool // the walk did not enter it, or its rules are unknown
	file     bool // a file or symlink was at its path: nothing was below it
	patterns []gitignore.Pattern
}

// looked reports whether the checkpoint's walk would have recorded a file
// at p, had there been one.
func (t *thenRules) looked(p string) bool {
	parts := strings.Split(p, "/")
	d := t.dir(parts[:len(parts)-1])
	if d.file {
		return true
	}
	return !d.unseen && !ignoredBy(d.patterns, parts, false)
}

// dir returns what is known of the directory at parts ("" the root).
func (t *thenRules) dir(parts []string) *dirRules {
	key := strings.Join(parts, "/")
	if d, ok := t.dirs[key]; ok {
		return d
	}
	var d *dirRules
	if len(parts) == 0 {
		d = t.load(&dirRules{}, parts)
	} else {
		parent := t.dir(parts[:len(parts)-1])
		switch e, ok := t.then[key]; {
		case parent.file:
			d = parent
		case parent.unseen:
			d = parent
		case ok && e.mode != filemode.Dir:
			d = &dirRules{file: true}
		case ignoredBy(parent.patterns, parts, true):
			d = &dirRules{unseen: true}
		default:
			d = t.load(&dirRules{patterns: parent.patterns}, parts)
		}
	}
	t.dirs[key] = d
	return d
}

// load adds the patterns of the directory's .gitignore as the checkpoint
// recorded it. One it did not record (ignored itself, or too big) may have
// held patterns: then what is below is unknown.
func (t *thenRules) load(d *dirRules, parts []string) *dirRules {
	name := strings.Join(append(slices.Clone(parts), ".gitignore"), "/")
	e, ok := t.then[name]
	if !ok {
		if ignoredBy(d.patterns, append(slices.Clone(parts), ".gitignore"), false) {
			return &dirRules{unseen: true}
		}
		return d
	}
	if e == unrecorded || e.mode == filemode.Symlink {
		return &dirRules{unseen: true}
	}
	data, err := t.r.blob(e.hash)
	if err != nil {
		return &dirRules{unseen: true}
	}
	data = data[:min(len(data), ignoreMaxFile)]
	pats := slices.Clone(d.patterns)
	for line := range strings.Lines(string(data)) {
		s := strings.TrimRight(line, "\r\n")
		if strings.TrimSpace(s) == "" || strings.HasPrefix(s, "#") {
			continue
		}
		pats = append(pats, gitignore.ParsePattern(s, slices.Clone(parts)))
	}
	return &dirRules{patterns: pats}
}

// ignoreMaxFile is how much of a .gitignore the walk reads (as the file
// tools do).
const ignoreMaxFile = 256 << 10

// ignoredBy reports whether the patterns (the last that matches decides)
// or the name .git make the walk skip the entry at parts.
func ignoredBy(patterns []gitignore.Pattern, parts []string, isDir bool) bool {
	if parts[len(parts)-1] == ".git" {
		return true
	}
	for i := len(patterns) - 1; i >= 0; i-- {
		switch patterns[i].Match(parts, isDir) {
		case gitignore.Exclude:
			return true
		case gitignore.Include:
			return false
		}
	}
	return false
}

// Edited lists the files changed since the session's last run ended (end,
// a commit; "" when its end was never recorded, as after a crash: then
// since it started, start) as now shows them: someone else's changes,
// which a rewind without force does not overwrite. A file there now that
// end did not record and that is as the checkpoint to had it is left
// out: the rewind would not change it (one the walk no longer sees,
// recorded by now only because to did).
func (r *Repo) Edited(start, end, now, to string) ([]proto.FileChange, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	from := end
	if from == "" {
		from = start
	}
	_, cur, changes, err := r.changes(from, now)
	if err != nil {
		return nil, err
	}
	then, err := r.files(to)
	if err != nil {
		return nil, err
	}
	out := changes[:0]
	for _, c := range changes {
		if e, ok := then[c.Path]; ok && c.Change == proto.ChangeAdded && cur[c.Path] == e {
			continue
		}
		out = append(out, c)
	}
	return out, nil
}

// Restore puts the workspace's files back as commit to recorded them,
// given now, a snapshot of them as they are (see Plan and Apply). It
// returns the changes it undid, as going from to to now.
func (r *Repo) Restore(ctx context.Context, to, now string) ([]proto.FileChange, error) {
	p, err := r.Plan(to, now)
	if err != nil {
		return nil, err
	}
	if err := r.Apply(ctx, p); err != nil {
		return nil, err
	}
	return p.Changes, nil
}

// op is one step of a rewind, with what undoes it.
type op struct {
	path string
	do   func() error
	undo func() error
}

// Apply carries the plan out: files added since are removed (with the
// directories that leaves empty and that the checkpoint did not have),
// files deleted or changed since get their content and mode back. It
// checks the whole plan against the files first and changes nothing when
// a step could not be done safely (ErrBlocked); a step that fails all the
// same has the steps before it undone (ErrUndone). Every access goes
// through an os.Root of the workspace, so a directory swapped for a
// symlink meanwhile cannot lead outside it. The files now must be a
// stored snapshot: undoing a step puts back what they recorded.
func (r *Repo) Apply(ctx context.Context, p *Plan) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	root, err := r.env.OpenRoot()
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	defer root.Close()
	ops, err := r.steps(root, p)
	if err != nil {
		return err
	}
	r.loadIndex() // so that what it forgets here is forgotten on disk too
	for _, c := range p.Changes {
		delete(r.stats, c.Path)
		r.dirty = true
	}
	for i, o := range ops {
		// The failing step is undone too when it was begun: a file's
		// content is written after what was there is removed.
		last := i - 1
		err := ctx.Err()
		if err == nil {
			last, err = i, o.do()
		}
		if err == nil {
			continue
		}
		var failed []string
		for j := last; j >= 0; j-- {
			if ops[j].undo == nil {
				continue
			}
			if uerr := ops[j].undo(); uerr != nil {
				failed = append(failed, fmt.Sprintf("%s (%v)", ops[j].path, uerr))
			}
		}
		if len(failed) > 0 {
			return fmt.Errorf("restore %s: %w; and these could not be put back: %s", o.path, err, strings.Join(failed, ", "))
		}
		return fmt.Errorf("restore %s: %v: %w", o.path, err, ErrUndone)
	}
	return nil
}

// steps checks the plan against the files as they are and turns it into
// steps: removals first (a file that became a directory since needs its
// place back), then the directories they leave empty, deepest first, then
// what gets its content back.
func (r *Repo) steps(root *os.Root, p *Plan) ([]op, error) {
	dirs := make(map[string]bool) // the directories the checkpoint had
	for f := range p.then {
		for d := path.Dir(f); d != "."; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	removed := make(map[string]bool)
	var ops, last []op
	emptied := make(map[string]bool)
	for _, c := range p.Changes {
		if c.Change != proto.ChangeAdded {
			continue
		}
		rel := filepath.FromSlash(c.Path)
		if err := realDirs(root, c.Path, nil); err != nil {
			return nil, err
		}
		fi, err := root.Lstat(rel)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("restore %s: %w", c.Path, err)
		}
		if fi.IsDir() {
			return nil, fmt.Errorf("%s is a directory now, not the file the rewind would remove: %w", c.Path, ErrBlocked)
		}
		removed[c.Path] = true
		o := op{path: c.Path, do: func() error { return ignoreGone(root.Remove(rel)) }}
		if e := p.cur[c.Path]; e != unrecorded {
			o.undo = func() error { return r.put(root, c.Path, e) }
			ops = append(ops, o)
		} else {
			// Not stored, so not to be put back: removed after every
			// other removal, so that at least those can be undone.
			last = append(last, o)
		}
		for d := path.Dir(c.Path); d != "." && !dirs[d]; d = path.Dir(d) {
			emptied[d] = true
		}
	}
	ops = append(ops, last...)
	// Deepest first, so a parent is empty once its children are gone; a
	// directory that still holds something (an ignored file) stays.
	byDepth := slices.Collect(maps.Keys(emptied))
	sort.Slice(byDepth, func(i, j int) bool {
		if len(byDepth[i]) != len(byDepth[j]) {
			return len(byDepth[i]) > len(byDepth[j])
		}
		return byDepth[i] < byDepth[j]
	})
	for _, d := range byDepth {
		rel := filepath.FromSlash(d)
		gone := false
		ops = append(ops, op{path: d,
			do: func() error {
				gone = root.Remove(rel) == nil
				return nil
			},
			undo: func() error {
				if !gone {
					return nil
				}
				return root.Mkdir(rel, 0o755)
			},
		})
	}
	for _, c := range p.Changes {
		if c.Change == proto.ChangeAdded {
			continue
		}
		rel := filepath.FromSlash(c.Path)
		if err := realDirs(root, c.Path, func(d string) bool { return removed[d] }); err != nil {
			return nil, err
		}
		if fi, err := root.Lstat(rel); err == nil && fi.IsDir() && !emptied[c.Path] {
			return nil, fmt.Errorf("%s is a directory now, where the rewind would put a file back: %w", c.Path, ErrBlocked)
		}
		e, was := p.then[c.Path], p.cur[c.Path]
		var made []string
		o := op{path: c.Path,
			do: func() error {
				var err error
				made, err = missingDirs(root, c.Path)
				if err != nil {
					return err
				}
				return r.put(root, c.Path, e)
			},
			undo: func() error {
				var err error
				if _, ok := p.cur[c.Path]; ok && was != unrecorded {
					err = r.put(root, c.Path, was)
				} else {
					err = ignoreGone(root.Remove(rel))
				}
				for i := len(made) - 1; i >= 0; i-- {
					_ = root.Remove(filepath.FromSlash(made[i]))
				}
				return err
			},
		}
		ops = append(ops, o)
	}
	return ops, nil
}

// realDirs checks that every directory on the way to p is a directory, or
// not there (to be made), or a file the plan removes first (gone reports
// which): never a symlink, which the rewind neither follows nor removes
// unless the checkpoint says it was added since.
func realDirs(root *os.Root, p string, gone func(string) bool) error {
	parts := strings.Split(p, "/")
	for i := 1; i < len(parts); i++ {
		d := strings.Join(parts[:i], "/")
		fi, err := root.Lstat(filepath.FromSlash(d))
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil
		case err != nil:
			return fmt.Errorf("restore %s: %w", p, err)
		case gone != nil && gone(d):
			return nil
		case fi.Mode()&fs.ModeSymlink != 0:
			return fmt.Errorf("%s is a symlink now, on the way to %s; the rewind does not follow or remove it: %w", d, p, ErrBlocked)
		case !fi.IsDir():
			return fmt.Errorf("%s is a file now, on the way to %s: %w", d, p, ErrBlocked)
		}
	}
	return nil
}

// missingDirs makes the directories on the way to p that are not there,
// and returns them, outermost first.
func missingDirs(root *os.Root, p string) ([]string, error) {
	var made []string
	parts := strings.Split(p, "/")
	for i := 1; i < len(parts); i++ {
		d := strings.Join(parts[:i], "/")
		err := root.Mkdir(filepath.FromSlash(d), 0o755)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return made, fmt.Errorf("restore %s: %w", p, err)
		}
		made = append(made, d)
	}
	return made, nil
}

func ignoreGone(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// put writes the file at p as e records it, replacing what is there.
func (r *Repo) put(root *os.Root, p string, e entry) error {
	data, err := r.blob(e.hash)
	if err != nil {
		return err
	}
	rel := filepath.FromSlash(p)
	// Removed first: what is there may be a symlink, which a write would
	// follow, or a file of another mode.
	if err := root.Remove(rel); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("restore %s: %w", p, err)
	}
	if e.mode == filemode.Symlink {
		if err := root.Symlink(string(data), rel); err != nil {
			return fmt.Errorf("restore %s: %w", p, err)
		}
		return nil
	}
	perm := os.FileMode(0o644)
	if e.mode == filemode.Executable {
		perm = 0o755
	}
	f, err := root.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return fmt.Errorf("restore %s: %w", p, err)
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = root.Chmod(rel, perm)
	}
	if err != nil {
		return fmt.Errorf("restore %s: %w", p, err)
	}
	return nil
}
